"""torch.autograd.graph names: ``Node`` (the grad_fn base class) and the saved-tensor hooks.

``saved_tensors_hooks(pack_hook, unpack_hook)``: while the context is active, every tensor a
recorded node saves for its backward goes through ``pack_hook(tensor)`` (whatever it returns is
kept instead of the tensor), and ``unpack_hook(packed)`` must give a Tensor back each time the
backward reads it. The nodes that save tensors are the generated modules' (built-in ops and
forward-only Functions save their inputs) and ``ctx.save_for_backward`` of a Function with its
own backward. While hooks are active, a module's ``forward_saving`` intermediates are not kept
(they are recomputed), so every saved value passes through the hooks. Hooks are thread-local,
and they nest (the innermost applies); a pack hook runs without hooks.
"""
import functools
import threading

from symgrad import tensor as _tm   # the runtime's modules import each other (used in calls)
from symgrad.autograd import engine as _engine
from symgrad.autograd.engine import GradientEdge, Node  # noqa: F401

__all__ = ["SavedTensor", "Node", "GradientEdge", "get_gradient_edge", "register_multi_grad_hook",
           "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks",
           "increment_version"]


def _grad_fn_or_grad_acc(t):
    if t.grad_fn is not None:
        return t.grad_fn
    return _engine.grad_accumulator(t) if t.requires_grad else None


