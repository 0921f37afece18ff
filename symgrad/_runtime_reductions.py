"""The runtime's reductions and matrix products: sum / mean / prod (and a full sum's own node),
max / min (with indices, or of two tensors), argmax / argmin, the logical reductions, matmul /
mm (and a matmul's node for one input's gradient). Moved verbatim from _runtime_ops.py (which
re-exports every name; the public ones keep ``symgrad._runtime_ops`` as their ``__module__``).
"""
from __future__ import annotations

import collections

import numpy as np

from symgrad import tensor as _tm
from symgrad._runtime_modules import _MODULES, _module, grad_module
from symgrad.autograd import function as _function
from symgrad.autograd import grad_mode as _gm
from symgrad.ops import table as _table

Tensor = _tm.Tensor
_wrap = _tm._wrap
_ndarray = np.ndarray
SaveSpec = _function.SaveSpec
_apply1 = _function.apply1
_apply2 = _function.apply2
_NODES = _table.node_names()   # torch's node names of the op table's ops (SumBackward0, ...)


# Names of _runtime_ops.py used below. _runtime_ops.py imports this module before it defines
# them, so it binds them here once it has (_runtime_ops._bind_moved_names).
_FROM_RUNTIME_OPS = ("_CHECK_COND", "_NONE", "_arr", "_is_traced", "maximum", "minimum",)
(_CHECK_COND, _NONE, _arr, _is_traced, maximum, minimum,) = (None,) * len(_FROM_RUNTIME_OPS)


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
_SUM, _MEAN, _PROD = (_NODES[name] for name in ("sum", "mean", "prod"))   # (all dims, some)
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
    return _reduce("sum", input, dim, keepdim, _SUM, dtype)


def mean(input, dim=None, keepdim=False, axis=None, keepdims=None, *, dtype=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("mean", dim, keepdim, axis, keepdims)
    return _reduce("mean", input, dim, keepdim, _MEAN, dtype)


def prod(input, dim=None, keepdim=False, axis=None, keepdims=None, *, dtype=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _tm._np_aliases("prod", dim, keepdim, axis, keepdims)
    if isinstance(dim, (tuple, list)):
        raise TypeError("prod(): argument 'dim' must be int, not tuple")
    return _reduce("prod", input, dim, keepdim, _PROD, dtype)


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
        from .errors import matmul_dtype_message

        raise RuntimeError(matmul_dtype_message(a.ndim, b.ndim, input.dtype, other.dtype))
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
    mm, dot, mv, unsafe_view = _MATMUL   # torch's node names: the op table's
    if a.ndim == 2 and b.ndim == 2:
        name = mm
    elif a.ndim == 1 and b.ndim == 1:
        name = dot
    elif a.ndim == 2 and b.ndim == 1:
        name = mv
    else:
        name = unsafe_view if a.ndim > 2 else mm
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


_MATMUL = _NODES["matmul"]
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
