"""torch.linalg over traced values: argument checks with torch's messages, torch's vector and
batch-broadcast rules, and the structural ops of `symgrad.ops.linalg`.

Two rewrites happen here, both because the user's forward says what the value is:

- `inv(S) @ B` and `B @ inv(S)` (the naive Gaussian log-density `x @ inv(S) @ x`) become
  solves (`SymbolicTensor.matmul` asks `matmul_rewrite`): one LU solve instead of an inverse
  and a product, backward-stable (Higham 2002, 14.1), and the adjoint is again a solve.
- `logdet(A)` / `slogdet(A)` of a matrix the forward has already factored with
  `cholesky(A)` is `2 * sum(log(diag(L)))` (the factor is reused; no LU), and `log(det(A))`
  is `logdet(A)` (`SymbolicTensor.log` asks `log_rewrite`), whose LU-based log-magnitude
  does not overflow where det does (det of a 1000 x 1000 matrix of 0.1 * identity is 1e-1000).
"""
from __future__ import annotations

from .errors import ShapeError, TraceError
from .ops import linalg as L
from .ops.linalg_results import EighResult, LstsqResult, QrResult, SlogdetResult, SvdResult
from ._trace_functions import full_like
from ._trace_shapes import broadcast_shapes

# Names of trace.py used below. trace.py imports this module (through _trace_reductions) before
# it defines them, so it binds them here once it has (trace._bind_moved_names).
_FROM_TRACE = ("SymbolicTensor", "_at", "user_site")
SymbolicTensor, _at, user_site = (None,) * len(_FROM_TRACE)


def _value(x, op, name, site):
    if not isinstance(x, SymbolicTensor):
        raise TraceError(f"{op}: argument {name!r} must be a tensor, got "
                         f"{type(x).__name__}{_at(site)}")
    if not isinstance(x.shape, tuple):
        raise TraceError(f"{op} needs known shapes, which a shape-generic trace does not have"
                         f"{_at(site)}; give example inputs: sg.compile(fn, *arrays)")
    if x.dtype != "float":
        raise TraceError(f"{op}: Expected a floating point tensor as input. Got "
                         f"{x.dtype}{_at(site)}")
    return x


def _matrix(x, op, site, name="A", square=True):
    x = _value(x, op, name, site)
    if len(x.shape) < 2:
        raise ShapeError(f"{op}: The input tensor {name} must have at least 2 dimensions."
                         f"{_at(site)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{op}: {name} must be batches of square matrices, but they are "
                         f"{x.shape[-2]} by {x.shape[-1]} matrices{_at(site)}")
    return x


def _broadcast_batch(a, b, op, site):
    """a (..., n, n) and b (..., n, k) expanded to one batch shape."""
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], op, site)
    if a.shape[:-2] != batch:
        a = a.expand(batch + a.shape[-2:])
    if b.shape[:-2] != batch:
        b = b.expand(batch + b.shape[-2:])
    return a, b


def _node(op, args, site, **attrs):
    tr = args[0].tracer
    return tr.structural(op, tuple(args), site=site, **attrs)


def _is_vector_rhs(a, b):
    """torch's rule: B is a (batch of) vector(s) if it is 1-D, or has one dim less than A
    and A's shape without its last dim."""
    return len(b.shape) == 1 or (len(b.shape) == len(a.shape) - 1
                                  and tuple(b.shape) == tuple(a.shape[:-1]))


# ----------------------------------------------------------------------------- solves
def solve(A, B, *, left=True):
    site = user_site()
    A = _matrix(A, "linalg.solve", site)
    B = _value(A.tracer.lift(B, site), "linalg.solve", "B", site)
    vector = _is_vector_rhs(A, B)
    if vector and not left:
        raise ShapeError(f"linalg.solve: Vector broadcasting of the left hand side is not "
                         f"supported for left=False. In this case linalg.solve is equivalent "
                         f"to B / A.squeeze(-1){_at(site)}")
    if vector:
        B = B.unsqueeze(-1)
    if len(B.shape) < 2:
        raise ShapeError(f"linalg.solve: The input tensor B must have at least 2 dimensions."
                         f"{_at(site)}")
    n = A.shape[-1]
    if not left:                       # X A = B  <=>  A^T X^T = B^T
        if B.shape[-1] != n:
            raise ShapeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                             f"XA = B ({B.shape[-2]}x{B.shape[-1]} and {n}x{n}){_at(site)}")
        return L.mT(solve(L.mT(A), L.mT(B)))
    if B.shape[-2] != n:
        raise ShapeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                         f"AX = B ({n}x{n} and {B.shape[-2]}x{B.shape[-1]}){_at(site)}")
    A, B = _broadcast_batch(A, B, "linalg.solve", site)
    X = _node("linalg_solve", (A, B), site)
    return X.squeeze(-1) if vector else X


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    site = user_site()
    op = "linalg.solve_triangular"
    A = _matrix(A, op, site)
    B = _matrix(A.tracer.lift(B, site), op, site, "B", square=False)
    n = A.shape[-1]
    if not left:
        if B.shape[-1] != n:
            raise ShapeError(f"{op}: Incompatible shapes of A and B for the equation XA = B "
                             f"({B.shape[-2]}x{B.shape[-1]} and {n}x{n}){_at(site)}")
        A, B = _broadcast_batch(A, B, op, site)
        X = _node("linalg_solve_triangular", (L.mT(A), L.mT(B)), site, upper=not upper,
                  unit=bool(unitriangular))
        return L.mT(X)
    if B.shape[-2] != n:
        raise ShapeError(f"{op}: Incompatible shapes of A and B for the equation AX = B "
                         f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]}){_at(site)}")
    A, B = _broadcast_batch(A, B, op, site)
    return _node("linalg_solve_triangular", (A, B), site, upper=bool(upper),
                 unit=bool(unitriangular))


