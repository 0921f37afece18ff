"""The op layer: built-in ops as module-Functions over generated modules.

Each differentiable op looks up its generated module (``symgrad._generated.<op>``) through
``_module(name)`` and applies it with ``apply_module``, which records a ``ModuleFunction``
node named as torch names it (``ExpBackward0``). Type promotion follows torch (Python scalars
are "wrapped numbers": float32 tensor + 2.5 stays float32; int tensor + 2.5 is float32).

Every public function also accepts traced values: when its first argument is not a runtime
Tensor, number or array (a ``symgrad.trace.SymbolicTensor``), it calls that object's method of
the same name, so user forwards written with ``sg.exp(x)`` trace.
"""

import builtins
import collections
import importlib
import numbers

import numpy as np

from symgrad import tensor as _tm
from symgrad.errors import scalar_type_name
from symgrad.ops import table as _table
from symgrad.autograd import engine as _engine
from symgrad.autograd import forward_ad as _forward_ad
from symgrad.autograd import function as _function
from symgrad.autograd import grad_mode as _gm
from symgrad import _runtime_nodes, _runtime_reductions, _runtime_views
# the built-in ops' generated modules: moved there verbatim; re-exported
from symgrad._runtime_modules import _MODULES, _module, grad_module  # noqa: F401
# the runtime's nodes and in-place machinery, the movement and view ops: moved there verbatim;
# re-exported
from symgrad._runtime_nodes import (  # noqa: F401
    CopySlices, RuntimeNode, _NEEDS_OLD_VALUE, _TORCH_TYPE, _check_inplace,
    _check_view_of_grad_leaf, _copy_backward, _copy_value, _fill_backward, _fill_value,
    _identity_backward, _no_tangent, _overwritten, _random_value, _rebase, _snapshot,
    _to_device_backward, _to_dtype_backward, _type_word, _writable_alias, _write, _zero_value,
    clone, copy_obey_contract, inplace, rebase_view, record, sum_to, to_device, to_dtype,
)
from symgrad._runtime_views import (  # noqa: F401
    _INPLACE_VIEW_NODES, _SPECIAL_NS, _as_strided_kw, _check_index, _expand_kw, _getitem_kw,
    _igamma_op, _index_add_backward, _index_add_zeros, _index_array, _index_backward,
    _index_name, _index_put, _infer_shape, _movement, _multi_view, _normalize_index,
    _not_implemented, _permute_kw, _reshape_kw, _sequence_as_tuple, _shape_arg,
    _special_helpers, _squeeze_kw, _storage_of, _strided_index, _strided_map, _unsqueeze_kw,
    _view_of, as_strided, chunk, expand, flatten, getitem, igamma, igammac, inplace_view,
    permute, reshape, setitem, split, squeeze, swapaxes, swapdims, t, transpose, unbind,
    unsqueeze, view,
)
# the reductions and matrix products: moved there verbatim; re-exported
from symgrad._runtime_reductions import (  # noqa: F401  (_full_sum, rebound there, is not)
    argmax, argmin, argreduce, _CHECK_IN_OUT, _dims, _FullSum, logical_reduce, _mat_str, _MATMUL,
    matmul, _matmul_modules, _MatmulOne, max, _max_ret, _maxmin, _MEAN, mean, min, _min_ret, mm,
    _PROD, prod, _reduce, _SUM, sum, _SUM_ALL, _sum_all, _SUM_ALL_KEEP,
)

Tensor = _tm.Tensor
_wrap = _tm._wrap
_ndarray = np.ndarray
SaveSpec = _function.SaveSpec
_apply1 = _function.apply1
_apply2 = _function.apply2
_NO_PARAMS = _function._NO_PARAMS
_fw_live = _forward_ad.live
_NODES = _table.node_names()   # torch's node names of the op table's ops (SumBackward0, ...)

