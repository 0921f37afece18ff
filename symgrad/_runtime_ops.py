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
from symgrad.autograd import engine as _engine
from symgrad.autograd import forward_ad as _forward_ad
from symgrad.autograd import function as _function
from symgrad.autograd import grad_mode as _gm

Tensor = _tm.Tensor
_wrap = _tm._wrap
_ndarray = np.ndarray
SaveSpec = _function.SaveSpec
_apply1 = _function.apply1
_apply2 = _function.apply2
_NO_PARAMS = _function._NO_PARAMS
_fw_live = _forward_ad.live

__all__ = [
    "abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
    "sigmoid", "relu", "erf", "neg", "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "where", "clamp", "clip", "sum", "mean", "max", "min", "prod", "matmul", "mm", "reshape",
    "view", "transpose", "permute", "squeeze", "unsqueeze", "expand", "flatten", "clone",
    "cat", "stack", "square", "negative", "multiply", "divide", "subtract", "true_divide",
    "eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "isnan", "isfinite", "isinf", "isposinf", "isneginf", "sign",
    "logical_not", "logical_and", "logical_or", "logical_xor",
    "allclose", "numel", "t", "split", "chunk", "unbind", "as_strided", "swapaxes", "swapdims",
    "igamma", "igammac",
]


# --------------------------------------------------------------------- modules
_MODULES = {}


def _module(name):
    """The generated module of built-in op ``name`` (``symgrad/_generated/<name>.py``)."""
    mod = _MODULES.get(name)
    if mod is None:
        mod = _MODULES[name] = importlib.import_module(f"symgrad._generated.{name}")
    return mod


def grad_module(mod, needed=None):
    """Module whose forward is ``mod.backward`` (for create_graph / higher order); `needed`:
    per input, whether its gradient is wanted (None: all)."""
    from symgrad.compiler import grad_module as compiler_grad_module

    return compiler_grad_module(mod, needed)


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
_UNARY = {
    # name: (node name, what torch saves, result is always float)
    "abs": ("AbsBackward0", _CHECK_IN, False),
    "exp": ("ExpBackward0", _COW_OUT, True),
    "log": ("LogBackward0", _CHECK_IN, True),
    "log1p": ("Log1PBackward0", _CHECK_IN, True),
    "expm1": ("Expm1Backward0", _COW_OUT, True),
    "sqrt": ("SqrtBackward0", _COW_OUT, True),
    "rsqrt": ("RsqrtBackward0", _COW_OUT, True),
    "sin": ("SinBackward0", _CHECK_IN, True),
    "cos": ("CosBackward0", _CHECK_IN, True),
    "tan": ("TanBackward0", _COW_OUT, True),
    "tanh": ("TanhBackward0", _COW_OUT, True),
    "sigmoid": ("SigmoidBackward0", _COW_OUT, True),
    "relu": ("ReluBackward0", _COW_OUT, False),
    "erf": ("ErfBackward0", _CHECK_IN, True),
    "neg": ("NegBackward0", _function.SAVE_NONE, False),
}


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


abs = _unary_op("abs")
exp = _unary_op("exp")
log = _unary_op("log")
log1p = _unary_op("log1p")
expm1 = _unary_op("expm1")
sqrt = _unary_op("sqrt")
rsqrt = _unary_op("rsqrt")
sin = _unary_op("sin")
cos = _unary_op("cos")
tan = _unary_op("tan")
tanh = _unary_op("tanh")
sigmoid = _unary_op("sigmoid")
relu = _unary_op("relu")
erf = _unary_op("erf")
neg = _unary_op("neg")


negative = neg


# -------------------------------------------------------------------- binary ops
_CHECK_COND = SaveSpec(check="cond")
_CHECK_ALL = SaveSpec(check="all")
_NONE = _function.SAVE_NONE


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


def add(input, other, *, alpha=1):
    if alpha != 1:
        other = mul(other, alpha)
    return _binary("add", input, other, "AddBackward0", _NONE)


def sub(input, other, *, alpha=1):
    if alpha != 1:
        other = mul(other, alpha)
    name = "SubBackward0" if isinstance(input, Tensor) else "RsubBackward1"
    return _binary("sub", input, other, name, _NONE)


subtract = sub


def mul(input, other):
    return _binary("mul", input, other, "MulBackward0", _CHECK_COND)


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
    return _binary("div", input, other, "DivBackward0", _CHECK_ALL)


divide = true_divide = div


_ROOTS = {0.5: "sqrt", -0.5: "rsqrt"}


def pow(input, exponent):
    if isinstance(input, Tensor) and isinstance(exponent, Tensor):
        name, spec = "PowBackward1", SaveSpec(check="all", outputs=(0,))
    elif isinstance(input, Tensor):
        # a number exponent has no gradient: pow_scalar computes x's alone (and needs no
        # mask); x**0 (torch: gradient 0, also at x = 0) takes pow's masked one. x**0.5 and
        # x**-0.5 are sqrt and rsqrt, as in torch (-0.0**0.5 = -0.0 with gradient -inf), and
        # NumPy's power has no fast path for their derivatives' exponents (5x slower)
        if isinstance(exponent, numbers.Number) and exponent != 0:
            root = _ROOTS.get(exponent) if input._data.dtype.kind == "f" else None
            if root is not None:
                return _apply1(_MODULES.get(root) or _module(root), input, input._data,
                               _NO_PARAMS, "PowBackward0", _CHECK_IN)
            return _binary("pow_scalar", input, exponent, "PowBackward0", _CHECK_IN)
        name, spec = "PowBackward0", _CHECK_IN
    else:
        name, spec = "PowBackward2", SaveSpec(check=(1,), outputs=(0,))
    return _binary("pow", input, exponent, name, spec)


def maximum(input, other):
    return _binary("maximum", input, other, "MaximumBackward0", _CHECK_ALL)


def minimum(input, other):
    return _binary("minimum", input, other, "MinimumBackward0", _CHECK_ALL)


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
    cond = _array_of(condition)
    if cond.dtype != np.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {_tm._DTYPES[cond.dtype].name.capitalize()}")
    tensors, arrays = _operands(input, other)
    return _function.apply_module(_module("where"), [None] + tensors, [cond] + arrays, {},
                                  "WhereBackward0", SaveSpec(check=(0,)))[0]


def clamp(input, min=None, max=None):
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


