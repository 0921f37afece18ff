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

import mpmath
import sympy

# The special functions' coefficients, NumPy helpers and C helpers are in specfun_coefficients,
# specfun_numpy and specfun_c; this module holds the SymPy classes and re-exports their names.
from .stable_numpy import _HELPER_DEPENDS, NUMPY_HELPERS  # noqa: F401
from .specfun_coefficients import (_LGAM_A, _LGAM_B, _LGAM_C, _LS2PI, _LGAM_NEAR, _PSI_A,
                                   _PSI_ROOT, _PSI_ROOT_SERIES, _ZETA_A, _ERFINV_A, _ERFINV_B,
                                   _ERFINV_C, _ERFINV_D, _I0_A, _I0_B, _I1_A, _I1_B, _PI,
                                   _SQRT_PI_2, _TWO_OVER_SQRT_PI, _cot_derivative_poly,
                                   _polygamma_cut, _IGAM_D, _LGAM1P)  # noqa: F401
from .specfun_numpy import _np_tuple, _IGAMMA_PARTS  # noqa: F401
from .specfun_c import (_horner, _chbevl_c, _c_lgamma, _c_digamma, _c_polygamma, _c_erfinv,
                        _c_bessel, _c_igamma, _c_source, _C_CALL, _C_DEPENDS, c_definitions,
                        C_CALLS)  # noqa: F401

__all__ = ["lgamma", "digamma", "polygamma", "erfinv", "i0", "i0e", "i1", "i1e", "igamma", "igammac",
           "SPECIAL_OPS", "c_definitions"]


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
