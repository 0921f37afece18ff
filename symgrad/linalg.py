"""`sg.linalg`: torch.linalg's names, signatures, batching and error classes, on runtime
tensors and in a traced forward alike (derivatives of every order).

Norms and products are compositions of symgrad ops. Solves, factorizations, determinants and
spectra (`solve`, `cholesky`, `inv`, `det`, `slogdet`, `eigh`, `svd`, `qr`, `pinv`, `lstsq`,
`matrix_exp`, ...) are structural ops of the IR (`symgrad.ops.linalg`) with symbolic
adjoints; in a traced forward they trace (`symgrad._linalg_trace`), on runtime tensors each is
a forward-only Function of that traced forward (torch's node name, e.g.
`LinalgSolveExBackward0`), compiled on first use per signature. See docs/linear-algebra.md.
"""
from __future__ import annotations

import math
import sys as _sys

from . import _methods
from .errors import LinAlgError  # noqa: F401  (torch.linalg.LinAlgError)
from .ops.linalg_results import (  # noqa: F401  (moved to the op table's layer; re-exported)
    EighResult, LstsqResult, QrResult, SlogdetResult, SvdResult)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm: the ord-norm over `dim` (None: every element)."""
    if isinstance(ord, str):
        raise ValueError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    return x.norm(ord, dim, keepdim=keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """torch.linalg.matrix_norm: ord 'fro', 'nuc', 2, -2, 1, -1, inf, -inf."""
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
        return _spectral_norm(A, ord, (rows, cols), keepdim)
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


# --------------------------------------------------------------------------- decompositions
# torch's node names (`y.grad_fn`) of the runtime ops
_NODE_NAMES = {
    "solve": "LinalgSolveExBackward0", "solve_triangular": "LinalgSolveTriangularBackward0",
    "cholesky": "LinalgCholeskyExBackward0", "cholesky_solve": "CholeskySolveBackward0",
    "inv": "LinalgInvExBackward0", "det": "LinalgDetBackward0",
    "slogdet": "LinalgSlogdetBackward0", "logdet": "WhereBackward0",
    "eigh": "LinalgEighBackward0", "eigvalsh": "LinalgEighBackward0",
    "svd": "LinalgSvdBackward0", "svdvals": "LinalgSvdBackward0", "qr": "LinalgQrBackward0",
    "pinv": "LinalgPinvBackward0", "lstsq": "LinalgLstsqBackward0",
    "matrix_exp": "LinalgMatrixExpBackward0",
}
_FUNCTIONS: dict = {}


def _traced_impl(name):
    """The traced forward of op `name`, over positional arguments."""
    from . import _linalg_trace as T

    return {
        "solve": lambda A, B, left: T.solve(A, B, left=left),
        "solve_triangular": lambda A, B, upper, left, unit: T.solve_triangular(
            A, B, upper=upper, left=left, unitriangular=unit),
        "cholesky": lambda A, upper: T.cholesky(A, upper=upper),
        "cholesky_solve": lambda B, L, upper: T.cholesky_solve(B, L, upper),
        "inv": T.inv, "det": T.det, "logdet": T.logdet,
        "slogdet": lambda A: tuple(T.slogdet(A)),
        "eigh": lambda A, UPLO: tuple(T.eigh(A, UPLO)),
        "eigvalsh": T.eigvalsh,
        "svd": lambda A, full: tuple(T.svd(A, full)),
        "svdvals": T.svdvals,
        "qr": lambda A, mode: tuple(T.qr(A, mode)),
        "pinv": T.pinv,
        "lstsq": lambda A, B: T.lstsq(A, B).solution,
        "matrix_exp": T.matrix_exp,
    }[name]


def _function(name):
    """The forward-only Function of linalg op `name` (created once; its backward is
    generated, as for the composite ops)."""
    cls = _FUNCTIONS.get(name)
    if cls is None:
        from .autograd.function import Function

        def forward(ctx, *args):
            return _traced_impl(name)(*args)

        forward.__qualname__ = f"linalg_{name}.forward"
        camel = "Linalg" + "".join(part.capitalize() for part in name.split("_"))
        cls = type(camel, (Function,), {
            "forward": staticmethod(forward), "__module__": __name__,
            "_node_name": _NODE_NAMES[name],
            "__doc__": f"torch.linalg.{name} as a forward-only Function (generated backward)."})
        _FUNCTIONS[name] = cls
    return cls


def _is_traced(x):
    return hasattr(x, "tracer") and hasattr(x, "expr")


def _run(name, op, tensors, consts=()):
    """Op `name` on runtime tensors: checks, then its Function; NumPy's LinAlgError (raised by
    the generated module with torch's message) re-raised as symgrad.linalg.LinAlgError."""
    import numpy

    from . import tensor as _tm

    values = []
    for t in tensors:
        t = t if isinstance(t, _tm.Tensor) else _tm.tensor(t)
        if t._data.dtype.kind not in "f":
            raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. "
                               f"Got {_tm._sg_dtype(t._data.dtype)}")
        values.append(t)
    try:
        return _function(name).apply(*values, *consts)
    except numpy.linalg.LinAlgError as exc:
        raise LinAlgError(str(exc)) from None