# -------------------------------------------------------------------- reductions
def _dims(dim, ndim):
    """Normalise ``dim`` to a sorted tuple of non-negative ints, or None for all dims."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return None
        dims = tuple(sorted(_tm._wrap_dim(d, ndim) for d in dim))
        for i in range(1, len(dims)):
            if dims[i] == dims[i - 1]:
                raise RuntimeError(f"dim {dims[i]} appears multiple times in the list of dims")
        return dims
    return (_tm._wrap_dim(dim, ndim),)


def _reduce(name, x, dim, keepdim, node_names, dtype=None):
    if not isinstance(x, Tensor):
        if _is_traced(x):
            return getattr(x, name)(dim, keepdim)
        x = _tm.tensor(x)
    a = x._data
    if dtype is not None:
        a = a.astype(_tm._np_dtype(dtype))
    dims = _dims(dim, a.ndim)
    named = dim is not None and dims is not None
    if a.ndim == 0:
        dims = None   # torch: dim 0 (or -1) of a 0-d tensor is the tensor itself
    if a.dtype.kind in "biu":
        if name == "mean":
            raise RuntimeError(
                "mean(): could not infer output dtype. Input dtype must be either a floating "
                f"point or complex dtype. Got: {x.dtype._legacy[:-6]}"
            )
        fn = np.sum if name == "sum" else np.prod
        return _wrap(_arr(fn(a, axis=dims, keepdims=keepdim, dtype=np.int64)))
    if name == "sum" and dims is None:
        global _full_sum
        if _full_sum is None:
            _full_sum = _FullSum(_module("sum"))
        return _apply1(_full_sum, x, a, _SUM_ALL_KEEP if keepdim else _SUM_ALL,
                       node_names[named], _NONE)
    params = {"dim": dims, "keepdim": keepdim}
    spec = _NONE if name == "sum" or name == "mean" else _CHECK_IN_OUT
    return _apply1(_MODULES.get(name) or _module(name), x, a, params,
                   node_names[named], spec)


_CHECK_IN_OUT = SaveSpec(check=(0,), outputs=(0,))
_SUM_ALL = {"dim": None, "keepdim": False}


def _sum_all(x):
    """``x.sum()`` of a floating-point Tensor (what ``_reduce`` does for it, minus the checks)."""
    global _full_sum
    if _full_sum is None:
        _full_sum = _FullSum(_module("sum"))
    return _apply1(_full_sum, x, x._data, _SUM_ALL, "SumBackward0", _NONE)


_SUM_ALL_KEEP = {"dim": None, "keepdim": True}
_full_sum = None


class _FullSum:
    """The generated ``sum`` module, for a sum over every dimension (torch's SumBackward0).

    Its backward broadcasts the incoming gradient to the input's shape; the generated
    ``_unreduce`` does that with expand_dims + broadcast_to, ~9 µs on a 16-element tensor,
    where filling a fresh array costs ~0.4 µs (and the result, a dense array, can become a
    leaf's ``.grad`` without another copy). Anything but NumPy arrays goes to the module.
    Forward and the gradient module (create_graph) are the generated module's.
    """

    __slots__ = ("mod",)

    def __init__(self, mod):
        self.mod = mod

    @property
    def forward(self):
        return self.mod.forward

    @property
    def BACKWARD_DEPENDS(self):
        return self.mod.BACKWARD_DEPENDS

    def backward(self, grad_out, x, *, dim, keepdim):
        if dim is None and type(grad_out) is _ndarray and type(x) is _ndarray:
            out = np.empty(x.shape, np.result_type(grad_out, x))
            out[...] = grad_out
            return (out,)
        return self.mod.backward(grad_out, x, dim=dim, keepdim=keepdim)

    def grad_module(self, needed=None):
        return grad_module(self.mod, needed)

    def jvp_module(self, which=None):
        from symgrad.compiler import jvp_module

        return jvp_module(self.mod, which)


def sum(input, dim=None, keepdim=False, axis=None, keepdims=None, *, dtype=None):
    # NumPy's spellings, as torch takes them (not keyword-only: each keyword-only default
    # costs a dict lookup per call)
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("sum", dim, keepdim, axis, keepdims)
    return _reduce("sum", input, dim, keepdim, ("SumBackward0", "SumBackward1"), dtype)


def mean(input, dim=None, keepdim=False, axis=None, keepdims=None, *, dtype=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("mean", dim, keepdim, axis, keepdims)
    return _reduce("mean", input, dim, keepdim, ("MeanBackward0", "MeanBackward1"), dtype)


def prod(input, dim=None, keepdim=False, axis=None, keepdims=None, *, dtype=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("prod", dim, keepdim, axis, keepdims)
    if isinstance(dim, (tuple, list)):
        raise TypeError("prod(): argument 'dim' must be int, not tuple")
    return _reduce("prod", input, dim, keepdim, ("ProdBackward0", "ProdBackward1"), dtype)


_max_ret = collections.namedtuple("max", ["values", "indices"])
_min_ret = collections.namedtuple("min", ["values", "indices"])


def _maxmin(name, input, dim, keepdim):
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return getattr(input, name)(dim, keepdim)
        input = _tm.tensor(input)
    if isinstance(dim, (Tensor, _ndarray)) or (dim is not None and not isinstance(dim, int)):
        return (maximum if name == "max" else minimum)(input, dim)
    a = input._data
    node = "MaxBackward" if name == "max" else "MinBackward"
    if dim is None:
        if a.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        return _function.apply_module(_module(name), [input], [a], {"dim": None, "keepdim": False},
                                      node + "1", SaveSpec(check=(0,), outputs=(0,)))[0]
    d = _tm._wrap_dim(dim, a.ndim)
    values, indices = _function.apply_module(
        _module(name + "_dim"), [input], [a], {"dim": d, "keepdim": keepdim}, node + "0",
        SaveSpec(cow=(0,), outputs=(1,)), differentiable=(a.dtype.kind == "f", False))
    return (_max_ret if name == "max" else _min_ret)(values, indices)


def max(input, dim=None, keepdim=False, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("max", dim, keepdim, axis, keepdims)
    return _maxmin("max", input, dim, keepdim)


def min(input, dim=None, keepdim=False, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("min", dim, keepdim, axis, keepdims)
    return _maxmin("min", input, dim, keepdim)


def argreduce(name, x, dim, keepdim):
    fn = np.argmax if name == "argmax" else np.argmin
    if dim is None:
        return _wrap(_arr(fn(x._data), dtype=np.int64))
    return _wrap(_arr(fn(x._data, axis=dim, keepdims=keepdim), dtype=np.int64))


def argmax(input, dim=None, keepdim=False, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("argmax", dim, keepdim, axis, keepdims)
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.argmax(dim, keepdim)
        input = _tm.tensor(input)
    return argreduce("argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("argmin", dim, keepdim, axis, keepdims)
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.argmin(dim, keepdim)
        input = _tm.tensor(input)
    return argreduce("argmin", input, dim, keepdim)


def logical_reduce(name, x, dim, keepdim):
    fn = np.all if name == "all" else np.any
    return _wrap(_arr(fn(x._data, axis=dim, keepdims=keepdim)))


# ------------------------------------------------------------------------ matmul
def matmul(input, other):
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        if _is_traced(input):
            return input.matmul(other)
        if _is_traced(other):
            return other.__rmatmul__(input)
        input, other = _tm.as_tensor(input), _tm.as_tensor(other)
    a, b = input._data, other._data
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and "
            f"{b.ndim}D"
        )
    if a.dtype != b.dtype:   # torch 2.13's four messages: dot, addmv, bmm, mm
        x, y = input.dtype._legacy[:-6], other.dtype._legacy[:-6]
        if a.ndim == 1 and b.ndim == 1:
            raise RuntimeError(
                f"dot : expected both vectors to have same dtype, but found {x} and {y}")
        if b.ndim >= 3:
            raise RuntimeError(f"expected scalar type {x} but found {y}")
        if b.ndim == 1:
            raise RuntimeError(
                f"addmv input tensors must have the same dtype, but got {y}, {x}, and {y}")
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {x.lower()} != {y.lower()}")
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        if a.ndim == 1 and b.ndim == 1:
            raise RuntimeError(
                "inconsistent tensor size, expected tensor [%d] and src [%d] to have the same "
                "number of elements, but got %d and %d elements respectively"
                % (a.shape[0], b.shape[0], a.shape[0], b.shape[0])
            )
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({_mat_str(a)} and {_mat_str(b)})"
        )
    if a.ndim == 2 and b.ndim == 2:
        name = "MmBackward0"
    elif a.ndim == 1 and b.ndim == 1:
        name = "DotBackward0"
    elif a.ndim == 2 and b.ndim == 1:
        name = "MvBackward0"
    else:
        name = "UnsafeViewBackward0" if a.ndim > 2 else "MmBackward0"
    mod = _matmul_modules[0]
    if mod is None:
        m = _module("matmul")
        mod = _matmul_modules[0] = m
        _matmul_modules[1] = _MatmulOne(m, 0)
        _matmul_modules[2] = _MatmulOne(m, 1)
    if _gm._state.enabled:
        ra = input._requires_grad or input._base is not None
        rb = other._requires_grad or other._base is not None
        if ra != rb:  # only one operand's gradient is ever needed
            mod = _matmul_modules[1 if ra else 2]
    return _apply2(mod, input, other, a, b, name, _CHECK_COND)


_matmul_modules = [None, None, None]  # the generated module; only-a; only-b


class _MatmulOne:
    """matmul's generated module for a product where one operand needs no gradient (a
    constant input, ``x @ W``): its backward computes only the other operand's gradient, with
    the module's own ``_matmul_grad_a`` / ``_matmul_grad_b``, as torch skips the unneeded
    one (a 32x64 @ 64x64 product wastes ~12 µs otherwise). Without those helpers, or for
    arrays other than NumPy's, it is the module's full backward. Forward and the gradient
    module (create_graph) are the generated module's."""

    __slots__ = ("mod", "which")

    def __init__(self, mod, which):
        self.mod = mod
        self.which = which  # 0: gradient of a only; 1: of b only

    @property
    def forward(self):
        return self.mod.forward

    @property
    def BACKWARD_DEPENDS(self):
        return self.mod.BACKWARD_DEPENDS

    def backward(self, grad_out, a, b):
        helper = getattr(self.mod, "_matmul_grad_b" if self.which else "_matmul_grad_a", None)
        if helper is None or type(grad_out) is not _ndarray or type(a) is not _ndarray \
                or type(b) is not _ndarray:
            return self.mod.backward(grad_out, a, b)
        g = _function.call_ignoring_fp_errors(helper, grad_out, a, b)
        dt = np.result_type(grad_out, a, b)
        if type(g) is not _ndarray or g.dtype != dt:
            g = np.asarray(g, dt)
        return (None, g) if self.which else (g, None)

    def grad_module(self, needed=None):
        return grad_module(self.mod, needed)

    def jvp_module(self, which=None):
        from symgrad.compiler import jvp_module

        return jvp_module(self.mod, which)


def _mat_str(a):
    if a.ndim == 1:
        return f"1x{a.shape[0]}"
    return f"{int(np.prod(a.shape[:-1]))}x{a.shape[-1]}"


mm = matmul


# ---------------------------------------------------------------------- movement
def _view_of(x, out, fn, kwargs):
    """Make ``out`` a view of ``x`` when it shares its memory (shared version counter)."""
    a = out._data
    if a.base is None or not np.may_share_memory(a, x._data):
        return out
    out._vc = _tm._vc_of(x)
    if type(out._vc) is _tm._InferenceVersion:
        return out   # a view of an inference tensor is one too, with no history to track
    if x._base is not None:
        out._base = x._base
        out._view_fn = x._view_fn + ((fn, kwargs),)
    else:
        out._base = x
        out._view_fn = ((fn, kwargs),)
    out._view_version = x._vc.value
    if not _gm._state.enabled:
        # torch's CreationMeta::NO_GRAD_MODE (INFERENCE_MODE): no history, but requires_grad as
        # its base does (gradient reaching it is dropped); in-place writes with grad mode on are
        # refused
        out._view_meta = "inference_mode" if _gm._state.inference else "no_grad"
        out._requires_grad = x._requires_grad
    elif x._view_meta in ("custom_function", "multi_output"):   # torch propagates these
        out._view_meta = x._view_meta
    elif x._view_meta is not None:   # the mode the first view was made in shows in errors
        out._view_meta = ("view_of_inference_mode" if x._view_meta in (
            "inference_mode", "view_of_inference_mode") else "view_of_no_grad")
    return out


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, _tm.Size)):
        shape = tuple(shape[0])
    return tuple(builtins.int(s) for s in shape)


