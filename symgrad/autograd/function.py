"""``Function``, ``FunctionCtx`` and the one node class for generated modules.

A ``Function`` subclass that defines ``backward`` runs as torch runs it: ``forward`` under
no_grad, ``ctx`` is the graph node, ``backward`` runs in grad mode when ``create_graph`` is on.

A subclass that defines only ``forward`` is compiled (``symgrad.compiler.compile_function``)
to a module ``m`` with ``m.forward(*arrays)`` and ``m.backward(*grad_outputs, *arrays)``; its
node is a ``ModuleFunction``, the same node class the built-in ops use. With
``create_graph=True`` a ``ModuleFunction`` applies the module's gradient module (whose forward
is ``m.backward``) as a ``GradModuleFunction``, so derivatives of any order have a graph. As in
torch, a gradient is part of that graph only when a tensor it depends on requires grad (the
module's ``BACKWARD_DEPENDS``): the gradients of ``3*x + w`` are plain tensors.
"""

import os
import warnings
import weakref

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd import engine as _engine
from symgrad.autograd import forward_ad as _forward_ad
from symgrad.autograd import grad_mode as _gm
from symgrad.autograd import graph as _graph
from symgrad import _profiling as _prof

__all__ = [
    "Function", "FunctionCtx", "BackwardCFunction", "ModuleFunction", "apply_module",
    "once_differentiable", "InplaceFunction", "NestedIOFunction",
]

_NO_EDGE = (None, 0)
_ndarray = np.ndarray


def _version_error(shape, legacy, label, output_nr, current, expected):
    msg = (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [symgrad.{legacy} {list(shape)}]"
    )
    if label is not None:   # torch names the forward op: "output 0 of Exp"
        msg += f", which is output {output_nr} of {_engine.forward_op_name(label)},"
    msg += (
        f" is at version {current}; expected version {expected} instead. Hint: enable anomaly "
        "detection to find the operation that failed to compute its gradient, with "
        "symgrad.autograd.set_detect_anomaly(True, check_nan=False)."
    )
    return RuntimeError(msg)


def _label(node):
    if node is None or type(node) is _engine.AccumulateGrad:
        return None
    return node.name()


# ------------------------------------------------------------ module entry points
# The NumPy emitter decorates ``forward``/``backward`` with ``numpy.errstate(all="ignore")``.
# Entering that decorator costs more than the module's arithmetic on small arrays, so the
# runtime calls the undecorated function under the same error state, set through NumPy's
# context variable directly. Anything else (another decorator, other settings, a NumPy
# without that variable) is called as it is.
try:
    from numpy._core import _ufunc_config as _ufc

    _ERR_CV = _ufc._extobj_contextvar
    _make_extobj = _ufc._make_extobj
    _UNSPECIFIED = _ufc._Unspecified
    _cv_get = _ERR_CV.get
    _cv_set = _ERR_CV.set
    _cv_reset = _ERR_CV.reset
except (ImportError, AttributeError):  # pragma: no cover - other NumPy versions
    _ERR_CV = None

_MISS = object()
_RAW = {}        # decorated function -> undecorated one, or None when it must be called as is
_IGNORE = {}     # current error-state object -> the same with all="ignore"