def _traced(*values):
    return any(_is_traced(v) for v in values)


def solve(A, B, *, left=True):
    """torch.linalg.solve: X with A X = B (X A = B if not left); B a (batch of) vector(s) or
    matrices; batch dims broadcast."""
    if _traced(A, B):
        from . import _linalg_trace as T
        return T.solve(A, B, left=left)
    return _run("solve", "linalg.solve", (A, B), (bool(left),))


def solve_ex(A, B, *, left=True, check_errors=False):
    """torch.linalg.solve_ex: (result, info); info is 0 (a singular A raises)."""
    x = solve(A, B, left=left)
    return x, _zeros_info(A)


def _zeros_info(A):
    from . import tensor as _tm

    return _tm.zeros(tuple(A.shape[:-2]), dtype=_tm.int32 if hasattr(_tm, "int32") else None)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """torch.linalg.solve_triangular: only the upper (lower) triangle of A is read."""
    if _traced(A, B):
        from . import _linalg_trace as T
        return T.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    return _run("solve_triangular", "linalg.solve_triangular", (A, B),
                (bool(upper), bool(left), bool(unitriangular)))


def cholesky(A, *, upper=False):
    """torch.linalg.cholesky: L with A = L L^T (its lower triangle is read)."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.cholesky(A, upper=upper)
    return _run("cholesky", "linalg.cholesky", (A,), (bool(upper),))


def cholesky_ex(A, *, upper=False, check_errors=False):
    """torch.linalg.cholesky_ex: (L, info); a non-positive-definite A raises."""
    return cholesky(A, upper=upper), _zeros_info(A)


def cholesky_solve(B, L, upper=False):
    """torch.cholesky_solve(B, L, upper=False): X with (L L^T) X = B."""
    if _traced(B, L):
        from . import _linalg_trace as T
        return T.cholesky_solve(B, L, upper)
    return _run("cholesky_solve", "cholesky_solve", (B, L), (bool(upper),))


def inv(A):
    """torch.linalg.inv."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.inv(A)
    return _run("inv", "linalg.inv", (A,))


def inv_ex(A, *, check_errors=False):
    return inv(A), _zeros_info(A)


def det(A):
    """torch.linalg.det."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.det(A)
    return _run("det", "linalg.det", (A,))


def _named(kind, values):
    return globals()[kind](*values)


def slogdet(A):
    """torch.linalg.slogdet: (sign, logabsdet)."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.slogdet(A)
    return _named("SlogdetResult", _run("slogdet", "linalg.slogdet", (A,)))


def logdet(A):
    """torch.logdet: log det A; nan where det A < 0, -inf where it is 0."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.logdet(A)
    return _run("logdet", "logdet", (A,))


def eigh(A, UPLO="L"):
    """torch.linalg.eigh: (eigenvalues ascending, eigenvectors as columns)."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.eigh(A, UPLO)
    return _named("EighResult", _run("eigh", "linalg.eigh", (A,), (UPLO,)))


def eigvalsh(A, UPLO="L"):
    if _traced(A):
        from . import _linalg_trace as T
        return T.eigvalsh(A, UPLO)
    return _run("eigvalsh", "linalg.eigvalsh", (A,), (UPLO,))


