"""Forward-mode AD: ``symgrad.autograd.forward_ad``, torch.autograd.forward_ad's API.

``make_dual(x, t)`` inside a ``dual_level()`` gives a tensor carrying a tangent ``t``; every
differentiable op applied to it gives outputs whose tangents are the Jacobian-vector
products, and ``unpack_dual(y)`` returns ``(primal, tangent)``. One level at a time, as in
torch; leaving it drops every tangent.

How tangents are computed:

- an op backed by a generated module (every built-in op, every forward-only Function):
  the module's ``jvp_module`` (``symgrad.compiler``), the transpose of its backward, i.e. the
  symbolic directional derivative out of the same compiler, compiled on first use per op and
  per set of inputs with tangents, cached like gradient modules. It runs as a module op, so
  a tangent is itself differentiable (reverse mode through it) when what it depends on
  requires grad. Ops that are linear in their one input (movement ops, ``sum``, ``mean``,
  ``neg``) apply themselves to the tangent, so a view's tangent is a view of its base's;
- the runtime ops without a module (advanced indexing, ``cat``, ``clone``, ``to``, ``copy_``,
  ...) pass a ``jvp`` next to their backward (``_runtime_ops.record``);
- in-place ops write the new tangent into the existing one, so views see it, as in torch;
- a Function with ``jvp`` uses it (``ctx.save_for_forward``); one with ``backward`` and no
  ``jvp`` raises torch's error.

Tangents live in a table keyed by tensor identity (weak references), not on the Tensor: the
op layer reads one flag, ``live[0]``, and takes this module's path only while a dual tensor
may exist, so code that never makes a dual tensor pays one list lookup per op.
"""

import collections
import weakref

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd import grad_mode as _gm

__all__ = [
    "UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
    "dual_level",
]

# True while a dual level exists in which a dual tensor was made: the op layer's one check
live = [False]
_level = [-1]          # the current level (torch's _current_level): -1 none, else 0
_generation = [0]      # counts exits: tangents a graph node kept from an older level are stale
_tangents = {}         # id(tensor) -> (weak reference to it, its tangent Tensor or None)
_weakref = weakref.ref
_function = None   # symgrad.autograd.function, which imports this module (bound by it)


class UnpackedDualTensor(collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])):
    """Namedtuple returned by ``unpack_dual``: the primal and the tangent (None if none)."""

    __slots__ = ()


# ------------------------------------------------------------------------- levels
def enter_dual_level():
    """Enter a new forward grad level (only one may exist at a time, as in torch); returns
    it. ``make_dual`` and ``unpack_dual`` use it by default."""
    if _level[0] >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _level[0] = 0
    return 0


def exit_dual_level(*, level=None):
    """Exit the forward grad level: every tangent made in it is dropped."""
    if level is None:
        level = _level[0]
    if level != _level[0]:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    live[0] = False
    _tangents.clear()
    _generation[0] += 1
    _level[0] = level - 1


