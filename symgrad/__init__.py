"""symgrad: write the forward, get the backward as readable generated code.

The pipeline (each stage a module): trace -> differentiate -> optimize -> emit -> run.
`import symgrad` stays light: SymPy is imported only when something is traced or compiled.
"""
__version__ = "0.1.0"


def compile(fn, *example_inputs, target="numpy", dtype=None, **options):
    """Compile a forward into a module with forward and backward. See `symgrad.compiler`."""
    from .compiler import compile as _compile

    return _compile(fn, *example_inputs, target=target, dtype=dtype, **options)


def trace(fn, *example_inputs, **kwargs):
    """Trace a forward into a `Graph` of SymPy expressions. See `symgrad.trace`."""
    from .trace import trace as _trace

    return _trace(fn, *example_inputs, **kwargs)
