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

Rooms: ``ModuleFunction``, ``GradModuleFunction``, ``SaveSpec`` and the calls that record a
module's node (``apply_module``) are ``_module_nodes.py``, its fast paths (``apply1``, ``apply2``)
``_module_fastpaths.py``; how a module's
forward/backward is called (``call_module``, the errstate shortcut, its saving plan) is
``_module_calls.py``; the compiled Functions (the CPU target, tier polling, ``_Compiled``,
``_apply_compiled``, output casts) are ``_compiled_functions.py``. This module keeps the custom
Functions (``FunctionCtx``, ``BackwardCFunction``, ``Function``, ``once_differentiable``) and
re-exports every moved name.
"""

import warnings

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

from symgrad.autograd._module_calls import (  # noqa: F401  (re-exported: _function.call_module)
    _IGNORE, _MISS, _NO_EDGE, _RAW, _SAVING, _errstate_ignore_wrapped, _ignore_state, _label,
    _ndarray, _raw, _saving, _version_error, call_ignoring_fp_errors, call_module,
)
from symgrad.autograd._module_nodes import (  # noqa: F401  (re-exported: _function.apply_module)
    SAVE_ALL, SAVE_NONE, GradModuleFunction, ModuleFunction, SaveSpec, _AccumulateGrad,
    _NO_PARAMS, _Packed, _PROF_ON, _VC, _alias, _anomaly, _fw_live, _gm_state, _grad_accumulator,
    _guard_extra, _hooks_live, _new, _node_packed, _owner, _pack_saved, _register_cow, _sequence,
    _unpacked, _vc_of, _weakref, _wrap, apply_module,
)
from symgrad.autograd._module_fastpaths import (  # noqa: F401  (re-exported: _function.apply1)
    _apply_function1, _apply_function_n, _edge, _only_output, _only_output_array, apply1,
    apply2,
)

_forward_ad._function = __import__("sys").modules[__name__]


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
from symgrad.autograd._compiled_functions import (  # noqa: E402,F401  (re-exported)
    CPU_TARGETS, _CC_FOUND, _COMPILED, _TIER_WARNED, _Compiled, _apply_compiled, _bind,
    _c_compiler_found, _check_cpu_target, _compile_function, _cpu_target, _output_casts,
    _recast, _signatures, _tier_poll, _tier_warn, get_cpu_target, set_cpu_target,
)
set_cpu_target.__module__ = get_cpu_target.__module__ = __name__   # public: torch-style home

# The runtime layer's siblings this module calls into (each imports this one at module level,
# so they are bound once every name above is defined)
from symgrad import _runtime_ops  # noqa: E402
