"""Linear-algebra ops: solves, factorizations, determinants, spectra, as structural ops.

Each op is one LAPACK-backed call in the generated code (NumPy: `numpy.linalg` through the
helpers below, pasted into the module so it stays standalone; C: the same NumPy calls in the
loader, between the fused loops, as large matmuls are; CUDA: the helpers with `numpy.` spelled
`cupy.`). Each adjoint is written with ops of the IR (matmul, transposes, triangles, diagonals
and these ops again), so a backward is again a graph of the same kinds and every derivative
order follows. Rules, with their sources:

- solve (Giles 2008, 2.3.1): X = A^-1 B; gB = solve(A^T, g), gA = -gB X^T.
- solve_triangular: the same on the triangle that is read (tril / triu of gA).
- cholesky (Murray 2016; torch's cholesky_backward): P = tril(L^T gL), S = (P + tril(P,-1)^T)/2,
  gA = L^-T S L^-1 as two triangular solves.
- cholesky_solve: torch's rule, gB = cholesky_solve(g, L), gL = -(gB X^T + X gB^T) L.
- inv: gA = -X^T g X^T (X = A^-1 is the forward's own value).
- det / slogdet (Giles 2008, 2.2.4): gA = g det A^-T, g A^-T, with A^-T as solve(A^T, I).
- eigh (Seeger et al. 2017; torch's linalg_eig_backward for Hermitian input):
  gA = V (diag(gL) + F o skew(V^T gV) / 2) V^T, F_ij = 1 / (l_j - l_i).
- svd (torch's svd_backward; Townsend 2016): per U and Vh, with F on the squared singular
  values and the m != n corrections.
- qr (Walter & Lehmann 2018; torch's linalg_qr_backward): gA = (gQ + Q copyltu(M)) R^-T,
  M = R gR^T - gQ^T Q; a wide input splits as A = [X | Y].
- pinv (Golub & Pereyra 1973; torch's pinv_backward), full rank.
- matrix_exp (Najfeld & Havel 1995; torch): the adjoint is the upper-right block of
  exp([[A^T, G], [0, A^T]]).

Repeated eigenvalues (singular values) make F infinite: `linalg_gap_inverse` warns when that
happens, naming the op, instead of handing back a silent inf or nan.
"""
from __future__ import annotations

from .structural_base import Structural, register

