"""Printers render expressions; templates render files (STYLE rule 5).

`NumpyPrinter` extends SymPy's NumPyPrinter with a few overrides, each for a stated reason.
`formula_text` renders a Graph's outputs as readable formulas for docstrings and `symgrad show`
(it lives in the IR layer, symgrad/_formulas.py, re-exported here).
"""
from __future__ import annotations

import math

import sympy
from sympy import S
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.precedence import PRECEDENCE, precedence

from ..ops import stable
from .cprinter import print_dividing_squares

# The formulas (a Graph's text view) live in the IR layer: symgrad/_formulas.py. Re-exported.
from .._formulas import (  # noqa: F401
    _Op, _dims_text, _latex_text, _LATEX_SPECIAL, _GREEK, _LATEX_ALIASES, _OPERATOR_NAMES,
    _latex_word, _ACCENTS, _latex_name, _SYMPY_ATOMS, _ReadingOrder, _FormulaStrPrinter,
    _FormulaLatexPrinter, _Derivation, inline, _inline_one, SHARED_TERM_NODES,
    SMALL_SHARED_TERM_NODES, _assigned_name, _user_names, shared_terms, MAX_FORMULA_NODES,
    MAX_TOTAL_FORMULA_NODES, _tree_size, _derivation_rows, _place_terms, formula_lines,
    _display_cse, _wrap, formula_text, formula_latex, quotient_text,
)


class NumpyPrinter(NumPyPrinter):
    """SymPy's NumPy printer, tuned for speed and dtype preservation."""

    printmethod = "_numpycode"
    _print_erf = stable.NUMPY_PRINT_METHODS["_print_erf"]
    _print_erfc = stable.NUMPY_PRINT_METHODS["_print_erfc"]

    def __init__(self, settings=None, dag=False):
        settings = dict(settings or {"fully_qualified_modules": True})
        if dag:
            # a large program's sums and products print their arguments in the order they
            # have (SymPy's canonical order: deterministic), not sorted again by SymPy's
            # `as_ordered_terms` (a monomial decomposition per term: a fifth of printing)
            settings["order"] = "none"
        super().__init__(settings)

    # Python float literals are "weak": they keep float32 arrays float32 (NumPy >= 2, NEP 50);
    # repr() is the shortest text that round-trips exactly.
    def _print_Float(self, expr):
        return repr(float(expr))

    def _print_Rational(self, expr):
        return repr(expr.p / expr.q)

    def _print_Integer(self, expr):
        return str(expr.p)

    def _print_Half(self, expr):
        return "0.5"

    def _print_Exp1(self, expr):
        return repr(float(sympy.E))

    def _print_Pi(self, expr):
        return repr(float(sympy.pi))

    # Names of the arrays as large as the value being printed (set per step by numpy_lines), or
    # None where shapes are known only at run time: a*b**-2 prints as a/b/b for those, the same
    # number of passes as a/(b*b) without forming b*b (see cprinter.square_denominators); a
    # smaller b (softmax's row sums) keeps b*b, which is computed on the small array; unknown
    # shapes call _div_square, which decides when it runs.
    full_symbols: frozenset | None = None

    def _print_Mul(self, expr, **kwargs):
        if self.full_symbols is None:
            text = print_dividing_squares(self, expr, lambda a, b: f"_div_square({a}, {b})")
        else:
            text = print_dividing_squares(self, expr, lambda a, b: f"{a}/{b}/{b}",
                                          lambda b: b.name in self.full_symbols)
        if text:
            return text
        if self._settings["order"] == "none":
            return _print_mul_as_is(self, expr)
        return super()._print_Mul(expr, **kwargs)

    def parenthesize(self, item, level, strict=False):
        if self._settings["order"] != "none":
            return super().parenthesize(item, level, strict)
        p = fast_precedence(item)
        if p < level or (not strict and p <= level):
            return f"({self._print(item)})"
        return self._print(item)

    # NumPy's x**3 costs 13-35x a multiply: print small integer powers as products.
    def _print_Pow(self, expr, rational=False):
        base, exp = expr.args
        b = self.parenthesize(base, sympy.printing.precedence.PRECEDENCE["Pow"])
        simple = base.is_Symbol
        if exp == S.Half:
            return f"numpy.sqrt({self._print(base)})"
        if exp == -S.Half:
            return f"(1/numpy.sqrt({self._print(base)}))"
        if exp.is_Integer:
            n = int(exp)
            # products are parenthesized: the caller sees a Pow and assumes Pow precedence
            if n == -1:
                return f"(1/{b})"
            if n < 0:
                return f"(1/{self._print(sympy.Pow(base, -n, evaluate=False))})"
            if n == 2:
                return f"({b}*{b})" if simple else f"numpy.square({self._print(base)})"
            if n in (3, 4) and simple:
                return "(" + "*".join([b] * n) + ")"
            if 4 < n <= 64 and simple:
                return self._power_by_squaring(b, n)
        return f"{b}**{self.parenthesize(exp, sympy.printing.precedence.PRECEDENCE['Pow'])}"

    @staticmethod
    def _power_by_squaring(b, n):
        """b**n for a symbol b and 4 < n <= 64 as squarings and products, e.g. r**12 =
        numpy.square(numpy.square(r*r*r)): 4 multiplies instead of one pow (~20 multiplies)."""
        if n <= 4:
            return "(" + "*".join([b] * n) + ")" if n > 1 else b
        if n % 2 == 0:
            return f"numpy.square({NumpyPrinter._power_by_squaring(b, n // 2)})"
        return f"({NumpyPrinter._power_by_squaring(b, n - 1)}*{b})"

    # A number-valued expression (sqrt(pi), log(2), ...) is printed as a Python float: a weak
    # scalar. numpy.sqrt(3.14) would be a numpy.float64 scalar, which is *strong* under NEP 50
    # and silently turns float32 arrays into float64.
    def _print(self, expr, **kwargs):
        if isinstance(expr, sympy.Expr) and not expr.is_Atom and expr.is_number:
            try:
                value = complex(expr.evalf(20))
            except (TypeError, ValueError):
                value = None
            if value is not None and value.imag == 0.0 and math.isfinite(value.real):
                return repr(value.real)
        return super()._print(expr, **kwargs)

    # where(c, a, b) nests; numpy.select would evaluate every branch into a list first.
    def _print_Piecewise(self, expr):
        pairs = list(expr.args)
        if pairs[-1].cond != S.true:
            pairs.append(sympy.functions.elementary.piecewise.ExprCondPair(S.NaN, S.true))
        out = self._print(pairs[-1].expr)
        for pair in reversed(pairs[:-1]):
            out = f"numpy.where({self._print(pair.cond)}, {self._print(pair.expr)}, {out})"
        return out

    # tanh(softplus(x)) (mish's gate) as _tanh_softplus(x): exp and arithmetic only, where
    # numpy.tanh and numpy.log are scalar loops (mish 1e5: ~2x faster fwd+bwd).
    def _print_tanh(self, expr):
        arg = expr.args[0]
        if isinstance(arg, stable.softplus):
            return f"_tanh_softplus({self._print(arg.args[0])})"
        return f"numpy.tanh({self._print(arg)})"

    def _print_NaN(self, expr):
        return "numpy.nan"

    def _print_Infinity(self, expr):
        return "numpy.inf"

    def _print_NegativeInfinity(self, expr):
        return "-numpy.inf"

    def _print_Relational(self, expr):
        op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[expr.rel_op]
        lhs = self.parenthesize(expr.lhs, 40)
        rhs = self.parenthesize(expr.rhs, 40)
        return f"({lhs} {op} {rhs})"

    def _print_Abs(self, expr):
        return f"numpy.abs({self._print(expr.args[0])})"

    def _print_sign(self, expr):
        return f"numpy.sign({self._print(expr.args[0])})"

    # SymPy prints And/Or as logical_and.reduce((a, b)), which cannot broadcast a against b
    def _print_And(self, expr):
        return self._nested("numpy.logical_and", expr.args)

    def _print_Or(self, expr):
        return self._nested("numpy.logical_or", expr.args)

    def _print_Not(self, expr):
        return f"numpy.logical_not({self._print(expr.args[0])})"

    def _nested(self, fn, args):
        out = self._print(args[0])
        for arg in args[1:]:
            out = f"{fn}({out}, {self._print(arg)})"
        return out

    def _print_BooleanTrue(self, expr):
        return "True"

    def _print_BooleanFalse(self, expr):
        return "False"


