"""`autograd.numpy`: NumPy's names; on `sg.Tensor` arguments, symgrad's ops."""
import numpy as _onp
import symgrad as _sg

from . import linalg, random  # noqa: F401


def _tensor(x):
    return x if isinstance(x, _sg.Tensor) else _sg.tensor(_onp.asarray(x, dtype=float))


def _traced(*xs):
    return any(isinstance(x, _sg.Tensor) for x in xs)


def dot(a, b):
    if not _traced(a, b):
        return _onp.dot(a, b)
    return _sg.matmul(_tensor(a), _tensor(b))


def tril(a, k=0):
    return a.tril(k) if _traced(a) else _onp.tril(a, k)


def triu(a, k=0):
    return a.triu(k) if _traced(a) else _onp.triu(a, k)


def swapaxes(a, i, j):
    return a.transpose(i, j) if _traced(a) else _onp.swapaxes(a, i, j)


def einsum(spec, *operands):
    if not _traced(*operands):
        return _onp.einsum(spec, *operands)
    return _sg.einsum(spec, *[_tensor(o) for o in operands])


def concatenate(arrays, axis=0):
    if not _traced(*arrays):
        return _onp.concatenate(arrays, axis)
    return _sg.cat([_tensor(a) for a in arrays], axis)


def sum(x, axis=None, keepdims=False):
    if not _traced(x):
        return _onp.sum(x, axis=axis, keepdims=keepdims)
    return x.sum() if axis is None else x.sum(axis, keepdim=keepdims)


def abs(x):
    return x.abs() if _traced(x) else _onp.abs(x)


def __getattr__(name):   # constants and constructors (eye, pi, float64, ...): NumPy's
    return getattr(_onp, name)