# ----------------------------------------------------------------------------- helpers
# Pasted into generated modules that call them (symgrad.emit.helpers merges this table).
# Each batches over leading dims, raises numpy.linalg.LinAlgError with torch's message for a
# singular or non-positive-definite input, and names torch's op.
LINALG_HELPERS: dict[str, str] = {
    "_linalg_error": '''\
def _linalg_error(op, problem, _error=__import__("numpy").linalg.LinAlgError):
    """numpy.linalg.LinAlgError with torch's wording (the runtime re-raises it as
    symgrad.linalg.LinAlgError, a RuntimeError as torch's). CuPy raises NumPy's class too."""
    return _error(f"{op}: {problem}")
''',
    "_linalg_solve": '''\
def _linalg_solve(a, b, _LinAlgError=__import__("numpy").linalg.LinAlgError):
    """X with a @ X = b: a (..., n, n), b (..., n, k) of the same batch shape."""
    try:
        return numpy.linalg.solve(a, b)
    except _LinAlgError:
        raise _linalg_error("linalg.solve", "The solver failed because the input matrix "
                            "is singular.") from None
''',
    "_triangular_solver": '''\
def _triangular_solver(_found=[]):
    """scipy.linalg.solve_triangular (LAPACK trtrs: O(n^2 k), where an LU solve costs
    O(n^3)) when SciPy is installed, else None: the module itself needs only NumPy."""
    if not _found:
        try:
            from scipy.linalg import solve_triangular
        except ImportError:
            solve_triangular = None
        _found.append(solve_triangular)
    return _found[0]
''',
    "_solve_triangular": '''\
def _solve_triangular(a, b, upper, unit, _LinAlgError=__import__("numpy").linalg.LinAlgError,
                      _ndarray=__import__("numpy").ndarray):
    """X with T @ X = b, T the lower (upper) triangle of a, its diagonal ones if `unit`;
    a (..., n, n) and b (..., n, k) of one batch shape."""
    solver = _triangular_solver() if type(a) is _ndarray and type(b) is _ndarray else None
    try:
        if solver is not None:
            n, k = b.shape[-2:]
            aa = a.reshape((-1, n, n))
            bb = b.reshape((-1, n, k))
            out = numpy.empty(bb.shape, numpy.result_type(a, b))
            for i in range(bb.shape[0]):
                out[i] = solver(aa[i], bb[i], lower=not upper, unit_diagonal=unit,
                                check_finite=False)
            return out.reshape(b.shape)
        t = numpy.triu(a) if upper else numpy.tril(a)
        if unit:
            n = numpy.shape(a)[-1]
            t = t * (1 - numpy.eye(n, dtype=t.dtype)) + numpy.eye(n, dtype=t.dtype)
        return numpy.linalg.solve(t, b)
    except _LinAlgError:
        raise _linalg_error("linalg.solve_triangular", "The solver failed because the "
                            "input triangular matrix is singular.") from None
''',
    "_cholesky": '''\
def _cholesky(a, _LinAlgError=__import__("numpy").linalg.LinAlgError):
    """The lower Cholesky factor of the symmetric positive-definite a (its lower triangle
    is read)."""
    try:
        return numpy.linalg.cholesky(a)
    except _LinAlgError:
        raise _linalg_error("linalg.cholesky", "The factorization could not be completed "
                            "because the input is not positive-definite.") from None
''',
    "_cholesky_solve": '''\
def _cholesky_solve(b, l):
    """X with (l @ l^T) @ X = b, l lower triangular: two triangular solves."""
    y = _solve_triangular(l, b, False, False)
    return _solve_triangular(numpy.swapaxes(l, -1, -2), y, True, False)
''',
    "_linalg_inv": '''\
def _linalg_inv(a, _LinAlgError=__import__("numpy").linalg.LinAlgError):
    try:
        return numpy.linalg.inv(a)
    except _LinAlgError:
        raise _linalg_error("linalg.inv", "The diagonal element 1 is zero, the inversion "
                            "could not be completed because the input matrix is "
                            "singular.") from None
''',
    "_inv_t": '''\
def _inv_t(a, _LinAlgError=__import__("numpy").linalg.LinAlgError):
    """a^-T, as the solve a^T X = I (for the adjoints of det and slogdet)."""
    n = numpy.shape(a)[-1]
    eye = numpy.broadcast_to(numpy.eye(n, dtype=a.dtype), numpy.shape(a))
    try:
        return numpy.linalg.solve(numpy.swapaxes(a, -1, -2), eye)
    except _LinAlgError:
        raise _linalg_error("linalg.slogdet", "the gradient at a singular matrix is not "
                            "defined (the solve with A^T failed); for det, its second "
                            "derivative at a singular matrix is not computed") from None
''',
    "_cofactor": '''\
def _cofactor(a, _LinAlgError=__import__("numpy").linalg.LinAlgError):
    """The cofactor matrix det(a) a^-T (the gradient of det), also at singular matrices: by
    the solve a^T X = I, or where that fails, from the SVD a = U S Vh as
    det(U) det(Vh) U diag(prod_{j != i} s_j) Vh (as torch)."""
    n = numpy.shape(a)[-1]
    d = numpy.linalg.det(a)
    if numpy.all(d != 0):
        try:
            eye = numpy.broadcast_to(numpy.eye(n, dtype=a.dtype), numpy.shape(a))
            return numpy.expand_dims(d, (-1, -2)) * numpy.linalg.solve(
                numpy.swapaxes(a, -1, -2), eye)
        except _LinAlgError:
            pass
    u, s, vh = numpy.linalg.svd(a)
    others = numpy.stack([numpy.prod(numpy.delete(s, i, axis=-1), axis=-1)
                          for i in range(n)], axis=-1) if n else s
    sign = numpy.linalg.det(u) * numpy.linalg.det(vh)
    return numpy.expand_dims(sign, (-1, -2)) * ((u * numpy.expand_dims(others, -2)) @ vh)
''',
    "_eigh": '''\
def _eigh(a, upper, want):
    """numpy.linalg.eigh of the lower (upper) triangle: eigenvalues (want 0, ascending) or
    eigenvectors (want 1, columns)."""
    uplo = "U" if upper else "L"
    if want == 0:
        return numpy.linalg.eigvalsh(a, UPLO=uplo)
    return numpy.linalg.eigh(a, UPLO=uplo)[1]
''',
    "_memo": '''\
def _memo(key, a, compute, _last={}):
    """compute(a), reused when the previous call for `key` had this very array with the same
    values: U and Vh of one SVD, the sign and log-magnitude of one LU, one factorization."""
    hit = _last.get(key)
    if hit is not None and hit[0] is a and numpy.array_equal(hit[1], a):
        return hit[2]
    out = compute(a)
    _last[key] = (a, a.copy(), out)
    return out
''',
    "_svd": '''\
def _svd(a, full, want):
    """numpy.linalg.svd: U (want 0), S (1) or Vh (2)."""
    if want == 1:
        return numpy.linalg.svd(a, compute_uv=False)
    return _memo(("svd", full), a, lambda m: numpy.linalg.svd(m, full_matrices=full))[want]
''',
    "_slogdet": '''\
def _slogdet(a):
    """numpy.linalg.slogdet as one array: [..., 0] the sign, [..., 1] log|det|."""
    sign, logabs = numpy.linalg.slogdet(a)
    return numpy.stack((sign, logabs), axis=-1)
''',
    "_qr": '''\
def _qr(a, mode, want):
    """numpy.linalg.qr: Q (want 0) or R (1)."""
    return numpy.linalg.qr(a, mode=mode)[want]
''',
    "_gap_inverse": '''\
def _gap_inverse(x, op, zeros=False):
    """F[..., i, j] = 1 / (x_j - x_i) off the diagonal, 0 on it; warns where two values
    are equal (the gradient is then not defined: inf, as torch gives), and with `zeros`
    where one is 0 (a zero singular value of a non-square matrix divides the gradient)."""
    import warnings
    if zeros and numpy.any(x == 0):
        warnings.warn(f"{op}: a zero singular value of a non-square matrix; the gradient of "
                      "the singular vectors is not defined there and is inf or nan (as "
                      "torch's)", RuntimeWarning, stacklevel=2)
    d = numpy.expand_dims(x, -2) - numpy.expand_dims(x, -1)
    n = numpy.shape(x)[-1]
    off = ~numpy.eye(n, dtype=bool)
    if numpy.any((d == 0) & off):
        warnings.warn(f"{op}: repeated values (eigenvalues or singular values); the gradient "
                      "of the vectors is not defined there and is inf or nan (as torch's)",
                      RuntimeWarning, stacklevel=2)
    return numpy.where(off, 1 / numpy.where(off, d, 1), 0).astype(x.dtype)
''',
    "_matrix_exp": '''\
def _matrix_exp(a):
    """exp(a) of each matrix: scaling and squaring with the [13/13] Pade approximant
    (Higham 2005), batched over leading dims."""
    n = numpy.shape(a)[-1]
    if n == 0 or numpy.size(a) == 0:
        return a.copy()
    dt = a.dtype
    work = a.astype(numpy.float64)
    norm1 = numpy.max(numpy.sum(numpy.abs(work), axis=-2), axis=-1)   # CuPy: no initial=
    top = float(numpy.max(norm1)) if numpy.size(norm1) else 0.0
    s = 0 if top <= 5.371920351148152 else int(numpy.ceil(numpy.log2(top / 5.371920351148152)))
    work = work / (2.0 ** s)
    b = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.)
    eye = numpy.broadcast_to(numpy.eye(n), numpy.shape(work))
    a2 = work @ work
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = work @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
                + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \\
        + b[0] * eye
    r = numpy.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r.astype(dt)
''',
    "_linalg_refuse": '''\
def _linalg_refuse(g, what):
    raise RuntimeError(what)
''',
    "_linalg_pinv": '''\
def _linalg_pinv(a):
    return numpy.linalg.pinv(a)
''',
}
LINALG_DEPENDS = {name: ("_linalg_error",) for name in (
    "_linalg_solve", "_solve_triangular", "_cholesky", "_linalg_inv", "_inv_t")}
