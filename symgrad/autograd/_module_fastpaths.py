"""The fast paths of ``apply_module`` for a one-output module of one or two tensors, the op
layer's hot ops: ``apply1`` / ``apply2`` (and ``_apply_function1``, a compiled Function's), which
record the same ``ModuleFunction`` node ``apply_module`` records with fewer steps; the helpers
they share (``_only_output``, ``_only_output_array``, ``_edge``). Moved verbatim from
autograd/_module_nodes.py, which keeps the node classes and ``apply_module``;
``symgrad.autograd.function`` re-exports every name.
"""

import numpy as np

from symgrad import tensor as _tm
from symgrad import _profiling as _prof
from symgrad.autograd import forward_ad as _forward_ad
from symgrad.autograd._module_calls import (
    _MISS, _NO_EDGE, _RAW, _SAVING, _TWIN, _saving, _ndarray, _twin, call_module,
)
from symgrad.autograd._module_nodes import (
    SAVE_ALL, ModuleFunction, _NO_PARAMS, _PROF_ON, _VC, _anomaly, _fw_live, _gm_state,
    _grad_accumulator, _guard_extra, _hooks_live, _new, _register_cow, _sequence, _vc_of,
    _weakref, _wrap, apply_module,
)


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
        # _only_output_array calls it (its generated twin, where it has one: _twin)
        outs = (_TWIN.get(f) or _twin(f))(a)
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
    called directly (a C module: no errstate decorator, no saving plan); apply1 otherwise.
    What is the same on every call of the signature is read from `entry` (the module's
    forward known to be direct, the input's dtype, the output's differentiability)."""
    mod = entry.mod
    f = mod.forward
    if f is not entry.direct:
        if _RAW.get(f, _MISS) is not None or _SAVING.get(mod, _MISS) is not None:
            return apply1(mod, x, a, _NO_PARAMS, entry.name, SAVE_ALL, entry.diff0)
        entry.direct = f   # checked once per module: no decorator, no saving plan
        entry.call = _twin(f)   # what is called for it (its generated twin: _twin)
    if (not (x._requires_grad and _gm_state.enabled) or _anomaly.enabled or _hooks_live[0]
            or _PROF_ON[0] or _fw_live[0]):
        return apply1(mod, x, a, _NO_PARAMS, entry.name, SAVE_ALL, entry.diff0)
    outs = entry.call(a)
    if len(outs) != 1:
        raise RuntimeError(f"{entry.name}: the module returned {len(outs)} outputs, expected 1")
    out = outs[0]
    if type(out) is not _ndarray and not hasattr(out, "__cuda_array_interface__"):
        out = np.asarray(out)
    node = _new(ModuleFunction)
    node._extra = None
    node._bsaved = None
    # the edge (_edge, inlined for a non-view input: its grad_fn's, or its accumulator's)
    if x._base is None:
        fn = x._grad_fn
        if fn is not None:
            node.next_functions = ((fn, x._output_nr),)
        else:   # a leaf (it requires grad): its accumulator, alive or made anew
            ref = x._grad_acc
            acc = ref() if ref is not None else None
            node.next_functions = ((acc if acc is not None else _grad_accumulator(x), 0),)
    else:
        node.next_functions = (_edge(x),)
    node._sequence_nr = next(_sequence)
    node._n_out = 1
    node._x = None
    node._mod = mod
    node._params = _NO_PARAMS
    node._saved = (a,)
    node._name = entry.name
    node._freeable = True      # SAVE_ALL.freeable
    node._in_dtypes = entry.in_dtypes
    node._vcs = ()
    t = _wrap(out)
    diff = entry.diff0
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


def _function_n_general(entry, args, arrays):
    """_apply_function_n's call where its fast path does not apply: apply2 or apply_module."""
    if len(args) == 2:
        return apply2(entry.mod, args[0], args[1], arrays[0], arrays[1], entry.name, SAVE_ALL,
                      entry.diff0)
    return apply_module(entry.mod, list(args), arrays, {}, entry.name, SAVE_ALL,
                        entry.differentiable)[0]


def _apply_function_n(entry, args, arrays):
    """``apply_module(entry.mod, list(args), arrays, {}, entry.name, SAVE_ALL, diff)[0]`` for
    a forward-only Function's call of two or more Tensors with one output (Function.apply's
    fast path): apply_module's recording for that case (every input saved and
    version-checked, no parameters, a module called directly: no errstate decorator, no
    saving plan), with the facts of the call signature read from `entry`; apply_module
    otherwise."""
    mod = entry.mod
    f = mod.forward
    if f is not entry.direct:
        if _RAW.get(f, _MISS) is not None or _SAVING.get(mod, _MISS) is not None:
            return _function_n_general(entry, args, arrays)
        entry.direct = f   # checked once per module: no decorator, no saving plan
        entry.call = _twin(f)   # what is called for it (its generated twin: _twin)
    if (not _gm_state.enabled or _anomaly.enabled or _hooks_live[0] or _PROF_ON[0]
            or _fw_live[0]):
        return _function_n_general(entry, args, arrays)
    edges = []
    requires = False
    for t in args:   # the edges (apply_module's, inlined)
        if t._base is None:
            fn = t._grad_fn
            if fn is not None:
                edges.append((fn, t._output_nr))
                requires = True
            elif t._requires_grad:
                ref = t._grad_acc
                acc = ref() if ref is not None else None
                edges.append(((acc if acc is not None else _grad_accumulator(t)), 0))
                requires = True
            else:
                edges.append(_NO_EDGE)
        else:
            if t._requires_grad:
                requires = True
            edges.append(_edge(t))
    if not requires:
        return _function_n_general(entry, args, arrays)
    outs = entry.call(*arrays)
    if len(outs) != 1:
        raise RuntimeError(f"{entry.name}: the module returned {len(outs)} outputs, expected 1")
    out = outs[0]
    if type(out) is not _ndarray and not hasattr(out, "__cuda_array_interface__"):
        out = np.asarray(out)
    node = _new(ModuleFunction)
    node.next_functions = tuple(edges)
    node._sequence_nr = next(_sequence)
    node._n_out = 1
    node._x = None
    node._mod = mod
    node._params = _NO_PARAMS
    node._saved = tuple(arrays)
    node._extra = None
    node._bsaved = None
    node._name = entry.name
    node._freeable = True      # SAVE_ALL.freeable
    node._in_dtypes = entry.in_dtypes
    node._vcs = ()
    checks = []
    i = 0
    for t in args:   # SAVE_ALL: every input version-checked
        vc = t._vc
        if vc is None:
            vc = t._vc = _VC()
        checks.append((vc, vc.value, i))
        i += 1
    t = _wrap(out)
    diff = entry.diff0
    if out.dtype.kind == "f" if diff is None else diff:
        t._requires_grad = True
        t._grad_fn = node
        node._out_meta = [(out.shape, out.dtype)]
    else:
        node._out_meta = [None]
    node._checks = tuple(checks)
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
