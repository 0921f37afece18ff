"""Special functions as elementwise primitives: lgamma, digamma, polygamma(n, x), erfinv, i0,
i0e, i1, i1e (torch's names). One class per op, as in `symgrad.ops.stable`: forward (mpmath
through ``evalf``), derivative (``fdiff``), NumPy printing (a helper embedded in generated
modules, pure numpy) and C/CUDA printing (a helper function whose definition the C and CUDA
emitters paste before the kernels, see `c_definitions`).

Algorithms (float64; float32 is computed in float64 and rounded once, in every target):

- lgamma: Cephes ``lgam`` for x > 0 (recurrence into [2, 3) and a rational fit there;
  Stirling's series from 13 on), the Taylor series of lgamma(1 + e) within 0.2 of the zeros
  at 1 and 2 (where the recurrence cancels),
  reflection log|pi / sin(pi x)| - lgamma(1 - x) for x <= 0 with the sine's argument reduced
  exactly; +inf at the poles (non-positive integers) and at +-inf.
- digamma: recurrence up to 10, then the asymptotic series; the Taylor series about its
  positive root 1.4616... within 0.1 of it (where the recurrence cancels); reflection
  psi(x) = psi(1 - x) - pi cot(pi x) for x <= 0 (cot as sin(pi (1/2 - |r|)) / sin(pi r), r
  = x - rint(x): exactly 0 at half-integers). torch's values at the poles: -inf at +0,
  +inf at -0, nan at the negative integers and -inf.
- polygamma(n, x), n >= 1: (-1)**(n+1) n! zeta(n+1, x) by direct summation up to x + k >= cut
  and the Euler-Maclaurin tail (Cephes ``zeta``'s twelve Bernoulli terms); for x < 0 the
  reflection psi_n(x) = (-1)**n psi_n(1 - x) - pi**(n+1) cot^(n)(pi x), cot's n-th derivative
  a polynomial in cot. Poles: (-1)**(n+1) * inf (torch's); 0 at +inf, nan at -inf.
- erfinv: Pavlis' rational first guess (as torch), then two Halley steps on erf(x) = y, or
  on erfc(x) = 1 - |y| for |y| > 0.5 (1 - |y| is exact there, so the tail keeps its relative
  accuracy); +-inf at +-1, nan beyond.
- i0, i0e, i1, i1e: Cephes' Chebyshev expansions of exp(-|x|) I(x) on [0, 8] and of
  exp(-|x|) sqrt(|x|) I(x) on (8, inf) (coefficients from the Cephes Math Library, 3-clause
  BSD, Copyright (c) 2018 Steven Moshier, as in torch's ATen/native/Math.h). i0 and i1 apply
  exp(|x|) as exp(|x|/2)**2 so they stay finite up to where I overflows (|x| ~ 713.98, where
  exp(|x|) alone overflows from 709.78), and are +-inf at +-inf (torch: nan).
"""
from __future__ import annotations

import math
import re

import mpmath
import sympy

from .stable import _HELPER_DEPENDS, NUMPY_HELPERS

__all__ = ["lgamma", "digamma", "polygamma", "erfinv", "i0", "i0e", "i1", "i1e", "igamma", "igammac",
           "SPECIAL_OPS", "c_definitions"]

# ----------------------------------------------------------------------------- coefficients
# Cephes lgam: Stirling correction for x >= 13 (in 1/x**2, highest degree first), and
# lgamma(2 + t) = t * B(t) / C(t) on 0 <= t < 1 (C monic, highest degree first)
_LGAM_A = (8.11614167470508450300E-4, -5.95061904284301438324E-4, 7.93650340457716943945E-4,
           -2.77777777730099687205E-3, 8.33333333333331927722E-2)
_LGAM_B = (-1.37825152569120859100E3, -3.88016315134637840924E4, -3.31612992738871184744E5,
           -1.16237097492762307383E6, -1.72173700820839662146E6, -8.53555664245765465627E5)
_LGAM_C = (1.0, -3.51815701436523470549E2, -1.70642106651881159223E4, -2.20528590553854454839E5,
           -1.13933444367982507207E6, -2.53252307177582951285E6, -2.01889141433532773231E6)
_LS2PI = 0.91893853320467274178   # log(sqrt(2 pi))
# lgamma(1 + e) = -gamma e + sum_k>=2 (-1)**k zeta(k)/k e**k, for |e| < 0.2 around 1 and 2
# (lgamma(2 + e) = log1p(e) + lgamma(1 + e)): the recurrence's log(z) + t B(t)/C(t) cancels
# at lgamma's zeros (2.8e-7 relative error at 2 - 1e-9); coefficients of e**1 ... e**26
_LGAM_NEAR = tuple(float(-mpmath.euler) if k == 1 else float((-1) ** k * mpmath.zeta(k) / k)
                   for k in range(1, 27))

# psi's asymptotic series in z = 1/x**2: sum_k B_2k / (2k) z**k (highest degree first)
_PSI_A = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
          -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
          8.33333333333333333333E-2)

# psi near its positive root x0 = 1.4616...: psi(x0 + d) = sum_k psi^(k)(x0)/k! d**k for
# |d| < 0.1 (the recurrence's terms cancel there: 5e-14 relative error at x0 + 0.013), with
# x0 split in two doubles so that d is exact to float64
_PSI_ROOT = (1.4616321449683622, 9.549995429965697e-17)
_PSI_ROOT_SERIES = (
    0.9676722454476212, -0.4427631689835921, 0.258499760955651, -0.16394270544240652,
    0.10782405069126237, -0.07219956125645471, 0.04880428816414311, -0.03316112647484736,
    0.022597648232218104, -0.01542476590494896, 0.010538791616612175, -0.007204534386356869,
    0.004926781395729853, -0.003369801655439328, 0.002305126326734928, -0.0015769367714301972)

# Cephes zeta's Euler-Maclaurin divisors (2k)! / B_2k
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)

# Pavlis' erfinv first guess (torch's calc_erfinv)
_ERFINV_A = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
_ERFINV_B = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
_ERFINV_C = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
_ERFINV_D = (3.543889200, 1.637067800)

