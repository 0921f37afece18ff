"""Numerically stable scalar primitives: one class per op (forward, derivative, printers).

Contract:
- ``eval`` only folds trivial numeric arguments (sigmoid(0) = 1/2, ...). Symbolic arguments are
  never rewritten here; rewriting naive formulas into these primitives is ``symgrad.rewrites``.
- ``fdiff`` is written as math, in terms of the result or of other stable primitives, so that
  every derivative of every order stays finite wherever the true derivative is finite.
- ``expr.evalf(50)`` works through ``_eval_mpmath``; ``rewrite(exp)`` gives the textbook form.
- ``_numpycode`` prints for NumPy (module ``numpy``; ufuncs and Python-scalar constants only, so
  float32 arrays stay float32; finite for every finite input, no overflow warnings). Where one
  ufunc is not enough, the code calls a helper from ``NUMPY_HELPERS``, which a generated module
  must include; ``required_numpy_helpers(source)`` says which, in dependency order.
- ``_ccode`` prints C99 / CUDA. The precision comes from the printer's ``float_type`` attribute
  ("float" or "double"), read by ``c_func``; literals go through ``printer._print`` so they get
  the printer's suffix.

``log1p`` and ``expm1`` are SymPy's ``sympy.codegen.cfunctions`` classes: their ``fdiff`` is
right, mpmath has both, NumPyPrinter prints ``numpy.log1p``/``numpy.expm1`` and C99CodePrinter
prints ``log1p``/``log1pf`` from its ``type_aliases``. ``erf``/``erfc`` are SymPy's classes;
NumPyPrinter prints them as ``math.erf`` (scalar only), so ``print_erf_numpy`` and
``print_erfc_numpy`` are provided for the NumPy printer to install as ``_print_erf``/``_print_erfc``.
"""

from __future__ import annotations

import mpmath
import sympy
from sympy.codegen.cfunctions import expm1, log1p

from . import specfun  # noqa: F401  (the special functions load with the stable primitives)
# the NumPy helpers the primitives' printed code calls (stable_numpy; the special functions add
# theirs, specfun_numpy) and which ones a printed source needs
from .numpy_helpers import (NUMPY_HELPERS, _HELPER_DEPENDS, numpy_helper_namespace,  # noqa: F401
                            required_numpy_helpers)

__all__ = [
    "sigmoid",
    "softplus",
    "log_sigmoid",
    "logaddexp",
    "logsumexp",
    "log1p",
    "expm1",
    "erfc",
    "erfcx",
    "log_ndtr",
    "log1mexp",
    "sinc",
    "exprel",
    "log1prel",
    "inv_exprel",
    "sinhc",
    "inv_sinhc",
    "tanc",
    "tanhc",
    "log_cosh",
    "taylor_op",
    "STABLE_OPS",
    "NUMPY_HELPERS",
    "NUMPY_PRINT_METHODS",
    "c_func",
    "required_numpy_helpers",
    "print_erf_numpy",
    "print_erfc_numpy",
]


# ----------------------------------------------------------------------------- printing helpers


def c_func(printer, name: str) -> str:
    """C math function name for the printer's precision: ``expf`` for float, ``exp`` for double.

    Args:
        printer: a C/CUDA code printer; its ``float_type`` attribute ("float" or "double",
            default "double") selects the precision.
        name: the double-precision C99 name, e.g. "exp", "log1p", "fmax", "fabs".

    Returns:
        The name to call.
    """
    if getattr(printer, "float_type", "double") == "float":
        return name + "f"
    return name


def _np(printer, name: str) -> str:
    """``numpy.<name>``, spelled through the printer so a CuPy printer gets ``cupy.<name>``."""
    module = getattr(printer, "_module", "numpy")
    return printer._module_format(f"{module}.{name}")


def _arg(printer, expr) -> str:
    """An argument printed and parenthesized, safe to place next to any operator."""
    return f"({printer._print(expr)})"