class dual_level(_gm._DecoratorContextManager):
    """Context manager (and decorator) for forward AD: enters a dual level, exits it at the
    end of the block, dropping every tangent."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, exc_type, exc_value, traceback):
        exit_dual_level()


# -------------------------------------------------------------------- dual tensors

def _size_mismatch(primal, tangent) -> RuntimeError:
    """torch's error for a forward gradient whose size is not its primal's."""
    return RuntimeError(
        "Trying to set a forward gradient that has a different size than that of the "
        "original Tensor, this is not supported. Tensor is of size "
        f"{list(primal._data.shape)} while the given forward gradient is of size "
        f"{list(tangent._data.shape)}.")


def make_dual(tensor, tangent, *, level=None):
    """A new tensor aliasing ``tensor`` (a view: differentiable as one) that carries
    ``tangent``, used as is when its layout matches, copied otherwise."""
    if level is None:
        level = _level[0]
    if level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    if not tensor.is_floating_point():   # a non-tensor: AttributeError, as torch
        raise ValueError(
            f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not tangent.is_floating_point():
        raise ValueError(
            f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if level != _level[0]:
        raise RuntimeError("Invalid level given to _make_dual")
    if not isinstance(tensor, _tm.Tensor) or not isinstance(tangent, _tm.Tensor):
        raise TypeError("make_dual(): expected Tensors, got "
                        f"{type(tensor).__name__} and {type(tangent).__name__}")
    if tangent_of(tensor) is not None:
        raise RuntimeError(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the "
            f"same level {level} is not supported.")
    if tangent._data.shape != tensor._data.shape:
        raise _size_mismatch(tensor, tangent)

    was = live[0]
    live[0] = False
    try:
        dual = ops.view(tensor, tensor._data.shape)
        if not _same_layout(tangent._data, tensor._data):
            tangent = ops.clone(tangent)   # differentiable: keeps a tangent's history
            a = _tm._empty_like_layout(tensor._data).astype(tangent._data.dtype, copy=False)
            a[...] = tangent._data
            tangent._data = a
    finally:
        live[0] = was
    set_tangent(dual, tangent)
    live[0] = True
    return dual


def _same_layout(a, b):
    if a.ndim == 0:
        return True
    return all(n == 1 or sa // a.itemsize == sb // b.itemsize
               for n, sa, sb in zip(a.shape, a.strides, b.strides))


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)``: the primal a view of ``tensor`` without tangent, the tangent
    as stored (None when ``tensor`` has none at this level)."""
    if level is None:
        level = _level[0]
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    if not isinstance(tensor, _tm.Tensor):
        raise TypeError("_unpack_dual(): argument 'dual' (position 1) must be Tensor, not "
                        f"{type(tensor).__name__}")
    tangent = tangent_of(tensor)
    if level != _level[0]:
        if tangent is not None:
            raise RuntimeError("Invalid level given to _fw_primal")
        return UnpackedDualTensor(tensor, None)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)

    live[0] = False
    try:
        primal = ops.view(tensor, tensor._data.shape)
    finally:
        live[0] = True
    _tangents[id(primal)] = (_ref(primal), None)   # a view that has no tangent
    return UnpackedDualTensor(primal, tangent)


# ------------------------------------------------------------------- the tangent table
def _ref(t):
    key = id(t)

    def drop(r):
        e = _tangents.get(key)
        if e is not None and e[0] is r:
            del _tangents[key]

    return _weakref(t, drop)


def set_tangent(t, tangent):
    _tangents[id(t)] = (_ref(t), tangent)


def tangent_of(t):
    """``t``'s tangent at the current level, or None. A view without one of its own gets the
    same view of its base's tangent (made when the base got a tangent after the view)."""
    e = _tangents.get(id(t))
    if e is not None and e[0]() is t:
        return e[1]
    base = t._base
    if base is None:
        return None
    e = _tangents.get(id(base))
    if e is None or e[0]() is not base or e[1] is None:
        return None
    tangent = _replay_view(t, e[1])
    set_tangent(t, tangent)
    return tangent


def _replay_view(view, base_tangent):
    """``view``'s view functions applied to its base's tangent (a view of it)."""
    was = live[0]
    live[0] = False
    try:
        t = base_tangent
        for fn, kwargs in view._view_fn:
            t = fn(t, **kwargs)
    finally:
        live[0] = was
    return t


def _tangents_of(tensors):
    """Per tensor, its tangent or None; None for all when no tensor has one (or inference
    mode is on: torch computes no tangents there)."""
    out = None
    for i, t in enumerate(tensors):
        if t is None:
            continue
        tan = tangent_of(t)
        if tan is not None:
            if out is None:
                out = [None] * len(tensors)
            out[i] = tan
    if out is not None and _gm._state.inference:
        return None
    return out


# -------------------------------------------------------------------- module ops
_LINEAR = frozenset(("reshape", "permute", "squeeze", "unsqueeze", "expand", "getitem", "sum",
                     "mean", "neg"))
_JVP = {}        # (module, which) -> jvp module
_KIND = {}       # module -> "linear" or "jvp"


def _kind(mod):
    kind = _KIND.get(mod)
    if kind is None:
        gen = getattr(mod, "mod", mod)    # the _runtime_ops wrappers of a generated module
        source = getattr(gen, "SOURCE", None)
        linear = (isinstance(source, str) and source.startswith("symgrad/_builtins.py:")
                  and getattr(gen, "NAME", None) in _LINEAR)
        kind = _KIND[mod] = "linear" if linear else "jvp"
    return kind


