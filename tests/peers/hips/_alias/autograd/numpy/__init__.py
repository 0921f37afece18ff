"""`autograd.numpy` over symgrad: NumPy's namespace, where each differentiable function
dispatches on its arguments — plain NumPy values go to NumPy, symgrad Tensors (the runtime)
and traced values (a forward being compiled) go to symgrad's op of the same meaning.

Only the spelling is adapted here (NumPy's `axis`/`keepdims`/`ddof`/`axes` to symgrad's
torch-style arguments, `np.max` to `amax`, ...): every derivative comes from symgrad.
"""
import builtins
import numbers

import numpy as _onp
from numpy import *  # noqa: F401,F403  (dtypes, constants, non-differentiable helpers)
from numpy import __version__  # noqa: F401

import symgrad as _sg
from symgrad.trace import SymbolicTensor as _Sym

from . import random  # noqa: F401

_Tensor = _sg.Tensor


def _is_sg(v):
    return isinstance(v, (_Tensor, _Sym))


def _any_sg(args, kwargs=None):
    for a in args:
        if _is_sg(a):
            return True
        if isinstance(a, (list, tuple)) and builtins.any(_is_sg(b) for b in a):
            return True
    return bool(kwargs) and builtins.any(_is_sg(v) for v in kwargs.values())


def _lift(v, like=None):
    """A NumPy value or Python number next to symgrad values: a float64 Tensor (a traced
    forward captures it as a constant input)."""
    if _is_sg(v):
        return v
    if isinstance(v, (list, tuple)) and _any_nested(v):   # np.mean([x, x + 2])
        return _sg.stack([_lift(b, like) for b in v])
    a = _onp.asarray(v)
    if a.dtype.kind == "c":
        raise TypeError("symgrad has no complex dtype")
    if a.dtype.kind == "f" or a.dtype.kind in "iu" and like is not None:
        a = a.astype(_onp.float64)
    return _sg.tensor(a)


def _dispatch(name, impl):
    base = getattr(_onp, name, None)
    if base is None:   # gone from this NumPy (msort, row_stack in NumPy 2): as autograd.numpy
        return None

    def f(*args, **kwargs):
        if _any_sg(args, kwargs):
            return impl(*args, **kwargs)
        return base(*args, **kwargs)

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"numpy.{name} (symgrad on symgrad values)"
    globals()[name] = f
    return f


def _shape(x):
    return tuple(x.shape)


def _ndim(x):
    return len(_shape(x))


def _axes(axis, nd):
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        return tuple(a % nd for a in axis)
    return axis % nd if nd else axis


# ---- elementwise, one argument
_UNARY = {
    "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "exp": "exp", "exp2": "exp2", "expm1": "expm1",
    "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p", "sqrt": "sqrt",
    "abs": "abs", "absolute": "abs", "fabs": "abs", "sign": "sign", "floor": "floor",
    "ceil": "ceil", "deg2rad": "deg2rad", "rad2deg": "rad2deg", "degrees": "rad2deg",
    "radians": "deg2rad", "sinc": "sinc", "reciprocal": "reciprocal", "negative": "neg",
    "trunc": "trunc", "rint": "round", "round": "round",
}