def _c_lit(printer, value) -> str:
    """A numeric literal printed by the printer (so float printers add their suffix)."""
    return printer._print(sympy.sympify(value))


# ----------------------------------------------------------------------------- primitives


class sigmoid(sympy.Function):
    """sigmoid(x) = 1 / (1 + exp(-x)).

    Derivative: s(x) * s(-x), not s(x) * (1 - s(x)): the two are equal, but 1 - s(x) cancels
    to 0 for x > 37 (and loses all relative accuracy from x ~ 20), while s(-x) is accurate.
    """

    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sympy.S.Half
        if x is sympy.S.Infinity:
            return sympy.S.One
        if x is sympy.S.NegativeInfinity:
            return sympy.S.Zero
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return self * sigmoid(-self.args[0])

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return 1 / (1 + sympy.exp(-x))

    def _eval_mpmath(self):
        return (lambda x: 1 / (1 + mpmath.exp(-x))), self.args

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_positive(self):
        return self.args[0].is_real

    def _numpycode(self, printer):
        return f"_sigmoid({printer._print(self.args[0])})"

    def _ccode(self, printer):
        # t = exp(-|x|) never overflows: (x >= 0 ? 1 : t) / (1 + t) keeps sigmoid(x)'s
        # subnormal values below x = -88 (float) / -709 (double), where 1/(1 + exp(-x)) is 0.
        # The compiler computes the repeated exp once (math functions are const).
        x = _arg(printer, self.args[0])
        exp_, fabs = c_func(printer, "exp"), c_func(printer, "fabs")
        one, zero = _c_lit(printer, 1), _c_lit(printer, 0)
        t = f"{exp_}(-{fabs}({x}))"
        return f"(({x} >= {zero} ? {one} : {t})/({one} + {t}))"


class softplus(sympy.Function):
    """softplus(x) = log(1 + exp(x)); derivative sigmoid(x)."""

    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sympy.log(2)
        if x is sympy.S.Infinity:
            return sympy.S.Infinity
        if x is sympy.S.NegativeInfinity:
            return sympy.S.Zero
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return sigmoid(self.args[0])

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return sympy.log(1 + sympy.exp(x))

    def _eval_mpmath(self):
        return (lambda x: mpmath.log1p(mpmath.exp(x))), self.args

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_positive(self):
        return self.args[0].is_real

    def _numpycode(self, printer):
        return f"_softplus({printer._print(self.args[0])})"

    def _ccode(self, printer):
        # max(x, 0) + log1p(exp(-|x|)): the exp argument is <= 0, so it never overflows.
        x = _arg(printer, self.args[0])
        fmax, log1p_, exp_, fabs = (c_func(printer, n) for n in ("fmax", "log1p", "exp", "fabs"))
        return f"({fmax}({x}, {_c_lit(printer, 0)}) + {log1p_}({exp_}(-{fabs}({x}))))"


class log_sigmoid(sympy.Function):
    """log_sigmoid(x) = log(sigmoid(x)) = -softplus(-x); derivative sigmoid(-x)."""

    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return -sympy.log(2)
        if x is sympy.S.Infinity:
            return sympy.S.Zero
        if x is sympy.S.NegativeInfinity:
            return sympy.S.NegativeInfinity
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return sigmoid(-self.args[0])

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return -sympy.log(1 + sympy.exp(-x))

    def _eval_mpmath(self):
        return (lambda x: -mpmath.log1p(mpmath.exp(-x))), self.args

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_negative(self):
        return self.args[0].is_real

    def _numpycode(self, printer):
        return f"(-_softplus(-{_arg(printer, self.args[0])}))"

    def _ccode(self, printer):
        x = _arg(printer, self.args[0])
        fmin, log1p_, exp_, fabs = (c_func(printer, n) for n in ("fmin", "log1p", "exp", "fabs"))
        return f"({fmin}({x}, {_c_lit(printer, 0)}) - {log1p_}({exp_}(-{fabs}({x}))))"