LINALG_DEPENDS["_solve_triangular"] += ("_triangular_solver",)
LINALG_DEPENDS["_cholesky_solve"] = ("_solve_triangular", "_triangular_solver",
                                     "_linalg_error")
LINALG_DEPENDS.update({"_svd": ("_memo",)})


# ----------------------------------------------------------------------------- IR helpers
def mT(x):
    """The transpose of the last two dims, as a permute (static shapes)."""
    n = len(x.shape)
    if n < 2:
        return x
    return x.tracer.structural("permute", (x,), dims=tuple(range(n - 2)) + (n - 1, n - 2))


def mm(a, b):
    return a.tracer.structural("matmul", (a, b))


def solve(a, b):
    return a.tracer.structural("linalg_solve", (a, b))


def solve_tri(a, b, upper, unit=False):
    return a.tracer.structural("linalg_solve_triangular", (a, b), upper=bool(upper),
                               unit=bool(unit))


def right_solve_tri(x, r, upper, unit=False):
    """x @ r^-1 for the triangular r: (r^-T x^T)^T."""
    return mT(solve_tri(mT(r), mT(x), not upper, unit))


def tri(x, upper, k=0):
    return x.triu(k) if upper else x.tril(k)


def col(v):
    """(..., n) -> (..., n, 1)."""
    return v.unsqueeze(-1)


