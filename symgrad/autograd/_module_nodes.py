"""The node of a generated module and the calls that record it.

``ModuleFunction`` is the one node class of the built-in ops and of compiled Functions (its
backward calls the module's ``backward``; with ``create_graph`` it applies the gradient module
as a ``GradModuleFunction``); ``SaveSpec`` says which inputs a node saves and checks, ``_Packed``
a value saved-tensor hooks packed. ``apply_module`` runs a module's forward and records its node,
with the version-counter and memory-sharing guards of what a node saved (``_guard_extra``,
``_register_cow``). Its fast paths for one and two tensors (the op layer's hot ops), ``apply1`` /
``apply2``, are autograd/_module_fastpaths.py. ``symgrad.autograd.function`` re-exports every
name of both (the engine, forward AD and the op layer reach them as ``_function.apply_module``,
``_function.SAVE_ALL``, ...).
"""

import weakref

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd import engine as _engine
from symgrad.autograd import _backward_chain as _chain
from symgrad.autograd import forward_ad as _forward_ad
from symgrad.autograd import grad_mode as _gm
from symgrad.autograd import graph as _graph
from symgrad.autograd.graph import _Packed  # noqa: F401  (re-exported by function.py)
from symgrad import _profiling as _prof
from symgrad._runtime_modules import grad_module
from symgrad.autograd._module_calls import (
    _MISS, _NO_EDGE, _RAW, _TWIN, _label, _ndarray, _saving, _twin, _version_error,
    call_module,
)

# ----------------------------------------------------------------- module nodes
class SaveSpec:
    """What torch would save for an op, which decides version checks and freeing.

    Args:
        check: indices of inputs torch saves ("all" for every tensor input, "cond" for
            inputs that torch saves only when another input requires grad).
        cow: indices of inputs our module reads but torch does not save: they get a private
            copy before any in-place write instead of an error.
        outputs: indices of outputs torch saves (version-checked).
    """

    __slots__ = ("check", "cow", "outputs", "freeable", "_mode")

    def __init__(self, check=(), cow=(), outputs=()):
        self.check = check
        self.cow = cow
        self.outputs = outputs
        self.freeable = bool(check or outputs)
        self._mode = 1 if check == "all" else 2 if check == "cond" else 3 if check else 0


SAVE_ALL = SaveSpec(check="all")
SAVE_NONE = SaveSpec()


def _owner(a):
    b = getattr(a, "base", None)
    return a if b is None else b


def _unpacked(saved):
    return tuple([s.value() if type(s) is _Packed else s for s in saved])