class log1mexp(sympy.Function):
    """log1mexp(x) = log(1 - exp(-x)) for x > 0 (Maechler 2012): log(-expm1(-x)) below log(2),
    log1p(-exp(-x)) above. Each form alone loses the other end: log(-expm1(-x)) is 0 from
    x ~ 37 (truly -exp(-x)) and 1.7e-4 off at x = 30; log1p(-exp(-x)) is -inf at x = 1e-20.
    Derivative 1/expm1(x)."""

    nargs = 1

    @classmethod
    def eval(cls, x):
        if x is sympy.S.Infinity:
            return sympy.S.Zero
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return 1 / expm1(self.args[0])

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return sympy.log(1 - sympy.exp(-x))

    def _eval_mpmath(self):
        def value(x):
            if x < mpmath.log(2):
                return mpmath.log(-mpmath.expm1(-x))
            return mpmath.log1p(-mpmath.exp(-x))
        return value, self.args

    def _eval_is_real(self):
        return self.args[0].is_positive

    def _numpycode(self, printer):
        return f"_log1mexp({printer._print(self.args[0])})"

    def _ccode(self, printer):
        x = _arg(printer, self.args[0])
        log_, expm1_, log1p_, exp_ = (c_func(printer, n) for n in ("log", "expm1", "log1p", "exp"))
        return (f"({x} < {_c_lit(printer, 0.6931471805599453)} ? {log_}(-{expm1_}(-{x})) : "
                f"{log1p_}(-{exp_}(-{x})))")


class logaddexp(sympy.Function):
    """logaddexp(a, b) = log(exp(a) + exp(b)); d/da = sigmoid(a - b), d/db = sigmoid(b - a)."""

    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if a is sympy.S.NegativeInfinity:
            return b
        if b is sympy.S.NegativeInfinity:
            return a
        return None

    def fdiff(self, argindex=1):
        a, b = self.args
        if argindex == 1:
            return sigmoid(a - b)
        if argindex == 2:
            return sigmoid(b - a)
        raise sympy.ArgumentIndexError(self, argindex)

    def _eval_rewrite_as_exp(self, a, b, **kwargs):
        return sympy.log(sympy.exp(a) + sympy.exp(b))

    def _eval_mpmath(self):
        return (lambda a, b: mpmath.log(mpmath.exp(a) + mpmath.exp(b))), self.args

    def _eval_is_real(self):
        return self.args[0].is_real and self.args[1].is_real

    def _numpycode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"{_np(printer, 'logaddexp')}({a}, {b})"

    def _ccode(self, printer):
        # max(a, b) + log1p(exp(-|a - b|)), and a where a == b is infinite (there a - b is nan;
        # numpy.logaddexp and torch give -inf, inf); the compiler shares the repeated code.
        a, b = (_arg(printer, arg) for arg in self.args)
        fmax, log1p_, exp_, fabs = (c_func(printer, n) for n in ("fmax", "log1p", "exp", "fabs"))
        return (f"({a} == {b} && isinf({a}) ? {a} : "
                f"{fmax}({a}, {b}) + {log1p_}({exp_}(-{fabs}({a} - {b}))))")