def _errstate_ignore_wrapped(f):
    """The function under ``@numpy.errstate(all="ignore")``, or None."""
    w = getattr(f, "__wrapped__", None)
    if w is None or _ERR_CV is None:
        return None
    for cell in getattr(f, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if isinstance(v, np.errstate):
            if (getattr(v, "_all", None) == "ignore" and v._call is _UNSPECIFIED
                    and v._divide is None and v._over is None and v._under is None
                    and v._invalid is None):
                return w
            return None
    return None


def _raw(f):
    try:
        return _RAW[f]
    except KeyError:
        pass
    except TypeError:  # unhashable callable
        return None
    r = _errstate_ignore_wrapped(f)
    if len(_RAW) > 4096:
        _RAW.clear()
    _RAW[f] = r
    return r


def _ignore_state():
    cur = _cv_get()
    ign = _IGNORE.get(cur)
    if ign is None:
        tok = _cv_set(cur)
        try:
            ign = _make_extobj(all="ignore")
        finally:
            _cv_reset(tok)
        if len(_IGNORE) > 64:
            _IGNORE.clear()
        _IGNORE[cur] = ign
    return ign


def call_module(f, args, params):
    """``f(*args, **params)`` for a module entry point, errstate decorator included."""
    if _PROF_ON[0] and _prof.wants():   # profiler: one event per generated-module call
        return _prof.call(call_module, _prof.module_label(f), "module",
                          _prof.shapes_of(args), (f, args, params))
    raw = _RAW.get(f, _MISS)
    if raw is _MISS:
        raw = _raw(f)
    if raw is None:
        return f(*args, **params)
    tok = _cv_set(_IGNORE.get(_cv_get()) or _ignore_state())
    try:
        return raw(*args, **params)
    finally:
        _cv_reset(tok)


def call_ignoring_fp_errors(f, *args):
    """``f(*args)`` under ``numpy.errstate(all="ignore")`` (cheaply)."""
    if _ERR_CV is None:
        with np.errstate(all="ignore"):
            return f(*args)
    tok = _cv_set(_IGNORE.get(_cv_get()) or _ignore_state())
    try:
        return f(*args)
    finally:
        _cv_reset(tok)


_SAVING = {}  # module -> (forward_saving, backward_saved) or None


def _saving(mod):
    """The module's ``(forward_saving, backward_saved)`` when it exposes both, else None."""
    try:
        return _SAVING[mod]
    except KeyError:
        pass
    except TypeError:
        return None
    fs = getattr(mod, "forward_saving", None)
    bs = getattr(mod, "backward_saved", None)
    r = (fs, bs) if callable(fs) and callable(bs) else None
    if len(_SAVING) > 4096:  # gradient modules of built-ins are made afresh (create_graph)
        _SAVING.clear()
    try:
        _SAVING[mod] = r
    except TypeError:
        pass
    return r


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


class _Packed:
    """A saved input as a saved_tensors_hooks pack hook left it; ``value()`` unpacks it."""

    __slots__ = ("obj", "hooks", "shape", "dtype")

    def __init__(self, hooks, tensor, array):
        self.obj = _graph.pack(hooks, tensor)
        self.hooks = hooks
        self.shape = array.shape
        self.dtype = array.dtype

    def value(self):
        a = _graph.unpack(self.hooks, self.obj)._data
        return a if a.dtype == self.dtype else a.astype(self.dtype)


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
        extra = self._extra
        if extra is not None:
            f = self._bsaved
            args = (g._data, *extra, *saved)
        else:
            f = self._mod.backward
            args = (g._data, *saved)
        if _RAW.get(f, _MISS) is None and not _PROF_ON[0]:
            arrays = f(*args)   # no errstate decorator (a C module): call_module calls it so
        else:
            arrays = call_module(f, args, _NO_PARAMS)
        out = []
        for a, dt, e in zip(arrays, self._in_dtypes, self.next_functions):
            if a is None or e[0] is None:
                out.append(None)
                continue
            if type(a) is not _ndarray and not hasattr(a, "__cuda_array_interface__"):
                a = np.asarray(a)     # scalars from numpy reductions; CuPy arrays stay on GPU
            if a.dtype != dt:
                a = a.astype(dt)
            out.append(_wrap(a))
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
        from symgrad import _runtime_ops

        return _runtime_ops.grad_module(self._mod, needed)

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
_forward_ad._function = __import__("sys").modules[__name__]


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


def _only_output(node, out, diff):
    """The Tensor over a one-output node's output array (differentiable: `diff`, or when
    None, when floating point), with the node's output metadata."""
    t = _wrap(out)
    if out.dtype.kind == "f" if diff is None else diff:
        t._requires_grad = True
        t._grad_fn = node
        node._out_meta = ((out.shape, out.dtype),)
    else:
        node._out_meta = (None,)
    return t


def _edge(t):
    """``engine.edge(t)``, inlined where it is hot."""
    fn = t._grad_fn if t._base is None else t.grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    if t._requires_grad and (t._base is None or t._view_meta is None):
        ref = t._grad_acc
        acc = ref() if ref is not None else None
        return ((acc if acc is not None else _grad_accumulator(t)), 0)
    return _NO_EDGE


def _only_output_array(node, mod, args, params, name):
    """Run a one-output module for a node being recorded — its ``forward_saving`` where it
    has one, keeping the intermediates on the node — and return the output array."""
    saving = _SAVING.get(mod, _MISS)
    if saving is _MISS:
        saving = _saving(mod)
    if saving is None:
        outs = call_module(mod.forward, args, params)
        node._extra = None
        node._bsaved = None
    else:
        outs, extra = call_module(saving[0], args, params)
        node._extra = tuple(extra)
        node._bsaved = saving[1]
    if len(outs) != 1:
        raise RuntimeError(f"{name}: the module returned {len(outs)} outputs, expected 1")
    out = outs[0]
    if type(out) is not _ndarray and not hasattr(out, "__cuda_array_interface__"):
        out = np.asarray(out)
    return out


def apply1(mod, x, a, params, name, spec, diff=None):
    """``apply_module(mod, [x], [a], params, name, spec, (diff,))[0]`` for a one-output module
    (``diff`` None: the output is differentiable when it is floating point)."""
    if _PROF_ON[0] and _prof.wants():
        return _prof.call(apply1, _prof.op_label(name), "cpu_op", _prof.shapes_of((a,)),
                          (mod, x, a, params, name, spec, diff))
    if _fw_live[0]:
        return _forward_ad.apply_module(mod, [x], [a], params, name, spec,
                                        None if diff is None else (diff,))[0]
    if not (x._requires_grad and _gm_state.enabled):
        out = call_module(mod.forward, (a,), params)[0]
        if type(out) is not _ndarray and not hasattr(out, "__cuda_array_interface__"):
            out = np.asarray(out)
        return _wrap(out)
    if _anomaly.enabled or _hooks_live[0]:
        return apply_module(mod, [x], [a], params, name, spec,
                            None if diff is None else (diff,))[0]
    node = _new(ModuleFunction)
    f = mod.forward
    if (_RAW.get(f, _MISS) is None and _SAVING.get(mod, _MISS) is None and not params
            and not _PROF_ON[0]):
        # a module without errstate decorator nor saving plan (a C module): called as
        # _only_output_array calls it
        outs = f(a)
        node._extra = None
        node._bsaved = None
        if len(outs) != 1:
            raise RuntimeError(f"{name}: the module returned {len(outs)} outputs, expected 1")
        out = outs[0]
        if type(out) is not _ndarray and not hasattr(out, "__cuda_array_interface__"):
            out = np.asarray(out)
    else:
        out = _only_output_array(node, mod, (a,), params, name)
    fn = x._grad_fn
    node.next_functions = ((fn, x._output_nr) if fn is not None and x._base is None
                           else _edge(x),)
    node._sequence_nr = next(_sequence)
    node._n_out = 1
    node._x = None
    node._mod = mod
    node._params = params
    node._saved = (a,)
    node._name = name
    node._freeable = spec.freeable
    node._in_dtypes = (x._data.dtype,)
    node._vcs = ()
    t = _wrap(out)   # _only_output, inlined
    if out.dtype.kind == "f" if diff is None else diff:
        t._requires_grad = True
        t._grad_fn = node
        node._out_meta = ((out.shape, out.dtype),)
    else:
        node._out_meta = (None,)
    mode = spec._mode
    if mode == 1 or (mode == 3 and 0 in spec.check):
        vc = x._vc
        if vc is None:
            vc = x._vc = _VC()
        checks = [(vc, vc.value, 0)]
    else:
        checks = []
    if spec.cow:  # _register_cow(node, (x,), (0,)), inlined
        vc = x._vc
        if vc is None:
            vc = x._vc = _VC()
        cow = vc.cow
        if cow is None:
            vc.cow = [_weakref(node)]
        else:
            if len(cow) > 64:
                cow[:] = [r for r in cow if r() is not None]
            cow.append(_weakref(node))
        node._vcs = ((vc, 0),)
    if spec.outputs:
        vc = _VC()
        t._vc = vc
        checks.append((vc, 0, (out.shape, _tm._DTYPES[out.dtype]._legacy, name, 0)))
    if node._extra and not (spec.outputs and (checks or spec.cow)):
        _guard_extra(node, (x,), (a,), (t,), node._extra, checks, spec)
    node._checks = tuple(checks)
    return t


def _apply_function1(entry, x, a):
    """``apply1(entry.mod, x, a, {}, entry.name, SAVE_ALL, diff)`` for a forward-only
    Function's call of one Tensor (Function.apply's fast path): the recording of apply1, for
    its one case (every input saved and version-checked, no parameters), where the module is
    called directly (a C module: no errstate decorator, no saving plan); apply1 otherwise."""
    mod = entry.mod
    f = mod.forward
    if (not (x._requires_grad and _gm_state.enabled) or _anomaly.enabled or _hooks_live[0]
            or _PROF_ON[0] or _fw_live[0] or _RAW.get(f, _MISS) is not None
            or _SAVING.get(mod, _MISS) is not None):
        return apply1(mod, x, a, _NO_PARAMS, entry.name, SAVE_ALL, entry.differentiable[0])
    outs = f(a)
    if len(outs) != 1:
        raise RuntimeError(f"{entry.name}: the module returned {len(outs)} outputs, expected 1")
    out = outs[0]
    if type(out) is not _ndarray and not hasattr(out, "__cuda_array_interface__"):
        out = np.asarray(out)
    node = _new(ModuleFunction)
    node._extra = None
    node._bsaved = None
    fn = x._grad_fn
    node.next_functions = ((fn, x._output_nr) if fn is not None and x._base is None
                           else _edge(x),)
    node._sequence_nr = next(_sequence)
    node._n_out = 1
    node._x = None
    node._mod = mod
    node._params = _NO_PARAMS
    node._saved = (a,)
    node._name = entry.name
    node._freeable = True      # SAVE_ALL.freeable
    node._in_dtypes = (a.dtype,)
    node._vcs = ()
    t = _wrap(out)
    diff = entry.differentiable[0]
    if out.dtype.kind == "f" if diff is None else diff:
        t._requires_grad = True
        t._grad_fn = node
        node._out_meta = ((out.shape, out.dtype),)
    else:
        node._out_meta = (None,)
    vc = x._vc
    if vc is None:
        vc = x._vc = _VC()
    node._checks = ((vc, vc.value, 0),)
    return t


def apply2(mod, x, y, a, b, name, spec, diff=None):
    """``apply_module(mod, [x, y], [a, b], {}, name, spec, (diff,))[0]`` for a one-output
    module; ``x`` or ``y`` may be None (a constant)."""
    if _PROF_ON[0] and _prof.wants():
        return _prof.call(apply2, _prof.op_label(name), "cpu_op", _prof.shapes_of((a, b)),
                          (mod, x, y, a, b, name, spec, diff))
    if _fw_live[0]:
        return _forward_ad.apply_module(mod, [x, y], [a, b], _NO_PARAMS, name, spec,
                                        None if diff is None else (diff,))[0]
    rx = x is not None and x._requires_grad
    ry = y is not None and y._requires_grad
    if not ((rx or ry) and _gm_state.enabled):
        out = call_module(mod.forward, (a, b), _NO_PARAMS)[0]
        if type(out) is not _ndarray and not hasattr(out, "__cuda_array_interface__"):
            out = np.asarray(out)
        return _wrap(out)
    if _anomaly.enabled or _hooks_live[0]:
        return apply_module(mod, [x, y], [a, b], {}, name, spec,
                            None if diff is None else (diff,))[0]
    node = _new(ModuleFunction)
    out = _only_output_array(node, mod, (a, b), _NO_PARAMS, name)
    # edges (engine.edge, inlined for a non-view input with a grad_fn)
    if rx:
        fn = x._grad_fn
        ex = (fn, x._output_nr) if fn is not None and x._base is None else _edge(x)
    elif x is not None and x._base is not None:
        ex = _edge(x)
    else:
        ex = _NO_EDGE
    if ry:
        fn = y._grad_fn
        ey = (fn, y._output_nr) if fn is not None and y._base is None else _edge(y)
    elif y is not None and y._base is not None:
        ey = _edge(y)
    else:
        ey = _NO_EDGE
    node.next_functions = (ex, ey)
    node._sequence_nr = next(_sequence)
    node._n_out = 1
    node._x = None
    node._mod = mod
    node._params = _NO_PARAMS
    node._saved = (a, b)
    node._name = name
    node._freeable = spec.freeable
    node._in_dtypes = (None if x is None else x._data.dtype, None if y is None else y._data.dtype)
    node._vcs = ()
    t = _only_output(node, out, diff)
    mode = spec._mode
    checks = []
    if mode:
        if x is not None and (mode == 1 or (mode == 2 and ry) or (mode == 3 and 0 in spec.check)):
            vc = x._vc
            if vc is None:
                vc = x._vc = _VC()
            checks.append((vc, vc.value, 0))
        if y is not None and (mode == 1 or (mode == 2 and rx) or (mode == 3 and 1 in spec.check)):
            vc = y._vc
            if vc is None:
                vc = y._vc = _VC()
            checks.append((vc, vc.value, 1))
    if spec.cow:
        _register_cow(node, (x, y), spec.cow)
    if spec.outputs:
        checks.append((_vc_of(t), 0, (out.shape, _tm._DTYPES[out.dtype]._legacy, name, 0)))
    if node._extra:
        _guard_extra(node, (x, y), (a, b), (t,), node._extra, checks, spec)
    node._checks = tuple(checks)
    return t


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


# ------------------------------------------------------------------- custom Functions
class FunctionCtx:
    """The ``ctx`` of a custom Function (it is the Function's graph node)."""

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, _tm.Tensor):
                raise TypeError(
                    "save_for_backward can only save variables, but argument "
                    f"{i} is of type {type(t).__name__}"
                )
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        """Save tensors for ``jvp`` (forward-mode AD), where ``ctx.saved_tensors`` returns them."""
        for t in tensors:
            if t is not None and not isinstance(t, _tm.Tensor):
                raise AssertionError("save_for_forward expects all arguments to be tensors; you "
                                     "should save non-tensors as attributes on ctx.")
        self.saved_for_forward = tensors

    def mark_dirty(self, *args):
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    def mark_shared_storage(self, *pairs):
        raise RuntimeError(
            "mark_shared_storage is deprecated. Tensors with shared storages are automatically "
            "tracked."
        )