def _infer_shape(shape, numel):
    shape = list(shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[shape.index(-1)] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
    return tuple(shape)


def _movement(name, x, params, node_name, fn):
    out = _apply1(_MODULES.get(name) or _module(name), x, x._data, params, node_name, _NONE)
    return _view_of(x, out, fn, params)


def reshape(input, *shape, **size):
    if size:   # torch's keyword spelling: sg.reshape(x, shape=(2, 3))
        shape = _tm._keyword_shape("reshape", shape, size, "shape")
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.reshape(*shape)
        input = _tm.tensor(input)
    shape = _infer_shape(_shape_arg(shape), input._data.size)
    out = _apply1(_MODULES.get("reshape") or _module("reshape"), input, input._data,
                  {"shape": shape}, "ViewBackward0", _NONE)
    if out._data.base is None or not np.may_share_memory(out._data, input._data):
        if out._grad_fn is not None:
            out._grad_fn._name = "UnsafeViewBackward0"
        return out
    return _view_of(input, out, _reshape_kw, {"shape": shape})


def _reshape_kw(x, shape):
    return reshape(x, shape)


def view(input, *shape):
    if not isinstance(input, Tensor):
        return input.view(*shape)
    shape = _infer_shape(_shape_arg(shape), input._data.size)
    try:
        np.reshape(input._data, shape, copy=False)
    except ValueError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from None
    return reshape(input, shape)


def flatten(input, start_dim=0, end_dim=-1):
    nd = input.ndim
    if nd == 0:
        return reshape(input, (1,))
    s = _tm._wrap_dim(start_dim, nd)
    e = _tm._wrap_dim(end_dim, nd)
    shape = input.shape
    return reshape(input, shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:])


def permute(input, *dims, **named):
    if named:
        dims = _tm._keyword_shape("permute", dims, named, "dims")
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.permute(*dims)
        input = _tm.tensor(input)
    dims = _shape_arg(dims)
    nd = input._data.ndim
    if len(dims) != nd:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal "
            f"to len(dims) = {len(dims)}"
        )
    dims = tuple(_tm._wrap_dim(d, nd) for d in dims)
    if sorted(dims) != list(range(nd)):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _movement("permute", input, {"dims": dims}, "PermuteBackward0", _permute_kw)