def jvp_module(mod, which):
    """The Jacobian-vector product module of a generated module (see module docstring)."""
    key = (mod, which)
    jm = _JVP.get(key)
    if jm is None:
        factory = getattr(mod, "jvp_module", None)
        if callable(factory):
            jm = factory(which)
        else:
            from symgrad.compiler import jvp_module as builtin_jvp

            jm = builtin_jvp(mod, which)
        if len(_JVP) > 4096:
            _JVP.clear()
        _JVP[key] = jm
    return jm


def apply_module(mod, tensors, arrays, params, name, spec, differentiable):
    """``function.apply_module`` with tangents: the op, then its outputs' tangents."""
    tangents = _tangents_of(tensors)
    live[0] = False
    try:
        results = _function.apply_module(mod, tensors, arrays, params, name, spec,
                                         differentiable)
        if tangents is not None:
            keep_for_backward(results, tangents)
            outs = _module_tangents(mod, tensors, arrays, params, name, results, tangents)
            for i, (r, tan) in enumerate(zip(results, outs)):
                if r is None or tan is None or r._data.dtype.kind != "f":
                    continue
                if differentiable is not None and not differentiable[i]:
                    continue
                set_tangent(r, tan)
    finally:
        live[0] = True
    return results


def keep_for_backward(results, tangents):
    """Forward-over-reverse: the graph node of an op on dual tensors keeps their tangents
    beside the primal values it saved, so that a create_graph backward in the same level
    unpacks dual tensors and the gradients it computes get tangents (the Hessian-vector
    product), as torch's saved variables keep their forward gradients."""
    for r in results:
        node = None if r is None else r._grad_fn
        if node is not None and hasattr(type(node), "_saved_tangents"):
            node._saved_tangents = (_generation[0], tuple(tangents))
            return


def saved_dual(node, i, t):
    """``t`` (the node's i-th saved value, unpacked) as a dual tensor carrying the tangent the
    node kept for it in this level; ``t`` itself when it kept none (or kept it in a level
    that has ended)."""
    kept = getattr(node, "_saved_tangents", None)
    if kept is None or not live[0] or kept[0] != _generation[0] or _level[0] < 0:
        return t
    tangent = kept[1][i]
    if tangent is None or not isinstance(t, _tm.Tensor) or tangent_of(t) is not None:
        return t
    return make_dual(t, tangent)


def _module_tangents(mod, tensors, arrays, params, name, results, tangents):
    if _kind(mod) == "linear":
        t = tangents[0]
        return _function.apply_module(mod, [t], [t._data], params, name,
                                      _function.SAVE_NONE)
    which = tuple(t is not None for t in tangents)
    jm = jvp_module(mod, which)
    cotangents = []
    for r in results:
        if r is None:
            cotangents.append(None)
            continue
        a = r._data
        dt = a.dtype if a.dtype.kind == "f" else np.dtype(np.float32)
        cotangents.append(np.zeros(a.shape, dt) if type(a) is np.ndarray
                          else _tm._device.array_module("cuda").zeros(a.shape, dt))
    t_arrays = [None if t is None else t._data for t in tangents]
    m = len(results)
    return _function.apply_module(
        jm, list(tangents) + [None] * m + list(tensors), t_arrays + cotangents + list(arrays),
        params, name.replace("Backward", "JvpBackward"), _function.SAVE_ALL)[:m]


# ------------------------------------------------------------------- runtime ops
def record(inputs, outputs, jvp, name):
    """Tangents of a runtime op's outputs from its ``jvp(tangents)`` (tangents aligned with
    ``inputs``, None where none), or torch's error when it has none."""
    tangents = _tangents_of(inputs)
    if tangents is None:
        return
    if jvp is None:
        raise NotImplementedError(
            f"Trying to use forward AD with {name.replace('Backward', '').rstrip('0123456789')}"
            " that does not support it.")
    live[0] = False
    try:
        outs = jvp(tangents)
    finally:
        live[0] = True
    for r, tan in zip(outputs, outs):
        if tan is not None and r._data.dtype.kind == "f":
            set_tangent(r, tan)


def _zeros_like(t):
    return _tm._wrap(np.zeros(t._data.shape, t._data.dtype))


