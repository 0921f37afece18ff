"""The special functions' NumPy helpers (`symgrad.ops.specfun`): the source of each function a
generated NumPy module pastes in, added to the stable primitives' table `NUMPY_HELPERS` (with
the helpers each one calls in `_HELPER_DEPENDS`), in the order they are pasted."""
from __future__ import annotations

from .specfun_coefficients import (_LGAM_A, _LGAM_B, _LGAM_C, _LS2PI, _LGAM_NEAR, _PSI_A,
                                   _PSI_ROOT, _PSI_ROOT_SERIES, _ZETA_A, _ERFINV_A, _ERFINV_B,
                                   _ERFINV_C, _ERFINV_D, _I0_A, _I0_B, _I1_A, _I1_B, _PI,
                                   _TWO_OVER_SQRT_PI, _IGAM_D, _LGAM1P)
from .stable_numpy import _HELPER_DEPENDS, NUMPY_HELPERS


# ----------------------------------------------------------------------------- NumPy helpers
def _np_tuple(values) -> str:
    return "(" + ", ".join(repr(float(v)) for v in values) + ",)"


NUMPY_HELPERS.update({
    "_sg_f64": '''\
def _sg_f64(x):
    """(x as a float64 array, whether to round the result back to float32): the special
    functions compute float32 in float64 and round once."""
    single = getattr(x, "dtype", None) == numpy.float32
    return numpy.asarray(x, dtype=numpy.float64), single
''',
    "_sg_out": '''\
def _sg_out(y, single, like):
    """y rounded back to float32 for a float32 input, a Python float for a scalar input."""
    y = y.astype(numpy.float32) if single else y
    return y if numpy.ndim(like) or isinstance(like, numpy.ndarray) else y[()]
''',
    "_lgamma": f'''\
def _lgamma(x):
    """log|Gamma(x)| (Cephes lgam for x > 0, reflection for x <= 0), +inf at the poles."""
    w, single = _sg_f64(x)
    with numpy.errstate(all="ignore"):
        neg = w <= 0.0
        n = numpy.rint(w)
        refl = numpy.log({_PI!r} / numpy.abs(numpy.sin({_PI!r} * (w - n))))
        v = numpy.where(neg, 1.0 - w, w)
        # 0 < v < 13: v + p in [2, 3) (p shifts), z the product of the shifted-over factors
        s = numpy.clip(v, 1e-300, 13.0)
        z = numpy.ones_like(s)
        p = numpy.zeros_like(s)
        u = s
        for _ in range(10):
            m = u >= 3.0
            p = p - m
            u = s + p
            z = z * numpy.where(m, u, 1.0)
        for _ in range(2):
            m = u < 2.0
            z = z / numpy.where(m, u, 1.0)
            p = p + m
            u = s + p
        t = s + (p - 2.0)
        num = 0.0
        for c in {_np_tuple(_LGAM_B)}:
            num = num * t + c
        den = 0.0
        for c in {_np_tuple(_LGAM_C)}:
            den = den * t + c
        small = numpy.log(z) + t * num / den
        # v >= 13: Stirling's series
        b = numpy.maximum(v, 13.0)
        q = (b - 0.5) * numpy.log(b) - b + {_LS2PI!r}
        r = 1.0 / (b * b)
        corr = 0.0
        for c in {_np_tuple(_LGAM_A)}:
            corr = corr * r + c
        big = q + numpy.where(b < 1e8, corr / b, 0.0)
        y = numpy.where(v < 13.0, small, big)
        e1 = v - 1.0
        near1 = numpy.abs(e1) < 0.2
        e2 = v - 2.0
        near2 = numpy.abs(e2) < 0.2
        if near1.any() or near2.any():
            e = numpy.where(near1, e1, numpy.where(near2, e2, 0.0))
            series = 0.0
            for c in {_np_tuple(_LGAM_NEAR[::-1])}:
                series = series * e + c
            series = series * e
            y = numpy.where(near1, series, numpy.where(near2, numpy.log1p(e) + series, y))
        y = numpy.where(v < 1e-300, -numpy.log(v), y)
        y = numpy.where(neg, refl - y, y)
        y = numpy.where((neg & (w == n)) | numpy.isinf(w), numpy.inf, y)
    return _sg_out(y, single, x)
''',
    "_digamma": f'''\
def _digamma(x):
    """psi(x) = d/dx log Gamma(x): recurrence up to 10, asymptotic series; reflection for
    x <= 0. torch's pole values: -inf at +0, +inf at -0, nan at negative integers and -inf."""
    w, single = _sg_f64(x)
    with numpy.errstate(all="ignore"):
        neg = w <= 0.0
        n = numpy.rint(w)
        r = w - n
        # pi cot(pi r) with cos(pi r) = sin(pi (0.5 - |r|)): exactly 0 at half-integers
        refl = numpy.where(neg, -{_PI!r} * numpy.sin({_PI!r} * (0.5 - numpy.abs(r)))
                           / numpy.sin({_PI!r} * r), 0.0)
        v = numpy.where(neg, 1.0 - w, w)
        acc = numpy.zeros_like(v)
        for _ in range(11):
            m = v < 10.0
            acc = acc + numpy.where(m, 1.0 / v, 0.0)
            v = numpy.where(m, v + 1.0, v)
        z = 1.0 / (v * v)
        poly = 0.0
        for c in {_np_tuple(_PSI_A)}:
            poly = poly * z + c
        y = numpy.log(v) - 0.5 / v - z * poly - acc + refl
        d = (w - {_PSI_ROOT[0]!r}) - {_PSI_ROOT[1]!r}
        near = 0.0
        for c in {_np_tuple(_PSI_ROOT_SERIES[::-1])}:
            near = (near + c) * d
        y = numpy.where(numpy.abs(d) < 0.1, near, y)
        y = numpy.where(w == numpy.inf, numpy.inf, y)
        pole = neg & (w == n)
        y = numpy.where(pole, numpy.where(w == 0.0, numpy.copysign(numpy.inf, -w), numpy.nan), y)
    return _sg_out(y, single, x)
''',
    "_polygamma": f'''\
def _polygamma(n, x):
    """The n-th derivative of digamma (n >= 1): (-1)**(n+1) n! zeta(n+1, x) by direct sums up
    to a cut and the Euler-Maclaurin tail; reflection for x < 0."""
    n = int(n)
    w, single = _sg_f64(x)
    s = n + 1.0
    sign = 1.0 if n % 2 else -1.0
    fact = 1.0
    for k in range(2, n + 1):
        fact *= k
    cut = float(max(10, 2 * n + 4))
    # cot's n-th derivative as a polynomial in cot: P_0 = c, P_k+1 = -(1 + c**2) P_k'
    cot_poly = [0, 1]
    for _ in range(n):
        d = [k * cot_poly[k] for k in range(1, len(cot_poly))]
        q = [0] * (len(d) + 2)
        for k, c in enumerate(d):
            q[k] -= c
            q[k + 2] -= c
        cot_poly = q
    with numpy.errstate(all="ignore"):
        neg = w < 0.0
        rnd = numpy.rint(w)
        v = numpy.where(neg, 1.0 - w, w)
        # zeta(s, v) for v > 0
        steps = int(cut) + 1
        acc = numpy.zeros_like(v)
        a = v
        for _ in range(steps):
            m = a < cut
            acc = acc + numpy.where(m, a ** -s, 0.0)
            a = numpy.where(m, a + 1.0, a)
        b = a ** -s
        zeta = acc + a ** (1.0 - s) / (s - 1.0) + 0.5 * b   # not a * b: b underflows first
        fa = 1.0
        k = 0.0
        for div in {_np_tuple(_ZETA_A)}:
            fa *= s + k
            b = b / a
            zeta = zeta + fa * b / div
            k += 1.0
            fa *= s + k
            b = b / a
            k += 1.0
        y = sign * fact * zeta
        # x < 0: psi_n(x) = (-1)**n psi_n(1 - x) - pi**(n+1) P_n(cot(pi x))
        r = w - rnd
        c = numpy.sin({_PI!r} * (0.5 - numpy.abs(r))) / numpy.sin({_PI!r} * r)   # cot(pi x)
        poly = 0.0
        for coef in cot_poly[::-1]:
            poly = poly * c + float(coef)
        refl = (-sign) * y - {_PI!r} ** (n + 1) * poly
        y = numpy.where(neg, refl, y)
        y = numpy.where((w <= 0.0) & (w == rnd), sign * numpy.inf, y)
        y = numpy.where(w == numpy.inf, 0.0, numpy.where(w == -numpy.inf, numpy.nan, y))
    return _sg_out(y, single, x)
''',
    "_erfinv": f'''\
def _erfinv(x):
    """Inverse error function: Pavlis' first guess, two Halley steps on erf (|x| <= 0.5) or
    on erfc(t) = 1 - |x| (exact there); +-inf at +-1, nan beyond."""
    w, single = _sg_f64(x)
    with numpy.errstate(all="ignore"):
        a = numpy.abs(w)
        ac = numpy.minimum(a, 0.7)
        z = ac * ac
        num = 0.0
        for c in {_np_tuple(_ERFINV_A[::-1])}:
            num = num * z + c
        den = 0.0
        for c in {_np_tuple(_ERFINV_B[::-1])}:
            den = den * z + c
        central = ac * num / (den * z + 1.0)
        q = 1.0 - numpy.clip(a, 0.7, 1.0)
        z = numpy.sqrt(-numpy.log(q / 2.0))
        num = 0.0
        for c in {_np_tuple(_ERFINV_C[::-1])}:
            num = num * z + c
        tail = num / ((_ERFINV_D1 * z + _ERFINV_D0) * z + 1.0)
        t = numpy.where(a <= 0.7, central, tail)
        upper = a > 0.5
        one_minus = 1.0 - a
        for _ in range(2):
            f = numpy.where(upper, one_minus - _erfc(t), _erf(t) - a)
            r = f / ({_TWO_OVER_SQRT_PI!r} * numpy.exp(-t * t))
            t = t - r / (1.0 + t * r)
        y = numpy.copysign(t, w)
        y = numpy.where(a == 1.0, numpy.copysign(numpy.inf, w), y)
        y = numpy.where(a > 1.0, numpy.nan, y)
    return _sg_out(y, single, x)
'''.replace("_ERFINV_D1", repr(_ERFINV_D[1])).replace("_ERFINV_D0", repr(_ERFINV_D[0])),
    "_chbevl": '''\
def _chbevl(t, coeffs):
    """Clenshaw's sum of a Chebyshev series in t/2 (Cephes chbevl)."""
    b0 = coeffs[0] + 0.0 * t
    b1 = 0.0
    b2 = 0.0
    for c in coeffs[1:]:
        b2 = b1
        b1 = b0
        b0 = t * b1 - b2 + c
    return 0.5 * (b0 - b2)
''',
    "_bessel_i": f'''\
def _bessel_i(order, x, scaled):
    """I0 / I1 (order 0 / 1), times exp(-|x|) if scaled (Cephes i0, i0e, i1, i1e)."""
    w, single = _sg_f64(x)
    with numpy.errstate(all="ignore"):
        a = numpy.abs(w)
        near_a = numpy.minimum(a, 8.0)
        far_a = numpy.maximum(a, 8.0)
        if order == 0:
            near = _chbevl(near_a / 2.0 - 2.0, {_np_tuple(_I0_A)})
            far = _chbevl(32.0 / far_a - 2.0, {_np_tuple(_I0_B)}) / numpy.sqrt(far_a)
        else:
            near = _chbevl(near_a / 2.0 - 2.0, {_np_tuple(_I1_A)}) * near_a
            far = _chbevl(32.0 / far_a - 2.0, {_np_tuple(_I1_B)}) / numpy.sqrt(far_a)
        y = numpy.where(a <= 8.0, near, far)
        if not scaled:
            h = numpy.exp(a / 2.0)
            y = numpy.where(a == numpy.inf, numpy.inf, h * (h * y))
        y = numpy.where(a == numpy.inf, 0.0 if scaled else numpy.inf, y)
        if order == 1:
            y = numpy.where(w < 0.0, -y, y)
        y = numpy.where(numpy.isnan(w), numpy.nan, y)
    return _sg_out(y, single, x)
''',
})
for _name in ("_lgamma", "_digamma", "_polygamma"):
    _HELPER_DEPENDS[_name] = ("_sg_f64", "_sg_out")