__all__ = [
    *(op.name for op in _table.runtime("fast")),   # the op table's: abs ... neg, maximum, minimum
    "add", "sub", "mul", "div", "pow", "where", "clamp", "clip", "sum", "mean", "max", "min", "prod", "matmul", "mm", "reshape",
    "view", "transpose", "permute", "squeeze", "unsqueeze", "expand", "flatten", "clone",
    "cat", "stack", "square", "negative", "multiply", "divide", "subtract", "true_divide",
    "eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "isnan", "isfinite", "isinf", "isposinf", "isneginf", "sign",
    "logical_not", "logical_and", "logical_or", "logical_xor",
    "allclose", "numel", "t", "split", "chunk", "unbind", "as_strided", "swapaxes", "swapdims",
    "igamma", "igammac",
]


# ------------------------------------------------------------------ type promotion
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _is_traced(x):
    return not isinstance(x, (Tensor, numbers.Number, _ndarray, np.generic, list, tuple)) \
        and x is not None and hasattr(x, "exp")


def _result_dtype(operands):
    """torch's result_type over Tensors, 0-d Tensors and Python scalars."""
    best = [None, None, None]  # per priority: dimensioned, zero-dim, wrapped scalar
    cat_max = -1
    for x in operands:
        if isinstance(x, Tensor):
            dt = x._data.dtype
            prio = 0 if x._data.ndim else 1
        elif isinstance(x, builtins.bool):
            dt, prio = np.dtype(np.bool_), 2
        elif isinstance(x, numbers.Integral):
            dt, prio = np.dtype(np.int64), 2
        elif isinstance(x, numbers.Real):
            dt, prio = _tm._default_float.np, 2
        else:
            continue
        cat = _CATEGORY[dt.kind]
        cat_max = builtins.max(cat_max, cat)
        cur = best[prio]
        if cur is None:
            best[prio] = dt
        elif cat > _CATEGORY[cur.kind]:   # the highest category's dtype wins (float32 with
            best[prio] = dt                # int64 is float32, float16 with int32 float16)
        elif prio != 2 and cat == _CATEGORY[cur.kind]:   # Python scalars: the first one's
            best[prio] = np.promote_types(cur, dt)
    for dt in best:
        if dt is not None and _CATEGORY[dt.kind] == cat_max:
            return dt
    return _tm._default_float.np if cat_max == 2 else np.dtype(np.int64)


def _array_of(x, dt=None, like=None):
    if isinstance(x, Tensor):
        a = x._data
    elif like is not None and type(like) is not _ndarray and not isinstance(x, _ndarray):
        # a Python number next to a CuPy array: a NumPy scalar, which CuPy accepts
        return (dt or np.asarray(x).dtype).type(x)
    else:
        a = np.asarray(x)
    if dt is not None and a.dtype != dt:
        a = a.astype(dt)
    return a


def _arr(v, dtype=None):
    """v as an array of its own library: NumPy scalars become 0-d arrays, CuPy stays on GPU."""
    if type(v) is not _ndarray and hasattr(v, "__cuda_array_interface__"):
        return v if dtype is None else v.astype(dtype, copy=False)
    return np.asarray(v, dtype=dtype)


def _operands(*xs):
    """(tensors, arrays) for a module call, all arrays promoted to the result dtype."""
    dt = _result_dtype(xs)
    tensors = [x if isinstance(x, Tensor) else None for x in xs]
    arrays = []
    gpu = None
    for x in xs:
        if isinstance(x, Tensor):
            a = x._data
            arrays.append(a if a.dtype == dt else a.astype(dt))
        else:
            if gpu is None:
                gpu = any(isinstance(t, Tensor) and type(t._data) is not _ndarray for t in xs)
            # next to CuPy data a Python number is a NumPy scalar (CuPy rejects 0-d ndarrays)
            arrays.append(dt.type(x) if gpu else np.asarray(x, dtype=dt))
    return tensors, arrays


def _first_tensor(*xs):
    for x in xs:
        if isinstance(x, Tensor):
            return x
    return None


# --------------------------------------------------------------------- unary ops
_COW_OUT = SaveSpec(cow=(0,), outputs=(0,))
_CHECK_IN = SaveSpec(check=(0,))
_CHECK_COND = SaveSpec(check="cond")
_CHECK_ALL = SaveSpec(check="all")
_NONE = _function.SAVE_NONE
# what torch saves for the backward, in the op table's words (symgrad/ops/table.py: saves)
_SAVES = {"input": _CHECK_IN, "output": _COW_OUT, "inputs": _CHECK_ALL, "condition": _CHECK_COND,
          "nothing": _NONE}
