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

__all__ = ["lgamma", "digamma", "polygamma", "erfinv", "i0", "i0e", "i1", "i1e",
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


def _c_source(name: str) -> str:
    """The double-precision C definition of helper `name` (symgrad_<name>)."""
    if name == "lgamma":
        return _c_lgamma()
    if name == "digamma":
        return _c_digamma()
    if name == "erfinv":
        return _c_erfinv()
    m = re.fullmatch(r"polygamma(\d+)", name)
    if m:
        return _c_polygamma(int(m.group(1)))
    m = re.fullmatch(r"i([01])(e?)", name)
    if m:
        return _c_bessel(int(m.group(1)), bool(m.group(2)))
    raise KeyError(name)


_C_CALL = re.compile(r"(?<![\w.])symgrad_(lgamma|digamma|erfinv|polygamma\d+|i[01]e?)(f?)\(")


def c_definitions(code: str, qualifier: str) -> str:
    """C definitions of the special-function helpers that `code` calls (symgrad_lgamma,
    symgrad_lgammaf, symgrad_polygamma2, ...), each declared with `qualifier` (the C target's
    SYMGRAD_INLINE, CUDA's SG_DEVICE). The float versions evaluate the double ones and round
    once, as the NumPy target does. Empty when `code` calls none."""
    wanted = sorted({m.group(1) for m in _C_CALL.finditer(code)})
    floats = {m.group(1) for m in _C_CALL.finditer(code) if m.group(2)}
    parts = []
    for name in wanted:
        parts.append(_c_source(name).replace("SG_QUAL", qualifier))
        if name in floats:
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


SPECIAL_OPS: dict[str, type] = {
    "lgamma": lgamma, "digamma": digamma, "polygamma": polygamma, "erfinv": erfinv,
    "i0": i0, "i0e": i0e, "i1": i1, "i1e": i1e,
}
