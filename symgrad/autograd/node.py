"""The backward graph's nodes: ``Node`` (torch's ``grad_fn``), ``GradientEdge``,
``RemovableHandle`` (what ``register_hook`` returns), the sequence numbers that order a
backward, ``FREED_MESSAGE`` and ``forward_op_name`` (torch's wording), and anomaly mode's
parent node of this thread. The engine that runs the nodes (and ``AccumulateGrad``, which
accumulates into a leaf) is symgrad/autograd/engine.py, which re-exports these names."""
import itertools
import threading
import traceback
import weakref
from typing import NamedTuple

from symgrad.autograd.anomaly_mode import _anomaly

_sequence = itertools.count()
_ACCUMULATE_SEQ = 2**64 - 1

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


def forward_op_name(name):
    """torch's ``Node::forward_op_name``: a node name without its ``Backward`` and a ``0``
    after it ("Exp" for "ExpBackward0", "Clamp1" for "ClampBackward1", "Fill2" for
    "FillBackward2", as torch 2.13's messages), the name autograd's in-place error messages
    give an op."""
    head, sep, tail = name.rpartition("Backward")
    if sep and (not tail or tail.isdigit()):
        return head + ("" if tail in ("", "0") else tail)
    return name


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    _ids = itertools.count()
    __slots__ = ("hooks_dict_ref", "id")

    def __init__(self, hooks_dict, hook):
        self.id = next(RemovableHandle._ids)
        hooks_dict[self.id] = hook
        self.hooks_dict_ref = hooks_dict

    def remove(self):
        self.hooks_dict_ref.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class GradientEdge(NamedTuple):
    """torch.autograd.graph.GradientEdge: the ``(node, output_nr)`` through which gradient flows
    into a tensor (``get_gradient_edge``); ``grad`` and ``backward`` take it in place of the
    tensor, in ``inputs`` (and, with an explicit gradient, in ``outputs``)."""

    node: object
    output_nr: int
    ownership_token: object = None


class _NodeExtra:
    """What few nodes carry: hooks, retain_grad references, the anomaly-mode forward stack.

    A node without any of these has ``_x is None``, which is the engine's fast path.
    """

    __slots__ = ("tensor_hooks", "retain_refs", "pre_hooks", "post_hooks", "stack", "parent")

    def __init__(self, stack=None, parent=None):
        self.tensor_hooks = None
        self.retain_refs = None
        self.pre_hooks = None
        self.post_hooks = None
        self.stack = stack
        self.parent = parent   # anomaly mode: the node whose backward created this one


def _extra_field(name):
    """A Node attribute read from its `_NodeExtra` (None while the node has none)."""
    def get(self):
        x = self._x
        return None if x is None else getattr(x, name)
    return property(get)


class Node:
    """A backward function in the graph (torch's ``grad_fn``).

    ``next_functions`` holds one ``(node, output_nr)`` edge per forward input; ``_apply`` maps
    the gradients of the node's forward outputs to gradients of its forward inputs.
    """

    __slots__ = ("next_functions", "_sequence_nr", "_n_out", "_x", "_metadata", "__weakref__")

    def _init_node(self, next_functions, n_out):
        self.next_functions = next_functions
        self._sequence_nr = next(_sequence)
        self._n_out = n_out
        self._x = _NodeExtra(traceback.format_stack()[:-3],
                             getattr(_anomaly_parent, "node", None)) if _anomaly.enabled else None

    _run_without_grads = False  # custom Functions run even when no gradient reaches them

    def _ensure_x(self):
        x = self._x
        if x is None:
            x = self._x = _NodeExtra()
        return x

    # rarely used per-node state lives in _NodeExtra; None until something sets it
    _stack = _extra_field("stack")
    _parent = _extra_field("parent")
    _tensor_hooks = _extra_field("tensor_hooks")
    _retain_refs = _extra_field("retain_refs")
    _pre_hooks = _extra_field("pre_hooks")
    _post_hooks = _extra_field("post_hooks")

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{self.name()} object at {hex(id(self))}>"

    @property
    def metadata(self):
        try:
            return self._metadata
        except AttributeError:
            self._metadata = {}
            return self._metadata

    def _apply(self, grads):
        # every node kind (ModuleFunction, accumulators, custom Functions) overrides this
        raise NotImplementedError(f"{type(self).__name__} has no backward rule")

    def _release(self):
        """Free what was saved for backward (retain_graph=False)."""

    def __call__(self, *grads):
        n = getattr(self, "_n_out", None)
        if isinstance(n, int) and len(grads) != n:   # torch's wording (TypeError)
            raise TypeError(f"expected {n} arguments, got {len(grads)} instead")
        out = self._apply(list(grads))   # torch: a Tensor for one input, else a tuple
        return out[0] if len(out) == 1 else tuple(out)

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after the node runs; may return new grad_inputs."""
        x = self._ensure_x()
        if x.post_hooks is None:
            x.post_hooks = {}
        return RemovableHandle(x.post_hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before the node runs; may return new grad_outputs."""
        x = self._ensure_x()
        if x.pre_hooks is None:
            x.pre_hooks = {}
        return RemovableHandle(x.pre_hooks, fn)

    def _register_tensor_hook(self, output_nr, hook):
        x = self._ensure_x()
        if x.tensor_hooks is None:
            x.tensor_hooks = {}
        return RemovableHandle(x.tensor_hooks.setdefault(output_nr, {}), hook)

    def _set_retains_grad(self, output_nr, tensor):
        x = self._ensure_x()
        if x.retain_refs is None:
            x.retain_refs = {}
        x.retain_refs[output_nr] = weakref.ref(tensor)

    def _move_tensor_state(self, output_nr, new_node, new_nr):
        """In-place rebase: the tensor's retain_grad follows it to its new grad_fn."""
        refs = self._retain_refs
        if refs and output_nr in refs:
            new_node._set_retains_grad(new_nr, refs.pop(output_nr)())


# anomaly mode: the node whose backward is running in this thread (a node created meanwhile,
# under create_graph, records it as its parent; an error reports the chain, as torch's)
_anomaly_parent = threading.local()