class BackwardCFunction(_engine.Node, FunctionCtx):
    """Graph node of a custom Function with a hand-written ``backward``; also its ``ctx``."""

    _forward_cls = None
    _run_without_grads = True

    def __init__(self):
        self.next_functions = ()
        self._sequence_nr = 0
        self._n_out = 0
        self._x = None
        self.to_save = ()
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = ()
        self._saved = None
        self._freed = False
        self._in_meta = ()
        self._out_meta = ()
        self._out_info = ()

    def name(self):
        return type(self).__name__

    # saved tensors ----------------------------------------------------------------
    @property
    def saved_variables(self):
        """Deprecated spelling of ``saved_tensors`` (warns, as torch)."""
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'",
                      DeprecationWarning, stacklevel=2)
        return self.saved_tensors

    @property
    def saved_tensors(self):
        jvp_saved = self.__dict__.get("_jvp_saved")
        if jvp_saved is not None:   # inside jvp: what save_for_forward saved (torch)
            return tuple(jvp_saved)
        if self._freed:
            raise RuntimeError(_engine.FREED_MESSAGE)
        if self._saved is None:
            return ()
        out = []
        for entry in self._saved:
            if entry is None:
                out.append(None)
                continue
            kind, obj, vc, version, label, nr = entry
            if kind == 2:     # packed by a saved_tensors_hooks pack hook (vc: the hooks)
                out.append(_graph.unpack(vc, obj))
                continue
            if vc.value != version:
                if kind == 0 and vc.history is not None:   # torch: the current grad_fn
                    label, nr = vc.history
                raise _version_error(obj.shape if kind == 0 else obj.shape,
                                     _tm._DTYPES[obj._data.dtype if kind == 0 else obj.dtype]._legacy,
                                     label if isinstance(label, (str, type(None))) else _label(label),
                                     nr, vc.value, version)
            if kind == 0:
                out.append(obj)
            else:
                t = _tm._wrap(obj)
                t._vc = vc
                if self._out_meta[nr] is not None:
                    t._requires_grad = True
                    t._grad_fn = self
                    t._output_nr = nr
                out.append(t)
        return tuple(out)


    def _release(self):
        if self._saved is not None:
            self._saved = None
            self._freed = True

    def _apply(self, grads):
        cls = self._forward_cls
        if self.materialize_grads:   # zeros for every tensor output, differentiable or not
            for i, g in enumerate(grads):
                if g is None and self._out_info[i] is not None:
                    shape, dt = self._out_info[i]
                    grads[i] = _tm._wrap(np.zeros(shape, dt))
        backward = cls.backward
        if cls.vjp is not _BASE_BACKWARD:   # torch: vjp is backward's other name
            if backward is not _BASE_BACKWARD:
                raise RuntimeError(
                    "Implementing both 'backward' and 'vjp' for a custom Function is not "
                    "allowed. You should only implement one of them.")
            backward = cls.vjp
        result = backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self.next_functions)
        if len(result) != n:
            if len(result) > n and all(r is None for r in result[n:]):
                result = result[:n]
            else:
                raise RuntimeError(
                    f"function {self.name()} returned an incorrect number of gradients "
                    f"(expected {n}, got {len(result)})"
                )
        out = []
        for i, (g, meta) in enumerate(zip(result, self._in_meta)):
            if g is None:
                out.append(None)
                continue
            if meta is None:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {i + 1}, but the corresponding forward input was not a Variable"
                )
            if not isinstance(g, _tm.Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
            shape, dt = meta
            if g._data.shape != shape:
                if not _expandable(shape, g._data.shape):
                    raise RuntimeError(
                        f"Function {self.name()} returned an invalid gradient at index {i} - "
                        f"got {list(g._data.shape)} but expected shape compatible with "
                        f"{list(shape)}"
                    )
                from symgrad import _runtime_ops

                g = _runtime_ops.sum_to(g, shape)
            if g._data.dtype != dt:
                g = g.to(_tm._DTYPES[dt])
            out.append(g)
        return out

    def __call__(self, *grads):
        return self._apply(list(grads))

    def apply(self, *grads):
        """torch's ``grad_fn.apply``: the user's ``backward`` (or ``vjp``) on ``grads``, as
        written (no checks of what it returns)."""
        cls = self._forward_cls
        if cls.vjp is not _BASE_BACKWARD:
            if cls.backward is not _BASE_BACKWARD:
                raise RuntimeError(
                    "Implementing both 'backward' and 'vjp' for a custom Function is not "
                    "allowed. You should only implement one of them.")
            return cls.vjp(self, *grads)
        return cls.backward(self, *grads)


_DIRTY_VIEW_MESSAGE = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function "
    "cannot return more than one Tensor. This is not supported by the current autograd engine. "
    "You should either make sure the input is not a view (using .clone() for example) or make "
    "your Function only return one Tensor (potentially splitting it into two Functions: one "
    "doing the inplace that returns a single Tensor and a second one that does the other "
    "operations). You can ask on the forum https://discuss.pytorch.org/ if you need help to do "
    "this change.")