# the op table's fast-path ops: {name: (torch's node name(s), what torch saves, result is
# always float)}
_FAST = {op.name: (_table.node_name(op), _SAVES[op.saves], op.to_float)
         for op in (*_table.ELEMENTWISE, *_table.BINARY) if op.saves is not None}
_UNARY = {op.name: _FAST[op.name] for op in _table.runtime("fast", _table.ELEMENTWISE)}


def _unary(name, x):
    if type(x) is Tensor:
        a = x._data
        if a.dtype.kind == "f":  # fast path: no cast, no bool check
            node_name, spec, _ = _UNARY[name]
            return _apply1(_MODULES.get(name) or _module(name), x, a, _NO_PARAMS, node_name,
                           spec)
    elif not isinstance(x, Tensor):
        if _is_traced(x):
            return getattr(x, name)()
        x = _tm.tensor(x)
    node_name, spec, to_float = _UNARY[name]
    a = x._data
    if to_float and a.dtype.kind != "f":
        a = a.astype(_tm._default_float.np)
    elif name == "neg" and a.dtype.kind == "b":
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
            "to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return _apply1(_module(name), x, a, _NO_PARAMS, node_name, spec)


def _unary_op(name):
    """The public function of unary op ``name``: a float Tensor goes straight to the module."""
    node_name, spec, _ = _UNARY[name]

    def op(input):   # torch's parameter name: sg.exp(input=x)
        if type(input) is Tensor:
            a = input._data
            if a.dtype.kind == "f":
                mod = _MODULES.get(name)
                if mod is None:
                    mod = _module(name)
                return _apply1(mod, input, a, _NO_PARAMS, node_name, spec)
        return _unary(name, input)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name} (torch.{name}); differentiable ({node_name})."
    return op


# sg.exp, sg.sin, ...: the op table's fast-path one-operand ops
for _name in _UNARY:
    globals()[_name] = _unary_op(_name)
negative = globals()["neg"]


# -------------------------------------------------------------------- binary ops

def _binary(name, a, b, node_name, spec):
    try:
        # fast paths: two Tensors of one dtype, or a float Tensor and a Python float or int
        # (a "wrapped number": the Tensor's dtype wins), need no general type promotion
        ta = type(a) is Tensor
        tb = type(b) is Tensor
        if ta:
            da = a._data
            if tb:
                db = b._data
                if da.dtype == db.dtype:
                    return _apply2(_MODULES.get(name) or _module(name), a, b, da, db, node_name,
                                   spec)
            elif (type(b) is float or type(b) is int) and type(da) is _ndarray \
                    and da.dtype.kind == "f":
                return _apply2(_MODULES.get(name) or _module(name), a, None, da,
                               np.asarray(b, da.dtype), node_name, spec)
        elif tb:
            db = b._data
            if (type(a) is float or type(a) is int) and type(db) is _ndarray \
                    and db.dtype.kind == "f":
                return _apply2(_MODULES.get(name) or _module(name), None, b,
                               np.asarray(a, db.dtype), db, node_name, spec)
        # a traced value with a runtime Tensor (a constant the forward made or captured):
        # the traced op, which takes the Tensor as a captured input
        if _is_traced(a):
            return getattr(a, name)(b)
        if _is_traced(b):
            return getattr(b, "__r" + name + "__" if name in _REFLECT else name)(a)
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            a = _tm.tensor(a)
        tensors, arrays = _operands(a, b)
        return _function.apply_module(_module(name), tensors, arrays, {}, node_name, spec)[0]
    except ValueError as exc:
        raise _binary_error(a, b, exc) from None
    except TypeError as exc:
        if "boolean subtract" in str(exc):   # NumPy's words for what torch refuses so
            raise RuntimeError(
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use "
                "the `^` or `logical_xor()` operator instead.") from None
        raise


