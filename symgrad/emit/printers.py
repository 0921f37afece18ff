"""Printers render expressions; templates render files (STYLE rule 5).

`NumpyPrinter` extends SymPy's NumPyPrinter with a few overrides, each for a stated reason.
`formula_text` renders a Graph's outputs as readable formulas for docstrings and `symgrad show`.
"""
from __future__ import annotations

import math
import textwrap

import sympy
from sympy import S
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.precedence import PRECEDENCE, precedence

from ..ops import stable
from .cprinter import print_dividing_squares


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
    for item in pow_paren:
        if item.base in b:
            b_str[b.index(item.base)] = f"({b_str[b.index(item.base)]})"
    if not b:
        return sign + "*".join(a_str)
    if len(b) == 1:
        return sign + "*".join(a_str) + "/" + b_str[0]
    return sign + "*".join(a_str) + "/(" + "*".join(b_str) + ")"


def count_ops(exprs) -> int:
    """Arithmetic operations in expressions (SymPy's count, visual=False)."""
    return int(sum(sympy.count_ops(e) for e in exprs))


# --------------------------------------------------------------------------- formulas
def inline(node, memo=None, named=None):
    """The SymPy expression of `node` with elementwise regions inlined and structural ops shown
    as function applications, e.g. sum(exp(x*y), dims=(1,)) — for reading, not for running.
    `named`: ids of nodes shown by their name (shared terms of a derivation), not inlined."""
    from ..trace import symbol_of

    memo = {} if memo is None else memo
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    order = []                       # iterative post-order: derivations can be deep
    stack = [(node, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in memo:
            continue
        if ready:
            order.append(n)
            memo[id(n)] = None
            continue
        stack.append((n, True))
        stack.extend((a, False) for a in n.args if id(a) not in memo)
    for n in order:
        memo[id(n)] = _inline_one(n, memo, named)
    return memo[id(node)]


def _inline_one(node, memo, named, structural=False):
    """`structural`: a large program's derivation, whose formulas are pasted in as they are
    (`_fastsym.rename`), not re-canonicalized (a SymPy constructor per node of the program)."""
    from .._fastsym import rename
    from ..trace import symbol_of

    def arg(a):
        if named is not None and id(a) in named:
            return sympy.Symbol(named[id(a)], real=True)
        return memo[id(a)]

    if node.op == "input":
        return symbol_of(node)
    if node.op == "elementwise":
        try:
            mapping = {symbol_of(a): arg(a) for a in node.args}
            return rename(node.expr, mapping, {}) if structural else node.expr.xreplace(mapping)
        except TypeError:
            # a condition fed by a structural op (a bool `sum(...)` is no SymPy Boolean):
            # Piecewise refuses it; the formula names the value instead
            return symbol_of(node)
    from ..ops.structural import STRUCTURAL

    skip = STRUCTURAL[node.op].shape_args
    args = [arg(a) for i, a in enumerate(node.args) if i not in skip]
    shown = [a for a in node.attrs if a[0] not in ("mean",) and a[1] is not None]
    fn = sympy.Function(node.op)
    extra = [sympy.Symbol(f"{k}={v!r}".replace(" ", "")) for k, v in shown]
    return fn(*args, *extra)


# A value read by several others whose formula has at least this many nodes is shown once, as
# a named term ("v7 = ..."), and read by name: a derivation, linear in the program, instead of
# one formula that repeats it (exponentially so for an unrolled integrator).
SHARED_TERM_NODES = 24


def shared_terms(graph):
    """{id(node): name} for the values a derivation of `graph` names (see SHARED_TERM_NODES),
    and the nodes in order. Sizes are measured with the named terms already named."""
    nodes = graph.nodes()
    readers: dict = {}
    for n in nodes:
        for a in set(map(id, n.args)):
            readers[a] = readers.get(a, 0) + 1
    for o in graph.outputs:
        if o is not None:
            readers[id(o)] = readers.get(id(o), 0) + 1
    named: dict = {}
    memo: dict = {}
    sizes: dict = {}
    terms = []
    for n in nodes:
        memo[id(n)] = _inline_one(n, memo, named, graph.dag)
        if n.op == "input" or n in graph.outputs:
            continue
        shared = readers.get(id(n), 0) >= 2
        # a large program (Graph.dag) names every shared value, and any formula long enough
        # to be a term of its own, so that each line of the derivation stays short
        if (shared and (graph.dag or _tree_size(memo[id(n)], sizes) >= SHARED_TERM_NODES)) or \
                (graph.dag and _tree_size(memo[id(n)], sizes) >= 4 * SHARED_TERM_NODES):
            named[id(n)] = n.name
            terms.append(n)
    return named, terms, memo


# A formula whose printed tree has more nodes than this is summarized, not printed: printing
# is linear in the *tree* (shared subexpressions repeat), which for oscillator8's backward is
# seconds of compile time for a docstring nobody reads; the generated steps show the formula.
MAX_FORMULA_NODES = 1000
MAX_TOTAL_FORMULA_NODES = 4000   # per graph: later formulas are summarized past this budget
_FORMULA_CACHE: dict = {}   # id(graph) -> (weakref to graph, width, lines)


def _tree_size(expr, memo):
    """Nodes of expr's expression tree, shared subtrees counted once per occurrence (DAG walk)."""
    hit = memo.get(expr)
    if hit is not None:
        return hit
    stack = [(expr, False)]   # iterative: a derivation's terms can nest deeply
    while stack:
        e, ready = stack.pop()
        if e in memo:
            continue
        if ready or not e.args:
            memo[e] = 1 + sum(memo[a] for a in e.args)
        else:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args if a not in memo)
    return memo[expr]


def formula_lines(graph, width=96):
    """One 'name = formula' line (wrapped) per output of `graph` (cached per graph)."""
    import weakref

    hit = _FORMULA_CACHE.get(id(graph))
    if hit is not None and hit[0]() is graph and hit[1] == width:
        return list(hit[2])
    named, terms, memo = shared_terms(graph)
    sizes = {}
    lines = []
    budget = MAX_TOTAL_FORMULA_NODES
    rows = [(t.name, t) for t in terms] + list(zip(graph.output_names, graph.outputs))
    for name, node in rows:
        if node is None:
            lines.append(f"{name} = None")
            continue
        expr = memo[id(node)]
        size = _tree_size(expr, sizes)
        if size > MAX_FORMULA_NODES or budget < size:
            lines.append(f"{name} = <an expression of {size} nodes: see the steps below>")
            continue
        budget -= size
        text = f"{name} = {sympy.sstr(expr, order='none') if graph.dag else sympy.sstr(expr)}"
        lines.extend(textwrap.wrap(text, width, subsequent_indent="    ", break_long_words=True,
                                   break_on_hyphens=False) or [text])
    try:
        if len(_FORMULA_CACHE) > 256:
            _FORMULA_CACHE.clear()
        _FORMULA_CACHE[id(graph)] = (weakref.ref(graph), width, tuple(lines))
    except TypeError:  # a graph that cannot be weakly referenced is not cached
        pass
    return lines


def formula_text(graph) -> str:
    return "\n".join(formula_lines(graph))


def formula_latex(graph) -> str:
    named, terms, memo = shared_terms(graph)
    sizes = {}
    rows = []
    budget = MAX_TOTAL_FORMULA_NODES
    for name, node in [(t.name, t) for t in terms] + list(zip(graph.output_names,
                                                               graph.outputs)):
        if node is not None:
            label = name.replace("_", r"\_")
            expr = memo[id(node)]
            size = _tree_size(expr, sizes)
            if size > MAX_FORMULA_NODES or budget < size:
                body = rf"\text{{an expression of {size} nodes}}"
            else:
                budget -= size
                body = sympy.latex(expr)
            rows.append(rf"\mathrm{{{label}}} &= " + body)
    return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"