def fast_precedence(item):
    """sympy.printing.precedence.precedence, without building -item for a product
    (Mul.could_extract_minus_sign compares it with -item: a constructor call per product
    printed, a tenth of a large program's compile) or comparing a Float with 0 through
    SymPy. The same values: a product whose leading number is negative binds as a sum."""
    if isinstance(item, sympy.Mul):
        for arg in item.args:
            if isinstance(arg, sympy.Function) and getattr(arg, "precedence", 1 << 30) < \
                    PRECEDENCE["Mul"]:
                return PRECEDENCE["Mul"]
        c = item.args[0]
        return PRECEDENCE["Add"] if c.is_Number and c.is_extended_negative else \
            PRECEDENCE["Mul"]
    if isinstance(item, sympy.Float):
        return PRECEDENCE["Add"] if item._mpf_[0] else PRECEDENCE["Atom"]   # the sign bit
    return precedence(item)


def _print_mul_as_is(printer, expr):
    """CodePrinter._print_Mul for a large program's printer (order 'none'): the same text for
    a product as it holds its factors, with fast_precedence, and the positive product of a
    negated one built as it is (SymPy's _keep_coeff calls the constructor)."""
    prec = fast_precedence(expr)
    c, e = expr.as_coeff_Mul()
    sign = ""
    if c.is_Number and c.is_extended_negative:
        sign = "-"
        c = -c
        if c is S.One:
            expr = e
        elif e.is_Mul:
            margs = list(e.args)
            if margs[0].is_Number:
                margs[0] *= c
                if margs[0] == 1:
                    margs.pop(0)
            else:
                margs.insert(0, c)
            expr = sympy.Mul._from_args(margs)
        elif e is S.One:
            expr = c
        else:
            expr = sympy.Mul._from_args((c, e))
    a, b, pow_paren = [], [], []
    for item in sympy.Mul.make_args(expr):
        if item.is_commutative and item.is_Pow and item.exp.is_Rational and \
                item.exp.is_negative:
            if item.exp != -1:
                b.append(sympy.Pow(item.base, -item.exp, evaluate=False))
            else:
                if len(item.args[0].args) != 1 and isinstance(item.base, sympy.Mul):
                    pow_paren.append(item)
                b.append(item.base)
        else:
            a.append(item)
    a = a or [S.One]
    if len(a) == 1 and sign == "-":
        a_str = [printer.parenthesize(a[0], 0.5 * (PRECEDENCE["Pow"] + PRECEDENCE["Mul"]))]
    else:
        a_str = [printer.parenthesize(x, prec) for x in a]
    b_str = [printer.parenthesize(x, prec) for x in b]
    return quotient_text(sign, a_str, b_str, b, pow_paren)


def count_ops(exprs) -> int:
    """Arithmetic operations in expressions (SymPy's count, visual=False)."""
    return int(sum(sympy.count_ops(e) for e in exprs))