# Cephes Chebyshev coefficients (chbevl order): exp(-x) I0(x) on [0, 8] in x/2 - 2, and
# exp(-x) sqrt(x) I0(x) on (8, inf) in 32/x - 2; the same for I1 (divided by x on [0, 8])
_I0_A = (-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
         1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
         -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
         9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
         -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
         1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
         -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
         1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
         -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
         1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0_B = (-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
         3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
         1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
         -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
         7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
         -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
         3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
         2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
         8.04490411014108831608E-1)
_I1_A = (2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
         -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
         3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
         -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
         9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
         -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
         4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
         -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
         2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
         -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1_B = (7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
         -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
         -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
         4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
         -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
         3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
         -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
         -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
         7.78576235018280120474E-1)

_PI = 3.141592653589793
_SQRT_PI_2 = 0.886226925452758   # sqrt(pi) / 2
_TWO_OVER_SQRT_PI = 1.1283791670955126


def _cot_derivative_poly(n: int) -> list[int]:
    """Integer coefficients (lowest degree first) of P_n with cot^(n)(y) = P_n(cot(y)):
    P_0(c) = c, P_{k+1}(c) = -(1 + c**2) P_k'(c)."""
    p = [0, 1]
    for _ in range(n):
        d = [k * p[k] for k in range(1, len(p))] or [0]
        q = [0] * (len(d) + 2)
        for k, c in enumerate(d):
            q[k] -= c
            q[k + 2] -= c
        while len(q) > 1 and q[-1] == 0:
            q.pop()
        p = q
    return p


def _polygamma_cut(n: int) -> float:
    """Where the Euler-Maclaurin tail of zeta(n + 1, a) takes over: its twelfth term is below
    float64's epsilon from a >= 10 for small n; larger n need a larger a."""
    return float(max(10, 2 * n + 4))


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


# ----------------------------------------------------------------------------- igamma
# Temme's uniform asymptotic expansion of P(a, x) / Q(a, x) (DLMF 8.12.8-8.12.11): the
# coefficients d[k][n] of c_k(eta) = sum_n d[k][n] eta**n, 25 x 25 as in Cephes' igam.c,
# computed in exact rational arithmetic by tools/temme_coefficients.py
_IGAM_D = (
    (-0.3333333333333333, 0.08333333333333333, -0.014814814814814815, 0.0011574074074074073, 0.0003527336860670194, -0.0001787551440329218, 3.919263178522438e-05, -2.185448510679992e-06, -1.85406221071516e-06, 8.296711340953087e-07, -1.7665952736826078e-07, 6.707853543401498e-09, 1.0261809784240309e-08, -4.382036018453353e-09, 9.14769958223679e-10, -2.5514193994946248e-11, -5.830772132550426e-11, 2.4361948020667415e-11, -5.0276692801141755e-12, 1.1004392031956135e-13, 3.371763262400985e-13, -1.392388722418162e-13, 2.8534893807047445e-14, -5.139111834242572e-16, -1.9752288294349442e-15),
    (-0.001851851851851852, -0.003472222222222222, 0.0026455026455026454, -0.0009902263374485596, 0.00020576131687242798, -4.018775720164609e-07, -1.8098550334489977e-05, 7.64916091608111e-06, -1.6120900894563446e-06, 4.647127802807434e-09, 1.378633446915721e-07, -5.752545603517705e-08, 1.1951628599778148e-08, -1.7543241719747647e-11, -1.0091543710600413e-09, 4.162792991842583e-10, -8.56390702649298e-11, 6.067215101604758e-14, 7.1624989648114856e-12, -2.933186643771437e-12, 5.996696365683689e-13, -2.1671786527323313e-16, -4.978339972369262e-14, 2.0291628823713425e-14, -4.13125571381061e-15),
    (0.004133597883597883, -0.0026813271604938273, 0.0007716049382716049, 2.0093878600823047e-06, -0.0001073665322636516, 5.2923448829120125e-05, -1.2760635188618728e-05, 3.423578734096138e-08, 1.3721957309062934e-06, -6.298992138380055e-07, 1.4280614206064242e-07, -2.0477098421990866e-10, -1.409252991086752e-08, 6.228974084922022e-09, -1.3670488396617114e-09, 9.428356159014678e-13, 1.2872252400089318e-10, -5.5645956134363323e-11, 1.197593554636698e-11, -4.1689782251838634e-15, -1.0940640427884595e-12, 4.662239946390136e-13, -9.905105763906907e-14, 1.8931876768373515e-17, 8.859221872591127e-15),
    (0.0006494341563786008, 0.00022947209362139917, -0.0004691894943952557, 0.00026772063206283885, -7.561801671883977e-05, -2.396505113867297e-07, 1.1082654115347302e-05, -5.6749528269915965e-06, 1.4230900732435883e-06, -2.7861080291528143e-11, -1.6958404091930278e-07, 8.099464905388083e-08, -1.9111168485973655e-08, 2.3928620439808118e-12, 2.0620131815488797e-09, -9.460496661855133e-10, 2.1541049775774907e-10, -1.388823336813903e-14, -2.1894761681963938e-11, 9.790998951171684e-12, -2.178219188018096e-12, 6.208819573407901e-17, 2.126978363279737e-13, -9.344688791517433e-14, 2.045367122678285e-14),
    (-0.0008618882909167117, 0.0007840392217200666, -0.0002990724803031902, -1.4638452578843418e-06, 6.641498215465122e-05, -3.968365047179435e-05, 1.1375726970678419e-05, 2.507497226237533e-10, -1.6954149536558305e-06, 8.907507532205309e-07, -2.292934834000805e-07, 2.956794137544049e-11, 2.8865829742708783e-08, -1.4189739437803219e-08, 3.4463580499464896e-09, -2.3024517174528067e-13, -3.9409233028046403e-10, 1.86023389685045e-10, -4.356323005056618e-11, 1.278600101629623e-15, 4.67927502665792e-12, -2.149246470613483e-12, 4.908815614809652e-13, -6.33859148489156e-18, -5.045332069080094e-14),
    (-0.00033679855336635813, -6.972813758365857e-05, 0.0002772753244959392, -0.00019932570516188847, 6.797780477937208e-05, 1.419062920643967e-07, -1.3594048189768693e-05, 8.018470256334202e-06, -2.291481176508095e-06, -3.252473551298454e-10, 3.4652846491085265e-07, -1.8447187191171344e-07, 4.8240967037894184e-08, -1.7989466721743514e-14, -6.306194500013523e-09, 3.162417628774568e-09, -7.840924253697429e-10, 5.192679165254041e-15, 9.358944242306784e-11, -4.513426216163278e-11, 1.0799129993116828e-11, -3.661886712685252e-17, -1.210902069055155e-12, 5.680743584990564e-13, -1.3249659916340829e-13),
    (0.0005313079364639922, -0.0005921664373536939, 0.0002708782096718045, 7.902353232660328e-07, -8.153969367561969e-05, 5.61168275310625e-05, -1.8329116582843375e-05, -3.0796134506033047e-09, 3.465155368803609e-06, -2.0291327396058603e-06, 5.788792863149004e-07, 2.338630673826657e-13, -8.828600746330484e-08, 4.7435958880408125e-08, -1.2545415020710383e-08, 8.649648858010293e-14, 1.6846058979264062e-09, -8.575492823577594e-10, 2.1598224929232125e-10, -7.613230520476153e-16, -2.6639822008536144e-11, 1.3065700536611057e-11, -3.1799163902367977e-12, 4.710976121367431e-18, 3.6902800842763465e-13),
    (0.00034436760689237765, 5.171790908260592e-05, -0.00033493161081142234, 0.0002812695154763237, -0.00010976582244684731, -1.2741009095484485e-07, 2.7744451511563645e-05, -1.8263488805711332e-05, 5.7876949497350525e-06, 4.93875893393627e-10, -1.0595367014026043e-06, 6.166714376110408e-07, -1.7562973359060463e-07, -1.297447328701544e-12, 2.695423606288966e-08, -1.4578352908731272e-08, 3.887645959386175e-09, -3.881002251019412e-17, -5.327994173877286e-10, 2.7437977643314844e-10, -6.995796092070568e-11, 2.589986387486848e-17, 8.856689099669639e-12, -4.403168815871311e-12, 1.0865561947091654e-12),
    (-0.0006526239185953094, 0.0008394987206720873, -0.000438297098541721, -6.969091458420552e-07, 0.00016644846642067547, -0.00012783517679769218, 4.629953263691304e-05, 4.557909867922708e-09, -1.0595271125805195e-05, 6.783342904865167e-06, -2.1075476666258803e-06, -1.7213731432817144e-11, 3.773587741611098e-07, -2.1867506700122867e-07, 6.220228804018927e-08, 6.597703826733e-16, -9.590386497425686e-09, 5.213214492280807e-09, -1.3991589583935709e-09, 5.382058999060575e-16, 1.9484714275467745e-10, -1.0127287556389682e-10, 2.6077347197254926e-11, -5.090418699993299e-18, -3.3721464474854593e-12),
    (-0.0005967612901927463, -7.204895416020011e-05, 0.0006782308837667328, -0.0006401475260262758, 0.00027750107634328704, 1.819700838046515e-07, -8.479507117068503e-05, 6.105192082501531e-05, -2.1073920183404862e-05, -8.858589014125599e-10, 4.5284535953805374e-06, -2.8427815022504407e-06, 8.708234177864641e-07, 3.6886101871706966e-12, -1.534469519070206e-07, 8.862466778790695e-08, -2.5184812301826817e-08, -1.0225912098215092e-14, 3.896947075815478e-09, -2.1267304792235634e-09, 5.737013552805138e-10, -1.8877498501697116e-19, -8.093153869465787e-11, 4.23827232834492e-11, -1.1002224534207725e-11),
    (0.0013324454494800656, -0.0019144384985654776, 0.0011089369134596636, 9.9324041226423e-07, -0.0005087450129309319, 0.00042735056665392886, -0.00016858853767910798, -8.1301893922785e-09, 4.5284402370562144e-05, -3.127053674781734e-05, 1.044986828530338e-05, 4.8435226265680926e-11, -2.148256587345626e-06, 1.329369701097492e-06, -4.029569309210103e-07, -1.756787766632329e-13, 7.014504316366825e-08, -4.040787734999483e-08, 1.1474026743371964e-08, 3.964274685356394e-18, -1.7804938269892715e-09, 9.748026254873165e-10, -2.6405338676507616e-10, 5.79487516340376e-18, 3.764774955354384e-11),
    (0.001579727660730835, 0.00016251626278391583, -0.0020633421035543276, 0.00213896861856891, -0.0010108559391263003, -3.99127055299192e-07, 0.0003623502508476469, -0.00028143901463712157, 0.00010449513336495887, 2.12114184918303e-09, -2.5779417251947842e-05, 1.7281818956040464e-05, -5.641377387290428e-06, -1.1024320105776174e-11, 1.1223224418895174e-06, -6.869339637952674e-07, 2.0653236975414888e-07, 4.6714772409838506e-14, -3.5609886164949055e-08, 2.0470855345905963e-08, -5.809173863328336e-09, -1.3328212875828647e-16, 9.035460439133513e-10, -4.959878251733084e-10, 1.3481607129399748e-10),
    (-0.004072512119514016, 0.00640336283380807, -0.004041016108167662, -2.1837328028662328e-06, 0.002174044180125464, -0.001970044051841889, 0.0008359546974796246, 1.9445447567109655e-08, -0.000257793871204217, 0.00019009987368139304, -6.769649993743896e-05, -1.4440629666426571e-10, 1.5712512518742267e-05, -1.0304008744776894e-05, 3.304517767401387e-06, 7.982976024232571e-13, -6.4097794149313e-07, 3.8894624761300054e-07, -1.161834764494887e-07, -2.8168086305964423e-15, 1.9878012911297094e-08, -1.1407719956357511e-08, 3.2355857064185554e-09, 4.1759462466484876e-20, -5.042311271810582e-10),
    (-0.0059475779383993, -0.0005401647678926045, 0.00879104135507679, -0.009857631558785612, 0.005013469503102154, 1.2807521786221875e-06, -0.0020626019342754685, 0.0017109128573523059, -0.000676953127141338, -6.901154567656214e-09, 0.00018855128143995903, -0.0001339521566349197, 4.626318303352804e-05, 4.003423061332135e-11, -1.0255652921494033e-05, 6.612086372797651e-06, -2.0913022027253007e-06, -2.095177564960382e-13, 3.975602904199325e-07, -2.395621197881589e-07, 7.118288338214586e-08, 8.925574871713252e-16, -1.2101547235064677e-08, 6.935061824833439e-09, -1.966146445385609e-09),
    (0.01740202778752271, -0.02952788094569912, 0.020045875571402798, 7.0289515966903405e-06, -0.012375421071343148, 0.011976293444235255, -0.0054156038466518525, -6.329089339641862e-08, 0.0018855118129005065, -0.001473473274825001, 0.0005551581009770838, 5.240683441255066e-10, -0.00014357913535784835, 9.91812932249433e-05, -3.346083474947831e-05, -3.5755837291098967e-12, 7.1560851960630075e-06, -4.551680262815553e-06, 1.4236576649271474e-06, 1.8803149079275236e-14, -2.662340389892921e-07, 1.5950642189595716e-07, -4.718751467384107e-08, -6.510781264821694e-17, 7.979509102674677e-09),
    (0.03024912416090589, 0.0024817436002649977, -0.049939134373457025, 0.05991564300930787, -0.03248320760162339, -5.721296865210344e-06, 0.015085251778569354, -0.013261324005088445, 0.0055515262632426145, 3.026318225703001e-08, -0.0017229548406756724, 0.0012893570099929638, -0.00046845138348319875, -1.8302599378930445e-10, 0.00011449739014822654, -7.737856522124447e-05, 2.5625836246985202e-05, 1.0766165332658074e-12, -5.324680928242262e-06, 3.3496348630644643e-06, -1.038125312868401e-06, -5.608908533478749e-15, 1.9150821930676722e-07, -1.1418365800203775e-07, 3.365442520915233e-08),
    (-0.09905102088015905, 0.17954011706123485, -0.12989606383463778, -3.1478872752284355e-05, 0.09051063527684813, -0.0928288244111844, 0.04441211283987781, 2.7779236316835886e-07, -0.017229543805449696, 0.014182925050891573, -0.005621416163374734, -2.3959850918638095e-09, 0.0016029634366079909, -0.0011606784674435774, 0.00041001337768153875, 1.8365800753181603e-11, -9.58442565636559e-05, 6.364306233776471e-05, -2.0762506244890635e-05, -1.1806017999805486e-13, 4.213180823912094e-06, -2.6262241337013133e-06, 8.077062049488396e-07, 5.996409690563338e-16, -1.47297373744462e-07),
    (-0.19994542198219728, -0.015056113040026424, 0.3647023946934849, -0.4643519231173355, 0.26640934719197895, 3.403826602714719e-05, -0.13784338709329624, 0.1276467178337056, -0.056213828755200985, -1.7531508854830108e-07, 0.019235592956768112, -0.015088821281095316, 0.005740185445135012, 1.0622382710173866e-09, -0.0015335082692563998, 0.0010819320643228215, -0.0003737251019394563, -6.617090419433389e-12, 8.42636173809102e-05, -5.5150706827484874e-05, 1.7769536448337793e-05, 3.879070571006568e-14, -3.5351369749902462e-06, 2.1865832127706725e-06, -6.681284949240542e-07),
    (0.7243860850402943, -1.3918010932653375, 1.0654143352413967, 0.0001876173868950258, -0.827055011761527, 0.8935243334782841, -0.44971003995291337, -1.6107401567546651e-06, 0.1923559016527109, -0.1659770216004261, 0.06888222268181433, 1.391009172443142e-08, -0.021469115615086628, 0.016228980898865892, -0.005979601617258422, -1.1287468171928069e-10, 0.001516745111978496, -0.0010478634293554165, 0.00035539072889105875, 8.162616536150783e-13, -7.777301344470886e-05, 5.029141389162907e-05, -1.6035083877747675e-05, -5.0260094840152135e-15, 3.1369106037108428e-06),
    (1.6668949727276812, 0.1165462765994632, -3.3288393225018904, 4.469232548286404, -2.6977693045875806, -0.0002600667859891061, 1.5389017615694538, -1.4937962361134611, 0.6888196463323315, 1.3077482004532885e-06, -0.2576296332559629, 0.2109767610212545, -0.08371440835921982, -7.792042747000674e-09, 0.024267923064833764, -0.017813678334552763, 0.006397033038886307, 4.9415957307924725e-11, -0.0015554602758916928, 0.0010561196918773697, -0.00035277184484116647, -3.0939103274354235e-13, 7.528585452877513e-05, -4.8186515801973e-05, 1.5227272261135095e-05),
    (-6.618829886137293, 13.397985455142589, -10.789350606845145, -0.0014352254537875018, 9.23336945961898, -10.456552819547769, 5.510552602903347, 1.2024439690699193e-05, -2.5762961164755818, 2.320744274538718, -1.0045728797216278, -1.0207833106546672e-07, 0.33975092171169696, -0.26720517450758147, 0.10235252851556788, 8.430448585452676e-10, -0.02799828495925492, 0.020066274142830732, -0.007055436896237373, -6.510036896790042e-12, 0.0016562887995937561, -0.0011082898634291512, 0.0003654545342639166, 4.504194082820455e-14, -7.634011300557932e-05),
    (-17.112706061976095, -1.1208044642899115, 37.131966511885445, -52.29827102534896, 33.058589696624615, 0.0024791298976198995, -20.610894034115258, 20.886727751455822, -10.045703956517746, -1.2238783428880736e-05, 4.077013427422142, -3.473667358470283, 1.4329352617303721, 7.135612771732799e-08, -0.4479725716041533, 0.34112666076996123, -0.12699786335106672, -4.5009172627885263e-10, 0.033125776059235765, -0.023274087133486544, 0.008039999749288682, 2.9014850241350154e-12, -0.0018321627125162138, 0.001210814074308124, -0.00039487195597625305),
    (73.89033153567425, -156.80141270402274, 132.2177542759164, 0.013692876877323932, -123.66496885920151, 146.2068939106273, -80.36558772486529, -0.00011259851130717249, 40.770132196180214, -38.210340013274, 17.195222942763678, 9.351478525225111e-07, -6.271615990956665, 5.116899906638013, -2.0319658125917894, -7.68015576927279e-09, 0.5962639690008922, -0.44220765550893937, 0.1607999949801386, 6.105452322399745e-11, -0.04030757967497879, 0.02784872370893079, -0.00947692694339809, -4.5311013227974904e-13, 0.002105335093633221),
    (212.1683709838252, 13.107863022633866, -496.9828593287175, 731.2159526696921, -482.13821720890815, -0.028817248691623405, 326.1672030294732, -343.89340280087987, 171.9519387080629, 0.00014038023228364068, -75.25941959194343, 66.51969983809508, -28.44751976721878, -8.023117747524886e-07, 9.540223647451496, -7.51753014765263, 2.894399900499762, 4.980023807118572e-09, -0.8061515942879215, 0.5848231979048016, -0.20849239270188827, -3.225438491326595e-11, 0.05052804225167161, -0.03441205280628807, 0.011560069800937042),
    (-989.5964309832236, 2192.555536090523, -1928.3586782723344, -0.1592573812157951, 1956.9985945919989, -2407.2514765082165, 1375.6149959328543, 0.0012920686502737788, -752.5941716166408, 731.7166873438302, -341.37023489099647, -1.0517978697205148e-05, 133.56313092981054, -112.76295215735033, 46.31039839600551, 8.49948412810344e-08, -14.510728696418298, 11.111640759871898, -4.169847853971864, -6.787845238126073e-10, 1.1116169295323557, -0.7914772145428005, 0.277441675222115, 5.226168222780974e-12, -0.06531439992499116),
)
# lgamma(1 + e) = -gamma e + sum_k>=2 (-1)**k zeta(k)/k e**k for |e| <= 0.5 (Cephes lgam1p's
# Taylor branch), highest degree first
_LGAM1P = tuple(reversed([float(-mpmath.euler) if k == 1 else
                          float((-1) ** k * mpmath.zeta(k) / k) for k in range(1, 60)]))

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


# ----------------------------------------------------------------------------- C helpers
def _horner(coeffs, var) -> str:
    """C text of the polynomial with coefficients highest degree first, in Horner form."""
    out = repr(float(coeffs[0]))
    for c in coeffs[1:]:
        out = f"({out} * {var} + {float(c)!r})"
    return out


def _chbevl_c(coeffs, var) -> str:
    lines = [f"    b0 = {float(coeffs[0])!r}; b1 = 0.0; b2 = 0.0;"]
    for c in coeffs[1:]:
        lines.append(f"    b2 = b1; b1 = b0; b0 = {var} * b1 - b2 + {float(c)!r};")
    return "\n".join(lines)


def _c_lgamma() -> str:
    return f"""\
/* log|Gamma(x)| (Cephes lgam for x > 0, reflection for x <= 0); +inf at the poles */
SG_QUAL double symgrad_lgamma(double x)
{{
    double refl = 0.0, y, z, p, u, t;
    int neg = 0;
    if (x != x) return x;
    if (isinf(x)) return INFINITY;
    if (x <= 0.0) {{
        double n = rint(x);
        if (x == n) return INFINITY;
        refl = log({_PI!r} / fabs(sin({_PI!r} * (x - n))));
        x = 1.0 - x;
        neg = 1;
    }}
    if (x < 1e-300) {{
        y = -log(x);
    }} else if (fabs(x - 1.0) < 0.2 || fabs(x - 2.0) < 0.2) {{
        /* near the zeros at 1 and 2: the series of lgamma(1 + e) (and log1p(e) for 2 + e) */
        t = x < 1.5 ? x - 1.0 : x - 2.0;
        y = t * {_horner(_LGAM_NEAR[::-1], "t")};
        if (x >= 1.5) y += log1p(t);
    }} else if (x < 13.0) {{
        z = 1.0; p = 0.0; u = x;
        while (u >= 3.0) {{ p -= 1.0; u = x + p; z *= u; }}
        while (u < 2.0) {{ z /= u; p += 1.0; u = x + p; }}
        t = x + (p - 2.0);
        y = log(z) + t * {_horner(_LGAM_B, "t")} / {_horner(_LGAM_C, "t")};
    }} else {{
        y = (x - 0.5) * log(x) - x + {_LS2PI!r};
        if (x < 1e8) {{
            z = 1.0 / (x * x);
            y += {_horner(_LGAM_A, "z")} / x;
        }}
    }}
    return neg ? refl - y : y;
}}"""


def _c_digamma() -> str:
    return f"""\
/* digamma: recurrence up to 10, asymptotic series; reflection for x <= 0 (torch's poles) */
SG_QUAL double symgrad_digamma(double x)
{{
    double refl = 0.0, acc = 0.0, z;
    if (x != x || x == INFINITY) return x;
    z = (x - {_PSI_ROOT[0]!r}) - {_PSI_ROOT[1]!r};
    if (fabs(z) < 0.1) return {_horner(_PSI_ROOT_SERIES[::-1] + (0.0,), "z")};
    if (x <= 0.0) {{
        double n = rint(x);
        if (x == n) return x == 0.0 ? copysign(INFINITY, -x) : NAN;
        const double r = x - n;   /* cos(pi r) = sin(pi (0.5 - |r|)): 0 at half-integers */
        refl = -{_PI!r} * sin({_PI!r} * (0.5 - fabs(r))) / sin({_PI!r} * r);
        x = 1.0 - x;
    }}
    while (x < 10.0) {{ acc += 1.0 / x; x += 1.0; }}
    z = 1.0 / (x * x);
    return log(x) - 0.5 / x - z * {_horner(_PSI_A, "z")} - acc + refl;
}}"""


def _c_polygamma(n: int) -> str:
    s = float(n + 1)
    sign = 1.0 if n % 2 else -1.0
    fact = float(math.factorial(n))
    cut = _polygamma_cut(n)
    poly = _cot_derivative_poly(n)
    poly_c = _horner([float(c) for c in poly[::-1]], "c")
    divs = ", ".join(repr(d) for d in _ZETA_A)
    return f"""\
/* polygamma({n}, x) = {'-' if sign < 0 else ''}{n}! zeta({n + 1}, x): direct sum to {cut:g}, Euler-Maclaurin tail;
   reflection for x < 0 with cot's {n}-th derivative as a polynomial in cot */
SG_QUAL double symgrad_polygamma{n}(double x)
{{
    const double div[12] = {{{divs}}};
    double v, a, b, zeta, fa, k, r;
    int i, neg;
    if (x != x) return x;
    if (x == INFINITY) return 0.0;
    if (x == -INFINITY) return NAN;
    r = rint(x);
    if (x <= 0.0 && x == r) return {sign!r} * INFINITY;
    neg = x < 0.0;
    v = neg ? 1.0 - x : x;
    zeta = 0.0;
    a = v;
    while (a < {cut!r}) {{ zeta += pow(a, -{s!r}); a += 1.0; }}
    b = pow(a, -{s!r});
    zeta += pow(a, {1.0 - s!r}) / {s - 1.0!r} + 0.5 * b;   /* not a * b: b underflows first */
    fa = 1.0; k = 0.0;
    for (i = 0; i < 12; i++) {{
        fa *= {s!r} + k; b /= a;
        zeta += fa * b / div[i];
        k += 1.0; fa *= {s!r} + k; b /= a; k += 1.0;
    }}
    zeta *= {sign * fact!r};
    if (neg) {{
        const double c = sin({_PI!r} * (0.5 - fabs(x - r))) / sin({_PI!r} * (x - r));
        zeta = {-sign!r} * zeta - {_PI ** (n + 1)!r} * {poly_c};
    }}
    return zeta;
}}"""


def _c_erfinv() -> str:
    return f"""\
/* inverse error function: Pavlis' first guess, two Halley steps on erf (|y| <= 0.5) or on
   erfc(t) = 1 - |y| (exact there); +-inf at +-1, nan beyond */
SG_QUAL double symgrad_erfinv(double y)
{{
    const double a = fabs(y);
    double t, z, f, r;
    int i;
    if (!(a < 1.0)) return a == 1.0 ? copysign(INFINITY, y) : NAN;
    if (a <= 0.7) {{
        z = a * a;
        t = a * {_horner(_ERFINV_A[::-1], "z")} / ({_horner(_ERFINV_B[::-1], "z")} * z + 1.0);
    }} else {{
        z = sqrt(-log((1.0 - a) / 2.0));
        t = {_horner(_ERFINV_C[::-1], "z")} / ({_horner(_ERFINV_D[::-1], "z")} * z + 1.0);
    }}
    for (i = 0; i < 2; i++) {{
        f = a > 0.5 ? (1.0 - a) - erfc(t) : erf(t) - a;
        r = f / ({_TWO_OVER_SQRT_PI!r} * exp(-t * t));
        t = t - r / (1.0 + t * r);
    }}
    return copysign(t, y);
}}"""


def _c_bessel(order: int, scaled: bool) -> str:
    name = f"i{order}" + ("e" if scaled else "")
    near_c, far_c = (_I0_A, _I0_B) if order == 0 else (_I1_A, _I1_B)
    near_scale = "" if order == 0 else " * a"
    if scaled:
        finish = "    if (a == INFINITY) y = 0.0;"
    else:
        finish = ("    if (a == INFINITY) y = INFINITY;\n"
                  "    else { const double h = exp(a / 2.0); y = h * (h * y); }")
    odd = "\n    if (x < 0.0) y = -y;" if order == 1 else ""
    return f"""\
/* {name}(x) (Cephes Chebyshev expansions on [0, 8] and (8, inf)) */
SG_QUAL double symgrad_{name}(double x)
{{
    const double a = fabs(x);
    double b0, b1, b2, t, y;
    if (x != x) return x;
    if (a <= 8.0) {{
        t = a / 2.0 - 2.0;
{_chbevl_c(near_c, "t")}
        y = 0.5 * (b0 - b2){near_scale};
    }} else {{
        t = 32.0 / a - 2.0;
{_chbevl_c(far_c, "t")}
        y = 0.5 * (b0 - b2) / sqrt(a);
    }}
{finish}{odd}
    return y;
}}"""


def _c_igamma() -> str:
    """symgrad_igamma / symgrad_igammac (and their helpers): the NumPy helper's algorithm,
    one element at a time (needs symgrad_lgamma, defined before it)."""
    rows = []
    for k, row in enumerate(_IGAM_D):
        rows.append(f"        case {k}: ck = {_horner(row[::-1], 'eta')}; break;")
    cases = "\n".join(rows)
    return f"""\
/* log(1 + s) - s without cancellation */
SG_QUAL double symgrad_igam_log1pmx(double s)
{{
    if (fabs(s) < 0.5) {{
        double t = s / (2.0 + s), t2 = t * t, series = 0.0;
        int k;
        for (k = 17; k > 0; k--) series = series * t2 + 2.0 / (2 * k + 1);
        return -s * s / (2.0 + s) + t * t2 * series;
    }}
    return log1p(s) - s;
}}
/* x**a exp(-x) / Gamma(a): Stirling's form for a >= 10 */
SG_QUAL double symgrad_igam_fac(double a, double x)
{{
    if (a >= 10.0) {{
        double r = 1.0 / (a * a), s = (x - a) / a, e;
        double corr = (((((-691.0 / 360360.0 * r + 1.0 / 1188.0) * r - 1.0 / 1680.0) * r
                         + 1.0 / 1260.0) * r - 1.0 / 360.0) * r + 1.0 / 12.0) / a;
        e = fabs(s) < 0.5 ? a * symgrad_igam_log1pmx(s) : a * log(x / a) - (x - a);
        return sqrt(a / (2.0 * {_PI!r})) * exp(e - corr);
    }}
    return exp(a * log(x) - x - symgrad_lgamma(a));
}}
/* P(a, x) by its power series */
SG_QUAL double symgrad_igam_series(double a, double x)
{{
    double ax = symgrad_igam_fac(a, x), r = a, c = 1.0, ans = 1.0;
    int i;
    if (ax == 0.0) return 0.0;
    for (i = 0; i < 2000; i++) {{
        r += 1.0; c *= x / r; ans += c;
        if (c <= 1.1102230246251565e-16 * ans) break;
    }}
    return ans * ax / a;
}}
/* Q(a, x) by its continued fraction */
SG_QUAL double symgrad_igamc_cf(double a, double x)
{{
    double ax = symgrad_igam_fac(a, x), y, z, c = 0.0, yc, r, t, ans;
    double pk, pkm1, pkm2 = 1.0, qk, qkm1, qkm2 = x;
    int i;
    if (ax == 0.0) return 0.0;
    y = 1.0 - a; z = x + y + 1.0; pkm1 = x + 1.0; qkm1 = z * x; ans = pkm1 / qkm1;
    for (i = 0; i < 2000; i++) {{
        c += 1.0; y += 1.0; z += 2.0; yc = y * c;
        pk = pkm1 * z - pkm2 * yc; qk = qkm1 * z - qkm2 * yc;
        if (qk != 0.0) {{ r = pk / qk; t = fabs((ans - r) / r); ans = r; }} else t = 1.0;
        pkm2 = pkm1; pkm1 = pk; qkm2 = qkm1; qkm1 = qk;
        if (fabs(pk) > 4503599627370496.0) {{
            pkm2 *= 2.220446049250313e-16; pkm1 *= 2.220446049250313e-16;
            qkm2 *= 2.220446049250313e-16; qkm1 *= 2.220446049250313e-16;
        }}
        if (t <= 1.1102230246251565e-16) break;
    }}
    return ans * ax;
}}
/* lgamma(1 + a), accurate for small |a| */
SG_QUAL double symgrad_lgam1p(double a)
{{
    double e;
    if (fabs(a) <= 0.5) {{ e = a; return e * {_horner(_LGAM1P, "e")}; }}
    if (fabs(a - 1.0) < 0.5) {{ e = a - 1.0; return log(a) + e * {_horner(_LGAM1P, "e")}; }}
    return symgrad_lgamma(a + 1.0);
}}
/* Q(a, x) for small a and x, without the cancellation of 1 - P */
SG_QUAL double symgrad_igamc_series(double a, double x)
{{
    double fac = 1.0, sum = 0.0, term, logx;
    int n;
    for (n = 1; n < 2000; n++) {{
        fac *= -x / n; term = fac / (a + n); sum += term;
        if (fabs(term) <= 1.1102230246251565e-16 * fabs(sum)) break;
    }}
    logx = log(x);
    return -expm1(a * logx - symgrad_lgam1p(a)) - exp(a * logx - symgrad_lgamma(a)) * sum;
}}
/* P (upper 0) or Q (upper 1) by Temme's uniform asymptotic expansion */
SG_QUAL double symgrad_igam_asymptotic(double a, double x, int upper)
{{
    double sgn = upper ? 1.0 : -1.0, sigma = (x - a) / a, eta, res, sum = 0.0, ck = 0.0;
    double old = INFINITY, afac = 1.0, term, absterm;
    int k;
    eta = sqrt(-2.0 * symgrad_igam_log1pmx(sigma));
    if (sigma < 0.0) eta = -eta;
    res = 0.5 * erfc(sgn * eta * sqrt(a / 2.0));
    for (k = 0; k < {len(_IGAM_D)}; k++) {{
        switch (k) {{
{cases}
        }}
        term = ck * afac; absterm = fabs(term);
        if (absterm > old) break;
        sum += term;
        if (absterm < 1.1102230246251565e-16 * fabs(sum)) break;
        old = absterm; afac /= a;
    }}
    return res + sgn * exp(-0.5 * a * eta * eta) * sum / sqrt(2.0 * {_PI!r} * a);
}}
/* P(a, x) (upper 0) or Q(a, x) (upper 1): Cephes igam / igamc with torch's edge values */
SG_QUAL double symgrad_igamma_pq(double a, double x, int upper)
{{
    double p = upper ? 0.0 : 1.0, q = upper ? 1.0 : 0.0, ratio, r;
    if (!(a >= 0.0) || !(x >= 0.0)) return NAN;
    if (a == 0.0) return x > 0.0 ? p : NAN;
    if (x == 0.0) return q;
    if (isinf(a)) return isinf(x) ? NAN : q;
    if (isinf(x)) return p;
    ratio = fabs(x - a) / a;
    if ((a > 20.0 && a < 200.0 && ratio < 0.3) || (a > 200.0 && ratio < 4.5 / sqrt(a)))
        return symgrad_igam_asymptotic(a, x, upper);
    if (!upper && !(x > 1.0 && x > a)) return symgrad_igam_series(a, x);
    /* Q's choice of method (for P: x > 1, x > a, P = 1 - Q) */
    if (x > 1.1) {{
        r = x < a ? 1.0 - symgrad_igam_series(a, x) : symgrad_igamc_cf(a, x);
    }} else if (x <= 0.5) {{
        r = -0.4 / log(x) < a ? 1.0 - symgrad_igam_series(a, x) : symgrad_igamc_series(a, x);
    }} else {{
        r = x * 1.1 < a ? 1.0 - symgrad_igam_series(a, x) : symgrad_igamc_series(a, x);
    }}
    return upper ? r : 1.0 - r;
}}
SG_QUAL double symgrad_igamma(double a, double x) {{ return symgrad_igamma_pq(a, x, 0); }}
SG_QUAL double symgrad_igammac(double a, double x) {{ return symgrad_igamma_pq(a, x, 1); }}"""


def _c_source(name: str) -> str:
    """The double-precision C definition of helper `name` (symgrad_<name>)."""
    if name == "lgamma":
        return _c_lgamma()
    if name == "digamma":
        return _c_digamma()
    if name == "erfinv":
        return _c_erfinv()
    if name == "igamma":
        return _c_igamma()
    m = re.fullmatch(r"polygamma(\d+)", name)
    if m:
        return _c_polygamma(int(m.group(1)))
    m = re.fullmatch(r"i([01])(e?)", name)
    if m:
        return _c_bessel(int(m.group(1)), bool(m.group(2)))
    raise KeyError(name)


_C_CALL = re.compile(
    r"(?<![\w.])symgrad_(lgamma|digamma|erfinv|polygamma\d+|i[01]e?|igammac?)(f?)\(")
# helpers a helper calls (defined before it); igamma's source defines igamma and igammac
_C_DEPENDS = {"igamma": ("lgamma",)}


def c_definitions(code: str, qualifier: str) -> str:
    """C definitions of the special-function helpers that `code` calls (symgrad_lgamma,
    symgrad_lgammaf, symgrad_polygamma2, ...), each declared with `qualifier` (the C target's
    SYMGRAD_INLINE, CUDA's SG_DEVICE). The float versions evaluate the double ones and round
    once, as the NumPy target does. Empty when `code` calls none."""
    calls = [(m.group(1), m.group(2)) for m in _C_CALL.finditer(code)]
    sources = {"igammac": "igamma"}          # the one C source that defines both
    wanted = []
    for name in sorted({sources.get(name, name) for name, _ in calls}):
        for dep in _C_DEPENDS.get(name, ()) + (name,):     # dependencies first
            if dep not in wanted:
                wanted.append(dep)
    floats = sorted({name for name, f in calls if f})
    parts = []
    for source in wanted:     # each source, then the float versions of what it defines
        parts.append(_c_source(source).replace("SG_QUAL", qualifier))
        for name in floats:
            if sources.get(name, name) != source:
                continue
            if source == "igamma":
                parts.append(f"{qualifier} float symgrad_{name}f(float a, float x) "
                             f"{{ return (float)symgrad_{name}((double)a, (double)x); }}")
            else:
                parts.append(f"{qualifier} float symgrad_{name}f(float x) "
                             f"{{ return (float)symgrad_{name}((double)x); }}")
    return "\n".join(parts)


# libm functions the helpers call (the C target declares their vector variants)
C_CALLS = " exp( log( log1p( sin( pow( sqrt( erf( erfc( "


# ----------------------------------------------------------------------------- SymPy classes
def _c_call(printer, name, x) -> str:
    suffix = "f" if getattr(printer, "float_type", "double") == "float" else ""
    return f"symgrad_{name}{suffix}({printer._print(x)})"


class _Special(sympy.Function):
    """Base of the one-argument special functions."""

    nargs = 1
    helper = ""          # the NumPy helper's call, e.g. "_lgamma({})"
    c_helper = ""        # symgrad_<c_helper>[f] in C / CUDA
    mpmath_fn = None
    numpy_cost = 60      # optimize.OP_COST units (several passes and a few transcendentals)

    def _eval_mpmath(self):
        return type(self).mpmath_fn, self.args

    def _eval_is_real(self):
        return self.args[0].is_real

    def _numpycode(self, printer):
        return self.helper.format(printer._print(self.args[0]))

    def _ccode(self, printer):
        return _c_call(printer, self.c_helper, self.args[0])


def _mp_lgamma(x):
    if mpmath.isinf(x):
        return mpmath.inf
    if x <= 0 and x == mpmath.floor(x):
        return mpmath.inf
    return mpmath.re(mpmath.loggamma(x)) if x > 0 else mpmath.log(abs(mpmath.gamma(x)))


def _mp_digamma(x):
    if x <= 0 and x == mpmath.floor(x):
        return mpmath.nan
    return mpmath.digamma(x)


class lgamma(_Special):
    """torch.lgamma: log|Gamma(x)|; derivative digamma(x)."""

    helper = "_lgamma({})"
    c_helper = "lgamma"
    mpmath_fn = staticmethod(_mp_lgamma)

    @classmethod
    def eval(cls, x):
        if x in (sympy.S.One, sympy.Integer(2)):
            return sympy.S.Zero
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return digamma(self.args[0])

    def _eval_rewrite_as_loggamma(self, x, **kwargs):
        return sympy.loggamma(x)


class digamma(_Special):
    """torch.digamma (torch.special.psi); derivative polygamma(1, x) (trigamma)."""

    helper = "_digamma({})"
    c_helper = "digamma"
    mpmath_fn = staticmethod(_mp_digamma)

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return polygamma(sympy.S.One, self.args[0])

    def _eval_rewrite_as_polygamma(self, x, **kwargs):
        return sympy.polygamma(0, x)


class polygamma(sympy.Function):
    """torch.polygamma(n, x): the n-th derivative of digamma, integer n >= 1 (n = 0 is
    digamma itself); derivative in x polygamma(n + 1, x), none in n."""

    nargs = 2
    numpy_cost = 120

    @classmethod
    def eval(cls, n, x):
        if not (n.is_Integer and n >= 0):
            raise TypeError(f"polygamma: n must be a non-negative integer, got {n}")
        if n == 0:
            return digamma(x)
        return None

    def fdiff(self, argindex=2):
        n, x = self.args
        if argindex != 2:
            raise sympy.ArgumentIndexError(self, argindex)
        return polygamma(n + 1, x)

    def _eval_is_real(self):
        return self.args[1].is_real

    def _eval_mpmath(self):
        def value(n, x):
            if x <= 0 and x == mpmath.floor(x):
                return (-1) ** (int(n) + 1) * mpmath.inf
            return mpmath.psi(int(n), x)
        return value, self.args

    def _eval_rewrite_as_polygamma(self, n, x, **kwargs):
        return sympy.polygamma(n, x)

    def _numpycode(self, printer):
        n, x = self.args
        return f"_polygamma({int(n)}, {printer._print(x)})"

    def _ccode(self, printer):
        n, x = self.args
        return _c_call(printer, f"polygamma{int(n)}", x)


class erfinv(_Special):
    """torch.erfinv; derivative sqrt(pi)/2 * exp(erfinv(x)**2)."""

    helper = "_erfinv({})"
    c_helper = "erfinv"
    mpmath_fn = staticmethod(lambda y: mpmath.erfinv(y) if abs(y) <= 1 else mpmath.nan)

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sympy.S.Zero
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return sympy.sqrt(sympy.pi) / 2 * sympy.exp(self ** 2)

    def _eval_rewrite_as_erfinv(self, x, **kwargs):
        return sympy.erfinv(x)


class i0(_Special):
    """torch.i0 (torch.special.i0): modified Bessel function I0; derivative i1(x)."""

    helper = "_bessel_i(0, {}, False)"
    c_helper = "i0"
    mpmath_fn = staticmethod(lambda x: mpmath.besseli(0, x))

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return i1(self.args[0])


class i0e(_Special):
    """torch.special.i0e: exp(-|x|) I0(x); derivative i1e(x) - sign(x) i0e(x)."""

    helper = "_bessel_i(0, {}, True)"
    c_helper = "i0e"
    mpmath_fn = staticmethod(lambda x: mpmath.exp(-abs(x)) * mpmath.besseli(0, x))

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        x = self.args[0]
        return i1e(x) - sympy.sign(x) * self


class i1(_Special):
    """torch.special.i1: I1(x); derivative i0(x) - i1(x)/x, 1/2 at 0 (torch's)."""

    helper = "_bessel_i(1, {}, False)"
    c_helper = "i1"
    mpmath_fn = staticmethod(lambda x: mpmath.besseli(1, x))

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        from .elementwise import quotient

        x = self.args[0]
        return sympy.Piecewise((sympy.S.Half, sympy.Eq(x, 0)), (i0(x) - quotient(self, x), True))


class i1e(_Special):
    """torch.special.i1e: exp(-|x|) I1(x); derivative i0e(x) - i1e(x)/x - sign(x) i1e(x),
    1/2 at 0 (torch's)."""

    helper = "_bessel_i(1, {}, True)"
    c_helper = "i1e"
    mpmath_fn = staticmethod(lambda x: mpmath.exp(-abs(x)) * mpmath.besseli(1, x))

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        from .elementwise import quotient

        x = self.args[0]
        d = i0e(x) - quotient(self, x) - sympy.sign(x) * self
        return sympy.Piecewise((sympy.S.Half, sympy.Eq(x, 0)), (d, True))


class igamma(sympy.Function):
    """torch.igamma(a, x) (torch.special.gammainc): the regularized lower incomplete gamma
    P(a, x) = lowergamma(a, x) / Gamma(a). Derivative in x: torch's
    exp((a - 1) log x - x - lgamma(a)); in a: none (torch raises NotImplementedError; here the
    compile names it). Every target: the NumPy helper `_igamma` and the C / CUDA helpers
    symgrad_igamma / symgrad_igammac run the same algorithm (Cephes igam / igamc)."""

    nargs = 2
    numpy_cost = 400
    upper = False

    def fdiff(self, argindex=2):
        a, x = self.args
        if argindex == 1:
            raise NotImplementedError(
                f"the derivative for '{type(self).__name__}: input' is not implemented "
                "(torch has none either): pass a as a constant (captured or detached)")
        if argindex != 2:
            raise sympy.ArgumentIndexError(self, argindex)
        d = sympy.exp((a - 1) * sympy.log(x) - x - lgamma(a))
        return -d if self.upper else d

    def _eval_is_real(self):
        return True if self.args[0].is_real and self.args[1].is_real else None

    def _eval_mpmath(self):
        upper = self.upper

        def value(a, x):
            if a < 0 or x < 0 or (a == 0 and x == 0) or (mpmath.isinf(a) and mpmath.isinf(x)):
                return mpmath.nan
            if a == 0:
                return mpmath.mpf(0 if upper else 1)
            if x == 0 or mpmath.isinf(a):
                return mpmath.mpf(1 if upper else 0)
            if upper:
                return mpmath.gammainc(a, x, mpmath.inf, regularized=True)
            return mpmath.gammainc(a, 0, x, regularized=True)
        return value, self.args

    def _eval_rewrite_as_lowergamma(self, a, x, **kwargs):
        return sympy.lowergamma(a, x) / sympy.gamma(a)

    def _eval_rewrite_as_uppergamma(self, a, x, **kwargs):
        return sympy.uppergamma(a, x) / sympy.gamma(a)

    def _numpycode(self, printer):
        a, x = self.args
        return f"_igamma({printer._print(a)}, {printer._print(x)}, {self.upper})"

    def _ccode(self, printer):
        a, x = self.args
        suffix = "f" if getattr(printer, "float_type", "double") == "float" else ""
        return (f"symgrad_{type(self).__name__}{suffix}({printer._print(a)}, "
                f"{printer._print(x)})")


class igammac(igamma):
    """torch.igammac(a, x) (torch.special.gammaincc): Q(a, x) = 1 - P(a, x), computed without
    the cancellation (uppergamma(a, x) / Gamma(a)); derivative in x the negated one of P."""

    upper = True

    def _eval_rewrite_as_lowergamma(self, a, x, **kwargs):
        return 1 - sympy.lowergamma(a, x) / sympy.gamma(a)


SPECIAL_OPS: dict[str, type] = {
    "lgamma": lgamma, "digamma": digamma, "polygamma": polygamma, "erfinv": erfinv,
    "i0": i0, "i0e": i0e, "i1": i1, "i1e": i1e, "igamma": igamma, "igammac": igammac,
}
