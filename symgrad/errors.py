"""Errors a user sees. Each names the op, the argument and the line of the user's forward."""

import os


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


_SCALAR_TYPES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
                 "float64": "Double", "int64": "Long", "int32": "Int", "int16": "Short",
                 "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def scalar_type_name(dtype):
    """torch's ScalarType name of a dtype (Float, Double, Half, BFloat16, Long, Int, Short,
    Char, Byte, Bool), the word torch's messages use: ``dtype`` is symgrad's, NumPy's (a dtype
    or a scalar type) or a name ('float32'); a name already torch's passes through."""
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = getattr(dtype, "__name__", None) if isinstance(dtype, type) else None
        name = "bool" if name == "bool_" else name
    if not isinstance(name, str):
        name = str(dtype).replace("torch.", "").replace("symgrad.", "")
    return _SCALAR_TYPES.get(name, name)


def matmul_dtype_message(a_ndim, b_ndim, x, y):
    """torch 2.13's message for matmul of two dtypes (x, y: numpy names or torch's legacy
    ones, Float / Double): dot's for two vectors, bmm's for a batched right operand, addmv's
    for a vector one, mm's otherwise."""
    x, y = scalar_type_name(x), scalar_type_name(y)
    if a_ndim == 1 and b_ndim == 1:
        return f"dot : expected both vectors to have same dtype, but found {x} and {y}"
    if b_ndim >= 3:
        return f"expected scalar type {x} but found {y}"
    if b_ndim == 1:
        return f"addmv input tensors must have the same dtype, but got {y}, {x}, and {y}"
    return f"expected m1 and m2 to have the same dtype, but got: {x.lower()} != {y.lower()}"


def display_path(path: str) -> str:
    """A path for messages and generated comments: relative to the cwd when below it, else
    the file's name (the CLI's errors, the traced line of a message, a generated header)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:     # another drive (Windows)
        rel = path
    return os.path.basename(path) if rel.startswith("..") else rel.replace(os.sep, "/")
