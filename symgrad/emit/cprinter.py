"""The C expression printer shared by the native CPU target and the CUDA target.

`CPrinter` is SymPy's C99CodePrinter with a `float_type` ("float" or "double") and a few
overrides, each for a stated reason. In float32 code nothing is promoted to double: function
names come from the type aliases (exp -> expf), literals carry an `f` suffix, constants are
literals (never `M_PI`, a double). CUDA device math has the same names as C99's float/double
functions, so a CUDA printer subclasses this one unchanged.

Symbols of integer dtype are `int64_t` values and bool symbols are `unsigned char` (0/1) values
in the generated code; both read naturally in C expressions.
"""
from __future__ import annotations

import re

import numpy
import sympy
from sympy import S
from sympy.codegen.ast import float32, float64, real
from sympy.printing.c import C99CodePrinter
from sympy.printing.precedence import PRECEDENCE, precedence

from ..ops.stable import c_func

FLOAT_TYPES = ("float", "double")


def square_denominators(expr, eligible=None):
    """A product with factors b**-2 (b a symbol) as (the other factors, [b, ...]), or None.

    Printers write a*b**-2 so that b*b is never formed: it underflows (b = 1e-300, or 1e-20 in
    float) or overflows where the quotient is finite, as in d(x/y)/dy = -x/y**2 at
    x = y = 1e-300 (torch's -(x/y)/y is -1e300 there; -x/(y*y) was -inf). `eligible(b)` may
    refuse a base (the NumPy printer keeps b*b for a base smaller than the result).
    """
    if not isinstance(expr, sympy.Mul):
        return None
    squares, rest = [], []
    for f in expr.args:
        if f.is_Pow and f.exp == -2 and f.base.is_Symbol and (eligible is None or eligible(f.base)):
            squares.append(f.base)
        else:
            rest.append(f)
    if not squares:
        return None
    return sympy.Mul(*rest), sorted(squares, key=sympy.default_sort_key)


def print_dividing_squares(printer, expr, divide, eligible=None):
    """printer's text for expr with each b**-2 factor (see square_denominators) applied by
    `divide(text, b_text)`, or None when expr has no such factor."""
    split = square_denominators(expr, eligible)
    if split is None:
        return None
    rest, squares = split
    # a leading "-" as SymPy's Mul printer writes it, so that a sum prints "a - b/y/y"
    # (a unary minus on an array is a NumPy pass of its own)
    sign = ""
    if rest.as_coeff_Mul()[0] < 0:
        sign, rest = "-", -rest
    if rest == 1:
        text = printer._print(S.One)
    else:
        text = printer.parenthesize(rest, PRECEDENCE["Mul"], strict=True)
    text = sign + text
    for b in squares:
        text = divide(text, printer._print(b))
    return text


