"""Argument and memory-layout helpers of the runtime's ``Tensor`` and its op layer.

NumPy's aliases (``axis=``, ``keepdims=``), a shape given by keyword, dimension wrapping, and the
layout of an array (contiguous, non-overlapping and dense, an empty array in the same layout).
``symgrad.tensor`` re-exports them (the op layer reads them as ``_tm._wrap_dim`` and so on).
This module imports nothing of the runtime and must not import SymPy.
"""

import numpy as np

from symgrad import _device
from symgrad.ops import table as _table

_SUM_NAMES = _table.node_names()["sum"]   # (SumBackward0, SumBackward1): the op table's


# --------------------------------------------------------------------------- helpers
def _np_aliases(op, dim, keepdim, axis, keepdims):
    """(dim, keepdim) from torch's NumPy-style aliases `axis=` and `keepdims=`."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{op}() got both 'dim' and its alias 'axis'")
        dim = axis
    if keepdims is not None:
        if keepdim:
            raise TypeError(f"{op}() got both 'keepdim' and its alias 'keepdims'")
        keepdim = keepdims
    return dim, keepdim


def _keyword_shape(op, positional, named, name):
    """The shape argument given by keyword (x.reshape(shape=(2, 3)), x.permute(dims=...))."""
    if positional or len(named) > 1 or name not in named:
        other = next((k for k in named if k != name), name)
        what = (f"an unexpected keyword argument '{other}'" if other != name
                else f"'{name}' both positionally and by keyword")
        raise TypeError(f"{op}() got {what}")
    return (named[name],)


def _wrap_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def _is_contiguous(a):
    expected = a.itemsize
    for size, stride in zip(reversed(a.shape), reversed(a.strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _is_non_overlapping_and_dense(a):
    """torch's is_non_overlapping_and_dense: some permutation of ``a`` is contiguous."""
    if a.ndim == 0:
        return True
    dims = sorted(range(a.ndim), key=lambda d: (abs(a.strides[d]), a.shape[d]))
    expected = a.itemsize
    for d in dims:
        if a.shape[d] == 1:
            continue
        if a.strides[d] != expected:
            return False
        expected *= a.shape[d]
    return True


def _empty_like_layout(a):
    """Uninitialised array with ``a``'s strides if ``a`` is dense, else row-major."""
    xp = np if isinstance(a, np.ndarray) else _device.array_module("cuda")
    if _is_contiguous(a) or not _is_non_overlapping_and_dense(a):
        return xp.empty(a.shape, a.dtype)
    order = sorted(range(a.ndim), key=lambda d: -abs(a.strides[d]))
    buf = xp.empty(tuple(a.shape[d] for d in order), a.dtype)
    inverse = [0] * a.ndim
    for i, d in enumerate(order):
        inverse[d] = i
    return buf.transpose(inverse)