def row(v):
    """(..., n) -> (..., 1, n)."""
    return v.unsqueeze(-2)


def scale_matrix(s, m):
    """s (batch) times each matrix of m (batch, n, n)."""
    return col(col(s)) * m


class LinalgOp(Structural):
    """Base: static shapes only (a linalg op needs its matrix sizes when it is traced)."""

    cost = 200     # optimize.step_cost: a factorization is worth saving, not recomputing
    helper = ""

    @classmethod
    def numpy(cls, node, a, p):
        extra = "".join(f", {p.param(node, k)}" for k in cls.params)
        return f"{cls.helper}({', '.join(a)}{extra})"

    params: tuple[str, ...] = ()


@register
class Solve(LinalgOp):
    op = "linalg_solve"
    helper = "_linalg_solve"

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def vjp(node, g, args):
        a, b = args
        x = g.tracer.value_of(node)
        gb = solve(mT(a), g)
        return [-mm(gb, mT(x)), gb]


@register
class SolveTriangular(LinalgOp):
    op = "linalg_solve_triangular"
    helper = "_solve_triangular"
    params = ("upper", "unit")

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def vjp(node, g, args):
        a, b = args
        upper, unit = node.attr("upper"), node.attr("unit")
        x = g.tracer.value_of(node)
        gb = solve_tri(mT(a), g, not upper, unit)
        ga = tri(-mm(gb, mT(x)), upper, (1 if upper else -1) if unit else 0)
        return [ga, gb]


@register
class Cholesky(LinalgOp):
    op = "linalg_cholesky"
    helper = "_cholesky"

    @staticmethod
    def vjp(node, g, args):
        l = g.tracer.value_of(node)
        p = mm(mT(l), g).tril()
        s = 0.5 * (p + mT(p.tril(-1)))
        y = solve_tri(mT(l), s, upper=True)            # L^-T S
        return [right_solve_tri(y, l, upper=False)]     # L^-T S L^-1


@register
class CholeskySolve(LinalgOp):
    op = "linalg_cholesky_solve"
    helper = "_cholesky_solve"

    @staticmethod
    def vjp(node, g, args):
        b, l = args
        x = g.tracer.value_of(node)
        gb = g.tracer.structural("linalg_cholesky_solve", (g, l))
        c = mm(gb, mT(x))
        return [gb, -mm(c + mT(c), l)]


@register
class Inv(LinalgOp):
    op = "linalg_inv"
    helper = "_linalg_inv"

    @staticmethod
    def vjp(node, g, args):
        xt = mT(g.tracer.value_of(node))
        return [-mm(mm(xt, g), xt)]


