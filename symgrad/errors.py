"""Errors a user sees. Each names the op, the argument and the line of the user's forward."""


class SymgradError(Exception):
    """Base class of symgrad's own errors."""


class TraceError(SymgradError, TypeError):
    """The forward cannot be traced (data-dependent control flow, unsupported op or argument)."""


class ShapeError(SymgradError, RuntimeError):
    """Shapes that cannot broadcast or an invalid dim / reshape."""


class CompileError(SymgradError, RuntimeError):
    """The compiler could not differentiate or emit a traced graph."""


class DimensionError(ShapeError, IndexError):
    """A dim out of range: an IndexError, as torch raises, and a ShapeError."""


class LinAlgError(SymgradError, RuntimeError):
    """A singular or non-positive-definite matrix (torch.linalg.LinAlgError); the generated
    modules raise numpy.linalg.LinAlgError with the same message."""