def cholesky(A, *, upper=False):
    site = user_site()
    A = _matrix(A, "linalg.cholesky", site)
    lower = _node("linalg_cholesky", (A,), site)
    A.tracer.__dict__.setdefault("_linalg_cholesky", {})[id(A.tracer.materialize(A))] = lower
    return L.mT(lower) if upper else lower


def cholesky_solve(B, L_, upper=False):
    site = user_site()
    op = "cholesky_solve"
    L_ = _matrix(L_, op, site, "input2")
    B = _matrix(L_.tracer.lift(B, site), op, site, "input", square=False)
    n = L_.shape[-1]
    if B.shape[-2] != n:
        raise ShapeError(f"{op}: Incompatible matrix sizes for cholesky_solve: each A matrix "
                         f"is {n} by {n} but each b matrix is {B.shape[-2]} by "
                         f"{B.shape[-1]}{_at(site)}")
    lower = L.mT(L_) if upper else L_
    lower, B = _broadcast_batch(lower, B, op, site)
    return _node("linalg_cholesky_solve", (B, lower), site)


def inv(A):
    site = user_site()
    A = _matrix(A, "linalg.inv", site)
    return _node("linalg_inv", (A,), site)


def matmul_rewrite(a, b, site):
    """`inv(S) @ B` as solve(S, B) and `B @ inv(S)` as solve(S^T, B^T)^T (None: no rewrite)."""
    def inverted(v):
        node = v.node
        return node.args[0] if node is not None and node.op == "linalg_inv" else None

    if not (isinstance(a.shape, tuple) and isinstance(b.shape, tuple)):
        return None
    if a.dtype != "float" or b.dtype != "float":
        return None
    s = inverted(a)
    if s is not None and len(b.shape) >= 1 and b.shape[-2 if len(b.shape) > 1 else 0] == \
            s.shape[-1]:
        sv = _leaf(a, s)
        if len(b.shape) == 1:
            return _vector_solve(sv, b, site)
        bb, ss = b, sv
        batch = broadcast_shapes(ss.shape[:-2], bb.shape[:-2], "matmul", site)
        if ss.shape[:-2] != batch:
            ss = ss.expand(batch + ss.shape[-2:])
        if bb.shape[:-2] != batch:
            bb = bb.expand(batch + bb.shape[-2:])
        return _node("linalg_solve", (ss, bb), site)
    s = inverted(b)
    if s is not None and a.shape[-1] == s.shape[-2]:
        sv = _leaf(b, s)
        st = L.mT(sv)
        if len(a.shape) == 1:
            return _vector_solve(st, a, site)
        aa = L.mT(a)
        batch = broadcast_shapes(st.shape[:-2], aa.shape[:-2], "matmul", site)
        if st.shape[:-2] != batch:
            st = st.expand(batch + st.shape[-2:])
        if aa.shape[:-2] != batch:
            aa = aa.expand(batch + aa.shape[-2:])
        return L.mT(_node("linalg_solve", (st, aa), site))
    return None


def _leaf(value, node):
    return value.tracer._leaf_value(node)


def _vector_solve(s, v, site):
    """solve(s, v) for a 1-D v and s (..., n, n): (..., n)."""
    rhs = v.unsqueeze(-1)
    batch = s.shape[:-2]
    if batch:
        rhs = rhs.expand(batch + rhs.shape)
    return _node("linalg_solve", (s, rhs), site).squeeze(-1)


# ----------------------------------------------------------------------------- determinants
def det(A):
    site = user_site()
    A = _matrix(A, "linalg.det", site)
    return _node("linalg_det", (A,), site)