@register
class InvT(LinalgOp):
    """A^-T through the solve A^T X = I (the adjoints of det and slogdet)."""

    op = "linalg_inv_t"
    helper = "_inv_t"

    @staticmethod
    def vjp(node, g, args):
        # Y = A^-T: dY = -A^-T dA^T A^-T, so gA = -(Y^T g Y^T)^T = -Y g^T Y
        y = g.tracer.value_of(node)
        return [-mm(mm(y, mT(g)), y)]


@register
class Det(LinalgOp):
    op = "linalg_det"
    helper = "numpy.linalg.det"

    @staticmethod
    def shape(shapes, attrs):
        return shapes[0][:-2]

    @staticmethod
    def vjp(node, g, args):
        a, = args
        return [scale_matrix(g, g.tracer.structural("linalg_cofactor", (a,)))]


@register
class Cofactor(LinalgOp):
    """det(A) A^-T, defined (and computed) at singular A too: the adjoint of det."""

    op = "linalg_cofactor"
    helper = "_cofactor"

    @staticmethod
    def vjp(node, g, args):
        # d cof = <Y, dA> cof - cof dA^T Y with Y = A^-T: gA = <G, Y> cof - cof G^T Y
        # (at a singular A the solve for Y raises: the second derivative needs A invertible)
        a, = args
        c = g.tracer.value_of(node)
        y = g.tracer.structural("linalg_inv_t", (a,))
        inner = (g * y).sum((-2, -1))
        return [scale_matrix(inner, c) - mm(mm(c, mT(g)), y)]


@register
class Slogdet(Det):
    """(sign, log|det|) packed in a last dim of 2, from one LU; the sign carries no
    gradient."""

    op = "linalg_slogdet"

    @staticmethod
    def shape(shapes, attrs):
        return shapes[0][:-2] + (2,)

    @staticmethod
    def numpy(node, a, p):
        return f"_slogdet({a[0]})"

    @staticmethod
    def vjp(node, g, args):
        a, = args
        logabs = g[(slice(None),) * (len(g.shape) - 1) + (1,)]
        return [scale_matrix(logabs, g.tracer.structural("linalg_inv_t", (a,)))]


@register
class Eigvalsh(LinalgOp):
    op = "linalg_eigvalsh"
    helper = "_eigh"
    params = ("upper",)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[0][:-1]

    @staticmethod
    def numpy(node, a, p):
        return f"_eigh({a[0]}, {p.param(node, 'upper')}, 0)"

    @staticmethod
    def vjp(node, g, args):
        a, = args
        v = g.tracer.structural("linalg_eigh_vecs", (a,), upper=node.attr("upper"))
        return [mm(v * row(g), mT(v))]


@register
class EighVecs(LinalgOp):
    op = "linalg_eigh_vecs"

    @staticmethod
    def numpy(node, a, p):
        return f"_eigh({a[0]}, {p.param(node, 'upper')}, 1)"

    @staticmethod
    def vjp(node, g, args):
        a, = args
        tr = g.tracer
        v = tr.value_of(node)
        lam = tr.structural("linalg_eigvalsh", (a,), upper=node.attr("upper"))
        f = tr.structural("linalg_gap_inverse", (lam,), what="linalg.eigh", zeros=False)
        vg = mm(mT(v), g)
        inner = 0.5 * (vg - mT(vg)) * f
        return [mm(mm(v, inner), mT(v))]


@register
class GapInverse(LinalgOp):
    """F[..., i, j] = 1 / (x_j - x_i), 0 on the diagonal; warns on repeated values."""

    op = "linalg_gap_inverse"
    cost = 3

    @staticmethod
    def shape(shapes, attrs):
        return shapes[0] + shapes[0][-1:]

    @staticmethod
    def numpy(node, a, p):
        zeros = ", True" if node.attr("zeros") else ""
        return f"_gap_inverse({a[0]}, {p.param(node, 'what')}{zeros})"

    @staticmethod
    def vjp(node, g, args):
        f = g.tracer.value_of(node)
        h = g * f * f
        return [h.sum(-1) - h.sum(-2)]