def _permute_kw(x, dims):
    return permute(x, dims)


def transpose(input, dim0, dim1):
    if not isinstance(input, Tensor):
        return input.transpose(dim0, dim1)
    nd = input._data.ndim
    if nd == 0:
        return input
    d0, d1 = _tm._wrap_dim(dim0, nd), _tm._wrap_dim(dim1, nd)
    dims = list(range(nd))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return _movement("permute", input, {"dims": tuple(dims)}, "TransposeBackward0", _permute_kw)


swapaxes = transpose
swapdims = transpose


# ---------------------------------------------------------------- as_strided
def _storage_of(a):
    """(flat array over the memory `a`'s elements live in, `a`'s offset and strides in it, in
    elements). symgrad has no storages: the storage is the C-contiguous NumPy array that `a`
    views (its root), or a contiguous copy of `a` where there is none."""
    item = a.itemsize
    root = a
    while isinstance(root.base, _ndarray):
        root = root.base
    if (root.dtype == a.dtype and root.flags.c_contiguous
            and all(s % item == 0 for s in a.strides)):
        off = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        if off >= 0 and off % item == 0:
            return root.reshape(-1), off // item, tuple(s // item for s in a.strides)
    flat = np.ascontiguousarray(a).reshape(-1)
    strides = tuple(s // item for s in np.ascontiguousarray(a).strides) if a.ndim else ()
    return flat, 0, strides


def _strided_index(start, size, stride):
    """The storage positions of the elements of a (size, stride, offset) geometry."""
    idx = np.zeros(tuple(size), dtype=np.int64) + start
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return idx


def _strided_map(t, gather, scatter, pre, post, n):
    """storage = zeros(n); storage[scatter] += t * pre; result = storage[gather] * post: the
    linear map of as_strided (and, with the index maps and scales swapped, its adjoint);
    differentiable to any order."""
    v = t._data * pre if pre is not None else t._data
    storage = np.zeros(n, dtype=t._data.dtype)
    np.add.at(storage, scatter.reshape(-1), v.reshape(-1))
    out = storage[gather]
    if post is not None:
        out = out * post
    res = _wrap(out.astype(t._data.dtype, copy=False))

    def backward(ctx, grads):
        g = grads[0]
        return [None if g is None else _strided_map(g, scatter, gather, post, pre, n)]

    def jvp(ts):
        return [None if ts[0] is None else _strided_map(ts[0], gather, scatter, pre, post, n)]

    return record("AsStridedBackward0", backward, None, [t], [res], jvp)[0]


def as_strided(input, size, stride, storage_offset=None):
    """torch.as_strided: a view of ``input``'s memory with the given sizes and strides (in
    elements) from ``storage_offset`` (default: ``input``'s own offset). The gradient is
    torch's: summed over the storage positions an output element reads, divided by how many
    of ``input``'s own elements share a position (an expanded input)."""
    if not isinstance(input, Tensor):
        if _is_traced(input):
            raise TypeError("as_strided: not supported inside a traced forward (symgrad's "
                            "traced tensors have no memory layout); use view / reshape / "
                            "indexing there")
        input = _tm.tensor(input)
    size = tuple(builtins.int(s) for s in size)
    stride = tuple(builtins.int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, "
                           f"got strides: {list(stride)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: "
                           f"{list(size)}")
    a = input._data
    flat, own_off, own_strides = _storage_of(a)
    off = own_off if storage_offset is None else builtins.int(storage_offset)
    if off < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {off}")
    item = a.itemsize
    n = flat.size
    need = 0 if 0 in size else off + builtins.sum((k - 1) * s for k, s in zip(size, stride)) + 1
    if need > n:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {off}, and "
            f"itemsize {item} requiring a storage size of {need * item} are out of bounds for "
            f"storage of size {n * item}")
    data = np.lib.stride_tricks.as_strided(flat[off:] if off < n else flat[n:], shape=size,
                                           strides=tuple(s * item for s in stride))
    out = _wrap(data)
    idx_out = _strided_index(off, size, stride)
    idx_in = _strided_index(own_off, a.shape, own_strides)
    count = np.bincount(idx_in.reshape(-1), minlength=n) if a.size else np.zeros(n, np.int64)
    inv = None
    if a.size and count.max() > 1:
        inv = (1.0 / count[idx_in]).astype(a.dtype)

    def backward(ctx, grads):
        g = grads[0]
        return [None if g is None else _strided_map(g, idx_in, idx_out, None, inv, n)]

    def jvp(ts):
        return [None if ts[0] is None else _strided_map(ts[0], idx_out, idx_in, inv, None, n)]

    out = record("AsStridedBackward0", backward, None, [input], [out], jvp)[0]
    if out._data.dtype.kind != "f" and not np.shares_memory(out._data, a):
        return out
    return _view_of(input, out, _as_strided_kw,
                    {"size": size, "stride": stride, "storage_offset": off})


def _as_strided_kw(x, size, stride, storage_offset):
    return as_strided(x, size, stride, storage_offset)


# ---------------------------------------------------------------- igamma
_SPECIAL_NS = []


def _special_helpers():
    """The NumPy helpers of symgrad.ops (the same code the generated modules embed)."""
    if not _SPECIAL_NS:
        from .ops.stable import numpy_helper_namespace

        _SPECIAL_NS.append(numpy_helper_namespace())
    return _SPECIAL_NS[0]


def _igamma_op(name, input, other, upper):
    for arg, what in ((input, "input"), (other, "other")):
        if not isinstance(arg, Tensor):
            if _is_traced(arg):
                return getattr(input if _is_traced(input) else
                               other.tracer.lift(input), name)(other)
            raise TypeError(f"{name}(): argument '{what}' (position "
                            f"{1 if what == 'input' else 2}) must be Tensor, not "
                            f"{type(arg).__name__}")
    dt = _result_dtype([input, other])
    if dt.kind != "f":
        raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                  f"'{_tm._sg_dtype(dt)._legacy.replace('Tensor', '')}'")
    a = input._data.astype(dt, copy=False)
    x = other._data.astype(dt, copy=False)
    ns = _special_helpers()
    y = np.asarray(ns["_igamma"](a, x, upper), dtype=dt)
    out = _wrap(y)
    a_grad = input._requires_grad and _gm._state.enabled
    node = "IgammacBackward0" if upper else "IgammaBackward0"
    if a_grad:
        # torch has no derivative in a: a's gradient goes through a node that raises torch's
        # error when it runs, so that only a backward that needs a's gradient fails (torch's
        # not_implemented: autograd.grad(y, x) passes with an `a` that requires grad)
        input = _not_implemented(input, f"{name}: input")

    def backward(ctx, grads):
        g = grads[0]
        if g is None:
            return [None, None]
        # torch's formula: grad * exp((a - 1) * log(x) - x - lgamma(a)) (negated for igammac);
        # a enters as a constant (it has no derivative)
        with np.errstate(all="ignore"):
            lg = ns["_lgamma"](a.astype(np.float64))
        am1 = _wrap((a - 1).astype(dt, copy=False))
        c = _wrap(np.asarray(lg, dtype=dt))
        dx = exp(sub(sub(mul(am1, log(other)), other), c))
        gx = mul(g, neg(dx) if upper else dx)
        ga = _wrap(np.zeros(a.shape, dt)) if a_grad else None   # reaches the raising node
        return [ga, sum_to(gx, other._data.shape) if other._requires_grad else None]

    return record(node, backward, None, [input, other], [out], None)[0]


