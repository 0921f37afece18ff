"""The runtime's movement and view ops: reshape / view / flatten / permute / transpose, as_strided,
igamma, squeeze / unsqueeze / expand, indexing, and several views of one tensor (split, chunk,
unbind). Moved verbatim from _runtime_ops.py (which re-exports every name).
"""
from __future__ import annotations

import builtins
import numbers

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd import forward_ad as _forward_ad
from symgrad.autograd import function as _function
from symgrad.autograd import grad_mode as _gm
from symgrad.ops import table as _table

# torch's node names of the movement ops: the op table's (symgrad/ops/table.py)
_NODES = _table.node_names()
_RESHAPE, _SQUEEZE, _SPLIT = _NODES["reshape"], _NODES["squeeze"], _NODES["split"]


# Names of _runtime_ops.py used below. _runtime_ops.py imports this module before it defines
# them, so it binds them here once it has (_runtime_ops._bind_moved_names).
_FROM_RUNTIME_OPS = ("Tensor", "_MODULES", "_NONE", "_apply1", "_arr", "_array_of", "_check_inplace",
    "_dims", "_fw_live", "_is_traced", "_module", "_ndarray", "_rebase", "_result_dtype",
    "_wrap", "_write", "cat", "exp", "inplace", "log", "min", "mul", "neg", "numel", "record",
    "stack", "sub", "sum_to",)
(Tensor, _MODULES, _NONE, _apply1, _arr, _array_of, _check_inplace, _dims, _fw_live, _is_traced,
    _module, _ndarray, _rebase, _result_dtype, _wrap, _write, cat, exp, inplace, log, min, mul,
    neg, numel, record, stack, sub, sum_to,) = (None,) * len(_FROM_RUNTIME_OPS)


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
                  {"shape": shape}, _RESHAPE[0], _NONE)
    if out._data.base is None or not np.may_share_memory(out._data, input._data):
        if out._grad_fn is not None:
            out._grad_fn._name = _RESHAPE[1]
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
    return _movement("permute", input, {"dims": dims}, _NODES["permute"], _permute_kw)


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
    return _movement("permute", input, {"dims": tuple(dims)}, _NODES["transpose"], _permute_kw)


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

    return record(_NODES["as_strided"], backward, None, [t], [res], jvp)[0]


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

    out = record(_NODES["as_strided"], backward, None, [input], [out], jvp)[0]
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
                     _NODES["t"], _permute_kw)


def squeeze(input, dim=None):
    if not isinstance(input, Tensor):
        if _is_traced(input):
            return input.squeeze(dim)
        input = _tm.tensor(input)
    nd = input._data.ndim
    if dim is None:
        dims, name = None, _SQUEEZE[0]
    elif isinstance(dim, (tuple, list)):
        dims, name = _dims(dim, nd) or (), _SQUEEZE[2]
    else:
        dims, name = (_tm._wrap_dim(dim, nd),) if nd else (), _SQUEEZE[1]
    shape = input._data.shape
    dims = tuple(d for d in (range(nd) if dims is None else dims) if shape[d] == 1)
    return _movement("squeeze", input, {"dim": dims}, name, _squeeze_kw)


def _squeeze_kw(x, dim):
    return _movement("squeeze", x, {"dim": dim}, _SQUEEZE[0], _squeeze_kw)


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
    return _movement("unsqueeze", input, {"dim": dim % nd}, _NODES["unsqueeze"], _unsqueeze_kw)


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
                    "The expanded size of the tensor (-1) isn't allowed in a leading, "
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
    return _movement("expand", input, {"sizes": tuple(out)}, _NODES["expand"], _expand_kw)


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
            kind = type(i).__name__
            if type(i).__module__ == "numpy":
                kind = "numpy." + kind
            message = ("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                       f"Variables are valid indices (got {kind})")
            if isinstance(i, (str, bytes)):   # torch: TypeError, other scalars IndexError
                raise TypeError(message)
            raise IndexError(message)
        if isinstance(i, _ndarray) and i.dtype.kind not in "iub":
            if i.size or i.dtype.kind != "f":
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            i = i.astype(np.int64)   # x[[]]: an empty list reads as no indices, as in torch
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
        if isinstance(i, _ndarray) and i.dtype == np.bool_:
            _check_mask(a, i, dim)
        elif isinstance(i, _ndarray) and i.size:
            low, high = builtins.int(i.min()), builtins.int(i.max())
            if low < -a.shape[dim] or high >= a.shape[dim]:
                bad = low if low < -a.shape[dim] else high
                raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size "
                                 f"{a.shape[dim]}")
        dim += 1 if not isinstance(i, _ndarray) or i.dtype != np.bool_ else i.ndim


def _check_mask(a, mask, dim):
    """torch's refusal of a boolean mask whose shape is not the indexed dims'."""
    for j, k in enumerate(mask.shape):
        if dim + j >= a.ndim:
            raise IndexError(f"too many indices for tensor of dimension {a.ndim}")
        if k != a.shape[dim + j]:
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {j} does not match the "
                f"shape of the indexed tensor {list(a.shape)} at index {dim + j}")


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
        name = _SPLIT[0]
    else:
        sizes = [builtins.int(k) for k in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sizes}")
        name = _SPLIT[1]
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
    return _multi_view(input, _NODES["unbind"], indices, lambda parts: stack(parts, d))


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
    _check_index(input._data, nidx)   # torch's messages (a mask's shape, an index's range)
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