def _expandable(shape, grad_shape):
    """True when ``shape`` broadcasts to ``grad_shape`` (so the grad can be summed back)."""
    if len(shape) > len(grad_shape):
        return False
    for s, g in zip(reversed(shape), reversed(grad_shape)):
        if s != g and s != 1:
            return False
    return True


class FunctionMeta(type):
    """Gives each Function subclass its node class ``<Name>Backward`` (as torch does)."""

    def __init__(cls, name, bases, attrs):
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Base class of differentiable operations.

    Define ``forward(ctx, *args)``; define ``backward(ctx, *grad_outputs)`` to write the
    derivative by hand, or leave it out and symgrad compiles one from the traced forward.
    Call with ``Fn.apply(*args)`` (or ``Fn()(*args)``).
    """

    is_traceable = False
    generate_vmap_rule = False

    def __call__(self, *args, **kwargs):
        return self.apply(*args, **kwargs)

    # The base class's forward / setup_context / backward / jvp raise torch's own errors,
    # word for word: a subclass overrides what it uses (a forward-only subclass gets its
    # backward generated, see apply, and its jvp too: forward_ad).
    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def vmap(info, in_dims, *args):
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap staticmethod "
            "or set generate_vmap_rule=True.")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )

    @classmethod
    def _has_backward(cls):
        return cls.backward is not Function.backward or cls.vjp is not Function.vjp

    @classmethod
    def apply(cls, *args, **kwargs):
        if _PROF_ON[0] and _prof.wants():
            return _prof.call(cls.apply, cls.__name__, "cpu_op", _prof.shapes_of(args), args,
                              kwargs)
        if _fw_live[0]:
            return _forward_ad.apply_function(cls, args, kwargs)
        if cls.backward is not _BASE_BACKWARD or cls.vjp is not _BASE_BACKWARD:
            return _apply_custom(cls, args, kwargs)
        return _apply_compiled(cls, args, kwargs)


_BASE_BACKWARD = Function.backward


def _apply(cls, args, kwargs):
    """``cls.apply`` without forward AD."""
    if cls.backward is not _BASE_BACKWARD or cls.vjp is not _BASE_BACKWARD:
        return _apply_custom(cls, args, kwargs)
    return _apply_compiled(cls, args, kwargs)


class InplaceFunction(Function):
    def __init__(self, inplace=False):
        self.inplace = inplace


class NestedIOFunction(Function):
    pass


def once_differentiable(fn):
    """Decorate a ``backward`` that is not itself differentiable: it runs under no_grad."""
    import functools

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with _gm.no_grad():
            outputs = fn(ctx, *args)
        if not _gm.is_grad_enabled() or not any(
                isinstance(a, _tm.Tensor) and a._requires_grad for a in args):
            return outputs
        # under create_graph, as torch: the gradients get a graph whose node raises when a
        # second backward reaches it (not silently no gradient)
        return _delayed_error(
            "trying to differentiate twice a function that was marked with "
            "@once_differentiable", outputs)
    return wrapper


def _delayed_error(message, outputs):
    """torch's DelayedError: aliases of ``outputs`` (a tensor or a tuple, None allowed) whose
    node, "Error", raises RuntimeError(message) when backward reaches it. Its inputs are
    leaves that require grad (detached aliases), so that the aliases have a graph."""
    from symgrad import _runtime_ops

    single = not isinstance(outputs, tuple)
    outs = (outputs,) if single else outputs
    inputs, aliases = [], []
    for v in outs:
        if isinstance(v, _tm.Tensor) and v._data.dtype.kind == "f":
            leaf = v.detach()
            leaf.requires_grad_(True)
            inputs.append(leaf)
            aliases.append(_tm._wrap(v._data))
        else:
            inputs.append(None)

    def backward(ctx, grads):
        raise RuntimeError(message)

    if aliases:
        _runtime_ops.record("Error", backward, None, inputs, aliases)
    it = iter(aliases)
    result = tuple(next(it) if isinstance(v, _tm.Tensor) and v._data.dtype.kind == "f" else v
                   for v in outs)
    return result[0] if single else result


_SIGNATURES = {}   # forward -> (its signature, its parameter count when all are positional)


def _bind_default_args(forward, args, kwargs):
    entry = _SIGNATURES.get(forward)
    if entry is None:
        import inspect

        sig = inspect.signature(forward)
        plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())
        entry = _SIGNATURES[forward] = (sig, len(sig.parameters) if plain else -1)
    sig, n = entry
    if not kwargs and len(args) == n:   # every argument given, positionally: as bound
        return args, kwargs
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.args, bound.kwargs


def _apply_custom(cls, args, kwargs, ctx=None):
    if ctx is None:
        ctx = cls._backward_cls()
    Tensor = _tm.Tensor
    grad_on = _gm._state.enabled
    uses_setup = cls.setup_context is not Function.setup_context
    if uses_setup:   # torch: the forward's arguments bound, defaults applied, positionally
        args, kwargs = _bind_default_args(cls.forward, args, kwargs)
    # torch: needs_input_grad is each input's requires_grad, whatever the grad mode
    needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
    ctx.needs_input_grad = needs
    is_executable = grad_on and any(needs)
    with _gm.no_grad():
        if uses_setup:
            output = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, output)
        else:
            output = cls.forward(ctx, *args, **kwargs)
    is_tuple = isinstance(output, tuple)
    outputs = output if is_tuple else (output,)
    dirty = ctx.dirty_tensors
    non_diff = ctx.non_differentiable
    input_ids = {id(a) for a in args if isinstance(a, Tensor)}
    new_outputs = list(outputs)
    if is_executable:
        ctx._init_node(tuple(_engine.edge(a) if isinstance(a, Tensor) else _NO_EDGE for a in args),
                       len(outputs))
        ctx._in_meta = tuple((a._data.shape, a._data.dtype) if isinstance(a, Tensor) else None
                             for a in args)
    for d in dirty:
        if not any(d is o for o in outputs):
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned as "
                "output. The inputs that are modified inplace must all be outputs of the "
                "Function.")
    out_meta = []    # per output: (shape, dtype) when differentiable
    out_info = []    # per output: (shape, dtype) of every tensor output (materialized grads)
    for i, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            out_meta.append(None)
            out_info.append(None)
            continue
        is_diff = (o._data.dtype.kind == "f" and not any(o is t for t in non_diff))
        is_dirty = any(o is t for t in dirty)
        if is_dirty:
            if o._grad_fn is None and o._requires_grad and o._base is None and is_executable:
                raise RuntimeError(
                    "a leaf Variable that requires grad has been used in an in-place operation."
                )
            _vc_of(o).bump()   # torch bumps a dirty tensor's version once more
            if is_executable and is_diff:
                if id(o) not in input_ids:
                    warnings.warn(
                        "ctx.mark_dirty() received a tensor that was not an input. Only input "
                        "Tensors that have been mutated should be passed to ctx.mark_dirty().",
                        UserWarning, stacklevel=3)
                if o._base is not None:   # a view: its base's history goes through ctx
                    if len(outputs) > 1:
                        raise RuntimeError(_DIRTY_VIEW_MESSAGE)
                    if o._view_meta is not None:
                        raise _tm.view_rebase_error(o, indirect=False)
                    from symgrad import _runtime_ops

                    _runtime_ops.rebase_view(o, ctx, i)
                else:
                    if o._grad_fn is not None:
                        o._grad_fn._move_tensor_state(o._output_nr, ctx, i)
                    o._grad_fn = ctx
                    o._output_nr = i
                    o._requires_grad = True
                    _vc_of(o).history = (ctx, i)
        elif id(o) in input_ids:
            # torch: an input returned as is becomes a view of itself (so that it can get a
            # grad_fn of its own); one that requires grad but is not differentiable here, a
            # detached alias
            if (is_executable and is_diff) or not o._requires_grad:
                with _gm.no_grad():
                    o = o.view_as(o)
            else:
                o = o.detach()
            new_outputs[i] = o
            if is_executable and is_diff:
                o._grad_fn = ctx
                o._output_nr = i
                o._requires_grad = True
        elif is_executable and is_diff:
            o._grad_fn = ctx
            o._output_nr = i
            o._requires_grad = True
        elif o._grad_fn is None and not is_diff:
            o._requires_grad = False
        if o._base is not None and not (is_dirty and id(o) in input_ids):
            # torch's CreationMeta::IN_CUSTOM_FUNCTION: writing into this view in place (or
            # into its base) would bypass the custom backward, and is refused
            o._view_meta = "custom_function"
            # what the forward wrote into its base before returning it is part of the
            # output (torch records the view's version when the Function sets its history)
            o._view_version = _vc_of(o).value
        out_meta.append((o._data.shape, o._data.dtype) if is_executable and is_diff else None)
        out_info.append((o._data.shape, o._data.dtype) if is_executable else None)
    ctx._out_info = tuple(out_info)
    ctx._out_meta = tuple(out_meta)
    if ctx.to_save:
        saved = []
        hooks = _graph.current() if _hooks_live[0] else None
        for t in ctx.to_save:
            if t is None:
                saved.append(None)
                continue
            if hooks is not None:
                saved.append((2, _graph.pack(hooks, t), hooks, None, None, None))
                continue
            idx = next((i for i, o in enumerate(new_outputs) if o is t), None)
            if idx is not None and is_executable:
                vc = _vc_of(t)
                saved.append((1, t._data, vc, vc.value, ctx.name(), idx))
            else:
                fn = t._grad_fn
                vc = _vc_of(t)
                saved.append((0, t, vc, vc.value, fn, t._output_nr))
        ctx._saved = tuple(saved)
    ctx.to_save = ()
    if is_tuple:
        return tuple(new_outputs)
    return new_outputs[0]


# ------------------------------------------------------------------ compiled Functions
_signatures = {}


def _bind(cls, args, kwargs):
    """(positional args, keyword-only and **kwargs values) of a call to cls.forward."""
    if not kwargs:
        return args, {}
    import inspect

    sig = _signatures.get(cls)
    if sig is None:
        sig = _signatures[cls] = inspect.signature(cls.forward)
    # torch 2 style (a setup_context of its own): forward takes no ctx
    takes_ctx = not any("setup_context" in vars(k) for k in cls.__mro__
                        if k.__module__ != __name__)
    bound = sig.bind(None, *args, **kwargs) if takes_ctx else sig.bind(*args, **kwargs)
    bound.apply_defaults()
    # keyword-only and **kwargs values stay keywords (bound.args would drop them)
    return tuple(bound.args[1:] if takes_ctx else bound.args), dict(bound.kwargs)


CPU_TARGETS = ("auto", "numpy", "c")
_cpu_target = ["auto"]


def set_cpu_target(target):
    """The target forward-only Functions compile to for CPU tensors:

    - "auto" (the default): tiered. A Function's first calls for a call signature run its
      NumPy module while its C module (fused native loops) is built in a background thread;
      later calls run the C module once it is loaded. A C module already in the disk cache
      runs from the first call. Without a C compiler (CC, default cc) it is NumPy, with one
      warning; a C build that fails warns once and keeps NumPy for that signature.
    - "numpy": always the NumPy module.
    - "c": always the C module, built before the first call returns (the NumPy module with
      one warning where no C compiler works).

    The environment variable SYMGRAD_CPU_TARGET sets it at import; a Function's class
    attribute `cpu_target` overrides it for that Function. Returns the previous target.
    Functions already compiled for a call signature keep their module until this changes;
    symgrad's own composite ops stay on NumPy (one small op gains little from C). See
    docs/fast-by-default.md."""
    _check_cpu_target(target, "set_cpu_target")
    previous = _cpu_target[0]
    if target != previous:
        _cpu_target[0] = target
        _COMPILED.clear()
    return previous


def _check_cpu_target(target, who):
    if target not in CPU_TARGETS:
        raise ValueError(f"{who}: unknown target {target!r}; choose one of "
                         f"{', '.join(map(repr, CPU_TARGETS))}")


def get_cpu_target():
    """The target forward-only Functions compile to for CPU tensors (see set_cpu_target)."""
    return _cpu_target[0]


_CC_FOUND = {}        # CC's value -> whether it names an executable
_TIER_WARNED = set()  # reasons warned about (once each)


def _tier_warn(reason):
    if reason not in _TIER_WARNED:
        _TIER_WARNED.add(reason)
        warnings.warn(reason, RuntimeWarning, stacklevel=5)


def _c_compiler_found():
    cc = os.environ.get("CC", "cc")
    found = _CC_FOUND.get(cc)
    if found is None:
        import shutil

        found = _CC_FOUND[cc] = shutil.which(cc) is not None
        if not found:
            _tier_warn(f"symgrad: no C compiler ({cc!r} not found): forward-only Functions run "
                       "their NumPy modules (set CC to a C compiler for the fused C target, or "
                       "SYMGRAD_CPU_TARGET=numpy to choose NumPy)")
    return found


def _compile_function(cls, args, kwargs=None, tier_key=None):
    """(runtime module, background job or None) of a call signature."""
    from symgrad.compiler import compile_function

    # CuPy arrays (tensors on "cuda") compile for the CUDA target: fused kernels, no host copy
    on_gpu = any(type(a).__module__.split(".")[0] == "cupy" for a in args)
    if on_gpu:
        target = "cuda"
    elif cls.__module__.startswith("symgrad."):
        target = "numpy"
    else:
        # a Function may choose for itself: class attribute cpu_target = "c"
        target = getattr(cls, "cpu_target", None) or _cpu_target[0]
        _check_cpu_target(target, f"{cls.__name__}.cpu_target")
    if target != "auto":
        return compile_function(cls, args, target=target, kwargs=kwargs), None
    if tier_key is None or not _c_compiler_found():
        return compile_function(cls, args, target="numpy", kwargs=kwargs), None
    from symgrad import _tiers, compiler

    ready = compiler.cached_function(cls, args, "c", kwargs)
    if ready is not None:   # built by an earlier process (or call): no NumPy tier
        return ready, None
    module = compile_function(cls, args, target="numpy", kwargs=kwargs)

    # the build traces shapes and dtypes: stand-ins that hold no memory, not the caller's
    # arrays (a signature called once would keep them alive in its deferred job)
    specs = tuple(np.lib.stride_tricks.as_strided(np.zeros(1, a.dtype), a.shape,
                                                  (0,) * a.ndim, writeable=False)
                  if type(a) is _ndarray else a for a in args)

    def build_c():
        return compile_function(cls, specs, target="c", kwargs=kwargs)

    # keyed by the NumPy module too: one recompiled after an edit gets a new C build;
    # started by the signature's second call (_tier_poll)
    return module, _tiers.submit((tier_key, module), build_c, defer=True)


def _tier_poll(entry):
    """Between two calls: switch `entry` to its C module once built, or, its build failed,
    warn once and keep NumPy."""
    job = entry.job
    if not job.done:
        if not job.queued:
            from symgrad import _tiers

            _tiers.start(job)
        return
    entry.job = None
    if job.module is not None:
        entry.mod = job.module
    else:
        name = getattr(entry.forward_fn, "__qualname__", entry.name)
        _tier_warn(f"symgrad: the C module of {name.rsplit('.forward', 1)[0]} could not be "
                   f"built ({job.error}); this call signature keeps its NumPy module")


class _Compiled:
    """A forward-only Function's module for one call signature, with what apply needs."""

    __slots__ = ("mod", "name", "differentiable", "single", "one", "watch", "stale", "captured",
                 "forward_fn", "job", "casts", "fast")

    def __init__(self, cls, mod, job=None):
        from symgrad.compiler import stale, watch_list

        self.mod = mod
        self.job = job   # the C module being built (tiered CPU target), or None
        # the globals the forward reads (helpers, constants): one rebound recompiles
        self.watch = () if cls.__module__.startswith("symgrad.") else watch_list(cls)
        self.stale = stale
        # torch names a Function's node <Name>Backward; symgrad's own composite ops give
        # torch's name of the op's node (_node_name)
        self.name = getattr(cls, "_node_name", None) or cls.__name__ + "Backward"
        self.differentiable = tuple(mod.differentiable_outputs)
        self.single = not getattr(mod, "returns_tuple", False)
        # one output: the one-output fast paths apply (the module returns exactly one)
        self.one = len(self.differentiable) == 1 and getattr(mod, "n_outputs", 1) == 1
        # arrays the forward captured (closure, globals): constant trailing inputs, read
        # afresh on every call so that the module sees their current contents
        compiled = getattr(mod, "compiled", None)
        self.captured = bool(getattr(compiled, "captured", ()))
        self.forward_fn = getattr(cls, "forward", None)
        self.casts = None   # per output, its dtype where the module's is not (_output_casts)
        self.fast = 0       # n > 0: _apply_compiled's fast path applies (n Tensors)