def _not_implemented(t, what):
    """An alias of ``t`` whose node raises torch's NotImplementedError("the derivative for
    '<what>' is not implemented.") when a backward reaches it with a gradient."""
    def backward(ctx, grads):
        if grads[0] is None:
            return [None]
        raise NotImplementedError(f"the derivative for '{what}' is not implemented.")

    return record("NotImplemented", backward, None, [t], [_wrap(t._data)])[0]


def igamma(input, other):
    """torch.igamma (torch.special.gammainc): the regularized lower incomplete gamma function
    P(a, x) = gamma(a, x) / Gamma(a), a = input, x = other (float Tensors, broadcast). The
    gradient in x is torch's; in a torch has none (NotImplementedError, as here); forward AD
    is not implemented either (torch's NotImplementedError)."""
    return _igamma_op("igamma", input, other, False)


def igammac(input, other):
    """torch.igammac (torch.special.gammaincc): the regularized upper incomplete gamma function
    Q(a, x) = 1 - P(a, x), computed without cancellation."""
    return _igamma_op("igammac", input, other, True)


# torch's node names of the in-place view ops
_INPLACE_VIEW_NODES = {"transpose": "TransposeBackward1", "t": "TBackward1",
                       "squeeze": "SqueezeBackward3", "squeeze_dim": "SqueezeBackward4",
                       "unsqueeze": "UnsqueezeBackward1", "as_strided": "AsStridedBackward1"}


def inplace_view(self, name, make):
    """torch's in-place view ops (``x.t_()``, ``x.transpose_(0, 1)``, ``x.as_strided_(...)``):
    ``self`` becomes ``make(self)``, a view of ``self`` (same base, same version counter). In
    grad mode they are checked as an in-place write of ``self`` (a leaf that requires grad, a
    view made in no_grad mode, by a function returning several views or inside a custom
    Function are refused with torch's errors); a view keeps the way it was created, so a
    later in-place write is checked as before."""
    if _gm._state.enabled and self._requires_grad:
        if self._view_meta is not None:
            raise _tm.view_rebase_error(self, indirect=False)
        _check_inplace(self)
    new = make(self)
    self._data = new._data
    if new._grad_fn is not None:
        new._grad_fn._name = _INPLACE_VIEW_NODES.get(name, new._grad_fn._name)
        self._grad_fn = new._grad_fn
        self._output_nr = new._output_nr
        self._requires_grad = True
    if self._base is not None and new._base is self._base:
        self._view_fn = new._view_fn
        self._view_version = new._view_version
    return self


def t(input):
    if not isinstance(input, Tensor):
        return input.t()
    nd = input._data.ndim
    if nd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {nd}D")
    # torch: a view with its own node (TBackward0) also of a 0-D or 1-D tensor
    return _movement("permute", input, {"dims": (1, 0) if nd == 2 else tuple(range(nd))},
                     "TBackward0", _permute_kw)


def squeeze(input, dim=None):
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.squeeze(dim)
        input = _tm.tensor(input)
    nd = input._data.ndim
    if dim is None:
        dims, name = None, "SqueezeBackward0"
    elif isinstance(dim, (tuple, list)):
        dims, name = _dims(dim, nd) or (), "SqueezeBackward2"
    else:
        dims, name = (_tm._wrap_dim(dim, nd),) if nd else (), "SqueezeBackward1"
    shape = input._data.shape
    dims = tuple(d for d in (range(nd) if dims is None else dims) if shape[d] == 1)
    return _movement("squeeze", input, {"dim": dims}, name, _squeeze_kw)


def _squeeze_kw(x, dim):
    return _movement("squeeze", x, {"dim": dim}, "SqueezeBackward0", _squeeze_kw)


def unsqueeze(input, dim):
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.unsqueeze(dim)
        input = _tm.tensor(input)
    nd = input._data.ndim + 1
    if not -nd <= dim < nd:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got "
            f"{dim})"
        )
    return _movement("unsqueeze", input, {"dim": dim % nd}, "UnsqueezeBackward0", _unsqueeze_kw)


def _unsqueeze_kw(x, dim):
    return unsqueeze(x, dim)


def expand(input, *sizes, **size):
    if size:
        sizes = _tm._keyword_shape("expand", sizes, size, "size")
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.expand(*sizes)
        input = _tm.tensor(input)
    sizes = _shape_arg(sizes)
    shape = input._data.shape
    if len(sizes) < len(shape):
        raise RuntimeError(
            f"expand(symgrad.FloatTensor{{{list(shape)}}}, size={list(sizes)}): the number of "
            "sizes provided (%d) must be greater or equal to the number of dimensions in the "
            "tensor (%d)" % (len(sizes), len(shape))
        )
    lead = len(sizes) - len(shape)
    out = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s == -1:
                raise RuntimeError(
                    f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                    "non-existing dimension %d" % i
                )
            out.append(s)
            continue
        cur = shape[i - lead]
        if s == -1:
            s = cur
        elif cur != 1 and s != cur:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size ({cur}) "
                f"at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                f"{list(shape)}"
            )
        out.append(s)
    return _movement("expand", input, {"sizes": tuple(out)}, "ExpandBackward0", _expand_kw)


def _expand_kw(x, sizes):
    return expand(x, sizes)


# ---------------------------------------------------------------------- indexing
def _sequence_as_tuple(index):
    """torch (and NumPy before 1.23) read a short list holding a slice, None, Ellipsis, a
    tensor or a sequence as a tuple of indices: ``x[[slice(None), [1, 3]]]`` is
    ``x[:, [1, 3]]`` and ``x[[[0, 4], [2, 2]]]`` is ``x[[0, 4], [2, 2]]``."""
    return len(index) < 32 and any(
        i is None or i is Ellipsis or isinstance(i, (slice, list, tuple, Tensor, _ndarray))
        for i in index)


def _index_array(i):
    if any(isinstance(v, Tensor) for v in i):
        i = [v._data if isinstance(v, Tensor) else v for v in i]
    return np.asarray(i)


def _normalize_index(index):
    if isinstance(index, list) and _sequence_as_tuple(index):
        index = tuple(index)
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    basic = True
    for i in index:
        if isinstance(i, Tensor):
            i = i._data
            if i.ndim == 0 and i.dtype.kind in "iu":
                i = builtins.int(i)
            else:
                basic = False
        elif isinstance(i, (list, _ndarray)):
            i = _index_array(i)
            basic = False
        elif isinstance(i, builtins.bool) or i is None or i is Ellipsis:
            pass
        elif isinstance(i, (numbers.Integral, np.integer)):
            i = builtins.int(i)
        elif not isinstance(i, slice):
            raise TypeError(f"symgrad: unsupported index {i!r}")
        out.append(i)
    if basic and Ellipsis not in out:
        out.append(Ellipsis)  # numpy returns a 0-d view (not a scalar copy) with a trailing ...
    return tuple(out), basic