class logsumexp(sympy.Function):
    """logsumexp(a1, ..., an) = log(sum_i exp(ai)), evaluated shifted by the max, or by a
    finite bound where the max is infinite (ai - max would be nan): -inf where every ai is
    -inf, inf where one is inf, as log(sum(exp)) and torch.logsumexp.

    d/dai = exp(ai - logsumexp(...)): the softmax weight, written with the result so CSE
    shares it; its exponent is <= 0, so it never overflows (nan where the value is infinite,
    as torch's exp(ai - result)).
    """

    @classmethod
    def eval(cls, *args):
        if len(args) == 0:
            raise TypeError("logsumexp needs at least one argument")
        if len(args) == 1:
            return args[0]
        return None

    def fdiff(self, argindex=1):
        if not 1 <= argindex <= len(self.args):
            raise sympy.ArgumentIndexError(self, argindex)
        return sympy.exp(self.args[argindex - 1] - self)

    def _eval_rewrite_as_exp(self, *args, **kwargs):
        return sympy.log(sympy.Add(*[sympy.exp(a) for a in args]))

    def _eval_mpmath(self):
        return (lambda *a: mpmath.log(mpmath.fsum(mpmath.exp(t) for t in a))), self.args

    def _eval_is_real(self):
        return all(arg.is_real for arg in self.args)

    def _numpycode(self, printer):
        args = ", ".join(printer._print(arg) for arg in self.args)
        if len(self.args) == 2:
            return f"{_np(printer, 'logaddexp')}({args})"
        return f"_logsumexp({args})"

    def _ccode(self, printer):
        args = [_arg(printer, arg) for arg in self.args]
        fmax, exp_, log_ = (c_func(printer, n) for n in ("fmax", "exp", "log"))
        m = args[0]
        for a in args[1:]:
            m = f"{fmax}({m}, {a})"
        m = f"(isfinite({m}) ? {m} : {_c_lit(printer, 0)})"   # the shift: 0 if infinite
        total = " + ".join(f"{exp_}({a} - {m})" for a in args)
        return f"({m} + {log_}({total}))"


class erfc(sympy.erfc):
    """erfc(x) = 1 - erf(x), kept as written.

    SymPy's erfc rewrites erfc(-x) to 2 - erfc(x), which is exactly the cancellation this op
    exists to avoid (1 + erf(x) for x -> -inf); this subclass only folds trivial numbers.
    The derivative, -2 exp(-x**2) / sqrt(pi), and mpmath evaluation are SymPy's.
    """

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sympy.S.One
        if x is sympy.S.Infinity:
            return sympy.S.Zero
        if x is sympy.S.NegativeInfinity:
            return sympy.Integer(2)
        return None

    def _numpycode(self, printer):
        return f"_erfc({printer._print(self.args[0])})"

    def _ccode(self, printer):
        return f"{c_func(printer, 'erfc')}({printer._print(self.args[0])})"


def _c_erfcx(printer, x: str) -> str:
    """C for erfcx(x): exp(x*x)*erfc(x) where erfc does not underflow, else the asymptotic
    series 1/(x sqrt(pi)) * sum_k (-1)^k (2k-1)!! / (2x^2)^k (relative error < 1e-15 at
    x >= 25 in double, < 1e-8 at x >= 9 in float)."""
    single = getattr(printer, "float_type", "double") == "float"
    cut, terms = (9, 5) if single else (25, 7)
    exp_, erfc_ = c_func(printer, "exp"), c_func(printer, "erfc")
    z = f"({_c_lit(printer, 0.5)}/(({x})*({x})))"
    coeffs, double_fact = [], 1
    for k in range(1, terms + 1):          # (-1)^k (2k-1)!!
        double_fact *= 2 * k - 1
        coeffs.append((-1) ** k * double_fact)
    series = _c_lit(printer, coeffs[-1])
    for c in reversed(coeffs[:-1]):        # Horner in z
        series = f"({_c_lit(printer, c)} + {z}*{series})"
    series = f"({_c_lit(printer, 1)} + {z}*{series})"
    inv_sqrt_pi = _c_lit(printer, 0.5641895835477563)
    return (f"(({x}) < {_c_lit(printer, cut)} ? {exp_}(({x})*({x}))*{erfc_}({x}) : "
            f"{inv_sqrt_pi}/({x})*{series})")