class ModuleFunction(_engine.Node):
    """Backward node of a generated module (built-in op or forward-only user Function).

    ``_saved`` holds the module's input arrays; ``_extra`` the intermediates the module's
    ``forward_saving`` returned (None when the module has none, or once they are freed), which
    its ``backward_saved`` takes instead of recomputing the forward.
    """

    __slots__ = ("_mod", "_params", "_saved", "_extra", "_bsaved", "_name", "_checks",
                 "_freeable", "_out_meta", "_in_dtypes", "_vcs", "_hooked", "_fwd_deps",
                 "_consumed", "_pending", "_saved_tangents")

    def name(self):
        return self._name

    def _check_saved_name(self, attr):
        pow_node = self._name.startswith("Pow")
        name = attr.replace("_raw", "")
        if name != "_saved_self" and pow_node != (name == "_saved_exponent") or \
                not getattr(self._mod, "SOURCE", "").startswith("symgrad/_builtins.py:"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")

    def _saved_input(self, i, attr):
        """torch's saved-tensor attribute `attr` of a built-in op's node: its input i, unpacked
        as the backward would see it (the leaf itself for a leaf input); freed after a backward
        without retain_graph, as in torch. (Properties, not __getattr__: a class with
        __getattr__ slows every attribute read of its nodes, ~5% of a chain of ops.)"""
        self._check_saved_name(attr)
        if self._saved is None:
            raise RuntimeError(_engine.FREED_MESSAGE)
        if i >= len(self._saved):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")
        return self._unpack(i)

    _saved_self = property(lambda self: self._saved_input(0, "_saved_self"))
    _saved_other = property(lambda self: self._saved_input(1, "_saved_other"))
    _saved_exponent = property(lambda self: self._saved_input(1, "_saved_exponent"))

    def _raw_saved_input(self, i, attr):
        """torch's ``_raw_saved_*``: a SavedTensor of input i (register_hooks / unpack)."""
        self._check_saved_name(attr)
        if self._saved is not None and i >= len(self._saved):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")
        return _graph.SavedTensor._of(self, i)

    _raw_saved_self = property(lambda self: self._raw_saved_input(0, "_raw_saved_self"))
    _raw_saved_other = property(lambda self: self._raw_saved_input(1, "_raw_saved_other"))
    _raw_saved_exponent = property(
        lambda self: self._raw_saved_input(1, "_raw_saved_exponent"))

    def _release(self):
        self._extra = None
        if self._freeable:
            self._saved = None

    def _copy_on_write(self, vc):
        saved = self._saved
        if saved is None:
            return
        saved = list(saved)
        extra = self._extra
        if extra is not None:
            extra = list(extra)
        for v, i in self._vcs:
            if v is vc:
                old = saved[i]
                if type(old) is _Packed:
                    continue      # kept as the pack hook chose
                saved[i] = old.copy()
                if extra is not None:
                    own = _owner(old)
                    for k, e in enumerate(extra):
                        if e is old or _owner(e) is own:
                            extra[k] = e.copy()
        self._saved = tuple(saved)
        if extra is not None:
            self._extra = tuple(extra)

    def _check_versions(self):
        for vc, version, info in self._checks:
            if vc.value != version:
                if type(info) is int:
                    # torch names the saved tensor's grad_fn now: the in-place op's, if any
                    fn, nr = vc.history or self.next_functions[info]
                    shape = self._saved[info].shape
                    legacy = _tm._DTYPES[self._in_dtypes[info]]._legacy
                    label = _label(fn)
                else:
                    shape, legacy, label, nr = info
                raise _version_error(shape, legacy, label, nr, vc.value, version)

    def _apply(self, grads, reached=None):
        """The input gradients (``reached``: see GradModuleFunction)."""
        saved = self._saved
        if saved is None:
            raise RuntimeError(_engine.FREED_MESSAGE)
        for vc, version, _ in self._checks:
            if vc.value != version:
                self._check_versions()
        if _gm_state.enabled:  # create_graph: maybe differentiable
            arrived = [g is not None for g in grads]
            for i, g in enumerate(grads):
                if g is None:
                    meta = self._out_meta[i]
                    if meta is not None:
                        grads[i] = _wrap(np.zeros(meta[0], meta[1]))
            deps = self._graph_deps(grads, arrived, reached)
            if deps is not None:
                return self._apply_differentiable(grads, deps, reached)
        return self._vjp(grads, saved, reached)

    def _apply_plain(self, grads):
        """``_apply`` without create_graph (grad mode off in the backward), no ``reached``:
        the engine's one-node backward."""
        saved = self._saved
        if saved is None:
            raise RuntimeError(_engine.FREED_MESSAGE)
        for vc, version, _ in self._checks:
            if vc.value != version:
                self._check_versions()
        g = grads[0]
        if _hooks_live[1] or self._n_out != 1 or g is None or self._params:
            return self._vjp(grads, saved, None)
        # one output, its gradient arrived: _vjp's steps for it, inlined
        return [None if a is None else _wrap(a) for a in self._input_arrays(g, saved)]

    def _grad1(self, g):
        """``_apply_plain([g])[0]`` as an array (None: no gradient) for a node of one output
        and one input whose edge leads somewhere: the engine's one-node backward
        (``F.apply(x).backward(g)``), which wraps it only where it becomes the ``.grad``."""
        saved = self._saved
        if saved is None:
            raise RuntimeError(_engine.FREED_MESSAGE)
        for vc, version, _ in self._checks:
            if vc.value != version:
                self._check_versions()
        if _hooks_live[1] or self._params or g is None:
            o = self._vjp([g], saved, None)[0]
            return None if o is None else o._data
        a = self._module_backward(g, saved)[0]
        if a is None:
            return None
        if type(a) is not _ndarray and not hasattr(a, "__cuda_array_interface__"):
            a = np.asarray(a)     # scalars from numpy reductions; CuPy arrays stay on GPU
        dt = self._in_dtypes[0]
        return a if a.dtype is dt or a.dtype == dt else a.astype(dt)

    def _grad_arrays(self, g):
        """``_apply_plain([g])`` as arrays (None where no gradient, or its edge leads nowhere)
        for a node of one output: the engine's one-node backward of a node whose edges all
        lead to leaves (``F.apply(x, w, b).backward(g)``), which wraps each only where it
        becomes a ``.grad``."""
        saved = self._saved
        if saved is None:
            raise RuntimeError(_engine.FREED_MESSAGE)
        for vc, version, _ in self._checks:
            if vc.value != version:
                self._check_versions()
        if _hooks_live[1] or self._params or g is None:
            return [None if o is None else o._data for o in self._vjp([g], saved, None)]
        return self._input_arrays(g, saved)

    def _module_backward(self, g, saved):
        """The module's backward (backward_saved where the forward saved) on the gradient `g`
        of the one output: the arrays it returns, one per input."""
        extra = self._extra
        if extra is not None:
            f = self._bsaved
            args = (g._data, *extra, *saved)
        else:
            f = self._mod.backward
            args = (g._data, *saved)
        if _RAW.get(f, _MISS) is None and not _PROF_ON[0]:
            # no errstate decorator (a C module): call_module calls it so (its twin: _twin)
            return (_TWIN.get(f) or _twin(f))(*args)
        return call_module(f, args, _NO_PARAMS)

    def _input_arrays(self, g, saved):
        """`_module_backward`'s arrays as the inputs' gradients: arrays of the inputs' dtypes,
        None where there is none or the input's edge leads nowhere."""
        out = []
        for a, dt, e in zip(self._module_backward(g, saved), self._in_dtypes,
                            self.next_functions):
            if a is None or e[0] is None:
                out.append(None)
                continue
            if type(a) is not _ndarray and not hasattr(a, "__cuda_array_interface__"):
                a = np.asarray(a)     # scalars from numpy reductions; CuPy arrays stay on GPU
            out.append(a if a.dtype is dt or a.dtype == dt else a.astype(dt))
        return out

    def _vjp(self, grads, saved, reached):
        """The input gradients through the module's backward (no graph)."""
        if _hooks_live[1]:
            self._unpack_outputs()
            saved = _unpacked(saved)
        if self._n_out == 1:
            g = grads[0]
            if g is None:
                meta = self._out_meta[0]
                args = (None if meta is None else np.zeros(meta[0], meta[1]),)
            else:
                args = (g._data,)
        else:
            args = []
            for i, g in enumerate(grads):
                if g is None:
                    meta = self._out_meta[i]
                    args.append(None if meta is None else np.zeros(meta[0], meta[1]))
                else:
                    args.append(g._data)
            args = tuple(args)
        extra = self._extra
        if extra is not None:
            f = self._bsaved
            args = args + extra + saved
        else:
            f = self._mod.backward
            args = args + saved
        arrays = call_module(f, args, self._params)
        if reached is not None:   # no gradient for an input no arrived gradient depends on
            arrays = [a if r else None for a, r in zip(arrays, reached)]
        out = []
        for a, dt, (fn, _) in zip(arrays, self._in_dtypes, self.next_functions):
            if a is None or fn is None:
                out.append(None)
                continue
            if type(a) is not _ndarray and not hasattr(a, "__cuda_array_interface__"):
                a = np.asarray(a)     # scalars from numpy reductions; CuPy arrays stay on GPU
            if a.dtype != dt:
                a = a.astype(dt)
            out.append(_wrap(a))
        return out

    def _grad_module(self, needed=None):
        """The module's gradient module; `needed` (None: all): per input, whether its gradient
        is wanted, for a module that computes only those."""
        factory = getattr(self._mod, "grad_module", None)
        if callable(factory):
            return factory() if needed is None else factory(needed)
        return grad_module(self._mod, needed)

    def _unpack_outputs(self):
        """Under saved-tensor hooks, the outputs torch saves are unpacked when the backward
        runs, as torch does (the module itself recomputes them)."""
        for p in getattr(self, "_hooked", ()):
            p.value()

    def _unpack(self, i):
        arr = self._saved[i]
        if type(arr) is _Packed:
            arr = arr.value()
        fn, nr = self.next_functions[i]
        if fn is None:
            return arr
        t = _wrap(arr, True)
        if type(fn) is _engine.AccumulateGrad:
            return fn.variable if fn.variable._data is arr else _alias(arr, fn)
        t._grad_fn = fn
        t._output_nr = nr
        return t

    def _graph_deps(self, grads, arrived, reached):
        """With create_graph: per input gradient, the backward arguments (indices into grads +
        inputs) it depends on when it needs a graph, else None. As in torch, it needs one only
        when a tensor its formula is a differentiable function of requires grad (the module's
        BACKWARD_DEPENDS, for the grad outputs that arrived: the gradient of 3*x + w has no
        grad_fn; x's gradient of x*w depends on w). None when no gradient needs a graph: they
        are computed as without create_graph."""
        edges = self.next_functions
        depends = getattr(self._mod, "BACKWARD_DEPENDS", None)
        n_grads = len(grads)
        live = [g is not None and g._requires_grad for g in grads]
        live += [fn is not None for fn, _ in edges]
        out = []
        some = False
        for i, (fn, _) in enumerate(edges):
            dep = None
            if fn is not None and (reached is None or reached[i]):
                if depends is None:   # a module without the table: it may depend on anything
                    dep = range(n_grads + len(edges))
                elif depends[i] is not None:
                    dep = set()
                    for j, term in enumerate(depends[i]):
                        if term is not None and arrived[j]:
                            dep.update(term)
                if dep is not None and any(live[k] for k in dep):
                    dep = tuple(sorted(dep))
                    some = True
                else:
                    dep = None
            out.append(dep)
        return out if some else None

    def _apply_differentiable(self, grads, deps, reached):
        """The input gradients through the gradient module, recorded as its node: those with
        ``deps`` (see _graph_deps) are its outputs; the others are plain tensors. The node's
        edges are to the arguments those depend on."""
        # only the gradients that flow somewhere, as torch computes only those it needs
        needed = [fn is not None and (reached is None or reached[i])
                  for i, (fn, _) in enumerate(self.next_functions)]
        gm = self._grad_module(None if all(needed) else needed)
        n = len(self._saved)
        self._unpack_outputs()
        inputs = list(grads) + [self._unpack(i) for i in range(n)]
        if _fw_live[0]:   # forward-over-reverse: the saved inputs' tangents, where kept
            inputs[len(grads):] = [_forward_ad.saved_dual(self, i, t)
                                   for i, t in enumerate(inputs[len(grads):])]
        tensors = [x if isinstance(x, _tm.Tensor) else None for x in inputs]
        arrays = [x._data if isinstance(x, _tm.Tensor) else x for x in inputs]
        used = set()
        for dep in deps:
            if dep is not None:
                used.update(dep)
        tensors = [t if k in used else None for k, t in enumerate(tensors)]
        outs = apply_module(gm, tensors, arrays, self._params, self._name + "Backward", SAVE_ALL,
                            differentiable=(True,) * n)
        for g, dep in zip(outs, deps):
            if dep is not None and g is not None and g._grad_fn is not None:
                node = g._grad_fn
                node.__class__ = GradModuleFunction
                node._fwd_deps = deps
                node._consumed = set()
                node._pending = None
                break
        result = []
        for i, (g, dep) in enumerate(zip(outs, deps)):
            fn = self.next_functions[i][0]
            if g is None or fn is None or (reached is not None and not reached[i]):
                result.append(None)
                continue
            if dep is None and g._grad_fn is not None:
                # computed by the node, independent of what requires grad: a plain tensor (the
                # node keeps its metadata: a gradient that never arrives is zeros)
                g._grad_fn = None
                g._requires_grad = False
            dt = self._in_dtypes[i]
            result.append(g if g._data.dtype == dt else g.to(_tm._DTYPES[dt]))
        return result


class GradModuleFunction(ModuleFunction):
    """The node of a gradient module (create_graph): its outputs are a module's input
    gradients, which torch computes as separate ops. ``_fwd_deps`` holds, per output, the
    node's inputs it depends on (None: not an output of the node). As torch's separate ops:

    - an input gets a gradient only from the outputs that depend on it (None otherwise: x*w's
      gradient w.r.t. w, g*x, has no path to w);
    - the engine follows only the edges of the outputs that receive gradient
      (``live_edges``), so a backward through x's gradient of x*w does not reach, or free, the
      graph of w's;
    - a backward through some outputs frees only those: another through them raises; the
      saved values go once every output has been through one.
    """

    __slots__ = ()

    def live_edges(self, slots):
        """``next_functions``, with (None, 0) for the inputs no output in ``slots`` (those
        gradients may arrive) depends on."""
        live = set()
        for k in slots:
            dep = self._fwd_deps[k]
            if dep is not None:
                live.update(dep)
        return tuple(e if i in live else _NO_EDGE for i, e in enumerate(self.next_functions))

    def _apply(self, grads):
        return ModuleFunction._apply(self, grads, self._reached(grads))

    def _reached(self, grads):
        """Per input, whether a gradient that arrived depends on it; a second backward
        through an output already freed raises."""
        arrived = {k for k, g in enumerate(grads) if g is not None}
        if not arrived.isdisjoint(self._consumed):
            raise RuntimeError(_engine.FREED_MESSAGE)
        self._pending = arrived
        reached = [False] * len(self.next_functions)
        for k in arrived:
            dep = self._fwd_deps[k]
            if dep is not None:
                for i in dep:
                    reached[i] = True
        return reached

    def _release(self):
        self._extra = None
        pending, self._pending = self._pending, None
        if pending:
            self._consumed.update(pending)
            if all(dep is None or k in self._consumed for k, dep in enumerate(self._fwd_deps)):
                self._saved = None


_engine._module_function = ModuleFunction
_engine._hooks_live = _graph.live


def _node_packed(node):
    """Whether saved-tensor hooks packed any of a module node's saved values (its backward
    then runs their unpack hooks: the engine's general path)."""
    saved = node._saved
    if saved is not None:
        for v in saved:
            if type(v) is _Packed:
                return True
    try:
        return bool(node._hooked)
    except AttributeError:   # an optional slot, set only under hooks
        return False


_engine._node_packed = _node_packed
_engine._grad_module_function = GradModuleFunction
# and the engine's fast chain path's (autograd/_backward_chain.py, moved out of engine.py)
_chain._module_function = ModuleFunction
_chain._hooks_live = _graph.live
_chain._node_packed = _node_packed


def _alias(arr, acc):
    """A tensor over ``arr`` whose gradient flows into leaf accumulator ``acc``."""
    t = _wrap(arr, True)
    t._grad_fn = acc
    return t


_wrap = _tm._wrap
_vc_of = _tm._vc_of
_VC = _tm._VersionCounter
_weakref = weakref.ref
_new = object.__new__
_sequence = _engine._sequence
_anomaly = _engine._anomaly
_AccumulateGrad = _engine.AccumulateGrad
_grad_accumulator = _engine.grad_accumulator
_gm_state = _gm._state
_hooks_live = _graph.live
_fw_live = _forward_ad.live


_PROF_ON = _prof.ON


def apply_module(mod, tensors, arrays, params, name, spec=SAVE_ALL, differentiable=None):
    """Run ``mod.forward`` and, when grad mode needs it, record a ``ModuleFunction`` node.

    Args:
        mod: object with ``forward(*arrays, **params)`` and ``backward(*grads, *arrays, **params)``;
            optionally ``forward_saving`` / ``backward_saved`` (see ``ModuleFunction``).
        tensors: per module input, the Tensor it came from, or None for a constant.
        arrays: per module input, the array passed to the module (already type-promoted).
        params: keyword parameters of the module.
        name: the node's name (``ExpBackward0``).
        spec: a ``SaveSpec``.
        differentiable: per output, whether it is differentiable (default: float outputs).

    Returns:
        A list of output Tensors (None where the module returned None).
    """
    if _PROF_ON[0] and _prof.wants():
        return _prof.call(apply_module, _prof.op_label(name), "cpu_op", _prof.shapes_of(arrays),
                          (mod, tensors, arrays, params, name, spec, differentiable))
    if _fw_live[0]:   # forward AD: a dual tensor may be among the inputs
        return _forward_ad.apply_module(mod, tensors, arrays, params, name, spec, differentiable)
    requires = False
    if _gm_state.enabled:
        for t in tensors:
            if t is not None and t._requires_grad:
                requires = True
                break
    hooks = _graph.current() if requires and _hooks_live[0] else None
    # under saved-tensor hooks every saved value is an input that goes through them
    saving = _saving(mod) if requires and hooks is None else None
    outs = call_module(mod.forward if saving is None else saving[0], arrays, params)
    extra = None
    if saving is not None:
        outs, extra = outs
        extra = tuple(extra)
    results = []
    for a in outs:
        if a is None:
            results.append(None)
            continue
        if type(a) is not _ndarray and not hasattr(a, "__cuda_array_interface__"):
            a = np.asarray(a)
        results.append(_wrap(a))
    if not requires:
        return results

    # the node (Node._init_node, inlined)
    edges = []
    for t in tensors:
        if t is None:
            edges.append(_NO_EDGE)
            continue
        fn = t._grad_fn if t._base is None else t.grad_fn
        if fn is not None:
            edges.append((fn, t._output_nr))
        elif t._requires_grad and (t._base is None or t._view_meta is None):
            ref = t._grad_acc
            acc = ref() if ref is not None else None
            edges.append(((acc if acc is not None else _grad_accumulator(t)), 0))
        else:
            edges.append(_NO_EDGE)
    node = _new(ModuleFunction)
    n_out = len(results)
    if _anomaly.enabled:
        node._init_node(tuple(edges), n_out)
    else:
        node.next_functions = tuple(edges)
        node._sequence_nr = next(_sequence)
        node._n_out = n_out
        node._x = None
    node._mod = mod
    node._params = params
    node._saved = tuple(arrays)
    node._extra = extra
    node._bsaved = None if saving is None else saving[1]
    node._name = name
    node._freeable = spec.freeable
    node._in_dtypes = tuple([None if t is None else t._data.dtype for t in tensors])
    node._vcs = ()
    checks = []
    mode = spec._mode
    if mode:
        if mode == 3:
            idx = spec.check
        else:
            idx = range(len(tensors))
        for i in idx:
            t = tensors[i]
            if t is None:
                continue
            if mode == 2:
                for j, u in enumerate(tensors):
                    if j != i and u is not None and u._requires_grad:
                        break
                else:
                    continue
            vc = _vc_of(t)
            checks.append((vc, vc.value, i))
    if spec.cow:
        _register_cow(node, tensors, spec.cow)
    out_meta = []
    for i, out in enumerate(results):
        if out is None:
            out_meta.append(None)
            continue
        a = out._data
        diff = differentiable[i] if differentiable is not None else a.dtype.kind == "f"
        if diff:
            out._requires_grad = True
            out._grad_fn = node
            out._output_nr = i
            out_meta.append((a.shape, a.dtype))
        else:
            out_meta.append(None)
    for i in spec.outputs:
        out = results[i]
        checks.append((_vc_of(out), 0, (out._data.shape, out.dtype._legacy, name, i)))
    if extra:
        _guard_extra(node, tensors, arrays, results, extra, checks, spec)
    if hooks is not None:
        checks = _pack_saved(node, hooks, tensors, arrays, results, checks, spec)
    node._out_meta = out_meta
    node._checks = tuple(checks)
    return results


def _pack_saved(node, hooks, tensors, arrays, results, checks, spec):
    """Under saved_tensors_hooks: what torch saves for this op goes through the pack hook —
    the inputs it saves (those `checks` version-checks: the unpacked values are what the
    backward reads) and the outputs it saves (unpacked when the backward runs, as in torch;
    the module recomputes from its inputs). As in torch, packed values are not version-checked,
    and under hooks every check is of a packed value: the node keeps none."""
    saved = list(node._saved)
    for _, _, i in checks:
        if type(i) is int:
            saved[i] = _Packed(hooks, tensors[i], arrays[i])
    node._saved = tuple(saved)
    node._hooked = tuple(_Packed(hooks, results[o], results[o]._data) for o in spec.outputs)
    return []


_NO_PARAMS = {}


def _register_cow(node, tensors, indices):
    vcs = list(node._vcs)
    ref = weakref.ref(node)
    for i in indices:
        t = tensors[i]
        if t is not None:
            vc = _vc_of(t)
            if vc.cow is None:
                vc.cow = [ref]
            else:
                cow = vc.cow
                if len(cow) > 64:
                    cow[:] = [r for r in cow if r() is not None]
                cow.append(ref)
            vcs.append((vc, i))
    node._vcs = tuple(vcs)


def _guard_extra(node, tensors, arrays, results, extra, checks, spec):
    """Saved intermediates that alias an output or an input stay as valid as the rest.

    An intermediate that is (a view of) an output is version-checked like an output torch
    saves; one that aliases an input that is neither checked nor copy-on-write becomes
    copy-on-write.
    """
    owners = [_owner(e) for e in extra]
    # the common case first: no intermediate shares memory with an output or an input
    ids = {id(o) for o in owners}
    for out in results:
        if out is not None and id(_owner(out._data)) in ids:
            break
    else:
        for t, a in zip(tensors, arrays):
            if t is not None and id(_owner(a)) in ids:
                break
        else:
            return
    checked_out = set(spec.outputs)
    for j, out in enumerate(results):
        if out is None or j in checked_out:
            continue
        own = _owner(out._data)
        if any(o is own for o in owners):
            checks.append((_vc_of(out), 0, (out._data.shape, out.dtype._legacy, node._name, j)))
    protected = {info for _, _, info in checks if type(info) is int}
    protected.update(i for _, i in node._vcs)
    cow = []
    for i, t in enumerate(tensors):
        if t is None or i in protected:
            continue
        own = _owner(arrays[i])
        if any(o is own for o in owners):
            cow.append(i)
    if cow:
        _register_cow(node, tensors, cow)
