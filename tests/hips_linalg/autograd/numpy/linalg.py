"""`autograd.numpy.linalg`: numpy.linalg's names and conventions over sg.linalg."""
import numpy as _onp
import symgrad as _sg


def _t(x):
    return x if isinstance(x, _sg.Tensor) else _sg.tensor(_onp.asarray(x, dtype=float))


def _on(x):
    return isinstance(x, _sg.Tensor)


def T(x):
    return x.transpose(-1, -2) if _on(x) else _onp.swapaxes(x, -1, -2)


def _dot(a, b):
    return _t(a) @ _t(b) if _on(a) or _on(b) else _onp.matmul(a, b)


def inv(a):
    return _sg.linalg.inv(a) if _on(a) else _onp.linalg.inv(a)


def solve(a, b):
    if not (_on(a) or _on(b)):
        return _onp.linalg.solve(a, b)
    return _sg.linalg.solve(_t(a), _t(b))


def det(a):
    return _sg.linalg.det(a) if _on(a) else _onp.linalg.det(a)


def slogdet(a):
    return tuple(_sg.linalg.slogdet(a)) if _on(a) else _onp.linalg.slogdet(a)


def pinv(a):
    return _sg.linalg.pinv(a) if _on(a) else _onp.linalg.pinv(a)


def cholesky(a):
    return _sg.linalg.cholesky(_from_triangle(a, "L")) if _on(a) else _onp.linalg.cholesky(a)


def _from_triangle(a, UPLO):
    """The symmetric matrix numpy.linalg reads from a's lower (upper) triangle: its
    gradient is then that of numpy's function of every entry (torch's, which sg.linalg
    gives, assumes a symmetric input and symmetric perturbations)."""
    t = a.tril() if UPLO == "L" else a.triu()
    return t + (t.tril(-1) if UPLO == "L" else t.triu(1)).transpose(-1, -2)


def eigh(a, UPLO="L"):
    if not _on(a):
        return _onp.linalg.eigh(a, UPLO)
    return tuple(_sg.linalg.eigh(_from_triangle(a, UPLO), UPLO))


def svd(a, full_matrices=True, compute_uv=True):
    if not _on(a):
        return _onp.linalg.svd(a, full_matrices, compute_uv)
    if not compute_uv:
        return _sg.linalg.svdvals(a)
    return tuple(_sg.linalg.svd(a, full_matrices))


def norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: a vector norm over one axis (or of a 1-D array), a matrix norm over
    two (or of a 2-D array with ord given); ord None: the 2-norm of all elements."""
    if isinstance(x, (list, tuple)) and any(_on(e) for e in x):   # a list of boxes
        x = _sg.stack([_t(e) for e in x])
    if not _on(x):
        return _onp.linalg.norm(x, ord, axis, keepdims)
    if isinstance(axis, int):
        axis = (axis,)
    if axis is None and ord is None:
        return _sg.linalg.vector_norm(x, 2, None, keepdims)
    if axis is None:
        axis = tuple(range(x.ndim))
    if len(axis) == 1:
        return _sg.linalg.vector_norm(x, 2 if ord is None else ord, axis, keepdims)
    return _sg.linalg.matrix_norm(x, "fro" if ord is None else ord, axis, keepdims)