def _binary_error(a, b, exc):
    """torch's RuntimeError for what NumPy reports as a ValueError in a binary op."""
    msg = str(exc)
    if "broadcast" in msg:
        sa = list(getattr(a, "shape", ()))
        sb = list(getattr(b, "shape", ()))
        n = builtins.max(len(sa), len(sb))
        sa = [1] * (n - len(sa)) + sa
        sb = [1] * (n - len(sb)) + sb
        for d in range(n - 1, -1, -1):
            if sa[d] != sb[d] and sa[d] != 1 and sb[d] != 1:
                return RuntimeError(f"The size of tensor a ({sa[d]}) must match the size of "
                                    f"tensor b ({sb[d]}) at non-singleton dimension {d}")
    return RuntimeError(msg)


_REFLECT = {"add", "sub", "mul", "div", "pow"}
# (torch's node name(s), what torch saves) of the arithmetic ops: the op table's
_ADD, _SUB, _MUL, _DIV = (_FAST[name][:2] for name in ("add", "sub", "mul", "div"))


def add(input, other, *, alpha=1):
    if alpha != 1:
        other = mul(other, alpha)
    return _binary("add", input, other, _ADD[0], _ADD[1])


def _is_bool(x):
    return x._data.dtype.kind == "b" if isinstance(x, Tensor) else isinstance(x, builtins.bool)


def sub(input, other, *, alpha=1):
    if _is_bool(input) or _is_bool(other):   # torch refuses a bool operand of `-`
        if _is_bool(input) and _is_bool(other):   # (a Python bool counts, as in torch)
            raise RuntimeError(
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use "
                "the `^` or `logical_xor()` operator instead.")
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    if alpha != 1:
        other = mul(other, alpha)
    # SubBackward0, or RsubBackward1 for number - tensor
    return _binary("sub", input, other, _SUB[0][not isinstance(input, Tensor)], _SUB[1])


subtract = sub


def mul(input, other):
    return _binary("mul", input, other, _MUL[0], _MUL[1])


multiply = mul


def _is_float_tensor(a):
    return type(a) is Tensor and a._data.dtype.kind in "fc"