def inplace(self, op, args, kwargs):
    """``_runtime_ops.inplace`` with tangents: the new tangent is computed out of place from
    the old values, then the op runs, then the tangent is written into self's existing
    tangent (so views of self see it, as in torch)."""

    tangent = tangent_of(self)
    tensor_args = [a for a in args if isinstance(a, _tm.Tensor)]
    arg_tangents = _tangents_of(tensor_args)
    if (tangent is None and arg_tangents is None) or _gm._state.inference:
        live[0] = False
        try:
            return ops.inplace(self, op, *args, **kwargs)
        finally:
            live[0] = True
    old = _tm._wrap(self._data)
    if tangent is not None:
        set_tangent(old, tangent)
    with _gm.no_grad():
        new = ops._INPLACE[op](old, *args, **kwargs)   # the tangent (live: this path)
    new_tangent = tangent_of(new)
    if new_tangent is not None:
        live[0] = False
        try:   # detached from `old`'s arrays before the write below changes them
            new_tangent = ops.clone(new_tangent)
        finally:
            live[0] = True
    live[0] = False
    try:
        ops.inplace(self, op, *args, **kwargs)
    finally:
        live[0] = True
    update_tangent(self, new_tangent)
    return self


def setitem(self, index, value):
    """``self[index] = value`` with advanced indexing (not a view): the tangent is written
    at ``index`` likewise."""

    tangent = tangent_of(self)
    vt = tangent_of(value) if isinstance(value, _tm.Tensor) else None
    live[0] = False
    try:
        ops.setitem(self, index, value)
        if (tangent is None and vt is None) or _gm._state.inference:
            return
        nidx, _ = ops._normalize_index(index)
        with _gm.no_grad():
            new = ops.clone(tangent) if tangent is not None else _zeros_like(self)
            new._data[nidx] = 0 if vt is None else vt._data.astype(new._data.dtype)
    finally:
        live[0] = True
    update_tangent(self, new)


def update_tangent(t, new):
    """Write tangent ``new`` into ``t``'s tangent in place (None: zeros), giving ``t`` one
    first if it has none (a view: a view of its base's, made zero)."""
    cur = tangent_of(t)
    if new is None:
        if cur is not None:
            _fill(t, cur, 0)
        return
    if cur is None:
        base = t._base
        if base is not None:
            bt = tangent_of(base)
            if bt is None:
                bt = _tm._wrap(np.zeros_like(base._data))
                set_tangent(base, bt)
            cur = _replay_view(t, bt)
        else:
            cur = _tm._wrap(_tm._empty_like_layout(t._data).astype(new._data.dtype,
                                                                    copy=False))
        set_tangent(t, cur)
    _fill(t, cur, new)


def _fill(t, cur, value):
    a = cur._data
    src = value._data if isinstance(value, _tm.Tensor) else value
    if isinstance(value, _tm.Tensor) and (value._requires_grad or cur._requires_grad):
        set_tangent(t, value)   # keep the tangent's own history (reverse mode through it)
        return
    if not a.flags.writeable:    # a broadcast view: t gets a tangent of its own
        set_tangent(t, _tm._wrap(np.array(np.broadcast_to(src, a.shape), a.dtype)))
        return
    np.copyto(a, src, casting="unsafe")