def _unary(sgname):
    def impl(x, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{sgname}: extra arguments {args} {kwargs}")
        return getattr(_sg, sgname)(_lift(x))
    return impl


for _n, _s in _UNARY.items():
    _dispatch(_n, _unary(_s))

_dispatch("square", lambda x: _lift(x) * _lift(x))
_dispatch("conj", lambda x: x)
_dispatch("conjugate", lambda x: x)
_dispatch("real", lambda x: x)


# ---- elementwise, two arguments
def _binary(fn):
    def impl(a, b, *rest, **kwargs):
        if rest or kwargs:
            raise TypeError(f"extra arguments {rest} {kwargs}")
        return fn(_lift(a, b), _lift(b, a))
    return impl


for _n, _f in {
    "add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b, "divide": lambda a, b: a / b,
    "true_divide": lambda a, b: a / b, "power": lambda a, b: a ** b,
    "mod": lambda a, b: a % b, "remainder": lambda a, b: a % b,
    "fmod": lambda a, b: _sg.fmod(a, b), "floor_divide": lambda a, b: a // b,
    "maximum": lambda a, b: _sg.maximum(a, b), "minimum": lambda a, b: _sg.minimum(a, b),
    "fmax": lambda a, b: _sg.maximum(a, b), "fmin": lambda a, b: _sg.minimum(a, b),
    "arctan2": lambda a, b: _sg.atan2(a, b), "hypot": lambda a, b: _sg.hypot(a, b),
    "logaddexp": lambda a, b: _sg.logaddexp(a, b),
    "logaddexp2": lambda a, b: _sg.logaddexp2(a, b),
    "copysign": lambda a, b: _sg.copysign(a, b),
}.items():
    _dispatch(_n, _binary(_f))


def _where(cond, x=None, y=None):
    if x is None:
        raise TypeError("where(cond) with one argument is not differentiable")
    return _sg.where(_lift(cond) if _is_sg(cond) else _sg.tensor(_onp.asarray(cond, bool)),
                     _lift(x, y), _lift(y, x))


_dispatch("where", _where)


def _clip(a, a_min=None, a_max=None):
    return _sg.clamp(_lift(a), a_min, a_max)


_dispatch("clip", _clip)


# ---- reductions
def _reduction(kind):
    def impl(x, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **kwargs):
        x = _lift(x)
        nd = _ndim(x)
        ax = _axes(axis, nd)
        if nd == 0:
            ax = None
        if kind in ("sum", "mean"):
            f = getattr(x, kind)
            return f() if ax is None and not keepdims else f(
                dim=ax if ax is not None else tuple(range(nd)), keepdim=keepdims)
        if kind in ("max", "min"):
            f = getattr(_sg, "amax" if kind == "max" else "amin")
            if ax is None:
                if not keepdims:
                    return f(x.reshape(-1), 0) if nd else x
                ax = tuple(range(nd))
            return f(x, ax, keepdims)
        if kind == "prod":
            if ax is None:
                out_ = x.reshape(-1).prod(0)
                return out_.reshape((1,) * nd) if keepdims else out_
            if isinstance(ax, tuple):
                for d in sorted(ax, reverse=True):
                    x = x.prod(d, keepdim=keepdims)
                return x
            return x.prod(ax, keepdim=keepdims)
        if kind in ("var", "std"):
            f = getattr(x, kind)
            dims = ax if ax is not None else tuple(range(nd))
            if nd == 0:
                return x * 0.0
            return f(dim=dims, correction=ddof, keepdim=keepdims)
        raise AssertionError(kind)
    return impl


for _n in ("sum", "mean", "max", "min", "prod", "var", "std"):
    _dispatch(_n, _reduction(_n))
amax = max  # noqa: F811
amin = min  # noqa: F811


def _cumsum(x, axis=None, dtype=None, out=None):
    x = _lift(x)
    if axis is None:
        return x.reshape(-1).cumsum(0)
    return x.cumsum(axis)


_dispatch("cumsum", _cumsum)


def _cumprod(x, axis=None, dtype=None, out=None):
    x = _lift(x)
    if axis is None:
        return x.reshape(-1).cumprod(0)
    return x.cumprod(axis)


_dispatch("cumprod", _cumprod)


# ---- linear algebra
def _dot(a, b):
    a, b = _lift(a, b), _lift(b, a)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return a * b
    if _ndim(b) > 2:
        return _sg.tensordot(a, b, ([_ndim(a) - 1], [_ndim(b) - 2]))
    return _sg.matmul(a, b)


_dispatch("dot", _dot)
_dispatch("matmul", lambda a, b: _sg.matmul(_lift(a, b), _lift(b, a)))


def _outer(a, b):
    return _sg.outer(_lift(a, b).reshape(-1), _lift(b, a).reshape(-1))


_dispatch("outer", _outer)


def _inner(a, b):
    a, b = _lift(a, b), _lift(b, a)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return a * b
    return _sg.tensordot(a, b, ([_ndim(a) - 1], [_ndim(b) - 1]))


_dispatch("inner", _inner)
_dispatch("kron", lambda a, b: _sg.kron(_lift(a, b), _lift(b, a)))


def _tensordot(a, b, axes=2):
    a, b = _lift(a, b), _lift(b, a)
    if isinstance(axes, numbers.Integral):
        return _sg.tensordot(a, b, int(axes))
    x, y = axes
    x = [x] if isinstance(x, numbers.Integral) else list(x)
    y = [y] if isinstance(y, numbers.Integral) else list(y)
    return _sg.tensordot(a, b, (x, y))


_dispatch("tensordot", _tensordot)


def _einsum(*args, **kwargs):
    if kwargs.pop("optimize", None) is not None and kwargs:
        raise TypeError(f"einsum: {kwargs}")
    if isinstance(args[0], str):
        return _sg.einsum(args[0], *[_lift(a) for a in args[1:]])
    return _sg.einsum(*[list(a) if isinstance(a, (list, tuple)) else _lift(a) for a in args])


_dispatch("einsum", _einsum)


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _lift(a, b), _lift(b, a)
    a, b = _sg.movedim(a, axisa, -1), _sg.movedim(b, axisb, -1)
    shape = _onp.broadcast_shapes(_shape(a), _shape(b))
    return _sg.movedim(_sg.cross(a.expand(shape), b.expand(shape), dim=-1), -1, axisc)


_dispatch("cross", _cross)


def _trace(a, offset=0, axis1=0, axis2=1):
    return _sg.diagonal(_lift(a), offset, axis1, axis2).sum(-1)


_dispatch("trace", _trace)
_dispatch("diagonal", lambda a, offset=0, axis1=0, axis2=1:
          _sg.diagonal(_lift(a), offset, axis1, axis2))


def _diag(v, k=0):
    return _sg.diag(_lift(v), k)


_dispatch("diag", _diag)
_dispatch("tril", lambda m, k=0: _sg.tril(_lift(m), k))
_dispatch("triu", lambda m, k=0: _sg.triu(_lift(m), k))


# ---- shapes
def _reshape(a, newshape=None, order="C", shape=None):
    shape = newshape if shape is None else shape
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    return _lift(a).reshape(tuple(shape))


_dispatch("reshape", _reshape)
_dispatch("ravel", lambda a, order="C": _lift(a).reshape(-1))


def _transpose(a, axes=None):
    a = _lift(a)
    nd = _ndim(a)
    axes = tuple(reversed(range(nd))) if axes is None else tuple(int(k) % nd for k in axes)
    return a.permute(*axes) if nd else a


_dispatch("transpose", _transpose)
_dispatch("swapaxes", lambda a, axis1, axis2: _lift(a).transpose(axis1, axis2))
_dispatch("moveaxis", lambda a, source, destination: _sg.movedim(_lift(a), source, destination))


def _rollaxis(a, axis, start=0):
    a = _lift(a)
    nd = _ndim(a)
    axis %= nd
    start = start % (nd + 1) if start < 0 else start
    if axis < start:
        start -= 1
    return _sg.movedim(a, axis, start) if axis != start else a


_dispatch("rollaxis", _rollaxis)


def _squeeze(a, axis=None):
    a = _lift(a)
    if axis is None:
        return a.squeeze()
    for d in sorted((axis,) if isinstance(axis, int) else axis, reverse=True):
        a = a.squeeze(d % _ndim(a))
    return a


_dispatch("squeeze", _squeeze)


def _expand_dims(a, axis):
    a = _lift(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = _ndim(a) + len(axes)
    for d in sorted(k % nd for k in axes):
        a = a.unsqueeze(d)
    return a


_dispatch("expand_dims", _expand_dims)


def _concatenate(arrays, axis=0):
    arrays = [_lift(a) for a in arrays]
    if axis is None:
        return _sg.cat([a.reshape(-1) for a in arrays], 0)
    return _sg.cat(arrays, axis)


_dispatch("concatenate", _concatenate)
_dispatch("stack", lambda arrays, axis=0: _sg.stack([_lift(a) for a in arrays], axis))


def _atleast(n):
    def impl(*arys):
        out = []
        for a in arys:
            a = _lift(a)
            nd = _ndim(a)
            if nd < n:
                if n == 3 and nd == 2:
                    a = a.unsqueeze(-1)
                elif n == 3 and nd == 1:
                    a = a.reshape(1, -1, 1)
                else:
                    a = a.reshape((1,) * (n - nd) + _shape(a))
            out.append(a)
        return out[0] if len(out) == 1 else out
    return impl


for _k in (1, 2, 3):
    _dispatch(f"atleast_{_k}d", _atleast(_k))


def _vstack(tup):
    return _sg.cat([atleast_2d(_lift(a)) for a in tup], 0)


def _hstack(tup):
    arrs = [atleast_1d(_lift(a)) for a in tup]
    return _sg.cat(arrs, 0 if _ndim(arrs[0]) == 1 else 1)


def _column_stack(tup):
    arrs = []
    for a in tup:
        a = _lift(a)
        arrs.append(a.reshape(-1, 1) if _ndim(a) < 2 else a)
    return _sg.cat(arrs, 1)


_dispatch("vstack", _vstack)
_dispatch("row_stack", _vstack)
_dispatch("hstack", _hstack)
_dispatch("column_stack", _column_stack)
_dispatch("dstack", lambda tup: _sg.cat([atleast_3d(_lift(a)) for a in tup], 2))


def _tile(a, reps):
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    a = _lift(a)
    if len(reps) < _ndim(a):
        reps = (1,) * (_ndim(a) - len(reps)) + reps
    return _sg.tile(a, reps)


_dispatch("tile", _tile)


def _repeat(a, repeats, axis=None):
    a = _lift(a)
    if axis is None:
        a, axis = a.reshape(-1), 0
    return _sg.repeat_interleave(a, int(repeats), axis)


_dispatch("repeat", _repeat)


def _roll(a, shift, axis=None):
    a = _lift(a)
    if axis is None:
        return _sg.roll(a.reshape(-1), shift, 0).reshape(_shape(a))
    return _sg.roll(a, shift, axis)


_dispatch("roll", _roll)
_dispatch("flip", lambda m, axis=None: _sg.flip(
    _lift(m), tuple(range(_ndim(m))) if axis is None else
    ((axis,) if isinstance(axis, int) else tuple(axis))))
_dispatch("flipud", lambda m: _sg.flip(_lift(m), (0,)))
_dispatch("fliplr", lambda m: _sg.flip(_lift(m), (1,)))


def _rot90(m, k=1, axes=(0, 1)):
    m = _lift(m)
    k %= 4
    a0, a1 = axes
    for _ in range(k):
        m = _sg.flip(m, (a1,)).transpose(a0, a1)
    return m


_dispatch("rot90", _rot90)


def _diff(a, n=1, axis=-1):
    a = _lift(a)
    for _ in range(n):
        a = _sg.diff(a, dim=axis)
    return a


_dispatch("diff", _diff)


def _sort(a, axis=-1, kind=None, order=None):
    a = _lift(a)
    if axis is None:
        a, axis = a.reshape(-1), 0
    return _sg.sort(a, axis).values


_dispatch("sort", _sort)
_dispatch("msort", lambda a: _sg.sort(_lift(a), 0).values)


def _split(kind):
    def impl(ary, indices_or_sections, axis=0):
        ary = _lift(ary)
        axis = {"hsplit": 1 if _ndim(ary) > 1 else 0, "vsplit": 0, "dsplit": 2}.get(kind, axis)
        n = _shape(ary)[axis]
        if isinstance(indices_or_sections, numbers.Integral):
            k = int(indices_or_sections)
            if kind != "array_split" and n % k:
                raise ValueError("array split does not result in an equal division")
            q, r = divmod(n, k)
            sizes = [q + 1] * r + [q] * (k - r)
        else:
            bounds = [0] + [builtins.min(int(i), n) for i in indices_or_sections] + [n]
            sizes = [builtins.max(b - a, 0) for a, b in zip(bounds[:-1], bounds[1:])]
        return list(ary.split(sizes, axis))
    return impl


for _n in ("split", "array_split", "hsplit", "vsplit", "dsplit"):
    _dispatch(_n, _split(_n))


def _array(obj, dtype=None, copy=True, **kwargs):
    if _is_sg(obj):
        return obj
    if isinstance(obj, (list, tuple)):
        return _sg.stack([_array(o) if isinstance(o, (list, tuple)) or _is_sg(o) else _lift(o)
                          for o in obj])
    return _onp.array(obj, dtype=dtype)


def array(obj, *args, **kwargs):  # noqa: F811
    """np.array: a nested list holding symgrad values is stacked."""
    if _is_sg(obj) or isinstance(obj, (list, tuple)) and _any_nested(obj):
        return _array(obj)
    return _onp.array(obj, *args, **kwargs)


def _any_nested(obj):
    for o in obj:
        if _is_sg(o) or isinstance(o, (list, tuple)) and _any_nested(o):
            return True
    return False


def make_diagonal(D, offset=0, axis1=0, axis2=1):
    """autograd.numpy's make_diagonal: the inverse of diagonal (a new array); the diagonal
    in the last two axes (axis1/axis2 -1/-2), as the tests use it."""
    if offset != 0 or (axis1, axis2) not in ((-2, -1), (-1, -2)):
        raise NotImplementedError("make_diagonal with offset or other axes")
    if not _is_sg(D):
        D = _onp.asarray(D)
        return D[..., None] * _onp.eye(D.shape[-1])
    return _sg.diag_embed(D)


def _append(arr, values, axis=None):
    arr, values = _lift(arr, values), _lift(values, arr)
    if axis is None:
        return _sg.cat([arr.reshape(-1), values.reshape(-1)], 0)
    return _sg.cat([arr, values], axis)


_dispatch("append", _append)


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = _lift(x)
    big = _onp.finfo(_onp.float64).max
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    # comparisons with the largest finite value, not with inf (a traced forward refuses
    # arithmetic with an infinite constant)
    # x != x: NumPy's and torch's NaN test; a trace folds it to False (README Limitations:
    # "a traced forward is algebra before it is arithmetic"), and x.isnan() as a where
    # condition does not trace yet (SymPy: "Illegal operator isnan")
    x = _sg.where(x != x, _sg.zeros_like(x) + nan, x)
    x = _sg.where(x > big, _sg.zeros_like(x) + posinf, x)
    return _sg.where(x < -big, _sg.zeros_like(x) + neginf, x)


_dispatch("nan_to_num", _nan_to_num)


def _select(condlist, choicelist, default=0):
    out = _lift(default)
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        c = cond if _is_sg(cond) else _sg.tensor(_onp.asarray(cond, bool))
        out = _sg.where(c, _lift(choice), out)
    return out


_dispatch("select", _select)
_dispatch("real_if_close", lambda a, tol=100: a)


class _Concat:
    """np.r_ / np.c_ for symgrad values (arrays only: no slice or string directives)."""

    def __init__(self, base, last):
        self.base, self.last = base, last

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if not builtins.any(_is_sg(k) for k in key):
            return self.base[key]
        if builtins.any(isinstance(k, (slice, str)) for k in key):
            raise NotImplementedError("np.r_ / np.c_ with slices or directives on symgrad values")
        parts = []
        for k in key:
            k = _lift(k)
            if self.last:
                k = k.reshape(-1, 1) if _ndim(k) == 1 else (k.reshape(1, 1) if _ndim(k) == 0
                                                             else k)
            elif _ndim(k) == 0:
                k = k.reshape(1)
            parts.append(k)
        return _sg.cat(parts, -1 if self.last else 0)


r_ = _Concat(_onp.r_, False)
c_ = _Concat(_onp.c_, True)


# non-differentiable (zero-gradient) helpers that accept symgrad values
def _nodiff(name, how):
    def impl(*args, **kwargs):
        args = [a.detach().numpy() if isinstance(a, _Tensor) else a for a in args]
        return how(*args, **kwargs)
    _dispatch(name, impl)


for _n in ("allclose", "isclose", "shape", "ndim", "size"):
    _nodiff(_n, getattr(_onp, _n))


def _all_any(kind):
    def impl(a, axis=None, keepdims=False, **kwargs):
        a = _lift(a)
        f = getattr(_sg, kind)
        if axis is None:
            return f(a)
        return f(a, axis, keepdims)
    return impl


_dispatch("all", _all_any("all"))
_dispatch("any", _all_any("any"))


def _full_like(kind):
    def impl(a, dtype=None, **kwargs):
        return getattr(_sg, f"{kind}_like")(_lift(a))
    return impl


_dispatch("zeros_like", _full_like("zeros"))
_dispatch("ones_like", _full_like("ones"))
