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


class DtypeError(SymgradError, RuntimeError):
    """Operands of dtypes an op does not mix (torch refuses float32 @ float64)."""


_LEGACY = {"float16": "Half", "float32": "Float", "float64": "Double"}


def matmul_dtype_message(a_ndim, b_ndim, x, y):
    """torch 2.13's message for matmul of two dtypes (x, y: numpy names or torch's legacy
    ones, Float / Double): dot's for two vectors, bmm's for a batched right operand, addmv's
    for a vector one, mm's otherwise."""
    x, y = _LEGACY.get(x, x), _LEGACY.get(y, y)
    if a_ndim == 1 and b_ndim == 1:
        return f"dot : expected both vectors to have same dtype, but found {x} and {y}"
    if b_ndim >= 3:
        return f"expected scalar type {x} but found {y}"
    if b_ndim == 1:
        return f"addmv input tensors must have the same dtype, but got {y}, {x}, and {y}"
    return f"expected m1 and m2 to have the same dtype, but got: {x.lower()} != {y.lower()}"