def _output_casts(mod, arrays):
    """Per output, the dtype torch gives it where the module's differs, or None; () for none.

    A generated module casts every output to the combined dtype of all its inputs; torch
    promotes per op, so an output computed from float32 inputs only is float32 even when
    another input is float64. Each output gets the promotion of the float inputs its value
    depends on (the graph's output_depends: not those read only for shape or inside a where's
    condition), zero-dimensional ones counting only when no other does (torch's rule).
    Only mixed-precision calls are concerned."""
    floats = {a.dtype for a in arrays if getattr(getattr(a, "dtype", None), "kind", "") == "f"}
    if len(floats) < 2:
        return ()
    deps = getattr(getattr(mod, "compiled", None), "output_depends", None)
    if deps is None:   # a module without the dependences (an older cache entry)
        return ()
    casts = []
    for d in deps:
        fl = [arrays[k] for k in d or () if k < len(arrays)
              and getattr(getattr(arrays[k], "dtype", None), "kind", "") == "f"]
        dims = [a.dtype for a in fl if a.ndim] or [a.dtype for a in fl]
        casts.append(np.result_type(*dims) if dims else None)
    return tuple(casts) if any(c is not None for c in casts) else ()


def _recast(outs, casts):
    """Give each output its dtype of ``casts`` (its node's output metadata too)."""
    for out, dt in zip(outs, casts):
        if out is None or dt is None:
            continue
        a = out._data
        if a.dtype == dt or a.dtype.kind != "f":
            continue
        out._data = a.astype(dt)
        node = out._grad_fn
        meta = getattr(node, "_out_meta", None) if node is not None else None
        if meta is not None and meta[out._output_nr] is not None:
            meta = list(meta)
            meta[out._output_nr] = (a.shape, np.dtype(dt))
            node._out_meta = tuple(meta)