def get_gradient_edge(tensor):
    """The edge through which gradient flows into ``tensor``: ``grad(loss, input)`` and
    ``grad(loss, get_gradient_edge(input))`` are the same."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does "
                           "not require gradients")
    return GradientEdge(_grad_fn_or_grad_acc(tensor), tensor.output_nr)


class _MultiHandle:
    """The handles of one register_multi_grad_hook: ``remove()`` removes them all."""

    __slots__ = ("handles",)

    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for handle in self.handles:
            handle.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """``mode="all"``: ``fn(grads)`` once the gradients of all of ``tensors`` that the running
    backward computes are there (None for the others); ``mode="any"``: ``fn(grad)`` with the
    first of them. Returns a handle whose ``remove()`` unregisters the hook (torch's)."""
    supported_modes = ("all", "any")
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    lock = threading.Lock()
    if mode == "all":
        count = {}
        buffer = {}
        grad_fns = [_grad_fn_or_grad_acc(t) for t in tensors]
        n = len(tensors)
        expected = {}

        def inner_hook(idx, grad):
            task = _engine.current_graph_task_id()
            with lock:
                seen = count.get(task, 0)
                count[task] = seen + 1
                if seen == 0:
                    buffer[task] = [None] * n
                    expected[task] = sum(fn is not None and _engine.will_engine_execute_node(fn)
                                         for fn in grad_fns)
            buffer[task][idx] = grad
            if seen == expected[task] - 1:
                grads = buffer.pop(task)
                del count[task], expected[task]
                fn(grads)

        handles = tuple(t.register_hook(functools.partial(inner_hook, i))
                        for i, t in enumerate(tensors))
    else:
        ran = set()

        @functools.wraps(fn)
        def wrapped(grad):
            task = _engine.current_graph_task_id()
            with lock:
                if task in ran:
                    return
                ran.add(task)
            fn(grad)

        handles = tuple(t.register_hook(wrapped) for t in tensors if t.requires_grad)
    return _MultiHandle(handles)


def increment_version(tensor):
    """Bump the version counter of ``tensor`` (or of each tensor of an iterable), as an
    in-place write would: a backward that saved it then refuses to run."""
    for t in ((tensor,) if isinstance(tensor, _tm.Tensor) else tensor):
        vc = _tm._vc_of(t)
        if type(vc) is not _tm._InferenceVersion:   # an inference tensor has none (no error)
            vc.bump()

# live[0]: hook contexts entered and not yet left, in any thread (a cheap test on hot paths);
# live[1]: whether any ever was (saved values may be packed from then on)
live = [0, False]
_live_lock = threading.Lock()
_local = threading.local()


def _stack():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def current():
    """The (pack_hook, unpack_hook) pair that applies now in this thread, or None."""
    stack = getattr(_local, "stack", None)
    if not stack:
        return None
    return stack[-1]


class saved_tensors_hooks:
    """Context manager: pack and unpack hooks for the tensors saved for backward (torch's
    ``torch.autograd.graph.saved_tensors_hooks``)."""

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks: pack_hook and unpack_hook must be callable")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        message = getattr(_local, "disabled", None)
        if message is not None:
            raise RuntimeError(message)
        _stack().append((self.pack_hook, self.unpack_hook))
        with _live_lock:
            live[0] += 1
            live[1] = True
        return self

    def __exit__(self, *exc):
        stack = _stack()
        if not stack:        # more exits than enters (torch does not crash either)
            return False
        stack.pop()
        with _live_lock:
            live[0] -= 1
        return False


def _forget_entries(n):
    """A backward's copy of the hooks stack is dropped with `n` more entries than it began
    with (n < 0: fewer): keep `live` counting the contexts that are entered."""
    if n:
        with _live_lock:
            live[0] -= n


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors live on the CPU and go back to their device when the backward reads them
    (torch's ``save_on_cpu``; ``pin_memory`` is accepted and has no effect here)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            device = str(t.device)
            return (device, t if device == "cpu" else t.cpu())

        def unpack(packed):
            device, t = packed
            return t if device == "cpu" else t.to(device)

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    """Context manager: entering ``saved_tensors_hooks`` inside it raises
    ``RuntimeError(error_message)`` (torch's ``disable_saved_tensors_hooks``)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self._previous = getattr(_local, "disabled", None)
        _local.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _local.disabled = self._previous
        return False


def pack(hooks, tensor):
    """``hooks``' pack hook on ``tensor``, run with no hooks active in this thread."""
    stack = _stack()
    saved, stack[:] = list(stack), []
    try:
        return hooks[0](tensor)
    finally:
        stack[:] = saved


def unpack(hooks, packed):
    """``hooks``' unpack hook on what its pack hook returned: a Tensor, or a TypeError."""
    t = hooks[1](packed)
    if not isinstance(t, _tm.Tensor):
        raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                        f"result of type {type(t).__name__}")
    return t


class _Packed:
    """A saved input as a saved_tensors_hooks pack hook left it; ``value()`` unpacks it."""

    __slots__ = ("obj", "hooks", "shape", "dtype")

    def __init__(self, hooks, tensor, array):
        self.obj = pack(hooks, tensor)
        self.hooks = hooks
        self.shape = array.shape
        self.dtype = array.dtype

    def value(self):
        a = unpack(self.hooks, self.obj)._data
        return a if a.dtype == self.dtype else a.astype(self.dtype)


class SavedTensor:
    """A tensor a built-in op's node saved for its backward (torch's ``SavedTensor``, what
    ``grad_fn._raw_saved_self`` / ``_raw_saved_other`` / ``_raw_saved_exponent`` return).
    ``register_hooks(pack_hook, unpack_hook)`` packs it now and unpacks it whenever the
    backward (or ``grad_fn._saved_self``) reads it; ``unpack()`` is the value the backward
    sees. Made by symgrad only: ``SavedTensor()`` raises torch's RuntimeError."""

    __slots__ = ("_index", "_node")

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Trying to create a SavedTensor object from Python is forbidden.")

    @classmethod
    def _of(cls, node, index):
        obj = object.__new__(cls)
        obj._node = node
        obj._index = index
        return obj

    def __repr__(self):
        return f"<SavedTensor of {self._node.name()} input {self._index}>"

    def unpack(self):
        """The saved value, as the backward sees it (through the unpack hook, if any)."""
        return self._node._unpack(self._index)

    def register_hooks(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks(): incompatible function arguments: pack_hook and "
                            "unpack_hook must be callable")
        node = self._node
        saved = node._saved
        if saved is None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved "
                "intermediate values of the graph are freed when you call .backward() or "
                "autograd.grad(). Specify retain_graph=True if you need to backward through "
                "the graph a second time or if you need to access saved variables after "
                "calling backward.")
        i = self._index
        if type(saved[i]) is _Packed:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have "
                               "already been set. Hint: only one pair of hooks is allowed at "
                               "a time.")
        t = node._unpack(i).detach()   # torch packs the saved original detached
        vc = _tm._vc_of(t)
        before = vc.value
        packed = _Packed((pack_hook, unpack_hook), t, saved[i])
        if vc.value != before:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided "
                "as arguments to pack hook should not be modified in place by the pack hook "
                "so that they can be accessed during unpack.")
        node._saved = saved[:i] + (packed,) + saved[i + 1:]
        with _live_lock:
            live[1] = True      # backward unpacks packed values from now on