def div(input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        if _is_traced(input) or _is_traced(other):
            lhs = input if _is_traced(input) else other.tracer.lift(input)
            return lhs.div(other, rounding_mode=rounding_mode)
        if rounding_mode not in ("floor", "trunc"):
            raise ValueError("div expected rounding_mode to be one of None, 'trunc', or "
                             f"'floor' but found '{rounding_mode}'")
        dt = _result_dtype((input, other))
        if dt.kind not in "fc":   # integer division stays integral (torch)
            a, b = _array_of(input, dt), _array_of(other, dt)
            if (b == 0).any():
                raise RuntimeError("ZeroDivisionError")
            q = np.floor_divide(a, b)
            if rounding_mode == "trunc":   # towards zero: one up where the signs differ
                q = q + ((q * b != a) & ((a < 0) != (b < 0)))
            return _wrap(_arr(q).astype(dt, copy=False))
        out = div(input, other)
        with _gm.no_grad():
            fn = np.floor if rounding_mode == "floor" else np.trunc
            return _wrap(_arr(fn(out._data)))
    # true division of integers (and bools) is a floating op: the default float dtype. With
    # a floating Tensor operand (the common case) the result is floating anyway.
    if not (_is_float_tensor(input) or _is_float_tensor(other)) \
            and isinstance(input, (Tensor, numbers.Number)) \
            and isinstance(other, (Tensor, numbers.Number)) \
            and _result_dtype((input, other)).kind not in "fc":
        fl = _tm._default_float
        input = input.to(fl) if isinstance(input, Tensor) else builtins.float(input)
        other = other.to(fl) if isinstance(other, Tensor) else builtins.float(other)
    return _binary("div", input, other, _DIV[0], _DIV[1])


divide = true_divide = div


_ROOTS = {0.5: "sqrt", -0.5: "rsqrt"}


_POW = _NODES["pow"]   # tensor ** number, tensor ** tensor, number ** tensor


def pow(input, exponent):
    if _is_bool(input) and isinstance(exponent, Tensor) and _is_bool(exponent):
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")   # torch's
    if isinstance(input, Tensor) and isinstance(exponent, Tensor):
        name, spec = _POW[1], SaveSpec(check="all", outputs=(0,))
    elif isinstance(input, Tensor):
        # a number exponent has no gradient: pow_scalar computes x's alone (and needs no
        # mask); x**0 (torch: gradient 0, also at x = 0) takes pow's masked one. x**0.5 and
        # x**-0.5 are sqrt and rsqrt, as in torch (-0.0**0.5 = -0.0 with gradient -inf), and
        # NumPy's power has no fast path for their derivatives' exponents (5x slower)
        if isinstance(exponent, numbers.Number) and exponent != 0:
            root = _ROOTS.get(exponent) if input._data.dtype.kind == "f" else None
            if root is not None:
                return _apply1(_MODULES.get(root) or _module(root), input, input._data,
                               _NO_PARAMS, _POW[0], _CHECK_IN)
            return _binary("pow_scalar", input, exponent, _POW[0], _CHECK_IN)
        name, spec = _POW[0], _CHECK_IN
    else:
        name, spec = _POW[2], SaveSpec(check=(1,), outputs=(0,))
    return _binary("pow", input, exponent, name, spec)


def _binary_op(name):
    """The public function of the op table's fast-path two-operand op ``name``."""
    node_name, spec, _ = _FAST[name]
    tensors = _table.tensor_operands().get(name, ())

    def op(input, other):
        if tensors and (type(input) is not Tensor or type(other) is not Tensor):
            error = _table.number_operand_error(name, tensors, (input, other))
            if error is not None:   # sg.maximum(x, 2.0): torch's TypeError
                raise error
        return _binary(name, input, other, node_name, spec)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = None
    return op


# sg.maximum, sg.minimum: the op table's fast-path two-operand ops
for _op in _table.runtime("fast", _table.BINARY):
    globals()[_op.name] = _binary_op(_op.name)
del _name, _op


def tensor_method(op):
    """Tensor.<name> of the op table's fast-path op `op` (symgrad.tensor installs it): a method
    forwarding to the op's function."""
    fn = globals()[op.name]
    if op.arity == 1:
        def method(self):
            return fn(self)
    elif op.tensors:
        def method(self, other):
            if type(other) is not Tensor:   # x.maximum(2.0): torch's TypeError, its position
                error = _table.number_operand_error(op.name, op.tensors, (self, other), True)
                if error is not None:
                    raise error
            return fn(self, other)
    else:
        def method(self, other):
            return fn(self, other)
    method.__name__ = op.name
    method.__qualname__ = f"Tensor.{op.name}"
    method.__module__ = Tensor.__module__
    return method


def square(input):
    return pow(input, 2)


def where(condition, input=None, other=None):
    if input is None and other is None:
        c = _array_of(condition)
        return tuple(_wrap(i.astype(np.int64)) for i in np.nonzero(c))
    traced = next((v for v in (condition, input, other)
                   if not isinstance(v, Tensor) and _is_traced(v)), None)
    if traced is not None:
        # sg.where(c, a, b) in a traced forward: the tracer's where, argument order kept
        return traced.tracer.where(condition, input, other)
    if isinstance(condition, numbers.Number):   # torch's TypeError (a number input is fine)
        raise TypeError(f"where(): argument 'condition' (position 1) must be Tensor, not "
                        f"{type(condition).__name__}")
    cond = _array_of(condition)
    if cond.dtype == np.uint8:   # torch: deprecated, warned, read as cond != 0
        import warnings

        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and "
                      "will be removed in a future version of PyTorch. Use a boolean condition "
                      "instead.", UserWarning, stacklevel=2)
        cond = cond != 0
    if cond.dtype != np.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {scalar_type_name(cond.dtype)}")
    tensors, arrays = _operands(input, other)
    return _function.apply_module(_module("where"), [None] + tensors, [cond] + arrays, {},
                                  "WhereBackward0", SaveSpec(check=(0,)))[0]


