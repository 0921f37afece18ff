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

import re

import mpmath
import sympy
from sympy.codegen.cfunctions import expm1, log1p

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


# the names called in printed code: `name(` not preceded by a word character or a dot
_CALLED = re.compile(r"(?<![\w.])(\w+)\(")


def required_numpy_helpers(source: str) -> tuple[str, ...]:
    """Names of the ``NUMPY_HELPERS`` that printed NumPy code calls, dependencies first.

    Args:
        source: printed code (one expression or a whole module body).

    Returns:
        Helper names in a deterministic order (NUMPY_HELPERS order); paste
        ``NUMPY_HELPERS[name]`` for each into the generated module.
    """
    wanted: set[str] = set()
    called = set(_CALLED.findall(source))   # one pass over a large program's source
    for name in NUMPY_HELPERS:
        if name in called:
            wanted.add(name)
            wanted.update(_HELPER_DEPENDS.get(name, ()))
    return tuple(name for name in NUMPY_HELPERS if name in wanted)


def numpy_helper_namespace() -> dict[str, object]:
    """All helpers compiled into a namespace dict (for ``lambdify(modules=[ns, "numpy"])``)."""
    import numpy

    namespace: dict[str, object] = {"numpy": numpy}
    for source in NUMPY_HELPERS.values():
        exec(source, namespace)
    return namespace


# the special functions (lgamma, digamma, erfinv, Bessel I) add their helpers to NUMPY_HELPERS
from . import specfun  # noqa: E402,F401
