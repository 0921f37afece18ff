"""The op table. Elementwise ops are SymPy functions (forward, derivative and printers in one
class); structural ops are `Structural` subclasses (shape rule, NumPy lowering, adjoint rule)."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    """A structural op parameter supplied at run time (generic traces of built-in ops)."""

    name: str

    def __repr__(self):
        return self.name