def clamp(input, min=None, max=None):
    bounds = [b for b in (min, max) if b is not None]
    if len(bounds) == 2 and isinstance(bounds[0], numbers.Number) != isinstance(
            bounds[1], numbers.Number) and all(isinstance(b, (Tensor, numbers.Number)) and
                                               not getattr(b, "ndim", 0) for b in bounds):
        # a number and a 0-d tensor: torch reads the tensor as a number (no gradient)
        min, max = (b.item() if isinstance(b, Tensor) else b for b in (min, max))
        bounds = [min, max]
    if isinstance(input, numbers.Number) or (len(bounds) == 2 and isinstance(
            bounds[0], numbers.Number) != isinstance(bounds[1], numbers.Number)):
        # torch's TypeError: clamp(2.0, x), clamp(x, 0.0, t) (both bounds numbers or both
        # tensors)
        got = ", ".join(type(a).__name__ if isinstance(a, numbers.Number) else "Tensor"
                        for a in (input, *bounds))
        raise TypeError(f"clamp() received an invalid combination of arguments - got ({got}), "
                        "but expected (Tensor input, Tensor min = None, Tensor max = None) or "
                        "(Tensor input, Number min = None, Number max = None)")
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.clamp(min, max)
        input = _tm.tensor(input)
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        bounds = [b for b in (min, max) if b is not None]
        if _result_dtype([input] + bounds).kind == "f":
            # one clamp node with torch's gradients (ClampBackward0): x's where lo <= x <= hi,
            # bounds inclusive; as maximum(minimum(...)) a tie gave each side half
            tensors, arrays = _operands(input, -np.inf if min is None else min,
                                        np.inf if max is None else max)
            return _function.apply_module(_module("clamp"), tensors, arrays, {},
                                          "ClampBackward0", _CHECK_ALL)[0]
        out = input
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    a = input._data
    if a.dtype.kind != "f" and (isinstance(min, float) or isinstance(max, float)):
        a = a.astype(_tm._default_float.np)
    if a.dtype.kind == "f":
        lo = _array_of(-np.inf if min is None else min, a.dtype, a)
        hi = _array_of(np.inf if max is None else max, a.dtype, a)
    else:
        info = np.iinfo(a.dtype) if a.dtype.kind in "iu" else None
        lo = _array_of(info.min if min is None else min, a.dtype, a)
        hi = _array_of(info.max if max is None else max, a.dtype, a)
    return _function.apply_module(_module("clamp"), [input, None, None], [a, lo, hi], {},
                                  "ClampBackward1", _CHECK_IN)[0]


clip = clamp


# -------------------------------------------------------------------- comparisons
_COMPARE = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


def compare(op, a, b):
    """Elementwise comparison: a bool tensor, never differentiable."""
    if not isinstance(b, (Tensor, numbers.Number, _ndarray, np.generic, list, tuple)):
        return NotImplemented
    dt = _result_dtype((a, b))
    like = a._data if isinstance(a, Tensor) else getattr(b, "_data", None)
    return _wrap(_arr(_COMPARE[op](_array_of(a, dt, like), _array_of(b, dt, like))))


def eq(a, b):
    return compare("eq", a, b)


def ne(a, b):
    return compare("ne", a, b)


def lt(a, b):
    return compare("lt", a, b)


def le(a, b):
    return compare("le", a, b)


def gt(a, b):
    return compare("gt", a, b)


def ge(a, b):
    return compare("ge", a, b)


def logical_not(a):
    if not isinstance(a, Tensor) and _is_traced(a):
        return a.logical_not()
    return _wrap(np.logical_not(a._data))


_LOGICAL = {"not": np.logical_not, "and": np.logical_and, "or": np.logical_or,
            "xor": np.logical_xor}