def _cholesky_of(A):
    table = A.tracer.__dict__.get("_linalg_cholesky", {})
    return table.get(id(A.tracer.materialize(A)))


def slogdet(A):
    site = user_site()
    A = _matrix(A, "linalg.slogdet", site)
    lower = _cholesky_of(A)
    if lower is not None:   # the forward factored A: it is positive definite (or raised)
        logabs = 2.0 * lower.diagonal(0, -2, -1).log().sum(-1)
        return SlogdetResult(full_like(logabs, 1.0), logabs)
    packed = _node("linalg_slogdet", (A,), site)
    lead = (slice(None),) * (len(A.shape) - 2)
    return SlogdetResult(packed[lead + (0,)].detach(), packed[lead + (1,)])


def logdet(A):
    """torch.logdet: log(det(A)); nan where det(A) < 0, -inf where it is 0."""
    site = user_site()
    A = _matrix(A, "logdet", site)
    if _cholesky_of(A) is not None:    # the Cholesky form: the sign is 1
        return slogdet(A).logabsdet
    sign, logabs = slogdet(A)
    return logabs + sign.log()     # log(-1): nan where det < 0 (as torch), log(0) = -inf


def log_rewrite(value):
    """log(det(A)) as logdet(A); None when `value` is no determinant."""
    node = value.node
    if node is None or node.op != "linalg_det":
        return None
    return logdet(_leaf(value, node.args[0]))


# ----------------------------------------------------------------------------- spectra
def _uplo(UPLO, op, site):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"{op}: Expected UPLO argument to be 'L' or 'U', but got "
                           f"{UPLO}{_at(site)}")
    return UPLO == "U"


def eigh(A, UPLO="L"):
    site = user_site()
    A = _matrix(A, "linalg.eigh", site)
    upper = _uplo(UPLO, "linalg.eigh", site)
    return EighResult(_node("linalg_eigvalsh", (A,), site, upper=upper),
                      _node("linalg_eigh_vecs", (A,), site, upper=upper))


def eigvalsh(A, UPLO="L"):
    site = user_site()
    A = _matrix(A, "linalg.eigvalsh", site)
    return _node("linalg_eigvalsh", (A,), site, upper=_uplo(UPLO, "linalg.eigvalsh", site))


def svd(A, full_matrices=True, *, driver=None):
    site = user_site()
    A = _matrix(A, "linalg.svd", site, square=False)
    full = bool(full_matrices)
    return SvdResult(_node("linalg_svd_u", (A,), site, full=full),
                     _node("linalg_svdvals", (A,), site),
                     _node("linalg_svd_vh", (A,), site, full=full))


def svdvals(A, *, driver=None):
    site = user_site()
    A = _matrix(A, "linalg.svdvals", site, square=False)
    return _node("linalg_svdvals", (A,), site)


def qr(A, mode="reduced"):
    site = user_site()
    A = _matrix(A, "linalg.qr", site, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'{_at(site)}")
    if mode == "r":
        raise TraceError(f"linalg.qr: mode='r' (an empty Q) is not supported in a traced "
                         f"forward; use mode='reduced' and take R{_at(site)}")
    return QrResult(_node("linalg_qr_q", (A,), site, mode=mode),
                    _node("linalg_qr_r", (A,), site, mode=mode))


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    site = user_site()
    A = _matrix(A, "linalg.pinv", site, square=False)
    if atol is not None or rtol is not None:
        raise NotImplementedError(f"linalg.pinv: atol / rtol are not supported: symgrad "
                                  f"computes the pseudo-inverse of full-rank matrices (NumPy's "
                                  f"default cut-off, max(m, n) * eps){_at(site)}")
    return _node("linalg_pinv", (A,), site)


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of a full-rank A, as pinv(A) @ B (torch's backward is
    pinv's too); residuals, rank and singular_values are not computed (None)."""
    site = user_site()
    A = _matrix(A, "linalg.lstsq", site, square=False)
    B = _value(A.tracer.lift(B, site), "linalg.lstsq", "B", site)
    vector = len(B.shape) == len(A.shape) - 1
    rhs = B.unsqueeze(-1) if vector else B
    if len(rhs.shape) < 2 or rhs.shape[-2] != A.shape[-2]:
        raise ShapeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2)"
                         f"{_at(site)}")
    x = _node("linalg_pinv", (A,), site).matmul(rhs)
    return LstsqResult(x.squeeze(-1) if vector else x, None, None, None)


def matrix_exp(A):
    site = user_site()
    A = _matrix(A, "linalg.matrix_exp", site)
    return _node("linalg_matrix_exp", (A,), site)


