"""The in-place bookkeeping of runtime tensors: the version counter a tensor shares with its views
and ``detach()`` (bumped by every in-place write; an inference tensor's refuses), and a view's
history after its base (or another view of it) was written in place: ``_regenerate_view`` and
torch's errors for the views that cannot have one (``view_rebase_error``). Moved verbatim from
tensor.py, which imports it at the top and re-exports every name.

It imports no module that imports ``symgrad.tensor`` (grad mode and the node names are the
autograd package's leaves), so tensor.py can import it before it defines ``Tensor``.
"""

from symgrad.autograd import grad_mode as _gm
from symgrad.autograd.node import forward_op_name


# --------------------------------------------------------------------- version counter
class _VersionCounter:
    """Shared by a tensor, its views and ``detach()``; bumped by every in-place write.

    ``cow`` holds weak references to graph nodes that kept this storage for their backward
    although torch would not have saved it; they take a private copy before the write.
    ``history``: the ``(node, output_nr)`` an in-place op with a graph gave the tensor of this
    storage last (None before any), which a version error names as torch does.
    """

    __slots__ = ("value", "cow", "history")

    def __init__(self):
        self.value = 0
        self.cow = None
        self.history = None

    def bump(self):
        self._copy_on_write()
        self.value += 1

    def _copy_on_write(self):
        """Graph nodes that kept this storage without torch's saving take their copy now."""
        cow = self.cow
        if cow:
            self.cow = None
            for ref in cow:
                node = ref()
                if node is not None:
                    node._copy_on_write(self)


class _InferenceVersion(_VersionCounter):
    """The version counter of an inference tensor (made in ``inference_mode``): there is none
    (torch's errors) — reading it to save the tensor for backward, or writing the tensor in
    place, is refused outside inference mode. Views and ``detach()`` share it."""

    __slots__ = ()

    def __init__(self):
        self.cow = None
        self.history = None

    @property
    def value(self):
        if _gm._state.inference:
            return 0
        raise RuntimeError(
            "Inference tensors cannot be saved for backward. Please do not use Tensors created "
            "in inference mode in computation tracked by autograd. To work around this, you "
            "can make a clone to get a normal tensor and use it in autograd, or use "
            "`symgrad.no_grad()` instead of `symgrad.inference_mode()`.")

    def bump(self):
        if not _gm._state.inference:
            raise RuntimeError(
                "Inplace update to inference tensor outside InferenceMode is not allowed.You "
                "can make a clone to get a normal tensor before doing inplace update.See "
                "https://github.com/pytorch/rfcs/pull/17 for more details.")
        self._copy_on_write()   # no version to count


# whether any tensor ever had grad_dtype set (until then AccumulateGrad need not look)
grad_dtype_live = [False]
# whether any tensor ever had a post-accumulate-grad hook (until then no leaf has one: its
# optional slot, unset, costs an AttributeError to read)
post_acc_live = [False]


def _vc_of(t):
    """``t``'s version counter, created on first use (most tensors never need one)."""
    vc = t._vc
    if vc is None:
        vc = t._vc = _VersionCounter()
    return vc


def _regenerate_view(view):
    """Give a view whose base was written in place the base's new history (torch does it lazily)."""
    base = view._base
    meta = view._view_meta
    no_grad_view = meta in ("no_grad", "inference_mode")
    if (no_grad_view and view._requires_grad) or (
            meta in ("custom_function", "multi_output")
            and (view._grad_fn is not None or base._requires_grad)):
        # torch's CreationMeta::NO_GRAD_MODE: a view made in no_grad mode has no history of
        # its own to regenerate once its base (or another view of it) is written in place;
        # IN_CUSTOM_FUNCTION: regenerating it would drop the custom backward;
        # MULTI_OUTPUT_NODE: the node's other outputs would not see the write
        raise view_rebase_error(view, indirect=True)
    view._view_version = _vc_of(view).value
    if no_grad_view:
        return
    if not (base._requires_grad or view._requires_grad):
        return
    t = base
    with _gm.enable_grad():
        for fn, kwargs in view._view_fn:
            t = fn(t, **kwargs)
    old = view._grad_fn
    if old is not None and t._grad_fn is not None and old is not t._grad_fn:
        old._move_tensor_state(view._output_nr, t._grad_fn, t._output_nr)  # retain_grad
    view._grad_fn = t._grad_fn
    view._output_nr = t._output_nr
    view._requires_grad = t._requires_grad


def view_rebase_error(view, indirect):
    """torch's handle_view_on_rebase: the error for writing in place into a view that was made
    in no_grad / inference mode or by a custom Function (``indirect``: its base, or another
    view of its base, was written)."""
    meta = view._view_meta
    fn = view._grad_fn
    modified = "its base or another view of its base has been" if indirect else "is being"
    name = forward_op_name(fn.name()) if fn is not None else None
    if meta in ("custom_function", "multi_output") and fn is not None:
        msg = f"Output {view._output_nr} of {name} is a view and {modified} modified inplace."
    else:
        if fn is not None:
            prefix = (f"Output {view._output_nr} of {name} is a view of a view which was "
                      "created in")
        else:
            prefix = "A view was created in"
        if meta in ("inference_mode", "view_of_inference_mode"):
            msg = f"{prefix} inference mode and {modified} modified inplace in normal mode."
        else:
            msg = f"{prefix} no_grad mode and {modified} modified inplace with grad mode enabled."
    if meta == "custom_function":
        advice = CUSTOM_FUNCTION_VIEW_ADVICE
    elif meta == "multi_output":
        advice = MULTI_OUTPUT_VIEW_ADVICE
    elif meta in ("inference_mode", "view_of_inference_mode"):
        advice = NO_GRAD_VIEW_ADVICE.replace("no_grad", "inference_mode")
    else:
        advice = NO_GRAD_VIEW_ADVICE
    return RuntimeError(f"{msg} {advice}")


CUSTOM_FUNCTION_VIEW_ADVICE = (
    "This view was created inside a custom Function (or because an input was returned as-is) "
    "and the autograd logic to handle view+inplace would override the custom backward "
    "associated with the custom Function, leading to incorrect gradients. This behavior is "
    "forbidden. You can fix this by cloning the output of the custom Function.")

MULTI_OUTPUT_VIEW_ADVICE = (
    "This view is the output of a function that returns multiple views. Such functions do not "
    "allow the output views to be modified inplace. You should replace the inplace operation by "
    "an out-of-place one.")

NO_GRAD_VIEW_ADVICE = (
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the no_grad block "
    "(if you don't want the inplace to be tracked) or both outside (if you want the inplace to "
    "be tracked).")
