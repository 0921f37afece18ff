"""The op table. Elementwise ops are SymPy functions (forward, derivative and printers in one
class); structural ops are `Structural` subclasses (shape rule, NumPy lowering, adjoint rule)."""