def _svd_parts(a, full):
    """(U, S, Vh) reduced, from the forward's values where they are the reduced ones."""
    tr = a.tracer
    u = tr.structural("linalg_svd_u", (a,), full=False)
    s = tr.structural("linalg_svdvals", (a,))
    vh = tr.structural("linalg_svd_vh", (a,), full=False)
    return u, s, vh


def _svd_shape(shape, attrs, which):
    m, n = shape[-2:]
    k = min(m, n)
    full = attrs.get("full")
    if which == "u":
        return shape[:-1] + ((m if full else k),)
    if which == "vh":
        return shape[:-2] + ((n if full else k), n)
    return shape[:-2] + (k,)


@register
class Svdvals(LinalgOp):
    op = "linalg_svdvals"

    @staticmethod
    def shape(shapes, attrs):
        return _svd_shape(shapes[0], attrs, "s")

    @staticmethod
    def numpy(node, a, p):
        return f"_svd({a[0]}, False, 1)"

    @staticmethod
    def vjp(node, g, args):
        a, = args
        u, _, vh = _svd_parts(a, False)
        return [mm(u * row(g), vh)]


def _cols(x, start, stop=None):
    """x[..., :, start:stop] of a traced value."""
    return x[(slice(None),) * (len(x.shape) - 1) + (slice(start, stop),)]


def _rows(x, start, stop=None):
    """x[..., start:stop, :] of a traced value."""
    return x[(slice(None),) * (len(x.shape) - 2) + (slice(start, stop), slice(None))]


@register
class SvdU(LinalgOp):
    op = "linalg_svd_u"

    @staticmethod
    def shape(shapes, attrs):
        return _svd_shape(shapes[0], attrs, "u")

    @staticmethod
    def numpy(node, a, p):
        return f"_svd({a[0]}, {p.param(node, 'full')}, 0)"

    @staticmethod
    def vjp(node, g, args):
        a, = args
        tr = g.tracer
        m, n = a.shape[-2:]
        k = min(m, n)
        if node.attr("full") and m > k:
            g = _cols(g, 0, k)
        u, s, vh = _svd_parts(a, False)
        f = tr.structural("linalg_gap_inverse", (s * s,), what="linalg.svd", zeros=m > n)
        ug = mm(mT(u), g)
        inner = (ug - mT(ug)) * f * row(s)
        ga = mm(u, inner)
        if m > n:
            gs = g / row(s)
            ga = ga + gs - mm(u, mm(mT(u), gs))
        return [mm(ga, vh)]


@register
class SvdVh(LinalgOp):
    op = "linalg_svd_vh"

    @staticmethod
    def shape(shapes, attrs):
        return _svd_shape(shapes[0], attrs, "vh")

    @staticmethod
    def numpy(node, a, p):
        return f"_svd({a[0]}, {p.param(node, 'full')}, 2)"

    @staticmethod
    def vjp(node, g, args):
        a, = args
        tr = g.tracer
        m, n = a.shape[-2:]
        k = min(m, n)
        if node.attr("full") and n > k:
            g = _rows(g, 0, k)
        u, s, vh = _svd_parts(a, False)
        f = tr.structural("linalg_gap_inverse", (s * s,), what="linalg.svd", zeros=m < n)
        vg = mm(vh, mT(g))
        inner = col(s) * ((vg - mT(vg)) * f)
        ga = mm(inner, vh)
        if m < n:
            gs = g / col(s)
            ga = ga + gs - mm(mm(gs, mT(vh)), vh)
        return [mm(u, ga)]


def _copyltu(m):
    return m.tril() + mT(m.tril(-1))


def _qr_square_grad(gq, gr, q, r):
    """gA of A = QR (m >= n, reduced): (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q.
    gq / gr may be None (no adjoint)."""
    parts = []
    if gr is not None:
        parts.append(mm(r, mT(gr)))
    if gq is not None:
        parts.append(-mm(mT(gq), q))
    m = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    b = mm(q, _copyltu(m))
    if gq is not None:
        b = gq + b
    return mT(solve_tri(r, mT(b), upper=True))      # b R^-T