def _index_name(index, basic):
    if not basic:
        return "IndexBackward0"
    if index[-1] is Ellipsis and len(index) > 1:
        index = index[:-1]
    for i in reversed(index):
        if isinstance(i, builtins.bool) or i is None:
            return "UnsqueezeBackward0"
        if isinstance(i, builtins.int):
            return "SelectBackward0"
        if isinstance(i, slice):
            return "SliceBackward0"
    return "AliasBackward0"


def _check_index(a, index):
    dim = 0
    for i in index:
        if isinstance(i, builtins.bool) or i is None or i is Ellipsis:
            if i is Ellipsis:
                dim = a.ndim - builtins.sum(
                    1 for j in index if not (j is None or j is Ellipsis or isinstance(j, builtins.bool)))
                at = next(k for k, j in enumerate(index) if j is Ellipsis)  # not .index():
                dim = builtins.max(dim, 0) + (at - builtins.sum(   # == on arrays is ambiguous
                    1 for j in index[:at] if j is None))
            continue
        if dim >= a.ndim:
            raise IndexError(
                f"too many indices for tensor of dimension {a.ndim}"
            )
        if isinstance(i, builtins.int) and not -a.shape[dim] <= i < a.shape[dim]:
            raise IndexError(
                f"index {i} is out of bounds for dimension {dim} with size {a.shape[dim]}"
            )
        dim += 1 if not isinstance(i, _ndarray) or i.dtype != np.bool_ else i.ndim


def getitem(input, index):
    if not isinstance(input, Tensor):
        return input[index]
    index, basic = _normalize_index(index)
    _check_index(input._data, index)
    if not basic:
        # advanced indexing: repeated indices must accumulate in backward (numpy add.at)
        out = _wrap(_arr(input._data[index]))
        ctx = (input._data.shape, index)
        return record("IndexBackward0", _index_backward, ctx, [input], [out],
                      lambda ts: [getitem(ts[0], index)])[0]
    out = _function.apply_module(_module("getitem"), [input], [input._data], {"index": index},
                                 _index_name(index, basic), _NONE)[0]
    return _view_of(input, out, _getitem_kw, {"index": index})


def _index_backward(ctx, grads):
    shape, index = ctx
    return [_index_add_zeros(grads[0], shape, index)]


def _index_add_zeros(g, shape, index):
    """Zeros of ``shape`` with ``g`` added at ``index`` (repeats accumulate); differentiable."""
    a = np.zeros(shape, g._data.dtype)
    np.add.at(a, index, g._data)
    return record("IndexPutBackward0", _index_add_backward, index, [g], [_wrap(a)],
                  lambda ts: [_index_add_zeros(ts[0], shape, index)])[0]


def _index_add_backward(index, grads):
    return [getitem(grads[0], index)]


def _getitem_kw(x, index):
    return getitem(x, index)