def svd(A, full_matrices=True, *, driver=None):
    """torch.linalg.svd: (U, S, Vh)."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.svd(A, full_matrices)
    return _named("SvdResult", _run("svd", "linalg.svd", (A,), (bool(full_matrices),)))


def svdvals(A, *, driver=None):
    if _traced(A):
        from . import _linalg_trace as T
        return T.svdvals(A)
    return _run("svdvals", "linalg.svdvals", (A,))


def qr(A, mode="reduced"):
    """torch.linalg.qr: (Q, R) for mode 'reduced' or 'complete'."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.qr(A, mode)
    if mode not in ("reduced", "complete"):
        raise RuntimeError(f"linalg.qr: mode {mode!r} is not supported (use 'reduced' or "
                           "'complete')")
    return _named("QrResult", _run("qr", "linalg.qr", (A,), (mode,)))


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """torch.linalg.pinv of a full-rank matrix."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.pinv(A, atol=atol, rtol=rtol, hermitian=hermitian)
    if atol is not None or rtol is not None:
        raise NotImplementedError("linalg.pinv: atol / rtol are not supported: symgrad "
                                  "computes the pseudo-inverse of full-rank matrices")
    return _run("pinv", "linalg.pinv", (A,))


def lstsq(A, B, rcond=None, *, driver=None):
    """torch.linalg.lstsq of a full-rank A: (solution, residuals, rank, singular_values);
    only the solution is computed (the others are empty, as torch's default driver on CPU
    leaves residuals and singular values)."""
    if _traced(A, B):
        from . import _linalg_trace as T
        return T.lstsq(A, B, rcond, driver=driver)
    from . import tensor as _tm

    x = _run("lstsq", "linalg.lstsq", (A, B))
    empty = _tm.zeros((0,), dtype=x.dtype)
    rank = _tm.tensor(min(A.shape[-2:]))
    return LstsqResult(x, empty, rank, empty)


def matrix_power(A, n):
    """torch.linalg.matrix_power: repeated products (of inv(A) for n < 0)."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {tuple(A.shape[-2:])} matrices")
    if n == 0:
        return (A.diagonal(0, -2, -1) * 0 + 1).diag_embed()
    base = inv(A) if n < 0 else A
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def matrix_exp(A):
    """torch.linalg.matrix_exp: the matrix exponential (scaling and squaring, Pade 13)."""
    if _traced(A):
        from . import _linalg_trace as T
        return T.matrix_exp(A)
    return _run("matrix_exp", "linalg.matrix_exp", (A,))


def _spectral_norm(A, ord, dims, keepdim):
    """matrix_norm for ord 2 (largest singular value), -2 (smallest) and 'nuc' (their sum)."""
    n = A.ndim
    rows, cols = dims
    others = [d for d in range(n) if d not in (rows, cols)]
    moved = A if (rows, cols) == (n - 2, n - 1) else A.permute(*others, rows, cols)
    s = svdvals(moved)
    out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
    if keepdim:
        for d in sorted((rows, cols)):
            out = out.unsqueeze(d)
    return out


def cond(A, p=None):
    """torch.linalg.cond: sigma_max / sigma_min (p None or 2; -2 the inverse), else
    norm(A, p) * norm(inv(A), p)."""
    if p in (None, 2, -2):
        s = svdvals(A)
        big, small = s.amax(-1), s.amin(-1)
        return big / small if p in (None, 2) else small / big
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


_UNSUPPORTED = ("eig", "eigvals", "lu", "lu_factor", "lu_solve", "matrix_rank", "tensorinv",
                "tensorsolve", "householder_product", "ldl_factor", "ldl_solve")


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise AttributeError(f"symgrad.linalg.{name} is not supported (general eigen- and LU "
                             "decompositions, ranks and tensor solves); see "
                             "docs/linear-algebra.md for the supported torch.linalg functions")
    raise AttributeError(f"module 'symgrad.linalg' has no attribute {name!r}")


# torch.Tensor's methods of these ops, installed on Tensor and on the traced SymbolicTensor
_METHODS = {
    "inverse": lambda self: inv(self),
    "det": lambda self: det(self),
    "logdet": lambda self: logdet(self),
    "slogdet": lambda self: slogdet(self),
    "cholesky": lambda self, upper=False: cholesky(self, upper=upper),
    "cholesky_solve": lambda self, input2, upper=False: cholesky_solve(self, input2, upper),
    "cholesky_inverse": lambda self, upper=False: cholesky_solve(
        matrix_power(self, 0), self, upper),
    "matrix_exp": lambda self: matrix_exp(self),
    "matrix_power": lambda self, n: matrix_power(self, n),
    "pinverse": lambda self, rcond=1e-15: pinv(self),
}


def install(cls):
    """Add the methods above to `cls` where it has none of that name."""
    for name, fn in _METHODS.items():
        if name not in vars(cls):
            setattr(cls, name, fn)


def _install_tensor():
    from .tensor import Tensor

    install(Tensor)


_install_tensor()
_methods.register(install)   # the traced values' methods too (symgrad/_methods.py)
_methods.NAMESPACES["linalg"] = _sys.modules[__name__]
