"""The helpers symgrad.nn.functional's activations and losses share: in-place application
(torch's relu_ / elu_ histories), shape and dtype queries that work on runtime tensors and on
traced values alike. Split out of nn/functional.py so that its two halves (activations and
norms there, losses in nn/_losses.py) each import them once."""
from __future__ import annotations

from .._api_helpers import _is_traced


def _inplace(input, fn, inplace):
    """fn(input), written into `input` when inplace: fn runs on a private copy of the old
    value (a node that saves its input keeps it: F.elu(a, inplace=True) then backward raised a
    false in-place error), and input's history becomes fn's node, as torch's relu_ / elu_
    (a.grad_fn is ReluBackward0 / EluBackward1, not a copy)."""
    if inplace and not _is_traced(input):
        from .. import _runtime_ops

        return _runtime_ops.inplace(input, "apply", fn)
    return fn(input)


def _known(x):
    """The shape tuple of x, or None in a shape-generic trace."""
    s = getattr(x, "shape", None)
    try:
        return tuple(int(d) for d in s)
    except (TypeError, ValueError):
        return None


def _size(shape):
    return f"torch.Size({list(shape)})"


def _data(x):
    """The array of a runtime tensor, None for a traced value (or anything else)."""
    from ..tensor import Tensor

    return x._data if isinstance(x, Tensor) else None


def _dtype_kind(x):
    """'f' (floating), 'i' (integer) or 'b' (bool) of a runtime tensor or traced value."""
    if _is_traced(x):
        return {"float": "f", "int": "i", "bool": "b"}.get(x.dtype, "f")
    data = _data(x)
    kind = data.dtype.kind if data is not None else "f"
    return "i" if kind == "u" else kind