_HELPER_DEPENDS["_erfinv"] = _HELPER_DEPENDS["_erf"] + _HELPER_DEPENDS["_erfc"] + (
    "_erf", "_erfc", "_sg_f64", "_sg_out")
_HELPER_DEPENDS["_bessel_i"] = ("_chbevl", "_sg_f64", "_sg_out")
# NUMPY_HELPERS order is the order helpers are pasted in: dependencies were added before
# their users above, except the erf family, defined earlier in stable.py


NUMPY_HELPERS.update({
    "_log1pmx": '''\
def _log1pmx(s):
    """log(1 + s) - s without cancellation: for |s| < 0.5, with t = s / (2 + s),
    -s**2 / (2 + s) + 2 sum_k>=1 t**(2k+1) / (2k+1)."""
    with numpy.errstate(all="ignore"):
        t = s / (2.0 + s)
        t2 = t * t
        series = 0.0
        for k in range(17, 0, -1):
            series = series * t2 + 2.0 / (2 * k + 1)
        near = -s * s / (2.0 + s) + t * t2 * series
        return numpy.where(numpy.abs(s) < 0.5, near, numpy.log1p(s) - s)
''',
    "_igamma": f'''\
def _igam_fac(a, x):
    """x**a exp(-x) / Gamma(a) (Cephes igam_fac): Stirling's form
    sqrt(a / (2 pi)) exp(a log1pmx((x - a) / a) - (lgamma(a)'s Stirling correction)) for
    a >= 10 (no cancellation between a log x, x and lgamma(a) for large a), else direct."""
    with numpy.errstate(all="ignore"):
        big = a >= 10.0
        b = numpy.where(big, a, 10.0)
        r = 1.0 / (b * b)
        corr = (((((-691.0 / 360360.0 * r + 1.0 / 1188.0) * r - 1.0 / 1680.0) * r
                  + 1.0 / 1260.0) * r - 1.0 / 360.0) * r + 1.0 / 12.0) / b
        s = (x - b) / b
        # a (log(x / a) - (x - a) / a): log1pmx where x is near a, the exact ratio elsewhere
        # (1 + s rounds off the low bits of x / a when x << a)
        e = numpy.where(numpy.abs(s) < 0.5, b * _log1pmx(s), b * numpy.log(x / b) - (x - b))
        stirling = numpy.sqrt(b / (2.0 * {_PI!r})) * numpy.exp(e - corr)
        small = numpy.exp(a * numpy.log(x) - x - _lgamma(numpy.where(big, 1.0, a)))
        return numpy.where(big, stirling, small)


def _igam_loop(state, step, n_iter=2000):
    """Iterate step(state) -> (state, done) on the entries not yet done (compacted), the
    first array of state being the result; at most n_iter steps (Cephes' MAXITER)."""
    out = state[0].copy()
    idx = numpy.arange(out.size)
    for _ in range(n_iter):
        if not idx.size:
            break
        state, done = step(state)
        if done.any():
            out[idx[done]] = state[0][done]
            keep = ~done
            idx = idx[keep]
            state = tuple(s[keep] for s in state)
    out[idx] = state[0]
    return out


def _igam_series(a, x):
    """P(a, x) by its power series (DLMF 8.11.4)."""
    ax = _igam_fac(a, x)

    def step(s):
        ans, r, c, xx = s
        r = r + 1.0
        c = c * xx / r
        ans = ans + c
        return (ans, r, c, xx), c <= 1.1102230246251565e-16 * ans
    one = numpy.ones_like(a)
    total = _igam_loop((one, a.copy(), one.copy(), x), step)
    return numpy.where(ax == 0.0, 0.0, total * ax / a)


def _igamc_cf(a, x):
    """Q(a, x) by its continued fraction (DLMF 8.9.2)."""
    ax = _igam_fac(a, x)
    y = 1.0 - a
    z = x + y + 1.0
    pkm1 = x + 1.0
    qkm1 = z * x
    ans = pkm1 / qkm1

    def step(s):
        ans, c, y, z, pkm2, pkm1, qkm2, qkm1 = s
        c = c + 1.0
        y = y + 1.0
        z = z + 2.0
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        nz = qk != 0
        with numpy.errstate(all="ignore"):
            r = pk / qk
            t = numpy.where(nz, numpy.abs((ans - r) / r), 1.0)
        ans = numpy.where(nz, r, ans)
        scale = numpy.where(numpy.abs(pk) > 4503599627370496.0, 2.220446049250313e-16, 1.0)
        return (ans, c, y, z, pkm1 * scale, pk * scale, qkm1 * scale, qk * scale), \\
            t <= 1.1102230246251565e-16
    total = _igam_loop((ans, numpy.zeros_like(a), y, z, numpy.ones_like(a), pkm1, x.copy(),
                        qkm1), step)
    return numpy.where(ax == 0.0, 0.0, total * ax)


def _lgam1p(a):
    """lgamma(1 + a), accurate for small |a| (Cephes lgam1p)."""
    with numpy.errstate(all="ignore"):
        def taylor(e):
            s = 0.0
            for c in {_np_tuple(_LGAM1P)}:
                s = s * e + c
            return s * e
        near0 = numpy.abs(a) <= 0.5
        near1 = ~near0 & (numpy.abs(a - 1.0) < 0.5)
        return numpy.where(near0, taylor(numpy.where(near0, a, 0.0)),
                           numpy.where(near1, numpy.log(a) + taylor(a - 1.0),
                                       _lgamma(a + 1.0)))


def _igamc_series(a, x):
    """Q(a, x) for small a and x (DLMF 8.7.3), without the cancellation of 1 - P."""
    def step(s):
        total, n, fac, xx, aa = s
        n = n + 1.0
        fac = fac * -xx / n
        term = fac / (aa + n)
        total = total + term
        return (total, n, fac, xx, aa), \\
            numpy.abs(term) <= 1.1102230246251565e-16 * numpy.abs(total)
    zero = numpy.zeros_like(a)
    total = _igam_loop((zero, zero.copy(), numpy.ones_like(a), x, a), step)
    with numpy.errstate(all="ignore"):
        logx = numpy.log(x)
        return -numpy.expm1(a * logx - _lgam1p(a)) - \\
            numpy.exp(a * logx - _lgamma(a)) * total


def _igam_asymptotic(a, x, upper):
    """P(a, x) (upper False) or Q(a, x) (upper True) by Temme's uniform asymptotic
    expansion (DLMF 8.12.3 / 8.12.4), for a large and x near a."""
    sgn = 1.0 if upper else -1.0
    with numpy.errstate(all="ignore"):
        sigma = (x - a) / a
        eta = numpy.sign(sigma) * numpy.sqrt(-2.0 * _log1pmx(sigma))
        res = 0.5 * _erfc(sgn * eta * numpy.sqrt(a / 2.0))
        total = numpy.zeros_like(a)
        alive = numpy.ones(a.shape, dtype=bool)
        old = numpy.full_like(a, numpy.inf)
        afac = numpy.ones_like(a)
        for row in {_IGAM_D!r}:
            ck = 0.0
            for d in row[::-1]:
                ck = ck * eta + d
            term = ck * afac
            absterm = numpy.abs(term)
            alive = alive & ~(absterm > old)
            total = total + numpy.where(alive, term, 0.0)
            alive = alive & ~(absterm < 1.1102230246251565e-16 * numpy.abs(total))
            old = absterm
            afac = afac / a
        return res + sgn * numpy.exp(-0.5 * a * eta * eta) * total / numpy.sqrt(
            2.0 * {_PI!r} * a)


def _igamma(a, x, upper):
    """Regularized incomplete gamma P(a, x) = gammainc (upper False) or Q(a, x) = 1 - P
    (upper True), elementwise with broadcasting (Cephes igam / igamc as in torch and scipy:
    Temme's asymptotic series for large a near x, else the power series or the continued
    fraction, each where it has no cancellation). torch's values at the domain's edges:
    nan for a < 0 or x < 0 or a = x = 0; P(0, x > 0) = 1; P(a, 0) = 0; P(inf, x) = 0 (nan
    at x = inf); P(a, inf) = 1. float32 is computed in float64 and rounded once."""
    single = (getattr(a, "dtype", None) == numpy.float32
              and getattr(x, "dtype", None) == numpy.float32)
    scalar = not (numpy.ndim(a) or numpy.ndim(x) or isinstance(a, numpy.ndarray)
                  or isinstance(x, numpy.ndarray))
    shape = numpy.broadcast_shapes(numpy.shape(a), numpy.shape(x))
    A = numpy.broadcast_to(numpy.asarray(a, dtype=numpy.float64), shape).ravel()
    X = numpy.broadcast_to(numpy.asarray(x, dtype=numpy.float64), shape).ravel()
    out = numpy.full(A.shape, numpy.nan)
    p_val, q_val = (0.0, 1.0) if upper else (1.0, 0.0)
    with numpy.errstate(all="ignore"):
        ok = (A >= 0) & (X >= 0)
        out[ok & (A == 0) & (X > 0)] = p_val
        out[ok & (A > 0) & (X == 0)] = q_val
        out[ok & numpy.isinf(A) & (X > 0) & numpy.isfinite(X)] = q_val
        out[ok & (A > 0) & numpy.isfinite(A) & numpy.isinf(X)] = p_val
        gen = numpy.nonzero(ok & (A > 0) & (X > 0) & numpy.isfinite(A) & numpy.isfinite(X))[0]
        a_, x_ = A[gen], X[gen]
        res = numpy.empty(a_.shape)
        ratio = numpy.abs(x_ - a_) / a_
        asym = (((a_ > 20.0) & (a_ < 200.0) & (ratio < 0.3))
                | ((a_ > 200.0) & (ratio < 4.5 / numpy.sqrt(a_))))
        if asym.any():
            res[asym] = _igam_asymptotic(a_[asym], x_[asym], upper)
        rest = ~asym
        cf = rest & (x_ > 1.1) & (x_ >= a_)
        q_small = rest & ~cf & (x_ <= 1.1) & ~(
            ((x_ <= 0.5) & (-0.4 / numpy.log(x_) < a_)) | ((x_ > 0.5) & (x_ * 1.1 < a_)))
        if upper:
            p_ser = rest & ~cf & ~q_small
        else:
            via_q = rest & (x_ > 1.0) & (x_ > a_)
            p_ser = rest & ~via_q
            q_small = q_small & via_q
        if cf.any():
            q = _igamc_cf(a_[cf], x_[cf])
            res[cf] = q if upper else 1.0 - q
        if q_small.any():
            q = _igamc_series(a_[q_small], x_[q_small])
            res[q_small] = q if upper else 1.0 - q
        if p_ser.any():
            p = _igam_series(a_[p_ser], x_[p_ser])
            res[p_ser] = 1.0 - p if upper else p
        out[gen] = res
    y = out.reshape(shape)
    y = y.astype(numpy.float32) if single else y
    return y[()] if scalar else y
''',
})
# the "_igamma" text above holds several functions: one helper each (each starts with its def)
_IGAMMA_PARTS = NUMPY_HELPERS.pop("_igamma").split("\n\n\n")
for _part in _IGAMMA_PARTS:
    NUMPY_HELPERS[_part[4:_part.index("(")]] = _part.rstrip("\n") + "\n"
_HELPER_DEPENDS["_igam_fac"] = ("_log1pmx", "_lgamma", "_sg_f64", "_sg_out")
for _name in ("_igam_series", "_igamc_cf"):
    _HELPER_DEPENDS[_name] = ("_igam_fac", "_igam_loop") + _HELPER_DEPENDS["_igam_fac"]
_HELPER_DEPENDS["_lgam1p"] = ("_lgamma", "_sg_f64", "_sg_out")
_HELPER_DEPENDS["_igamc_series"] = ("_igam_loop", "_lgam1p", "_lgamma", "_sg_f64", "_sg_out")
_HELPER_DEPENDS["_igam_asymptotic"] = _HELPER_DEPENDS["_erfc"] + ("_erfc", "_log1pmx")
_HELPER_DEPENDS["_igamma"] = tuple(dict.fromkeys(
    ("_igam_asymptotic", "_igamc_cf", "_igamc_series", "_igam_series")
    + _HELPER_DEPENDS["_igam_asymptotic"] + _HELPER_DEPENDS["_igamc_cf"]
    + _HELPER_DEPENDS["_igamc_series"]))
del _part, _name