class erfcx(sympy.Function):
    """Scaled complementary error function erfcx(x) = exp(x**2) * erfc(x).

    Finite where erfc underflows (x > 26.5 in float64): erfcx(x) ~ 1/(x sqrt(pi)). Derivative
    2*x*erfcx(x) - 2/sqrt(pi), itself finite for large x.
    """

    nargs = 1

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        x = self.args[0]
        return 2 * x * erfcx(x) - 2 / sympy.sqrt(sympy.pi)

    def _eval_mpmath(self):
        return (lambda x: mpmath.exp(x * x) * mpmath.erfc(x)), self.args

    def _eval_rewrite_as_erfc(self, x, **kwargs):
        return sympy.exp(x ** 2) * sympy.erfc(x)

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_positive(self):
        return self.args[0].is_real

    def _numpycode(self, printer):
        return f"_erfcx({printer._print(self.args[0])})"

    def _ccode(self, printer):
        return _c_erfcx(printer, _arg(printer, self.args[0]))


class log_ndtr(sympy.Function):
    """log of the standard normal CDF, log(Phi(x)) = log(erfc(-x/sqrt(2)) / 2) (scipy's name).

    Finite for every finite x: log(erfcx(u)) - u**2 - log(2) with u = -x/sqrt(2) in the lower
    tail (log_ndtr(-40) = -804.6, where erfc underflows), log1p(-erfc(x/sqrt(2))/2) elsewhere
    (no cancellation near 0 for large x). Derivative sqrt(2/pi) / erfcx(-x/sqrt(2)).
    """

    nargs = 1

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return ndtr_ratio(self.args[0])

    def _eval_mpmath(self):
        return (lambda x: mpmath.log(mpmath.ncdf(x))), self.args

    def _eval_rewrite_as_erfc(self, x, **kwargs):
        return sympy.log(sympy.erfc(-x / sympy.sqrt(2)) / 2)

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_negative(self):
        return self.args[0].is_real

    def _numpycode(self, printer):
        return f"_log_ndtr({printer._print(self.args[0])})"

    def _ccode(self, printer):
        x = _arg(printer, self.args[0])
        log_, log1p_, erfc_ = (c_func(printer, n) for n in ("log", "log1p", "erfc"))
        u = f"({_c_lit(printer, -0.7071067811865476)}*{x})"
        tail = f"{log_}({_c_erfcx(printer, u)}) - {u}*{u} - {_c_lit(printer, 0.6931471805599453)}"
        body = f"{log1p_}({_c_lit(printer, -0.5)}*{erfc_}({_c_lit(printer, 0.7071067811865476)}*{x}))"
        return f"({x} < {_c_lit(printer, -1)} ? {tail} : {body})"


class ndtr_ratio(sympy.Function):
    """phi(x) / Phi(x) = sqrt(2/pi) / erfcx(-x/sqrt(2)), log_ndtr's derivative (the inverse
    Mills ratio of -x): 0 at +inf, ~ -x in the lower tail. Its own derivative is -r*(x + r),
    written in r itself, so every order stays finite where erfcx(-x/sqrt(2))**2 overflows
    (log_ndtr'' at x = 80 was nan and at 30 was -0 for -4.4e-195, torch: -0 and -4.4e-195)."""

    nargs = 1

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return -self * (self.args[0] + self)

    def _eval_mpmath(self):
        return (lambda x: mpmath.npdf(x) / mpmath.ncdf(x)), self.args

    def _eval_rewrite_as_erfc(self, x, **kwargs):
        return sympy.sqrt(2 / sympy.pi) * sympy.exp(-x ** 2 / 2) / sympy.erfc(-x / sympy.sqrt(2))

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_positive(self):
        return self.args[0].is_real

    def _numpycode(self, printer):
        return f"(0.7978845608028654/_erfcx(-0.7071067811865476*{printer._print(self.args[0])}))"

    def _ccode(self, printer):
        u = f"({_c_lit(printer, -0.7071067811865476)}*{_arg(printer, self.args[0])})"
        return f"({_c_lit(printer, 0.7978845608028654)}/{_c_erfcx(printer, u)})"


# ----------------------------------------------------------------------------- removable singularities