_COMPILED = {}  # (cls, per argument (array type, shape, dtype) or (type, value)) -> _Compiled
if os.environ.get("SYMGRAD_CPU_TARGET"):
    set_cpu_target(os.environ["SYMGRAD_CPU_TARGET"])


def _apply_compiled(cls, args, kwargs):
    if not kwargs and args:
        # the common call: Tensors only, a signature compiled before (its key built directly,
        # the checks of the general path below made once, when the entry was)
        Tensor = _tm.Tensor
        x = args[0]
        n = len(args)
        if type(x) is Tensor:
            a = x._data
            if n == 1:
                entry = _COMPILED.get((cls, (type(a), a.shape, a.dtype)))
            elif n == 2:
                y = args[1]
                if type(y) is Tensor:
                    b = y._data
                    entry = _COMPILED.get((cls, (type(a), a.shape, a.dtype),
                                           (type(b), b.shape, b.dtype)))
                else:
                    entry = None
            else:
                for t in args:
                    if type(t) is not Tensor:
                        entry = None
                        break
                else:
                    arrays = [t._data for t in args]
                    entry = _COMPILED.get((cls, *[(type(d), d.shape, d.dtype) for d in arrays]))
            if entry is not None and entry.fast == n:
                for namespace, name, value in entry.watch:   # compiler.stale, inlined
                    if namespace.get(name, _MISS) is not value:
                        break
                else:
                    if entry.one:
                        if n == 1:
                            out = _apply_function1(entry, x, a)
                            return out if entry.single else (out,)
                        if n == 2:
                            out = apply2(entry.mod, x, y, a, b, entry.name, SAVE_ALL,
                                         entry.differentiable[0])
                            return out if entry.single else (out,)
                    if n <= 2:
                        arrays = [a] if n == 1 else [a, b]
                    outs = apply_module(entry.mod, list(args), arrays, {}, entry.name,
                                        SAVE_ALL, entry.differentiable)
                    if entry.single and len(outs) == 1:
                        return outs[0]
                    return tuple(outs)
    kw = {}
    if kwargs:
        args, kw = _bind(cls, args, kwargs)
    Tensor = _tm.Tensor
    key = [cls, tuple(sorted(kw.items()))] if kw else [cls]
    tensors = []
    arrays = []
    for a in args:
        if type(a) is not Tensor and isinstance(a, (_ndarray, np.generic)):
            # a NumPy array or scalar is traced as an input (it has a shape and dtype):
            # passed to the module as a Tensor that needs no gradient, never as a constant
            # (a value in the key would compile once per value)
            args = tuple(_wrap(np.asarray(b)) if b is a else b for b in args)
            return _apply_compiled(cls, args, kw)
        if isinstance(a, Tensor):
            d = a._data
            key.append((type(d), d.shape, d.dtype))
            tensors.append(a)
            arrays.append(d)
        else:
            key.append((type(a), a))
    key = tuple(key)
    try:
        entry = _COMPILED.get(key)
    except TypeError:  # an unhashable constant: compile_function keys it by its repr
        key = entry = None
    if entry is not None and entry.watch and entry.stale(entry.watch):
        entry = None
    if entry is None:
        trace_args = tuple(a._data if isinstance(a, Tensor) else a for a in args)
        entry = _Compiled(cls, *_compile_function(cls, trace_args, kw, key))
        if key is not None:
            _COMPILED[key] = entry
    elif entry.job is not None:
        _tier_poll(entry)
    # read once: this call's forward and its node's backward use the same module
    mod = entry.mod
    if entry.captured:
        extra = mod.compiled.captured_arrays(entry.forward_fn)
        tensors = tensors + [None] * len(extra)
        arrays = arrays + extra
    casts = entry.casts
    if casts is None:   # once per call signature: its dtypes are in the key
        casts = entry.casts = _output_casts(mod, arrays)
    # the fast path above, for the next calls: Tensor arguments only, no captured arrays, no
    # output cast, no background build pending
    entry.fast = (len(tensors) if not entry.captured and not casts and entry.job is None
                  and len(tensors) == len(args) and not kw else 0)
    if entry.one:
        n = len(tensors)
        if n == 1:
            out = apply1(mod, tensors[0], arrays[0], _NO_PARAMS, entry.name, SAVE_ALL,
                         entry.differentiable[0])
            return out if entry.single else (out,)
        if n == 2:
            out = apply2(mod, tensors[0], tensors[1], arrays[0], arrays[1], entry.name,
                         SAVE_ALL, entry.differentiable[0])
            if casts:
                _recast((out,), casts)
            return out if entry.single else (out,)
    outs = apply_module(mod, tensors, arrays, {}, entry.name, SAVE_ALL,
                        entry.differentiable)
    if casts:
        _recast(outs, casts)
    if entry.single and len(outs) == 1:
        return outs[0]
    return tuple(outs)