# ------------------------------------------------------------ several views of one tensor
def split(tensor, split_size_or_sections, dim=0):
    """torch.split: views of ``tensor`` along ``dim``, of ``split_size`` each (the last may
    be smaller) or of the given sizes."""
    if not isinstance(tensor, Tensor):
        return tensor.split(split_size_or_sections, dim)
    a = tensor._data
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = _tm._wrap_dim(dim, a.ndim)
    n = a.shape[d]
    if isinstance(split_size_or_sections, (builtins.int, np.integer)):
        step = builtins.int(split_size_or_sections)
        if step < 0:
            raise RuntimeError(
                f"split expects split_size be non-negative, but got split_size={step}")
        if step == 0 and n != 0:
            raise RuntimeError("split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        sizes = [builtins.min(step, n - s) for s in range(0, n, step)] if step else []
        sizes = sizes or [0]
        name = "SplitBackward0"
    else:
        sizes = [builtins.int(k) for k in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sizes}")
        name = "SplitWithSizesBackward0"
    pre = (slice(None),) * d
    indices, start = [], 0
    for k in sizes:
        indices.append(pre + (slice(start, start + k),))
        start += k
    return _multi_view(tensor, name, indices, lambda parts: cat(parts, d))


def chunk(input, chunks, dim=0):
    """torch.chunk: ``split`` into pieces of ``ceil(size / chunks)``."""
    if not isinstance(input, Tensor):
        return input.chunk(chunks, dim)
    chunks = builtins.int(chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if input._data.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    n = input._data.shape[_tm._wrap_dim(dim, input._data.ndim)]
    return split(input, builtins.max(-(-n // chunks), 1 if n else 0), dim)


def unbind(input, dim=0):
    """torch.unbind: the slices of ``input`` along ``dim``, as views."""
    if not isinstance(input, Tensor):
        return input.unbind(dim)
    a = input._data
    if a.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = _tm._wrap_dim(dim, a.ndim)
    pre = (slice(None),) * d
    indices = [pre + (i,) for i in range(a.shape[d])]
    return _multi_view(input, "UnbindBackward0", indices, lambda parts: stack(parts, d))


def _multi_view(x, name, indices, join):
    """The outputs of an op returning several views of ``x`` (``x[index]`` per index), one node
    ``name`` whose backward joins the outputs' gradients (zeros for those without one).
    As torch's CreationMeta::MULTI_OUTPUT_NODE they refuse in-place writes."""
    a = x._data
    outs = [_wrap(a[index + (Ellipsis,)]) for index in indices]   # 0-d views, not scalars

    def backward(ctx, grads):
        return [join([g if g is not None else _wrap(np.zeros(o._data.shape, o._data.dtype))
                      for g, o in zip(grads, outs)])]

    def jvp(ts):
        return [None if ts[0] is None else getitem(ts[0], index) for index in indices]

    record(name, backward, None, [x], outs, jvp)
    grad_mode = _gm._state.enabled
    for out, index in zip(outs, indices):
        _view_of(x, out, _getitem_kw, {"index": index})
        if grad_mode and out._base is not None and x._view_meta != "inference_mode":
            out._view_meta = "multi_output"
    return tuple(outs)


def setitem(input, index, value):
    """``input[index] = value``: an in-place copy into the view ``input[index]``."""
    nidx, basic = _normalize_index(index)
    if basic:
        v = getitem(input, nidx)
        inplace(v, "copy", value)
        return
    # advanced indexing is not a view: write directly, record an IndexPut node
    if _fw_live[0]:
        return _forward_ad.setitem(input, index, value)
    grad_on = _gm._state.enabled
    val_rg = isinstance(value, Tensor) and value._requires_grad
    if grad_on and (input._requires_grad or val_rg):
        _check_inplace(input)
        result = _index_put(input, nidx, value)
        _write(input, result)
        _rebase(input, result)
    else:
        _tm._vc_of(input).bump()
        input._data[nidx] = _array_of(value, input._data.dtype)


def _index_put(x, index, value):
    a = x._data.copy()
    val = _array_of(value, a.dtype)
    a[index] = val
    vshape = np.shape(val)

    def backward(ctx, grads):
        g = grads[0]
        gx = g.clone()
        with _gm.no_grad():
            gx._data[index] = 0
        gv = None
        if isinstance(value, Tensor):
            gv = sum_to(getitem(g, index), vshape)
        return [gx, gv]

    def jvp(ts):
        tx = ts[0] if ts[0] is not None else _wrap(np.zeros_like(x._data))
        return [_index_put(tx, index, 0.0 if ts[1] is None else ts[1])]

    return record("IndexPutBackward0", backward, None,
                  [x, value if isinstance(value, Tensor) else None], [_wrap(a)], jvp)[0]


# -------------------------------------------------------------- runtime nodes
class RuntimeNode(_engine.Node):
    """A node whose backward is a few lines of Tensor ops (so it is differentiable too)."""

    __slots__ = ("_name", "_backward", "_ctx")

    def name(self):
        return self._name

    def _apply(self, grads):
        return self._backward(self._ctx, grads)


def record(name, backward, ctx, inputs, outputs, jvp=None):
    """Attach a ``RuntimeNode`` to ``outputs`` when grad mode and an input require it.

    ``jvp(tangents)``: forward AD, the outputs' tangents from the inputs' (None where an input
    has none), as Tensor ops so that they are differentiable too."""
    if _fw_live[0]:
        _forward_ad.record(inputs, outputs, jvp, name)
    if not _gm._state.enabled:
        return outputs
    if not any(t is not None and t._requires_grad for t in inputs):
        return outputs
    node = RuntimeNode.__new__(RuntimeNode)
    node._init_node(tuple((None, 0) if t is None else _engine.edge(t) for t in inputs),
                    len(outputs))
    node._name = name
    node._backward = backward
    node._ctx = ctx
    for i, out in enumerate(outputs):
        if out._data.dtype.kind == "f":
            out._grad_fn = node
            out._output_nr = i
            out._requires_grad = True
    return outputs


def sum_to(g, shape):
    """Sum ``g`` down to ``shape`` (the adjoint of broadcasting); differentiable."""
    shape = tuple(shape)
    gshape = g._data.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and gshape[lead + i] != 1)
    r = sum(g, dims, keepdim=True) if dims else g
    if r._data.shape != shape:
        r = reshape(r, shape)
    return r


def _identity_backward(ctx, grads):
    return [grads[0]]


def _to_dtype_backward(dt, grads):
    g = grads[0]
    return [None if g is None else to_dtype(g, dt)]


def clone(input, contiguous=False):
    a = input._data
    out = np.empty(a.shape, a.dtype) if contiguous else _tm._empty_like_layout(a)
    out[...] = a
    return record("CloneBackward0", _identity_backward, None, [input], [_wrap(out)],
                  lambda ts: [clone(ts[0], contiguous)])[0]


def to_dtype(input, dt):
    out = _wrap(input._data.astype(dt.np))
    if not dt.is_floating_point:
        return out
    return record("ToCopyBackward0", _to_dtype_backward, input.dtype, [input], [out],
                  lambda ts: [to_dtype(ts[0], dt)])[0]


def _to_device_backward(dev, grads):
    g = grads[0]
    return [None if g is None else to_device(g, dev)]


def to_device(input, dev):
    from symgrad import _device

    xp = _device.array_module(dev)
    a = input._data
    arr = xp.asarray(a) if dev.type == "cuda" else (a.get() if hasattr(a, "get") else a)
    return record("ToCopyBackward0", _to_device_backward, input.device, [input], [_wrap(arr)],
                  lambda ts: [to_device(ts[0], dev)])[0]


def copy_obey_contract(g, variable):
    """Differentiable deep copy of ``g`` into ``variable``'s layout (AccumulateGrad)."""
    out = _tm._empty_like_layout(variable._data)
    out[...] = g._data
    return record("torch::autograd::CopyBackwards", _identity_backward, None, [g], [_wrap(out)],
                  lambda ts: [copy_obey_contract(ts[0], variable)])[0]


# ---------------------------------------------------------------- in-place ops
_TORCH_TYPE = {"f": "Float", "i": "Long", "b": "Bool", "u": "Byte"}


def _type_word(dt):
    return {np.float16: "Half", np.float32: "Float", np.float64: "Double", np.int64: "Long",
            np.int32: "Int", np.int16: "Short", np.int8: "Char", np.uint8: "Byte",
            np.bool_: "Bool"}[dt.type]


def _check_view_of_grad_leaf(t):
    """A view taken before its base became a leaf that requires grad (``b = a[:]``, then
    ``a.requires_grad = True``): torch's view then requires grad through its base, and
    writing it in place in grad mode is refused as for any view of such a leaf."""
    base = t._base
    if base is not None and base._requires_grad and base._grad_fn is None:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place "
            "operation."
        )


def _check_inplace(t):
    if t._requires_grad:
        if t._base is None and t._grad_fn is None:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation."
            )
        base = t._base
        if base is not None and base._requires_grad and base._grad_fn is None:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation."
            )


def _overwritten(g):
    """The gradient of a tensor that an in-place copy_ / fill_ / zero_ overwrote: torch's
    zeros_like(grad), not None, so that the node that made the old value still runs and its
    saved-tensor check sees the write (a saved output overwritten by fill_ was not detected:
    backward ran with the new values)."""
    return _wrap(np.zeros_like(g._data))


def _copy_backward(ctx, grads):
    shape, dt = ctx
    g = grads[0]
    if g is None:
        return [None, None]
    gs = sum_to(g, shape)
    if gs._data.dtype != dt:
        gs = to_dtype(gs, _tm._DTYPES[dt])
    return [_overwritten(g), gs]


def _copy_value(s, src):
    a = np.empty_like(s._data)
    if isinstance(src, Tensor):
        try:
            np.copyto(a, src._data, casting="unsafe")
        except ValueError:
            raise RuntimeError(
                f"The size of tensor a ({s._data.shape[-1] if s.ndim else 1}) must match the "
                f"size of tensor b ({src._data.shape[-1] if src.ndim else 1}) at non-singleton "
                "dimension 0"
            ) from None
        return record("torch::autograd::CopyBackwards", _copy_backward, (src._data.shape, src._data.dtype),
                      [s, src], [_wrap(a)],
                      lambda ts: [None if ts[1] is None else _copy_value(s, ts[1])])[0]
    a[...] = np.asarray(src)
    return record("torch::autograd::CopyBackwards", _copy_backward, ((), a.dtype), [s, None], [_wrap(a)],
                  _no_tangent)[0]


def _fill_backward(ctx, grads):
    g = grads[0]
    return [None if g is None else _overwritten(g)]


def _fill_value(s, value):
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(
                "fill_ only supports 0-dimension value tensor but got tensor with "
                f"{value.ndim} dimensions."
            )
        a = np.empty_like(s._data)
        np.copyto(a, value._data, casting="unsafe")
        # torch's fill_.Tensor: the value gets the sum of the gradient
        return record("FillBackward3", _copy_backward, ((), value._data.dtype), [s, value],
                      [_wrap(a)],
                      lambda ts: [None if ts[1] is None else _fill_value(s, ts[1])])[0]
    a = np.full_like(s._data, value)
    return record("FillBackward2", _fill_backward, None, [s], [_wrap(a)], _no_tangent)[0]


def _random_value(s, values, name):
    a = np.empty_like(s._data)
    np.copyto(a, values, casting="unsafe")
    return record(name, _fill_backward, None, [s], [_wrap(a)], _no_tangent)[0]


def _zero_value(s):
    return record("ZeroBackward0", _fill_backward, None, [s], [_wrap(np.zeros_like(s._data))],
                  _no_tangent)[0]


def _no_tangent(tangents):
    """The jvp of an op whose outputs do not depend on its tensor inputs' values."""
    return [None]


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
# ops whose backward needs the old value of self: they run on a private copy of it
_NEEDS_OLD_VALUE = {"mul", "div", "pow", "clamp", "exp", "relu", "sigmoid", "tanh", "apply",
                    "igamma", "igammac"}


def _snapshot(t):
    s = _wrap(t._data.copy())
    s._requires_grad = t._requires_grad
    fn = t._grad_fn if t._base is None else t.grad_fn
    if fn is not None:
        s._grad_fn = fn
        s._output_nr = t._output_nr
    elif t._requires_grad:
        s._grad_fn = _engine.grad_accumulator(t)
    return s


def _writable_alias(a):
    """A writable array over the memory of the read-only view `a`, or None where writing it is
    refused. NumPy marks every view of an expanded (broadcast) array read-only; torch refuses
    a write only where the written-to tensor itself overlaps (a stride of 0 over more than one
    element), so `x.expand(n)[0] = 0` and `x.expand(n, m)[i, j] = v` write through."""
    if any(st == 0 and n > 1 for st, n in zip(a.strides, a.shape)):
        return None
    root = a
    while isinstance(root.base, _ndarray):
        root = root.base
    if not root.flags.writeable or not (root.flags.c_contiguous or root.flags.f_contiguous):
        return None
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    try:
        return np.ndarray(a.shape, a.dtype, buffer=root, offset=offset, strides=a.strides)
    except (TypeError, ValueError):
        return None


def _write(t, result):
    r = result._data
    a = t._data
    if r.shape != a.shape:
        raise RuntimeError(
            f"output with shape {list(a.shape)} doesn't match the broadcast shape "
            f"{list(r.shape)}"
        )
    if r.dtype != a.dtype and _CATEGORY[r.dtype.kind] > _CATEGORY[a.dtype.kind]:
        raise RuntimeError(
            f"result type {_type_word(r.dtype)} can't be cast to the desired output type "
            f"{_type_word(a.dtype)}"
        )
    if not a.flags.writeable:
        a = _writable_alias(a)
        if a is None:
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location. Please clone() the tensor before performing the "
                "operation.")
    _tm._vc_of(t).bump()
    if r.dtype == a.dtype and type(a) is _ndarray:
        a[...] = r
    else:
        np.copyto(a, r, casting="unsafe")


