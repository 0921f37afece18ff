"""Dtype names and torch's type promotion, by name: the one place every layer asks.

- `dtype_name(dtype)`: 'float32', 'int64', 'bool', ... of a dtype spelled as symgrad's,
  torch's, NumPy's (a dtype or a scalar type), JAX's, a Python type or a name.
- `dtype_kind(dtype)`: 'bool', 'int' or 'float', the kinds the tracer's values know.
- `result_name(operands)`: torch.result_type over (dtype name, tier) pairs, tier 0 a
  dimensioned tensor, 1 a zero-dimensional tensor, 2 a Python number ("wrapped number"):
  the highest category (bool < integer < float < complex) decides, and within it the
  lowest tier that holds an operand of that category (float32 tensor + float64 0-d tensor is
  float32; int tensor + float 0-d tensor is that float dtype; int tensor + Python float is
  the default float dtype). The runtime's hot path (`_runtime_ops._result_dtype`) applies the
  same rule to NumPy dtypes; tests/test_dtype_promotion.py checks both against torch.

Imports nothing at module level (NumPy only inside `dtype_name`, for NumPy scalar types).
"""
from __future__ import annotations

CATEGORY = {"bool": 0, "int": 1, "float": 2, "complex": 3}


def dtype_name(dtype) -> str:
    """The name of `dtype` ('float32', 'int64', 'bool', ...); Python's float is float64 and
    its int int64 (torch's and NumPy's reading of them)."""
    if dtype is bool or dtype == "bool":
        return "bool"
    if dtype is float:
        return "float64"
    if dtype is int:
        return "int64"
    name = getattr(dtype, "name", None)
    if isinstance(name, str):
        return name
    text = str(dtype).replace("torch.", "").replace("symgrad.", "").replace("numpy.", "")
    try:
        import numpy

        return numpy.dtype(dtype).name
    except (TypeError, ValueError):
        return text


def dtype_kind(dtype) -> str:
    """'bool', 'int' (signed or unsigned) or 'float' (a float or complex dtype, or unknown)."""
    text = dtype_name(dtype)
    if "bool" in text:
        return "bool"
    if "int" in text:
        return "int"
    return "float"


def category(name: str) -> int:
    """0 bool, 1 integer, 2 float, 3 complex (torch's promotion categories)."""
    if name == "bool":
        return 0
    if "complex" in name:
        return 3
    if "int" in name:
        return 1
    return 2


_FLOAT_ORDER = ("float16", "bfloat16", "float32", "float64")
_INT_ORDER = ("uint8", "int8", "int16", "int32", "int64")


def promote_names(a: str, b: str) -> str:
    """torch.promote_types by name (float16 with bfloat16 is float32; uint8 with int8 int16)."""
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        order = _FLOAT_ORDER
    elif ca == 1:
        if {a, b} == {"uint8", "int8"}:
            return "int16"
        order = _INT_ORDER
    else:
        order = ("complex64", "complex128")
    known = [n for n in (a, b) if n in order]
    return max(known, key=order.index) if len(known) == 2 else a


def result_name(operands, default_float: str = "float32") -> str:
    """torch.result_type over `operands`, (dtype name, tier) pairs (tier 0 dimensioned, 1 zero-
    dimensional, 2 a Python number: 'bool', 'int64' or 'float64' for bool, int, float).
    A Python float next to integer tensors gives `default_float`, as torch's default dtype."""
    best: list = [None, None, None]
    top = -1
    for name, tier in operands:
        cat = category(name)
        top = max(top, cat)
        cur = best[tier]
        if cur is None or cat > category(cur):
            best[tier] = name
        elif cat == category(cur) and tier != 2:   # Python numbers: the first one's dtype
            best[tier] = promote_names(cur, name)
    for tier, name in enumerate(best):
        if name is not None and category(name) == top:
            if tier == 2 and top == 2:
                return default_float   # a Python float: the default float dtype
            if tier == 2 and top == 3:
                return "complex64" if default_float != "float64" else "complex128"
            return name
    return default_float if top == 2 else "int64"
