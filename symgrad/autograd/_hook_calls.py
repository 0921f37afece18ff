"""How the engine calls a node's hooks and checks what they return (tensor hooks with no
gradient, pre- and post-hooks, ``retain_grad``), anomaly mode's nan check and its warnings
with the forward's stack. The hooks that see the engine's owned gradient arrays
(``_call_hooks``, ``_call_output_hooks``) stay in symgrad/autograd/engine.py, which imports
these at module level and re-exports them."""
import warnings

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd import grad_mode as _gm

def _check_hook_result(hook, r, g):
    """torch's check of what a tensor hook returned in place of the gradient ``g``."""
    if not isinstance(r, _tm.Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(r).__name__}'")
    name = getattr(hook, "__name__", type(hook).__name__)
    if r._data.shape != g._data.shape:
        raise RuntimeError(f"hook '{name}' has changed the size of value")
    if r._data.dtype != g._data.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was "
                           f"symgrad.{g.dtype._legacy} got symgrad.{r.dtype._legacy})")


def _call_hooks_undefined(hooks):
    """A tensor hook of a node's output that got no gradient (an unused output of a
    multi-output node, an undefined gradient): torch calls it with None, and it may not
    return a value."""
    for hook in tuple(hooks.values()):
        if hook(None) is not None:
            raise RuntimeError("can't replace a None gradient with a non-None value")


def _checked_hook_grads(hook, r, grads):
    """torch's check of what a Node pre- or post-hook returned in place of ``grads``."""
    if type(r) is not tuple:
        raise TypeError(f"expected tuple, but hook returned '{type(r).__name__}'")
    if len(r) != len(grads):
        name = getattr(hook, "__name__", type(hook).__name__)
        raise RuntimeError(f"hook '{name}' has returned an incorrect number of values (got "
                           f"{len(r)}, but expected {len(grads)})")
    for new, old in zip(r, grads):
        if new is not None:
            if old is None:
                raise RuntimeError("can't replace a None gradient with a non-None value")
            _check_hook_result(hook, new, old)
    return list(r)


def _call_pre_hooks(hooks, grads):
    for hook in tuple(hooks.values()):
        r = hook(tuple(grads))
        if r is not None:
            grads = _checked_hook_grads(hook, r, grads)
    return grads


def _call_post_hooks(hooks, outputs, grads):
    for hook in tuple(hooks.values()):
        r = hook(tuple(outputs), tuple(grads))
        if r is not None:
            outputs = _checked_hook_grads(hook, r, outputs)
    return outputs


def _retain(ref, g):
    t = ref()
    if t is None or g is None:
        return
    if t._grad is None:
        t._grad = g.clone() if _gm._state.enabled else _tm._wrap(g._data.copy())
    else:
        t._grad = t._grad + g


def _check_nan(node, outputs):
    for i, g in enumerate(outputs):
        if g is not None and g._data.dtype.kind == "f" and np.isnan(g._data).any():
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def _warn_forward_stack(node):
    _warn_one_stack(node)
    parent = node._parent
    while parent is not None:
        _warn_one_stack(parent, induced=True)
        parent = parent._parent


def _warn_one_stack(node, induced=False):
    if induced:
        head = f"\n\nPrevious calculation was induced by {node.name()}. "
        tb = "Traceback of forward call that induced the previous calculation:\n"
    else:
        head = f"Error detected in {node.name()}. "
        tb = "Traceback of forward call that caused the error:\n"
    if not node._stack:   # made before anomaly mode was on (torch's wording)
        text = (head + "No forward pass information available. Enable detect anomaly during "
                "forward pass for more information.")
    else:
        text = head + tb + "".join(node._stack)
    try:
        warnings.warn(text, UserWarning, stacklevel=5)
    except Warning:
        # warnings turned into errors: the backward's own error is the one to raise (torch
        # prints the warning to stderr then)
        import sys

        print(f"UserWarning: {text}", file=sys.stderr)


# The graph task running in this thread: (id, containers of the nodes it runs or captures),