def _rebase(t, result):
    fn = result._grad_fn
    if fn is None:
        return
    old = t._grad_fn
    if old is not None:
        old._move_tensor_state(t._output_nr, fn, result._output_nr)
    t._grad_fn = fn
    t._output_nr = result._output_nr
    t._requires_grad = True
    _tm._vc_of(t).history = (fn, result._output_nr)


class CopySlices(_engine.Node):
    """In-place op on a view: the base's new history (torch's CopySlices).

    The base's gradient passes through outside the view; inside it, the gradient goes
    through ``fn`` (the op applied to the view's old value) back to the base's old history.
    """

    __slots__ = ("_view_fn", "_fn", "_fn_nr")

    def name(self):
        return "torch::autograd::CopySlices"   # torch's C++ node name, verbatim

    def __repr__(self):
        return f"<CopySlices object at {hex(id(self))}>"

    def __init__(self, base_edge, view_fn, fn, fn_nr):
        self._init_node((base_edge,) + tuple(fn.next_functions[1:]), 1)
        self._view_fn = view_fn
        self._fn = fn
        self._fn_nr = fn_nr

    def _apply(self, grads):
        g = grads[0]
        if g is None:
            return [None] * len(self.next_functions)
        grad_base = clone(g, contiguous=True)
        gv = grad_base
        for fn, kwargs in self._view_fn:
            gv = fn(gv, **kwargs)
        fn_grads = [None] * self._fn._n_out
        fn_grads[self._fn_nr] = clone(gv)
        res = list(self._fn._apply(fn_grads))
        if res[0] is None:
            inplace(gv, "fill", 0)
        else:
            inplace(gv, "copy", res[0])
        return [grad_base] + res[1:]

    def _release(self):
        self._fn._release()


def inplace(self, op, *args, **kwargs):
    """Apply ``op`` to ``self`` in place, with torch's autograd rules for in-place ops."""
    if _fw_live[0]:
        return _forward_ad.inplace(self, op, args, kwargs)
    compute = _INPLACE[op]
    grad_on = _gm._state.enabled
    needs_graph = grad_on and (self._requires_grad or any(
        isinstance(a, Tensor) and a._requires_grad for a in args))
    if grad_on and not self._requires_grad:
        _check_view_of_grad_leaf(self)
    if not needs_graph:
        if grad_on:
            with _gm.no_grad():
                result = compute(self, *args, **kwargs)
        else:
            result = compute(self, *args, **kwargs)
        _write(self, result)
        return self
    if self._view_meta is not None:   # made in no_grad / inference mode, or by a Function
        raise _tm.view_rebase_error(self, indirect=False)
    _check_inplace(self)
    base = self._base
    if base is None:
        src = _snapshot(self) if op in _NEEDS_OLD_VALUE else self
        result = compute(src, *args, **kwargs)
        _write(self, result)
        _rebase(self, result)
        return self
    # a view: the op runs on the view's old value, and the base gets a CopySlices node
    placeholder = _wrap(self._data.copy(), self._data.dtype.kind == "f")
    result = compute(placeholder, *args, **kwargs)
    base_edge = _engine.edge(base)
    _write(self, result)
    if result._grad_fn is not None:
        rebase_view(self, result._grad_fn, result._output_nr, base_edge)
    return self


def rebase_view(view, fn, nr, base_edge=None):
    """torch's rebase_history of a view written in place by output ``nr`` of node ``fn``: the
    base's history becomes a CopySlices around ``fn`` (whose first input is the view); the
    view's own grad_fn is regenerated from it on next use."""
    base = view._base
    node = CopySlices(_engine.edge(base) if base_edge is None else base_edge, view._view_fn,
                      fn, nr)
    if base._grad_fn is not None:
        base._grad_fn._move_tensor_state(base._output_nr, node, 0)
    base._grad_fn = node
    base._output_nr = 0
    base._requires_grad = True
    _tm._vc_of(base).history = (node, 0)


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

    return record("CatBackward0", backward, None, tensors, [out], jvp)[0]


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

    return record("StackBackward0", backward, None, tensors, [out], jvp)[0]


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
