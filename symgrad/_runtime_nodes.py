"""The runtime's own autograd nodes and in-place machinery: RuntimeNode and `record` (a node whose
backward is a few Tensor ops), sum_to, clone / to_dtype / to_device, the checks and copies of
in-place ops (`inplace`, CopySlices, `rebase_view`, `_write`). Moved verbatim from
_runtime_ops.py (which re-exports every name).
"""
from __future__ import annotations

import numpy as np

from symgrad import tensor as _tm
from symgrad.errors import scalar_type_name
from symgrad._runtime_views import reshape
from symgrad.autograd import engine as _engine
from symgrad.autograd import forward_ad as _forward_ad
from symgrad.autograd import grad_mode as _gm


# Names of _runtime_ops.py used below. _runtime_ops.py imports this module before it defines
# them, so it binds them here once it has (_runtime_ops._bind_moved_names).
_FROM_RUNTIME_OPS = ("Tensor", "_CATEGORY", "_INPLACE", "_fw_live", "_ndarray", "_wrap", "sum",)
(Tensor, _CATEGORY, _INPLACE, _fw_live, _ndarray, _wrap, sum,) = (None,) * len(_FROM_RUNTIME_OPS)


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
    return scalar_type_name(dt)


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