class _TaylorAtZero(sympy.Function):
    """Base of the ops with a removable singularity at 0 (sinc(u) = sin(u)/u, ...) and their
    derivatives: the k-th derivative of family F is the class ``taylor_op(F, k)``.

    The closed form ("far" formula) is 0/0 at u = 0 and cancels near it (the derivative of
    sin(u)/u, cos(u)/u - sin(u)/u**2, lost every digit below |u| ~ 1e-8 and was -inf at
    1e-300); for |u| < ``cut`` the value is the Taylor polynomial of the exact function, whose
    coefficients come from SymPy's series, as many as float64 needs at |u| = cut. fdiff gives
    the next class, so derivatives of every order keep the same treatment.
    """

    nargs = 1
    family = ""
    order = 0
    numpy_cost = 24   # optimize.OP_COST units: the closed form, |u| < cut, the polynomial at times

    @classmethod
    def eval(cls, u):
        if u.is_zero:
            return sympy.factorial(cls.order) * _TAYLOR_FAMILIES[cls.family].coefficients()[cls.order]
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        family = _TAYLOR_FAMILIES[self.family]
        if self.order == 0 and family.derivative is not None:
            return family.derivative(self.args[0])   # accurate everywhere as it is
        return taylor_op(self.family, self.order + 1)(self.args[0])

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_rewrite_as_exp(self, u, **kwargs):
        return sympy.diff(_TAYLOR_FAMILIES[self.family].textbook(_U), _U, self.order).subs(_U, u)

    def _eval_mpmath(self):
        family, order = _TAYLOR_FAMILIES[self.family], self.order

        def value(u):
            if u == 0:
                return mpmath.mpf(sympy.factorial(order) * family.coefficients()[order])
            # the closed form cancels near 0: (order + 2) * log10(1/|u|) digits more cover it
            extra = 20 + int((order + 2) * max(0, -float(mpmath.log10(abs(u)))))
            with mpmath.workdps(mpmath.mp.dps + extra):
                return +family.mpmath_closed_form(order)(u)

        return value, self.args

    def _numpycode(self, printer):
        family = _TAYLOR_FAMILIES[self.family]
        coeffs, parity = family.polynomial(self.order)
        far = printer._print(family.far(_U, self.order))
        text = ", ".join(repr(c) for c in coeffs)
        args = f"{printer._print(self.args[0])}, lambda u: {far}, ({text},), {family.cut!r}"
        if parity is not None:
            args += f", {parity}"
        return f"_taylor_at_zero({args})"

    def _ccode(self, printer):
        family = _TAYLOR_FAMILIES[self.family]
        coeffs, parity = family.polynomial(self.order)
        u = _arg(printer, self.args[0])
        far = printer._print(family.far(_U, self.order).xreplace({_U: sympy.Symbol(u)}))
        w = f"({u}*{u})" if parity is not None else u
        poly = _c_lit(printer, coeffs[-1])
        for c in coeffs[-2::-1]:
            poly = f"({_c_lit(printer, c)} + {w}*{poly})"
        if parity == 1:
            poly = f"{u}*{poly}"
        fabs = c_func(printer, "fabs")
        return f"({fabs}({u}) < {_c_lit(printer, family.cut)} ? {poly} : {far})"


_U = sympy.Symbol("u", real=True)