class CPrinter(C99CodePrinter):
    """C99 expressions in one precision: `float` (float32) or `double` (float64)."""

    printmethod = "_ccode"

    def __init__(self, float_type="double", settings=None):
        if float_type not in FLOAT_TYPES:
            raise ValueError(f"float_type must be one of {FLOAT_TYPES}, not {float_type!r}")
        self.float_type = float_type          # read by the ops' `_ccode` through `c_func`
        alias = float32 if float_type == "float" else float64
        super().__init__(dict({"type_aliases": {real: alias}}, **(settings or {})))

    # ---- literals: in the module's precision, shortest text that rounds to the same value
    def _literal(self, value) -> str:
        scalar = numpy.float32(value) if self.float_type == "float" else numpy.float64(value)
        if not numpy.isfinite(scalar):
            return self._print(S.NaN if numpy.isnan(scalar) else
                               S.Infinity if scalar > 0 else S.NegativeInfinity)
        if scalar == 0 or 1e-5 <= abs(scalar) < 1e9:
            text = numpy.format_float_positional(scalar, unique=True, trim="0")
        else:
            text = numpy.format_float_scientific(scalar, unique=True, trim="0")
        return text + ("f" if self.float_type == "float" else "")

    # A number-valued expression (log(2), sqrt(2), 2/sqrt(pi), ...) is one literal, rounded once
    # from its exact value: SymPy prints log(2) as M_LN2, a double, which turned float code's
    # log(cosh(x)) at x = 0 into 1.9e-9 (logf(2) in float minus the double M_LN2), and
    # x/sqrtf(3.1415927f) rounds pi before the square root.
    def _print(self, expr, **kwargs):
        if isinstance(expr, sympy.Expr) and not expr.is_Atom and expr.is_number:
            try:
                value = complex(expr.evalf(30))
            except (TypeError, ValueError):
                value = None
            if value is not None and value.imag == 0.0 and numpy.isfinite(value.real):
                return self._literal(value.real)
        return super()._print(expr, **kwargs)

    # a float literal without a suffix is a double: print every real in the module's type
    def _print_Float(self, expr):
        return self._literal(float(expr))

    # 1/3 as one literal: an integer division or a double-typed quotient would be wrong
    def _print_Rational(self, expr):
        return self._literal(expr.p / expr.q)

    # small integers stay integers: C converts them to the other operand's type, not double
    def _print_Integer(self, expr):
        if abs(expr.p) < 2**31:
            return str(expr.p)
        return self._literal(float(expr.p))

    # M_PI and M_E are doubles: literals keep float32 code in float
    def _print_Pi(self, expr):
        return self._literal(numpy.pi)

    def _print_Exp1(self, expr):
        return self._literal(numpy.e)

    # INFINITY and NAN are float-typed macros (C99), exact in either precision
    def _print_Infinity(self, expr):
        return "INFINITY"

    def _print_NegativeInfinity(self, expr):
        return "(-INFINITY)"

    def _print_NaN(self, expr):
        return "NAN"

    def _print_BooleanTrue(self, expr):
        return "1"

    def _print_BooleanFalse(self, expr):
        return "0"

    # a*b**-2 as a/b/b, evaluated left to right (no -ffast-math): scale-safe where
    # a/(b*b) under- or overflows; a/b/b, torch's form, as the NumPy printer: a*(1/b)*(1/b) cost
    # one division fewer (+50% in a division-bound double kernel), but 1/b overflows for a
    # subnormal b, and d(a/b)/db at a = 0, b = 1e-40 (float) was 0*inf = nan (torch: -0)
    def _print_Mul(self, expr, **kwargs):
        text = print_dividing_squares(self, expr, lambda a, b: f"{a}/{b}/{b}")
        return text or super()._print_Mul(expr, **kwargs)

    # powf(x, 3) is a libm call; a product is exact to the same rounding and vectorizes
    def _print_Pow(self, expr):
        base, exp = expr.args
        b = self.parenthesize(base, PRECEDENCE["Mul"] + 1)
        one = self._literal(1.0)
        if exp == S.Half:
            return f"{c_func(self, 'sqrt')}({self._print(base)})"
        if exp == -S.Half:
            return f"({one}/{c_func(self, 'sqrt')}({self._print(base)}))"
        if exp.is_Integer and abs(int(exp)) <= 64:
            n = int(exp)
            if n == 0:
                return one
            # up to x**8 a product; beyond, squarings (x**12 = (x**6)**2 = 4 multiplies, where
            # powf is a libm call that does not vectorize and costs ~20x): the compiler computes
            # each repeated factor once
            product = "*".join([b] * abs(n)) if abs(n) <= 8 else self._squarings(b, abs(n))
            # 1.0f/..., never 1/...: an int64 base must not take integer division
            return f"({product})" if n > 0 else f"({one}/({product}))"
        if exp.is_Rational and exp.q == 2 and abs(exp.p) <= 9:
            # x**(3/2) = x*sqrt(x): one sqrt instead of powf
            root = f"{c_func(self, 'sqrt')}({self._print(base)})"
            whole = [b] * (abs(exp.p) // 2) + [root]
            product = "*".join(whole)
            return f"({product})" if exp.p > 0 else f"({one}/({product}))"
        return f"{c_func(self, 'pow')}({self._print(base)}, {self._print(exp)})"

    @classmethod
    def _squarings(cls, b, n):
        """b**n (n >= 1) as products of squares, e.g. b**12 = ((b*b*b)*(b*b*b))*((b*b*b)*(b*b*b))."""
        if n <= 3:
            return "*".join([b] * n)
        half = cls._squarings(b, n // 2)
        square = f"({half})*({half})"
        return square if n % 2 == 0 else f"{square}*{b}"

    # nested ternaries, never if/else blocks: the printed value is one expression (and the
    # vectorizer turns it into a blend)
    def _print_Piecewise(self, expr):
        pairs = list(expr.args)
        if pairs[-1].cond != S.true:
            pairs.append(sympy.functions.elementary.piecewise.ExprCondPair(S.NaN, S.true))
        out = self._print(pairs[-1].expr)
        for pair in reversed(pairs[:-1]):
            out = f"({self._print(pair.cond)} ? {self._print(pair.expr)} : {out})"
        return out

    # comparisons are 0/1 ints in C: parenthesized so they compose in any context
    def _print_Relational(self, expr):
        lhs = self.parenthesize(expr.lhs, PRECEDENCE["Relational"])
        rhs = self.parenthesize(expr.rhs, PRECEDENCE["Relational"])
        return f"({lhs} {expr.rel_op} {rhs})"

    def _print_And(self, expr):
        return "(" + " && ".join(self._print(a) for a in expr.args) + ")"

    def _print_Or(self, expr):
        return "(" + " || ".join(self._print(a) for a in expr.args) + ")"

    def _print_Not(self, expr):
        return f"(!{self.parenthesize(expr.args[0], PRECEDENCE['Not'])})"

    # numpy's sign: 0 at 0, NaN at NaN (x - x is 0 or NaN); SymPy's int formula loses the NaN
    def _print_sign(self, expr):
        x = self._print(expr.args[0])
        one = self._literal(1.0)
        return f"(({x}) > 0 ? {one} : (({x}) < 0 ? (-{one}) : ({x}) - ({x})))"

    def _print_Abs(self, expr):
        return f"{c_func(self, 'fabs')}({self._print(expr.args[0])})"

    def _print_erf(self, expr):
        return f"{c_func(self, 'erf')}({self._print(expr.args[0])})"

    def _print_erfc(self, expr):
        return f"{c_func(self, 'erfc')}({self._print(expr.args[0])})"

    # Heaviside(x, h0) with its value at 0 spelled out (SymPy's printer has no C form)
    def _print_Heaviside(self, expr):
        x = self._print(expr.args[0])
        h0 = expr.args[1] if len(expr.args) > 1 else S.Half
        return (f"(({x}) > 0 ? {self._literal(1.0)} : (({x}) < 0 ? {self._literal(0.0)} : "
                f"{self._print(h0)}))")

    # a temporary symbol is a local variable of the loop body; Symbol prints its name
    def _print_Symbol(self, expr):
        return str(expr.name)


def print_c(expr, float_type="double") -> str:
    """One SymPy expression as C in `float_type` ("float" or "double")."""
    return CPrinter(float_type).doprint(expr)


__all__ = ["CPrinter", "CpuPrinter", "print_c", "minmax_c"]


class CpuPrinter(CPrinter):
    """The native CPU target's printer: fmax/fmin become NaN-propagating inline functions.

    C's fmax(NaN, 0) is 0 where numpy.maximum and torch give NaN, and gcc will not inline or
    vectorize fmaxf without -ffinite-math-only (a scalar call blocks the whole loop). The
    kernels file defines `symgrad_fmax[f]` / `symgrad_fmin[f]` (see `MINMAX_C`).
    """

    _RENAMES = {"fmax": "symgrad_fmax", "fmin": "symgrad_fmin"}
    # functions of templates/c/vector_math.c.jinja (libm's exp, log, log1p, tanhf stay libm
    # calls: glibc's AVX2 vector variants measured faster than inline polynomials here, e.g.
    # expf 0.43 vs 0.70 ns per element; double tanh is the exception: libmvec's takes 3.4 to
    # 7.4 ns per element, its expm1 1.3 ns, so symgrad_tanh is one expm1 and a division)
    INLINE_MATH = ("tanh_softplus", "tanh")

    # tanh(softplus(x)) (mish's gate) as one inline function: one exp, where tanh of
    # max(x, 0) + log1p(exp(-|x|)) is two exps, a log and a division
    def _print_tanh(self, expr):
        from ..ops import stable

        arg = expr.args[0]
        if isinstance(arg, stable.softplus):
            suffix = "f" if self.float_type == "float" else ""
            return f"symgrad_tanh_softplus{suffix}({self._print(arg.args[0])})"
        if self.float_type == "double":
            return f"symgrad_tanh({self._print(arg)})"
        return f"tanhf({self._print(arg)})"

    def doprint(self, expr, assign_to=None):
        text = super().doprint(expr, assign_to)
        suffix = "f" if self.float_type == "float" else ""
        for name, new in self._RENAMES.items():
            text = re.sub(rf"(?<![\w.]){name}{suffix}\(", f"{new}{suffix}(", text)
        return text


def minmax_c(float_type) -> str:
    """C definitions of the NaN-propagating max/min that `CpuPrinter` prints."""
    f = "f" if float_type == "float" else ""
    t = float_type
    return (f"static inline {t} symgrad_fmax{f}({t} a, {t} b) {{ return (a != a || a > b) ? a : b; }}\n"
            f"static inline {t} symgrad_fmin{f}({t} a, {t} b) {{ return (a != a || a < b) ? a : b; }}")