def logical(name, a, b=None):
    """torch.logical_<name>(a[, b]): elementwise truth (nonzero is True) of any dtypes, with
    broadcasting; a bool tensor. In a traced forward, the traced value's own operators."""
    if _is_traced(a) or _is_traced(b):
        traced = a if _is_traced(a) else b.tracer.lift(a)
        return getattr(traced, f"logical_{name}")(*(() if b is None else (b,)))
    arrays = [x._data if isinstance(x, Tensor) else np.asarray(x) for x in (a, b)
              if x is not None]
    try:
        return _wrap(_LOGICAL[name](*arrays))
    except ValueError:
        shapes = " and ".join(str(list(np.shape(x))) for x in arrays)
        raise RuntimeError(f"logical_{name}: the shapes {shapes} do not broadcast") from None


def logical_and(input, other):
    return logical("and", input, other)


def logical_or(input, other):
    return logical("or", input, other)


def logical_xor(input, other):
    return logical("xor", input, other)


def predicate(fn, x, keep_dtype=False):
    if not isinstance(x, Tensor) and _is_traced(x):   # sg.isnan(x) in a traced forward
        return getattr(x, fn.__name__)()
    return _wrap(_arr(fn(x._data)))


def isnan(x):
    return predicate(np.isnan, x)


def isfinite(x):
    return predicate(np.isfinite, x)


def isinf(x):
    return predicate(np.isinf, x)


def isposinf(x):
    return predicate(np.isposinf, x)


def isneginf(x):
    return predicate(np.isneginf, x)


def sign(x):
    if _is_traced(x):
        return x.sign()
    if not isinstance(x, Tensor):
        x = _tm.tensor(x)
    a = x._data
    if a.dtype.kind == "f":   # differentiable, as torch's (SignBackward0: a zero gradient)
        return _apply1(_module("sign"), x, a, _NO_PARAMS, "SignBackward0", _function.SAVE_NONE)
    if a.dtype.kind == "b":   # torch: a bool tensor's sign is itself
        return _wrap(a.copy())
    return predicate(np.sign, x)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.bool(np.allclose(_array_of(a), _array_of(b), rtol, atol, equal_nan))


def numel(x):
    return x.numel()


# ------------------------------------------------------------------- in-place ops
# the ops `inplace` (_runtime_nodes.py) runs: defined here, where the ops are
_INPLACE = {
    "add": add,
    "sub": sub,
    "mul": mul,
    "div": div,
    "pow": pow,
    "clamp": clamp,
    "exp": exp,
    "relu": relu,
    "sigmoid": sigmoid,
    "tanh": tanh,
    "neg": neg,
    "copy": _copy_value,
    "fill": _fill_value,
    "zero": _zero_value,
    "random": _random_value,
    "apply": lambda s, fn: fn(s),   # nn.functional's inplace=True
    "igamma": igamma,
    "igammac": igammac,
}


# ------------------------------------------------------------------- joining
def _promoted(tensors):
    """The tensors' arrays in their torch result type (float32 with int64 is float32)."""
    dt = _result_dtype(tensors)
    return [t._data if t._data.dtype == dt else t._data.astype(dt) for t in tensors]


def cat(tensors, dim=0, *, axis=None):
    if axis is not None:   # torch's NumPy-style alias
        dim, _ = _tm._np_aliases("cat", dim or None, False, axis, None)
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    if any(_is_traced(t) for t in tensors):   # sg.cat in a traced forward
        from .trace import cat as traced_cat

        return traced_cat(tensors, dim)
    tensors = [t if isinstance(t, Tensor) else _tm.tensor(t) for t in tensors]
    d = _tm._wrap_dim(dim, tensors[0].ndim)
    out = _wrap(np.concatenate(_promoted(tensors), axis=d))
    sizes = [t._data.shape[d] for t in tensors]

    def backward(ctx, grads):
        g = grads[0]
        res, start = [], 0
        for s in sizes:
            idx = (slice(None),) * d + (slice(start, start + s),)
            res.append(getitem(g, idx))
            start += s
        return res

    def jvp(ts):
        return [cat([_wrap(np.zeros_like(x._data)) if t is None else t
                     for t, x in zip(ts, tensors)], d)]

    return record(_NODES["cat"], backward, None, tensors, [out], jvp)[0]