class _TaylorFamily:
    """One function with a removable singularity at 0: its textbook form, the closed forms the
    code evaluates away from 0 (k-th derivative), and the cut below which the series is used."""

    def __init__(self, name, textbook, cut, far_forms=None, derivative=None):
        self.name = name
        self.textbook = textbook          # u -> SymPy expression (0/0 at u = 0)
        self.cut = cut
        self.far_forms = far_forms or {}  # order -> (u -> SymPy expression), overriding diff
        self.derivative = derivative      # u -> the first derivative, where it needs no branch
        self._coefficients = None
        self._closed = {}

    def coefficients(self, n=None):
        """Exact Taylor coefficients a_0, a_1, ... of the function at 0 (enough for float64 at
        |u| = cut, for the orders the code uses)."""
        if self._coefficients is None:
            x = sympy.Symbol("x")
            series = sympy.series(self.textbook(x), x, 0, 48).removeO()
            self._coefficients = [series.coeff(x, k) for k in range(48)]
        return self._coefficients

    def polynomial(self, order):
        """(float coefficients, parity) of the Taylor polynomial of the order-th derivative:
        parity None for a polynomial in u; 0 (even) or 1 (odd) for one in u*u, times u if odd."""
        a = self.coefficients()
        b = [a[n + order] * sympy.factorial(n + order) / sympy.factorial(n)
             for n in range(len(a) - order)]
        even_function = all(a[k] == 0 for k in range(1, len(a), 2))
        parity = (order % 2) if even_function else None
        terms = b[parity::2] if parity is not None else b
        step = 2 if parity is not None else 1
        scale = max(abs(float(t)) * self.cut ** (step * i) for i, t in enumerate(terms))
        kept = []
        for i, t in enumerate(terms):
            kept.append(float(t))
            if i >= 2 and all(abs(float(r)) * self.cut ** (step * j) < 1e-18 * scale
                              for j, r in enumerate(terms[i + 1:i + 4], start=i + 1)):
                break
        return kept, parity

    def far(self, u, order):
        """The closed form of the order-th derivative, for |u| >= cut."""
        if order in self.far_forms:
            return self.far_forms[order](u)
        if order == 0:
            return self.textbook(u)
        return sympy.diff(self.far(u, order - 1), u)

    def mpmath_closed_form(self, order):
        fn = self._closed.get(order)
        if fn is None:
            expr = sympy.diff(self.textbook(_U), _U, order)
            fn = self._closed[order] = sympy.lambdify(_U, expr, modules="mpmath")
        return fn


def _exprel_far(order):
    """d^k/du^k expm1(u)/u = exp(u) * sum_j C(k,j) (-1)^j j! / u^(j+1) - (-1)^k k! / u^(k+1):
    no inf - inf where exp(u) overflows (the Leibniz form exp(u)/u - expm1(u)/u**2 is)."""
    def far(u):
        q = sympy.Add(*[sympy.binomial(order, j) * (-1) ** j * sympy.factorial(j) * u ** (-1 - j)
                        for j in range(order + 1)])
        return sympy.exp(u) * q - (-1) ** order * sympy.factorial(order) * u ** (-1 - order)
    return far


def _inv_exprel_far1(u):
    """d/du u/expm1(u) = B(u) * (1 - B(-u)) / u with B = inv_exprel (exp(u) * B(u) = B(-u)):
    finite for every u, where 1/expm1(u) - u*exp(u)/expm1(u)**2 overflows."""
    b = taylor_op("inv_exprel", 0)
    return b(u) * (1 - b(-u)) / u


def _sinhc_far1(u):
    """d/du sinh(u)/u = cosh(u) * (1 - tanh(u)/u) / u: no inf - inf where cosh overflows."""
    return sympy.cosh(u) * (1 - sympy.tanh(u) / u) / u


def _inv_sinhc_far1(u):
    """d/du u/sinh(u) = (u/sinh(u)) * (1/u - 1/tanh(u)): finite (0) where sinh overflows."""
    return taylor_op("inv_sinhc", 0)(u) * (1 / u - 1 / sympy.tanh(u))


