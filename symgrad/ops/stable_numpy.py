"""The NumPy helpers of the stable primitives (`symgrad.ops.stable`): the source of each
function a generated NumPy module pastes in when its code calls it (`NUMPY_HELPERS`, name ->
source), and which helpers each helper calls (`_HELPER_DEPENDS`). The special functions add
theirs (`symgrad.ops.specfun_numpy`); `symgrad.ops.numpy_helpers` reads the whole table."""
from __future__ import annotations


# Helper functions a generated NumPy module includes when its code calls them. Pure numpy,
# ufuncs and Python-float constants only (float32 in, float32 out), no overflow for finite x.
NUMPY_HELPERS: dict[str, str] = {
    "_sigmoid": '''\
def _sigmoid(x):
    """1 / (1 + exp(-x)) for every finite x: exp only ever sees -|x|, so nothing overflows.

    The numerator, 1 for x >= 0 else exp(-|x|), is max(x >= 0, t) (t <= 1): numpy.where on a
    data-dependent mask costs ~15x a multiply (branch mispredictions).
    """
    t = numpy.exp(-numpy.abs(x))
    return numpy.maximum(x >= 0, t) / (1.0 + t)
''',
    "_sigmoid2": '''\
def _sigmoid2(x):
    """(sigmoid(x), sigmoid(-x)) from one exp(-|x|) and one division (swish, silu, ...)."""
    t = numpy.exp(-numpy.abs(x))
    r = 1.0 / (1.0 + t)
    return numpy.maximum(x >= 0, t) * r, numpy.maximum(x <= 0, t) * r
''',
    "_softplus": '''\
def _softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) for every finite x, without numpy.log1p
    or numpy.logaddexp (scalar loops, ~10x numpy.log): log1p(t) = log(u) - ((u - 1) - t) / u
    with u = 1 + t, which corrects the rounding of u to first order (exactly t when u == 1)."""
    t = numpy.exp(-numpy.abs(x))
    u = 1.0 + t
    return numpy.maximum(x, 0.0) + (numpy.log(u) - ((u - 1.0) - t) / u)
''',
    "_tanh_softplus": '''\
def _tanh_softplus(x):
    """tanh(softplus(x)) = n / (n + 2) with n = e * (e + 2), e = exp(x) (mish's gate): exp and
    arithmetic only (numpy.tanh and numpy.log are scalar loops, ~8x numpy.exp). x is clipped at
    20, past which the value is 1 in double precision, so e * e cannot overflow."""
    e = numpy.exp(numpy.minimum(x, 20.0))
    n = e * (e + 2.0)
    return n / (n + 2.0)
''',
    "_logsumexp": '''\
def _logsumexp(*terms):
    """log(sum(exp(terms))), shifted by the elementwise max so no exp overflows; the max is
    clipped to the finite range (one cheap pass), as t - max is nan where the max is -inf
    (every term -inf: the value is -inf) or inf (the value is inf)."""
    m = terms[0]
    for t in terms[1:]:
        m = numpy.maximum(m, t)
    big = numpy.finfo(m.dtype).max
    m = numpy.clip(m, -big, big)
    total = 0.0
    for t in terms:
        total = total + numpy.exp(t - m)
    return m + numpy.log(total)
''',
    "_erfcx_tail": '''\
def _erfcx_tail(y):
    """exp(y*y)*erfc(y) for y >= 0.46875 (W. J. Cody, Math. Comp. 23 (1969), CALERF intervals
    2 and 3); finite for every y, ~ 1/(y*sqrt(pi)) for large y."""
    # 0.46875 <= y <= 4: P(y) / Q(y)
    # (augmented assignments update the temporaries this function owns, in cache, where fresh
    # arrays per step cost 2x at 1e5; on Dask arrays they rebind, so nothing outside mutates)
    y2 = numpy.minimum(y, 4.0)
    num = 2.15311535474403846e-8 * y2
    den = 1.0 * y2
    for c, d in ((5.64188496988670089e-1, 1.57449261107098347e01),
                 (8.88314979438837594e00, 1.17693950891312499e02),
                 (6.61191906371416295e01, 5.37181101862009858e02),
                 (2.98635138197400131e02, 1.62138957456669019e03),
                 (8.81952221241769090e02, 3.29079923573345963e03),
                 (1.71204761263407058e03, 4.36261909014324716e03),
                 (2.05107837782607147e03, 3.43936767414372164e03)):
        num += c
        num *= y2
        den += d
        den *= y2
    middle = (num + 1.23033935479799725e03) / (den + 1.23033935480374942e03)
    if isinstance(y, numpy.ndarray) and not (y > 4.0).any():
        return middle   # no element in the far interval (e.g. gelu's |x| < 5.6): skip it
    # y > 4: (1/sqrt(pi) + R(1/y^2) / y^2) / y
    y3 = numpy.maximum(y, 4.0)
    z = 1.0 / (y3 * y3)
    num = 1.63153871373020978e-2 * z
    den = 1.0 * z
    for p, q in ((3.05326634961232344e-1, 2.56852019228982242e00),
                 (3.60344899949804439e-1, 1.87295284992346047e00),
                 (1.25781726111229246e-1, 5.27905102951428412e-1),
                 (1.60837851487422766e-2, 6.05183413124413191e-2)):
        num += p
        num *= z
        den += q
        den *= z
    far = (5.6418958354775628695e-1 - z * (num + 6.58749161529837803e-4)
           / (den + 2.33520497626869185e-3)) / y3
    return numpy.where(y <= 4.0, middle, far)
''',
    "_erfc_tail": '''\
def _erfc_tail(y):
    """erfc(y) for y >= 0.46875: exp(-y*y) * erfcx(y)."""
    y = numpy.minimum(y, 30.0)  # erfc(27) underflows to 0; the clip keeps y*y finite
    # exp(-y*y) as exp(-a*a) * exp(-(y-a)(y+a)) with a = y rounded down to 1/16: a*a is exact,
    # so the rounding error of y*y is not amplified by the exponential
    a = numpy.trunc(y * 16.0) / 16.0
    return numpy.exp(-a * a) * numpy.exp(-(y - a) * (y + a)) * _erfcx_tail(y)
''',
    "_erf_small": '''\
def _erf_small(x):
    """erf(x) for |x| <= 1: Taylor series, summed as x + x*q(x^2) so that x itself is exact."""
    x = numpy.clip(x, -1.0, 1.0)
    z = x * x
    # q(z) = erf(x)/x - 1 = (2/sqrt(pi)) * sum_n (-1)^n z^n / (n! (2n+1)) - 1, |q| <= 0.16
    q = 4.7633480405150681e-18
    for c in (-9.0639708428086725e-17, 1.6342614095367152e-15, -2.7835162072109214e-14,
              4.4632242632864773e-13, -6.7113668551641104e-12, 9.422759064650411e-11,
              -1.2290555301717927e-9, 1.4807192815879217e-8, -1.6365844691234924e-7,
              1.6462114365889247e-6, -1.4925650358406251e-5, 1.2055332981789664e-4,
              -8.5483270234508528e-4, 5.2239776254421878e-3, -2.6866170645131252e-2,
              1.1283791670955126e-1, -3.7612638903183752e-1, 1.2837916709551257e-1):
        q = q * z + c
    return x + x * q
''',
    "_erf_rational": '''\
def _erf_rational(x):
    """erf(x) for |x| <= 0.5: x * P(x^2) / Q(x^2) (W. J. Cody, Math. Comp. 23 (1969), CALERF
    interval 1), relative error < 5e-16; 12 passes where _erf_small's series takes 38."""
    x = numpy.clip(x, -0.5, 0.5)
    z = x * x
    num = 1.85777706184603153e-1 * z
    den = 1.0 * z
    for a, b in ((3.16112374387056560e00, 2.36012909523441209e01),
                 (1.13864154151050156e02, 2.44024637934444173e02),
                 (3.77485237685302021e02, 1.28261652607737228e03)):
        num += a
        num *= z
        den += b
        den *= z
    return x * (num + 3.20937758913846947e03) / (den + 2.84423683343917062e03)
''',
    "_erfc_f32": '''\
def _erfc_f32(y):
    """erfc(y) for float32 y >= 0, relative error < 5e-7 (Numerical Recipes' erfcc Chebyshev
    fit, fractional error < 1.2e-7 in exact arithmetic); exp(-y*y) split as in _erfc_tail.
    Augmented assignments update temporaries this function owns (2.4x faster at 1e5 than fresh
    arrays per step); on Dask arrays they rebind instead, so nothing outside is mutated."""
    y = numpy.minimum(y, 11.0)  # erfc(10) = 2e-45 is float32's smallest subnormal; at 11
    # the exp(-a*a) factor below is exactly 0 (so is erfc), where a clip at 10 kept 1.4e-45:
    # x*erfc(-x) (gelu at x = -1e38) was -1.4e-7 instead of -0
    t = 0.5 * y
    t += 1.0
    t = 1.0 / t
    poly = 0.17087277 * t
    for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
              0.37409196, 1.00002368):
        poly += c
        poly *= t
    poly -= 1.26551223
    a = numpy.trunc(y * 16.0)
    a *= 0.0625
    d = y - a
    d *= y + a
    poly -= d
    return t * numpy.exp(-(a * a)) * numpy.exp(poly)
''',
    "_erf_f32": '''\
def _erf_f32(x):
    """erf(x) for float32 x, |error| < 2.5e-7: x * P(x^2) / Q(x^2) (Eigen's float erf) for
    |x| < 1, else sign(x) * (1 - erfc(|x|)); blended by mask products, not numpy.where.
    c * (p / q), not c * p / q: c * p underflows for subnormal x (erf(1e-45) was 0)."""
    c = numpy.clip(x, -1.0, 1.0)
    z = c * c
    p = -2.72614225801306e-10
    for k in (2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
              -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02):
        p = p * z + k
    q = -1.45660718464996e-05
    for k in (-2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
              -1.42647390514189e-02):
        q = q * z + k
    y = numpy.abs(x)
    far = y >= 1.0
    return (~far) * (c * (p / q)) + far * numpy.copysign(1.0 - _erfc_f32(y), x)
''',
    "_erf": '''\
def _erf(x):
    """Error function, elementwise, float32-preserving: Taylor for |x| <= 1, else 1 - erfc."""
    if getattr(x, "dtype", None) == numpy.float32:
        return _erf_f32(x)
    y = numpy.abs(x)
    tail = numpy.copysign((0.5 - _erfc_tail(y)) + 0.5, x)
    return numpy.where(y <= 1.0, _erf_small(x), tail)
''',
    "_erfc": '''\
def _erfc(x):
    """Complementary error function 1 - erf(x), accurate (relatively) deep into the tail."""
    if getattr(x, "dtype", None) == numpy.float32:
        r = _erfc_f32(numpy.abs(x))
        return r + (x < 0) * (2.0 - 2.0 * r)  # 2 - r for x < 0, without numpy.where
    y = numpy.abs(x)
    tail = _erfc_tail(y)
    # both branches are finite for finite x (nan for nan): selected by 0/1 factors, exactly
    # (numpy.where costs ~8 multiply passes on a mixed mask, these ~4)
    negative = numpy.less(x, 0)   # a numpy bool also for a Python float x (~ is logical not)
    tail = tail * ~negative + (2.0 - tail) * negative
    small = y <= 0.46875
    return tail * ~small + (1.0 - _erf_rational(x)) * small
''',
    "_erfcx": '''\
def _erfcx(x):
    """exp(x*x) * erfc(x), finite where erfc underflows (float32 is computed in float64)."""
    single = getattr(x, "dtype", None) == numpy.float32
    w = x.astype(numpy.float64) if single else x
    y = numpy.abs(w)
    tail = _erfcx_tail(numpy.maximum(y, 0.46875))
    a = numpy.trunc(w * 16.0) / 16.0
    grow = numpy.exp(a * a) * numpy.exp((w - a) * (w + a))   # exp(x*x), a*a exact
    near = grow * (1.0 - _erf_small(w))                       # |x| <= 0.46875
    negative = 2.0 * grow - tail                              # erfcx(-y) = 2 exp(y*y) - erfcx(y)
    negative = numpy.where(w == -numpy.inf, numpy.inf, negative)   # grow is inf*nan there
    out = numpy.where(y <= 0.46875, near, numpy.where(w < 0, negative, tail))
    return out.astype(numpy.float32) if single else out
''',
    "_log1mexp": '''\
def _log1mexp(x):
    """log(1 - exp(-x)) for x > 0: log(-expm1(-x)) below log(2), log1p(-exp(-x)) above."""
    return numpy.where(x < 0.6931471805599453, numpy.log(-numpy.expm1(-x)),
                       numpy.log1p(-numpy.exp(-x)))
''',
    "_hypot": '''\
def _hypot(a, b):
    """sqrt(a*a + b*b) without overflow or underflow of the squares. numpy.hypot is a scalar
    loop (6-10x the plain formula): it runs only when some sum of squares is outside the range
    where the plain formula is exact to rounding (or is nan)."""
    s = a * a + b * b
    lo, hi = (1e-30, 1e37) if getattr(s, "dtype", None) == numpy.float32 else (1e-290, 1e300)
    if numpy.max(s) <= hi:
        # below lo only exact zeros (0, 0) are fine: a square may have underflowed to 0
        if numpy.min(s) >= lo or not numpy.any((s < lo) & ((a != 0) | (b != 0))):
            return numpy.sqrt(s)
    return numpy.hypot(a, b)
''',
    "_div_square": '''\
def _div_square(a, b):
    """a / b**2 without forming b*b, which under- or overflows (b = 1e-300) where the quotient
    is finite, when b is as large as a (a/b/b: as many passes); a smaller, broadcast b keeps b*b,
    computed on the small array (shapes known only at run time decide here)."""
    if numpy.size(b) >= numpy.size(a):
        return a / b / b
    return a / (b * b)
''',
    "_taylor_at_zero": '''\
def _taylor_at_zero(u, far, coeffs, cut, parity=None):
    """A function with a removable singularity at 0 (sinc, exprel, ... and their derivatives):
    its closed form far(u) where |u| >= cut, the Taylor polynomial below (the closed form is 0/0
    at 0 and cancels near it). coeffs are in u, or in u*u times u**parity for an even (0) or
    odd (1) function."""
    out = far(u)
    small = numpy.abs(u) < cut
    if isinstance(small, numpy.ndarray) and not small.any():
        return out   # no element near 0: skip the polynomial
    v = numpy.clip(u, -cut, cut)
    w = v * v if parity is not None else v
    p = coeffs[-1]
    for c in coeffs[-2::-1]:
        p = p * w + c
    if parity == 1:
        p = p * v
    return numpy.where(small, p, out)
''',
    "_log_ndtr": '''\
def _log_ndtr(x):
    """log of the normal CDF: log(erfcx(u)) - u*u - log(2), u = -x/sqrt(2), in the lower tail
    (finite where erfc underflows); log1p(-erfc(x/sqrt(2))/2) above x = -1."""
    u = numpy.maximum(x, -1.0) * 0.7071067811865476
    body = numpy.log1p(-0.5 * _erfc(u))
    v = -0.7071067811865476 * numpy.minimum(x, -1.0)
    tail = numpy.log(_erfcx(v)) - v * v - 0.6931471805599453
    return numpy.where(x < -1.0, tail, body)
''',
}

# Which helpers each helper calls (listed before it in the generated module).
_HELPER_DEPENDS: dict[str, tuple[str, ...]] = {
    "_erfc_tail": ("_erfcx_tail", "_exp_neg_sq16"),
    "_erfcx": ("_erfcx_tail", "_erf_small"),
    "_log_ndtr": ("_erfcx_tail", "_erf_small", "_erfcx", "_erfc_tail", "_erf_rational",
                  "_erfc_f32", "_erfc"),
    "_erf_f32": ("_erfc_f32",),
    "_erf": ("_erfcx_tail", "_erfc_tail", "_erf_small", "_erfc_f32", "_erf_f32"),
    "_erfc": ("_erfcx_tail", "_erfc_tail", "_erf_rational", "_erfc_f32"),
}