# ------------------------------------------------------------------ custom Functions
def apply_function(cls, args, kwargs):
    """``Function.apply`` with tangents (see module docstring)."""
    Tensor = _tm.Tensor
    tangents = _tangents_of([a if isinstance(a, Tensor) else None for a in args])
    has_jvp = cls.jvp is not _function.Function.jvp
    has_backward = cls._has_backward()
    if tangents is None:
        live[0] = False    # as torch: a custom forward runs with forward AD off
        try:
            return _function._apply(cls, args, kwargs)
        finally:
            live[0] = True
    if not has_jvp:
        if has_backward:
            raise NotImplementedError(
                "You must implement the jvp function for custom autograd.Function to use it "
                "with forward mode AD.")
        # a forward-only Function: its generated module's jvp module (apply_module, above)
        return _function._apply_compiled(cls, args, kwargs)
    live[0] = False
    try:
        ctx = cls._backward_cls()
        if has_backward:
            output = _function._apply_custom(cls, args, kwargs, ctx)
        else:
            # the generated backward for reverse mode; the forward again with a ctx of its
            # own for the jvp (what it saves with save_for_forward, attributes it sets)
            output = _function._apply_compiled(cls, args, kwargs)
            with _gm.no_grad():
                if cls.setup_context is not _function.Function.setup_context:
                    cls.setup_context(ctx, args, cls.forward(*args, **kwargs))
                else:
                    cls.forward(ctx, *args, **kwargs)
        outputs = output if isinstance(output, tuple) else (output,)
        grads_in = [None if not isinstance(a, Tensor)
                    else tangents[i] if tangents[i] is not None else _zeros_like(a)
                    for i, a in enumerate(args)]
        ctx._jvp_saved = getattr(ctx, "saved_for_forward", ())
        versions = [_version_or_none(g) for g in grads_in]
        try:
            result = cls.jvp(ctx, *grads_in)
        finally:
            del ctx._jvp_saved
    finally:
        live[0] = True
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(outputs):
        raise RuntimeError("Function's jvp returned an invalid number of forward gradients "
                           f"(expected {len(outputs)} but got {len(result)})")
    non_diff = getattr(ctx, "non_differentiable", ())
    for i, (o, tan) in enumerate(zip(outputs, result)):
        if not isinstance(o, Tensor) or o._data.dtype.kind != "f" \
                or any(o is n for n in non_diff):
            continue
        if not isinstance(tan, Tensor):
            raise RuntimeError(
                f"Function {cls.__name__}'s jvp returned {type(tan).__name__} as the forward "
                f"gradient of output {i}: expected a Tensor of size {list(o._data.shape)}")
        if tan._data.shape != o._data.shape:
            raise _size_mismatch(o, tan)
        if any(o is d for d in getattr(ctx, "dirty_tensors", ())):
            j = next((k for k, a in enumerate(args) if a is o), None)
            if j is not None and (tan is not grads_in[j] or (
                    versions[j] is not None and _version_or_none(tan) == versions[j])):
                raise RuntimeError(
                    "An inplace custom Function is not modifying the forward mode gradients "
                    "inplace. If the forward is modifying an input inplace, then the jvp "
                    "function must modify the corresponding gradient inplace.")
            if tangent_of(o) is not tan:
                update_tangent(o, tan)
        else:
            _check_view_tangent(o, tan, args, grads_in)
            set_tangent(o, tan)
    return output


def _version_or_none(t):
    if not isinstance(t, _tm.Tensor):
        return None
    try:
        return t._version
    except RuntimeError:    # an inference tensor has none
        return None


def _check_view_tangent(o, tan, args, grads_in):
    """torch's checks of a custom Function whose forward returns a view of an input (or the
    input as-is, which is returned as a view of itself): its jvp must return a view of that
    input's tangent (of the tangent's base when the tangent is itself a view)."""
    base = o._base
    if base is None or o._view_meta != "custom_function":
        return
    j = next((k for k, a in enumerate(args)
              if isinstance(a, _tm.Tensor) and (a is base or a._base is base)), None)
    if j is None:
        return
    if tan._base is None:
        raise RuntimeError(
            "A custom Function's forward is returning a view (or an input as-is) but the jvp "
            "is not returning a view.")
    given, a = grads_in[j], args[j]
    allowed = [given, given._base]
    if a._base is not None:      # a view input: its tangent belongs to its base's
        allowed.append(tangent_of(a._base))
    if not any(tan._base is t for t in allowed if t is not None):
        # a view made from the dual (make_dual's own alias is the first link): "same base"
        if a._base is not None and len(a._view_fn) > 1:
            raise RuntimeError(
                "A custom Function is returning a view but the jvp is not returning a view of "
                "the same base as the given grad input.")
        raise RuntimeError(
            "A custom Function is returning a view but the jvp is not returning a view of the "
            "given grad input.")


def format_suffix(t):
    """``tangent=...`` for the repr of a dual tensor, or None."""
    if not live[0]:
        return None
    tangent = tangent_of(t)
    if tangent is None:
        return None
    return "tangent=" + repr(tangent)

# The runtime layer's siblings this module calls into (each imports this one at module level,
# so they are bound once every name above is defined)
from symgrad import _runtime_ops as ops  # noqa: E402
