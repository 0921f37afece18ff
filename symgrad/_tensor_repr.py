"""How a runtime tensor prints: ``repr(t)`` as torch prints it
(``tensor([1., 2.], grad_fn=<ExpBackward0>)``), the numbers formatted as torch formats them.
Moved verbatim from tensor.py, which imports it once ``Tensor`` exists and re-exports every name.
"""

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd import forward_ad as _forward_ad
# the dtypes (as in tensor.py, `bool` here is symgrad.bool, not the builtin)
from symgrad.tensor import bool, float32, int64


# ---------------------------------------------------------------------------- repr
_INVALID = object()


def _format_tensor(t):
    arr = t._data if isinstance(t._data, np.ndarray) else t._data.get()
    prefix = "tensor("
    suffixes = []
    d = t.dtype
    if arr.size == 0 and arr.ndim != 1:
        body = "[]"
        suffixes.append(f"size={tuple(arr.shape)}")
    else:
        body = _format_array(arr, prefix)
    if d not in (float32, int64, bool) and not (d is _tm._default_float):
        suffixes.append(f"dtype={d!r}")
    if t.device.type != "cpu":
        suffixes.insert(0, f"device='{t.device}'")
    try:
        fn = t.grad_fn   # a view's history is regenerated first, as torch's repr does
    except RuntimeError:
        # a view made in no_grad mode and written in place there has none that can be had
        fn = _INVALID
        suffixes.append("grad_fn=<Invalid>")
    if fn is not None and fn is not _INVALID:
        suffixes.append(f"grad_fn=<{fn.name()}>")
    elif fn is None and t._requires_grad:
        suffixes.append("requires_grad=True")
    if _forward_ad.live[0]:
        tangent = _forward_ad.format_suffix(t)
        if tangent is not None:
            suffixes.append(tangent)
    return prefix + body + "".join(", " + s for s in suffixes) + ")"


def _format_array(arr, prefix):
    kind = arr.dtype.kind
    if kind == "b":
        fmt = lambda v: "True" if v else "False"  # noqa: E731
    elif kind in "iu":
        fmt = str
    else:
        finite = arr[np.isfinite(arr)].astype(np.float64)
        nonzero = np.abs(finite[finite != 0])
        if finite.size and np.all(finite == np.round(finite)) and (
            nonzero.size == 0 or nonzero.max() < 1e8
        ):
            fmt = lambda v: _special(v) or f"{v:.0f}."  # noqa: E731
        elif nonzero.size and (nonzero.max() / nonzero.min() > 1000 or nonzero.max() > 1e8
                               or nonzero.min() < 1e-4):
            fmt = lambda v: _special(v) or f"{v:.4e}"  # noqa: E731
        else:
            fmt = lambda v: _special(v) or f"{v:.4f}"  # noqa: E731
    if arr.ndim == 0:
        return fmt(arr.item())
    flat = [fmt(v) for v in arr.reshape(-1).tolist()] if arr.size <= 1000 else None
    width = max(len(s) for s in flat) if flat else 0
    return np.array2string(
        arr, separator=", ", prefix=prefix, threshold=1000, edgeitems=3, max_line_width=80,
        formatter={"all": lambda v: fmt(v.item() if hasattr(v, "item") else v).rjust(width)},
    )


def _special(v):
    if v != v:
        return "nan"
    if v in (np.inf, -np.inf):
        return "inf" if v > 0 else "-inf"
    return None