_TAYLOR_FAMILIES: dict[str, _TaylorFamily] = {
    f.name: f for f in (
        _TaylorFamily("sinc", lambda u: sympy.sin(u) / u, 1.0),
        _TaylorFamily("exprel", lambda u: expm1(u) / u, 1.0,
                      {k: _exprel_far(k) for k in range(1, 8)}),
        _TaylorFamily("log1prel", lambda u: log1p(u) / u, 0.25),
        _TaylorFamily("inv_exprel", lambda u: u / expm1(u), 1.0, {1: _inv_exprel_far1}),
        _TaylorFamily("sinhc", lambda u: sympy.sinh(u) / u, 1.0, {1: _sinhc_far1}),
        _TaylorFamily("inv_sinhc", lambda u: u / sympy.sinh(u), 1.0, {1: _inv_sinhc_far1}),
        _TaylorFamily("tanc", lambda u: sympy.tan(u) / u, 0.5),
        _TaylorFamily("tanhc", lambda u: sympy.tanh(u) / u, 0.5),
        # log(cosh(u)) = u**2/2 - u**4/12 + ...: the closed form logaddexp(u, -u) - log(2)
        # cancels to an absolute eps near 0 (1.1e-16 at u = 1e-8, truly 5e-17)
        _TaylorFamily("log_cosh", lambda u: sympy.log(sympy.cosh(u)), 0.5,
                      {0: lambda u: logaddexp(u, -u) - sympy.log(2)},
                      derivative=sympy.tanh),
    )
}
_TAYLOR_CLASSES: dict[tuple[str, int], type] = {}


def taylor_op(family: str, order: int = 0) -> type:
    """The op class of the order-th derivative of a removable-singularity family: "sinc"
    (sin(u)/u), "exprel" (expm1(u)/u), "log1prel" (log1p(u)/u), "inv_exprel" (u/expm1(u)),
    "sinhc", "inv_sinhc" (u/sinh(u)), "tanc", "tanhc", "log_cosh"."""
    key = (family, order)
    cls = _TAYLOR_CLASSES.get(key)
    if cls is None:
        name = family if order == 0 else f"{family}_d{order}"
        cls = type(name, (_TaylorAtZero,), {"family": family, "order": order,
                                            "__module__": __name__})
        _TAYLOR_CLASSES[key] = cls
        globals()[name] = cls   # importable by name, as the other stable ops
    return cls


sinc = taylor_op("sinc")
exprel = taylor_op("exprel")
log1prel = taylor_op("log1prel")
inv_exprel = taylor_op("inv_exprel")
sinhc = taylor_op("sinhc")
inv_sinhc = taylor_op("inv_sinhc")
tanc = taylor_op("tanc")
tanhc = taylor_op("tanhc")
log_cosh = taylor_op("log_cosh")


STABLE_OPS: dict[str, type[sympy.Function]] = {
    "sigmoid": sigmoid,
    "softplus": softplus,
    "log_sigmoid": log_sigmoid,
    "erfc": erfc,
    "erfcx": erfcx,
    "log_ndtr": log_ndtr,
    "logaddexp": logaddexp,
    "logsumexp": logsumexp,
    "log1p": log1p,
    "expm1": expm1,
    "log1mexp": log1mexp,
    "sinc": sinc,
    "exprel": exprel,
    "log1prel": log1prel,
    "inv_exprel": inv_exprel,
    "sinhc": sinhc,
    "inv_sinhc": inv_sinhc,
    "tanc": tanc,
    "tanhc": tanhc,
    "log_cosh": log_cosh,
}


# ----------------------------------------------------------------------------- erf for NumPy


def print_erf_numpy(printer, expr) -> str:
    """NumPy printer method for ``sympy.erf``: NumPy has no erf; call the ``_erf`` helper."""
    return f"_erf({printer._print(expr.args[0])})"


def print_erfc_numpy(printer, expr) -> str:
    """NumPy printer method for ``sympy.erfc``: call the ``_erfc`` helper."""
    return f"_erfc({printer._print(expr.args[0])})"


# Install these on the NumPy printer subclass: ``class NumpyPrinter(NumPyPrinter): _print_erf =
# print_erf_numpy`` (sympy.erf is SymPy's class, so it cannot carry ``_numpycode`` itself).
NUMPY_PRINT_METHODS = {
    "_print_erf": print_erf_numpy,
    "_print_erfc": print_erfc_numpy,
}

