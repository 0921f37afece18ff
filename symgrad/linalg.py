"""`sg.linalg`: torch.linalg's norms and products that are compositions of symgrad ops, so
they work on runtime tensors and in a traced forward alike (derivatives of every order).

Decompositions and solves (`inv`, `det`, `solve`, `svd`, `eigh`, ...), and the spectral and
nuclear matrix norms that need them, are not supported: they raise an error saying so.
"""
from __future__ import annotations

import math


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm: the ord-norm over `dim` (None: every element)."""
    if isinstance(ord, str):
        raise ValueError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    return x.norm(ord, dim, keepdim=keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """torch.linalg.matrix_norm for ord 'fro', 1, -1, inf and -inf (the spectral and nuclear
    norms need a singular value decomposition, which symgrad does not have)."""
    n = A.ndim
    if n < 2:
        raise RuntimeError(f"linalg.matrix_norm: the input must have at least 2 dimensions, "
                           f"got {n}")
    rows, cols = (d % n for d in dim)
    if rows == cols:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different, got {tuple(dim)}")
    if ord == "fro":
        return A.norm(2, (rows, cols), keepdim=keepdim)
    if ord in (2, -2, "nuc"):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs singular values, "
                                  "which symgrad does not compute; use ord='fro', 1, -1, inf "
                                  "or -inf")
    if ord in (1, -1):        # max / min over columns of the column sums
        inner, outer = rows, cols
    elif ord in (math.inf, -math.inf):
        inner, outer = cols, rows
    else:
        raise ValueError(f"linalg.matrix_norm: order {ord!r} not supported")
    sums = A.abs().sum(inner, keepdim=True)
    out = sums.amax(outer, keepdim=True) if ord > 0 else sums.amin(outer, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm over one dim (or of a 1-D input), a matrix norm over
    two dims (or of a 2-D input with ord given); ord=None is the 2-norm of every element."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        return A.norm(2, dim, keepdim=keepdim)
    if dim is None:
        n = A.ndim
        if n not in (1, 2):
            raise RuntimeError(f"linalg.norm: input must be 1-D or 2-D when ord is given "
                               f"and dim is None, got {n}-D")
        dim = tuple(range(n))
    if len(dim) == 1:
        return vector_norm(A, ord, dim, keepdim)
    if len(dim) == 2:
        return matrix_norm(A, ord, dim, keepdim)
    raise RuntimeError(f"linalg.norm: dim must be 1 or 2 dims, got {dim}")


def vecdot(x, y, *, dim=-1):
    """torch.linalg.vecdot: the dot product over `dim` (real inputs)."""
    return (x * y).sum(dim)


def cross(input, other, *, dim=-1):
    """torch.linalg.cross: the cross product over `dim` (default: the last)."""
    return input.cross(other, dim=dim)


def matmul(input, other):
    return input @ other


def multi_dot(tensors):
    """torch.linalg.multi_dot: the product of the matrices, left to right."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got "
                           f"{len(tensors)}")
    out = tensors[0]
    for t in tensors[1:]:
        out = out @ t
    return out


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """torch.linalg.diagonal: the diagonal of the last two dims by default."""
    return A.diagonal(offset, dim1, dim2)


_UNSUPPORTED = ("inv", "inv_ex", "det", "slogdet", "solve", "solve_ex", "lstsq", "svd",
                "svdvals", "eig", "eigh", "eigvals", "eigvalsh", "qr", "cholesky",
                "cholesky_ex", "lu", "lu_factor", "pinv", "matrix_rank", "matrix_power",
                "matrix_exp", "cond", "tensorinv", "tensorsolve", "householder_product")


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise AttributeError(f"symgrad.linalg.{name} is not supported: symgrad has no matrix "
                             "decompositions or solves; the supported torch.linalg functions "
                             "are norm, vector_norm, matrix_norm (fro, 1, inf), vecdot, cross, "
                             "matmul, multi_dot and diagonal")
    raise AttributeError(f"module 'symgrad.linalg' has no attribute {name!r}")