def _qr_grad(node, gq, gr, a):
    tr = a.tracer
    mode = node.attr("mode")
    m, n = a.shape[-2:]
    q = tr.structural("linalg_qr_q", (a,), mode=mode)
    r = tr.structural("linalg_qr_r", (a,), mode=mode)
    if m >= n:
        if mode == "complete" and m > n:   # raised when the backward runs, as torch
            return tr.structural("linalg_refuse", (gq if gq is not None else gr, a),
                                 what="linalg.qr: The derivative of linalg.qr depends on Q, "
                                 "which is not computed when mode='r' or mode='complete' "
                                 "and nrows > ncols.")
        return _qr_square_grad(gq, gr, q, r)
    # wide: A = [X | Y], R = [U | V], X = Q U, V = Q^T Y
    y = _cols(a, m)
    u = _cols(r, 0, m)
    gu = _cols(gr, 0, m) if gr is not None else None
    gv = _cols(gr, m) if gr is not None else None
    if gv is not None:
        extra = mm(y, mT(gv))
        gq = extra if gq is None else gq + extra
    gx = _qr_square_grad(gq, gu, q, u)
    gy = mm(q, gv) if gv is not None else tr.structural("zeros_like", (y,))
    return tr.structural("cat", (gx, gy), dim=len(a.shape) - 1)


@register
class Refuse(Structural):
    """An adjoint that is not defined: raises RuntimeError (its message `what`) when the
    backward runs, as torch's backward does (the forward still runs)."""

    op = "linalg_refuse"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return f"_linalg_refuse({a[0]}, {p.param(node, 'what')})"

    @staticmethod
    def vjp(node, g, args):
        return [None, None]


@register
class QrQ(LinalgOp):
    op = "linalg_qr_q"

    @staticmethod
    def shape(shapes, attrs):
        m, n = shapes[0][-2:]
        k = m if attrs["mode"] == "complete" else min(m, n)
        return shapes[0][:-1] + (k,)

    @staticmethod
    def numpy(node, a, p):
        return f"_qr({a[0]}, {p.param(node, 'mode')}, 0)"

    @staticmethod
    def vjp(node, g, args):
        return [_qr_grad(node, g, None, args[0])]


@register
class QrR(LinalgOp):
    op = "linalg_qr_r"

    @staticmethod
    def shape(shapes, attrs):
        m, n = shapes[0][-2:]
        k = m if attrs["mode"] == "complete" else min(m, n)
        return shapes[0][:-2] + (k, n)

    @staticmethod
    def numpy(node, a, p):
        return f"_qr({a[0]}, {p.param(node, 'mode')}, 1)"

    @staticmethod
    def vjp(node, g, args):
        return [_qr_grad(node, None, g, args[0])]


@register
class Pinv(LinalgOp):
    """Moore-Penrose inverse of a full-rank matrix; torch's pinv_backward."""

    op = "linalg_pinv"
    helper = "_linalg_pinv"

    @staticmethod
    def shape(shapes, attrs):
        return shapes[0][:-2] + (shapes[0][-1], shapes[0][-2])

    @staticmethod
    def vjp(node, g, args):
        a, = args
        p = g.tracer.value_of(node)
        m, n = a.shape[-2:]
        ph, gh = mT(p), mT(g)
        if m <= n:
            k = mm(gh, p)
            kph = mm(k, ph)
            out = -mT(mm(p, k)) + kph - mm(mm(a, p), kph) + mm(mm(ph, p), gh - mm(k, a))
        else:
            k = mm(p, gh)
            phk = mm(ph, k)
            out = -mT(mm(k, p)) + mm(mm(gh - mm(a, k), p), ph) + phk - mm(mm(phk, p), a)
        return [out]


@register
class MatrixExp(LinalgOp):
    op = "linalg_matrix_exp"
    helper = "_matrix_exp"

    @staticmethod
    def vjp(node, g, args):
        a, = args
        tr = g.tracer
        n = a.shape[-1]
        at = mT(a)
        zero = tr.structural("zeros_like", (a,))
        d = len(a.shape) - 1
        top = tr.structural("cat", (at, g), dim=d)
        bottom = tr.structural("cat", (zero, at), dim=d)
        block = tr.structural("cat", (top, bottom), dim=d - 1)
        big = tr.structural("linalg_matrix_exp", (block,))
        return [_cols(_rows(big, 0, n), n)]