def stack(tensors, dim=0, *, axis=None):
    if axis is not None:
        dim, _ = _tm._np_aliases("stack", dim or None, False, axis, None)
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    if any(_is_traced(t) for t in tensors):   # sg.stack in a traced forward
        from .trace import stack as traced_stack

        return traced_stack(tensors, dim)
    tensors = [t if isinstance(t, Tensor) else _tm.tensor(t) for t in tensors]
    shape = tensors[0]._data.shape
    for i, t in enumerate(tensors[1:], 1):
        if t._data.shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                f"and {list(t._data.shape)} at entry {i}")
    d = _tm._wrap_dim(dim, len(shape) + 1)
    out = _wrap(np.stack(_promoted(tensors), axis=d))
    head = (slice(None),) * d

    def backward(ctx, grads):
        g = grads[0]
        return [getitem(g, head + (i,)) for i in range(len(tensors))]

    def jvp(ts):
        return [stack([_wrap(np.zeros_like(x._data)) if t is None else t
                       for t, x in zip(ts, tensors)], d)]

    return record(_NODES["stack"], backward, None, tensors, [out], jvp)[0]


# ------------------------------------------------------------------ out=
# torch's functions that take out=: symgrad's module-level spellings of these take it too
# (symgrad/__init__.py wraps them; the Tensor methods and internal calls are untouched)
OUT_OPS = (
    "add", "sub", "mul", "div", "true_divide", "pow", "exp", "log", "sin", "cos", "tan",
    "tanh", "sigmoid", "sqrt", "rsqrt", "abs", "neg", "matmul", "mm", "sum", "mean", "prod",
    "cat", "stack", "clamp", "where", "maximum", "minimum", "sign", "expm1", "log1p", "erf",
    "square", "igamma", "igammac",
)


def with_out(fn):
    """``fn`` with torch's ``out=`` keyword (see `_into_out`)."""
    import functools

    name = fn.__name__

    @functools.wraps(fn)
    def op(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        return _into_out(name, fn, args, kwargs, out)
    return op


def _flat_tensors(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flat_tensors(v)
        elif isinstance(v, Tensor) or _is_traced(v):
            yield v


def _into_out(name, fn, args, kwargs, out):
    """torch's out= semantics: the result is written into ``out`` (resized, with torch's
    warning, when it has another shape and is not a view), and ``out`` is returned. Refused
    where a gradient would be needed: out= functions are not differentiable (torch's error)."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    tensors = list(_flat_tensors(list(args) + list(kwargs.values())))
    if any(_is_traced(t) for t in tensors):
        raise TypeError(f"{name}(): out= is not supported inside a forward being traced; "
                        "use the returned value")
    if _gm._state.enabled and (out._requires_grad or any(t._requires_grad for t in tensors)):
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad.")
    with _gm.no_grad():
        result = fn(*args, **kwargs)
    if result._data.shape != out._data.shape:
        if out._base is not None:
            raise RuntimeError(
                f"{name}(): out= is a view of shape {list(out._data.shape)}, the result has "
                f"shape {list(result._data.shape)}: a view cannot be resized")
        if out._data.size:
            import warnings

            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out._data.shape)}, which does not match the required output shape "
                f"{list(result._data.shape)}. This behavior is deprecated, and in a future "
                "PyTorch release outputs will not be resized unless they have zero elements. "
                "You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                "elements with t.resize_(0).", UserWarning, stacklevel=3)
        out._data = np.empty(result._data.shape, out._data.dtype)
    _write(out, result)
    return out


# The modules moved out of _runtime_ops.py (_runtime_nodes.py, _runtime_views.py,
# _runtime_reductions.py) are imported before it defines the names they call (Tensor, record,
# ...): bind those names there now (each module lists them in _FROM_RUNTIME_OPS).
def _bind_moved_names():
    here = globals()
    for module in (_runtime_nodes, _runtime_views, _runtime_reductions):
        for name in module._FROM_RUNTIME_OPS:
            setattr(module, name, here[name])


_bind_moved_names()
# the public functions moved to _runtime_reductions.py keep this module's name (sg.sum.__module__)
for _public in (argmax, argmin, argreduce, logical_reduce, matmul, max, mean, min, prod, sum):
    _public.__module__ = __name__
del _public
