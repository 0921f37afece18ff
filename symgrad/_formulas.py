"""The IR's text view: a Graph's outputs as readable formulas (text and LaTeX), with named shared
terms, for `str(graph)`, the notebook reprs, docstrings of generated modules and `symgrad show`.

Moved verbatim from emit/printers.py (which re-exports every name) so that the IR layer prints
itself without importing the emit layer.
"""
from __future__ import annotations

import math
import textwrap

import sympy
from sympy.printing.latex import LatexPrinter
from sympy.printing.precedence import PRECEDENCE, precedence
from sympy.printing.str import StrPrinter


# --------------------------------------------------------------------------- formulas
class _Op(sympy.Function):
    """A structural op shown in a formula, e.g. mean(x, 1): its operands, then its attributes as
    Symbols named "key=value" (dims, count=N, ...). Printed compactly as text (dims positional,
    keepdim left out) and as operators in LaTeX (sums, 1/N sums, max, ...)."""

    op = "op"
    _cache: dict = {}

    @classmethod
    def of(cls, op):
        hit = cls._cache.get(op)
        if hit is None:
            hit = cls._cache[op] = type(op, (cls,), {"op": op})
        return hit

    def split(self):
        """(operands, {attribute: value text})."""
        operands, attrs = [], {}
        for a in self.args:
            if a.is_Symbol and "=" in a.name:
                k, v = a.name.split("=", 1)
                attrs[k] = v
            else:
                operands.append(a)
        return operands, attrs

    def _sympystr(self, printer):
        operands, attrs = self.split()
        parts = [printer._print(a) for a in operands]
        for k, v in attrs.items():
            if k == "dims":
                if v != "None":
                    parts.append(_dims_text(v))
            elif k != "count":
                parts.append(f"{k}={v}")
        text = f"{self.op}({', '.join(parts)})"
        if "count" in attrs and self.op == "unreduce":
            text += f"/{attrs['count']}"
        return text

    def _latex(self, printer, exp=None):
        text = self._latex_body(printer)
        # a power of it (sum(x)**2): SymPy's printer hands the exponent to the base
        return text if exp is None else rf"\left({text}\right)^{{{exp}}}"

    def _latex_body(self, printer):
        operands, attrs = self.split()
        dims = attrs.get("dims", "None")
        sub = "" if dims == "None" else r"_{\mathrm{dim}\," + _latex_text(_dims_text(dims)) + "}"
        body = ", ".join(printer._print(a) for a in operands)
        paren = rf"\left({body}\right)"
        if len(operands) == 1 and (operands[0].is_Atom or operands[0].is_Function):
            paren = "{" + body + "}"
        count = attrs.get("count")
        n = _latex_name(count) if count else "N"
        if self.op == "sum":
            return rf"\sum{sub} {paren}"
        if self.op == "mean":
            return rf"\frac{{1}}{{{n}}}\sum{sub} {paren}"
        if self.op in ("amax", "max_dim", "amin", "min_dim", "prod"):
            head = {"amax": r"\max", "max_dim": r"\max", "amin": r"\min", "min_dim": r"\min",
                    "prod": r"\prod"}[self.op]
            return rf"{head}{sub} {paren}"
        rest = [_latex_text(f"{v}") for k, v in attrs.items() if k not in ("dims", "count")]
        if dims != "None":
            rest.insert(0, r"\mathrm{dim}\," + _latex_text(_dims_text(dims)))
        name = r"\operatorname{" + self.op.replace("_", r"\_") + "}"
        text = name + ("_{" + ",".join(rest) + "}" if rest else "") + paren
        if count and self.op == "unreduce":
            text = rf"\frac{{1}}{{{n}}} {text}"
        return text


def _dims_text(v):
    """(1,) -> 1, (0, 2) -> (0, 2): the dims of a reduction as the formula shows them."""
    return v[1:-2] if v.startswith("(") and v.endswith(",)") else v


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&",
                  "#": r"\#", "^": r"\^{}", "_": r"\_", "%": r"\%", "~": r"\~{}"}


def _latex_text(text):
    """Text as LaTeX that typesets it literally (attribute values: tuples, numbers, names)."""
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
          "kappa", "lambda", "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi",
          "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma",
          "Upsilon", "Phi", "Psi", "Omega", "varepsilon", "vartheta", "varphi", "varrho"}
_LATEX_ALIASES = {"eps": r"\varepsilon", "lam": r"\lambda", "lamb": r"\lambda"}
_OPERATOR_NAMES = {"log", "exp", "sin", "cos", "tan", "sinh", "cosh", "tanh", "det", "max",
                   "min", "arg", "ln"}


def _latex_word(word, operator=False):
    """One part of a name: a Greek letter, a one-letter name, digits, or an upright word."""
    if word in _GREEK:
        return "\\" + word
    if word in _LATEX_ALIASES:
        return _LATEX_ALIASES[word]
    if operator and word in _OPERATOR_NAMES:
        return "\\" + word
    if len(word) == 1 or word.isdigit():
        return word
    head = word.rstrip("0123456789")
    if head and head != word and (len(head) == 1 or head in _GREEK or head in _LATEX_ALIASES):
        return _latex_word(head) + "_{" + word[len(head):] + "}"
    return r"\mathrm{" + _latex_text(word) + "}"


_ACCENTS = {"hat": r"\hat", "bar": r"\bar", "tilde": r"\tilde", "dot": r"\dot",
            "vec": r"\vec"}


def _latex_name(name, sub=False):
    r"""A variable's name as LaTeX: grad_out -> \mathrm{grad}_{\text{out}}, log_sigma ->
    \log \sigma, sigma_x -> \sigma_{x}, x_hat -> \hat{x}, mu -> \mu, v15 -> v_{15}, weight ->
    \mathrm{weight} (\text{weight} in a subscript)."""
    parts = [p for p in name.split("_") if p]
    if not parts:
        return _latex_text(name)
    head, rest = parts[0], parts[1:]
    if head in _OPERATOR_NAMES and rest and head not in ("max", "min"):
        return "\\" + head + " " + _latex_name("_".join(rest), sub)
    if len(rest) == 1 and rest[0] in _ACCENTS and (len(head) == 1 or head in _GREEK):
        return _ACCENTS[rest[0]] + "{" + _latex_word(head) + "}"
    text = _latex_word(head)
    if sub and text.startswith(r"\mathrm{"):
        text = r"\text{" + text[len(r"\mathrm{"):]
    if rest:
        if "_" in text:   # v15_x: a subscript of its own already
            text = "{" + text + "}"
        text += "_{" + _latex_name("_".join(rest), sub=True) + "}"
    return text


_SYMPY_ATOMS = {"E", "I", "N", "O", "Q", "S", "oo", "nan", "zoo", "pi"}


class _ReadingOrder:
    """Sums in reading order: x - mu, not -mu + x (SymPy's order puts the negated term first
    when its name sorts first); a term of constants alone (eps) after the others."""

    constant_names: frozenset = frozenset()

    def _as_ordered_terms(self, expr, order=None):
        terms = super()._as_ordered_terms(expr, order=order)

        def key(t):
            names = {s.name for s in t.free_symbols}
            return (t.could_extract_minus_sign(),
                    bool(names) and names <= self.constant_names or t.is_number)
        return sorted(terms, key=key)


class _FormulaStrPrinter(_ReadingOrder, StrPrinter):
    """SymPy's text printer, sums in reading order."""


def _str_precedence(item):
    """sympy.printing.precedence.precedence, for the StrPrinter, without building -item for a
    product (Mul.could_extract_minus_sign compares it with -item: a constructor call per
    product printed) or comparing a Float with 0 through SymPy. The same values."""
    if type(item) is sympy.Mul:
        args = item.args
        for arg in args:
            if isinstance(arg, sympy.Function) and getattr(arg, "precedence", None) is not None \
                    and arg.precedence < PRECEDENCE["Mul"]:
                return PRECEDENCE["Mul"]
            if arg is sympy.S.ComplexInfinity:   # zoo*x == -zoo*x: SymPy decides
                return precedence(item)
        c = args[0]
        return PRECEDENCE["Add"] if c.is_Number and c.is_extended_negative else \
            PRECEDENCE["Mul"]
    if type(item) is sympy.Float:
        return PRECEDENCE["Add"] if item._mpf_[0] else PRECEDENCE["Atom"]   # the sign bit
    return precedence(item)


class _DagStrPrinter(StrPrinter):
    """sympy.sstr(expr, order="none") -- the same text -- for a large program's docstring
    derivations (thousands of nodes per module): precedence without building -item per
    product, and the positive product of a negated one built as _keep_coeff builds it without
    the constructor's flatten where the result is known (one printer for all the rows).
    tests/test_formula_printer.py compares it with sstr."""

    def __init__(self):
        super().__init__({"order": "none"})

    def parenthesize(self, item, level, strict=False):
        p = _str_precedence(item)
        if p < level or (not strict and p <= level):
            return f"({self._print(item)})"
        return self._print(item)

    def _print_Add(self, expr, order=None):
        terms = self._as_ordered_terms(expr, order=order)   # order "none": as stored
        prec = _str_precedence(expr)
        out = []
        for term in terms:
            t = self._print(term)
            if t.startswith("-") and not term.is_Add:
                sign = "-"
                t = t[1:]
            else:
                sign = "+"
            if term.is_Add or _str_precedence(term) < prec:
                out.extend([sign, f"({t})"])
            else:
                out.extend([sign, t])
        sign = out.pop(0)
        return ("" if sign == "+" else sign) + " ".join(out)

    def _print_Mul(self, expr):
        # StrPrinter._print_Mul (SymPy 1.14) with _str_precedence and _positive
        S = sympy.S
        args = expr.args
        if args[0] is S.One or any(isinstance(a, sympy.Number) or a.is_Pow and all(
                ai.is_Integer for ai in a.args) for a in args[1:]):
            return super()._print_Mul(expr)   # an unevaluated product: SymPy's own way
        prec = _str_precedence(expr)
        c, e = expr.as_coeff_Mul()
        if c < 0:
            expr = _positive(-c, e)
            sign = "-"
        else:
            sign = ""
        a, b, pow_paren = [], [], []
        for item in sympy.Mul.make_args(expr):
            if item.is_commutative and isinstance(item, sympy.Pow) and \
                    bool(item.exp.as_coeff_Mul()[0] < 0):
                if item.exp is not S.NegativeOne:
                    b.append(_inverse_power(item))
                else:
                    if len(item.args[0].args) != 1 and isinstance(item.base,
                                                                  (sympy.Mul, sympy.Pow)):
                        pow_paren.append(item)
                    b.append(item.base)
            elif item.is_Rational and item is not S.Infinity:
                if item.p != 1:
                    a.append(sympy.Rational(item.p))
                if item.q != 1:
                    b.append(sympy.Rational(item.q))
            else:
                a.append(item)
        a = a or [S.One]
        a_str = [self.parenthesize(x, prec, strict=False) for x in a]
        b_str = [self.parenthesize(x, prec, strict=False) for x in b]
        return quotient_text(sign, a_str, b_str, b, pow_paren)


def quotient_text(sign, a_str, b_str, b, pow_paren):
    """The tail of SymPy's StrPrinter._print_Mul: sign, the numerator's factors `a_str` and
    the denominator's `b_str` (of the bases `b`) as `-a1*a2/(b1*b2)`, a denominator base that
    is a power's in `pow_paren` parenthesized. Shared by the derivation printer here and the
    targets' printers (emit/printers.py)."""
    for item in pow_paren:
        if item.base in b:
            b_str[b.index(item.base)] = f"({b_str[b.index(item.base)]})"
    if not b:
        return sign + "*".join(a_str)
    if len(b) == 1:
        return sign + "*".join(a_str) + "/" + b_str[0]
    return sign + "*".join(a_str) + "/(" + "*".join(b_str) + ")"


def _positive(coeff, factors):
    """sympy.core.mul._keep_coeff(coeff, factors) for a positive number `coeff`: the product
    built from its arguments where _keep_coeff's result is known to be that product (a Mul
    without a leading number; a symbol or a function application times a finite Float or
    Rational, which Mul's flatten leaves as (coeff, factors)), else _keep_coeff itself."""
    from sympy.core.mul import _keep_coeff

    S = sympy.S
    if factors is S.One:
        return coeff
    if coeff is S.One:
        return factors
    finite = coeff.is_Rational or (coeff.is_Float and math.isfinite(float(coeff)))
    if factors.is_Mul and not factors.args[0].is_Number:
        return sympy.Mul._from_args((coeff,) + factors.args)
    if finite and factors.is_commutative and (factors.is_Symbol or factors.is_Function):
        return sympy.Mul._from_args((coeff, factors))
    return _keep_coeff(coeff, factors)


def _inverse_power(item):
    """StrPrinter._print_Mul's apow: the power item with its exponent negated."""
    b, e = item.as_base_exp()
    eargs = list(sympy.Mul.make_args(e))
    if eargs[0] is sympy.S.NegativeOne:
        eargs = eargs[1:]
    else:
        eargs[0] = -eargs[0]
    e = sympy.Mul._from_args(eargs)
    if isinstance(item, sympy.Pow):
        return item.func(b, e, evaluate=False)
    return item.func(e, evaluate=False)


class _FormulaLatexPrinter(_ReadingOrder, LatexPrinter):
    """SymPy's LaTeX printer with the names of a derivation typeset as a reader expects."""

    def _print_Symbol(self, expr, style="plain"):
        return _latex_name(expr.name)


class _Derivation:
    """What a derivation names besides its terms: the constants (by the user's names) and the
    counts that means divide by (N, N2, ...)."""

    def __init__(self, graph, taken):
        root = graph.root()
        self.taken = set(taken)
        values = [(k, v) for k, v in root.constants if type(v) is float]
        values += [(k, v) for k, v in getattr(root, "named_globals", ())
                   if k not in self.taken and k not in dict(values)]
        by_value: dict = {}
        for k, v in values:
            if math.isfinite(v) and abs(v) not in (0.0, 0.5, 1.0, 2.0):
                by_value.setdefault(v, []).append(k)
        # a value two constants share is shown as a number: either name could be meant
        self.constants = {v: names[0] for v, names in by_value.items() if len(names) == 1
                          and names[0].isidentifier() and names[0] not in self.taken}
        self.constant_values = {k: v for v, k in self.constants.items()}
        self.counts: dict = {}   # (count or dims text) -> name
        self.count_notes: dict = {}   # name -> where text

    def name_constants(self, expr):
        if not self.constants:
            return expr
        sub = {}
        # a Float, or a Rational the trace made of an exact one (R0 = 1.5 -> 3/2), unless it
        # is an exponent somewhere in expr (x**(3/2) is no constant of the user's)
        powers = {p.exp for p in expr.atoms(sympy.Pow)}
        numbers = [f for f in expr.atoms(sympy.Rational) if not f.is_Integer and f not in powers]
        for f in [*expr.atoms(sympy.Float), *numbers]:
            v = float(f)
            if v in self.constants:
                sub[f] = sympy.Symbol(self.constants[v], real=True)
            elif -v in self.constants:
                sub[f] = -sympy.Symbol(self.constants[-v], real=True)
        return expr.xreplace(sub) if sub else expr

    def count(self, node, dims):
        """The name of the count a mean over `dims` of `node` (its full shape) divides by."""
        shape = node.shape
        fixed = dims is None or isinstance(dims, int) or isinstance(dims, tuple) and all(
            isinstance(d, int) for d in dims)
        if fixed and shape is not None and all(isinstance(n, int) for n in shape):
            axes = range(len(shape)) if dims is None else (
                [dims] if isinstance(dims, int) else list(dims))
            try:
                value = 1
                for d in axes:
                    value *= int(shape[d])
            except (TypeError, IndexError, ValueError):
                value = None
        else:
            value = None
        key = value if value is not None else ("dims", repr(dims))
        hit = self.counts.get(key)
        if hit is None:
            k = 1
            while True:
                hit = "N" if k == 1 else f"N{k}"
                if hit not in self.taken:
                    break
                k += 1
            self.taken.add(hit)
            self.counts[key] = hit
            what = ("all dims" if dims is None else f"dim {dims}" if isinstance(dims, int)
                    else f"dim {dims[0]}" if isinstance(dims, tuple) and len(dims) == 1
                    else f"dims {dims!r}")
            self.count_notes[hit] = (
                f"{hit} = {value} (the count a mean over {what} averages)"
                if value is not None else f"{hit} = the number of elements a mean over {what} "
                "averages" if fixed else f"{hit} = the number of elements the mean averages "
                f"(over {dims})")
        return hit

    def where(self, text):
        """The 'name = value' items a derivation's printed `text` uses."""
        import re

        items = []
        for name, value in self.constant_values.items():
            if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w(])", text):
                items.append(f"{name} = {value!r}")
        for name, note in self.count_notes.items():
            if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w(])", text):
                items.append(note)
        return items


def inline(node, memo=None, named=None, derivation=None):
    """The SymPy expression of `node` with elementwise regions inlined and structural ops shown
    as function applications, e.g. sum(exp(x*y), 1) — for reading, not for running.
    `named`: ids of nodes shown by their name (shared terms of a derivation), not inlined."""
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
        memo[id(n)] = _inline_one(n, memo, named, derivation)
    return memo[id(node)]


def _inline_one(node, memo, named, derivation=None, structural=False):
    """`structural`: a large program's derivation, whose formulas are pasted in as they are
    (`_fastsym.rename`), not re-canonicalized (a SymPy constructor per node of the program)."""
    from ._fastsym import rename, xreplace
    from ._symbols import symbol_of

    def arg(a):
        if named is not None and id(a) in named:
            return sympy.Symbol(named[id(a)], real=True)
        return memo[id(a)]

    if node.op == "input":
        return symbol_of(node)
    if node.op == "elementwise":
        try:
            mapping = {symbol_of(a): arg(a) for a in node.args}
            expr = rename(node.expr, mapping, {}) if structural else \
                xreplace(node.expr, mapping, {})
        except TypeError:
            # a condition fed by a structural op (a bool `sum(...)` is no SymPy Boolean):
            # Piecewise refuses it; the formula names the value instead
            return symbol_of(node)
        return expr if derivation is None else derivation.name_constants(expr)
    from .ops.structural import STRUCTURAL

    skip = STRUCTURAL[node.op].shape_args
    args = [arg(a) for i, a in enumerate(node.args) if i not in skip]
    shown = [a for a in node.attrs if a[0] not in ("mean", "keepdim") and a[1] is not None
             or a[0] == "dims"]
    extra = [sympy.Symbol(f"{k}={v!r}".replace(" ", "")) for k, v in shown]
    if derivation is not None and (node.op == "mean" or node.op == "unreduce"
                                   and node.attr("mean")):
        full = node if node.op == "unreduce" else node.args[0]
        extra.append(sympy.Symbol("count=" + derivation.count(full, node.attr("dims"))))
    return _Op.of(node.op)(*args, *extra)


# A value read by several others whose formula has at least this many nodes is shown once, as
# a named term ("v7 = ..."), and read by name: a derivation, linear in the program, instead of
# one formula that repeats it (exponentially so for an unrolled integrator).
SHARED_TERM_NODES = 24
# In a small program a shared value is named from this many nodes on, and a reduction the
# user's code assigned to a variable (`mu = x.mean(-1)`) is named by that variable: the
# docstring reads as a derivation ("mu = mean(x, 1)", "var = mean((x - mu)**2, 1)", "out =
# ..."), not one expression that repeats mu and var.
SMALL_SHARED_TERM_NODES = 8


def _assigned_name(site, op):
    """The variable the user's line `site` ("file.py:14") assigns the result of op `op` to
    (`mu = x.mean(-1, keepdim=True)` -> "mu" for op "mean"), or None."""
    import ast
    import keyword
    import linecache

    path, _, line = site.rpartition(":")
    if not line.isdigit():
        return None
    text = linecache.getline(path, int(line)).strip()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return None
    stmt = tree.body[0]
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name) or \
            not isinstance(stmt.value, ast.Call):
        return None
    func = stmt.value.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    name = stmt.targets[0].id
    if called not in (op, "a" + op, op.removeprefix("a"), op.removesuffix("_dim")):
        return None
    if not name.isascii() or keyword.iskeyword(name) or hasattr(sympy.functions, name) or \
            name in _SYMPY_ATOMS:
        return None
    return name


def _user_names(graph, nodes, taken):
    """{id(node): the user's variable name} for the reductions of the forward (recomputed in
    its derivative) that a line of the user's code assigns to a variable."""
    from .ops.structural import STRUCTURAL

    forward_inputs = {n.name for n in graph.root().inputs}
    adjoint = set()
    last: dict = {}
    for n in nodes:
        if n.op == "input":
            if n.name not in forward_inputs:
                adjoint.add(id(n))
            continue
        if any(id(a) in adjoint for a in n.args):
            adjoint.add(id(n))
        elif n.op != "elementwise" and n.site:
            last.setdefault(n.site, []).append(n)
    out, used = {}, set()
    for site, made in last.items():
        n = made[-1]
        if sum(m.op == n.op for m in made) > 1:
            continue   # a line run more than once (a loop's): its values share no one name
        name = _assigned_name(site, n.op)
        if name is None or name in taken or name in STRUCTURAL:
            continue
        if name in used:
            out = {k: v for k, v in out.items() if v != name}   # a loop's line: no one name
            continue
        used.add(name)
        out[id(n)] = name
    return out


def _readers(graph, nodes):
    """({id(node): how many of the derivation's shown formulas read it}, the ids of the values
    its formulas show). A value read only for its shape (unreduce's) is not in the formula that
    reads it: the derivation counts the readers among the values its formulas show."""
    from .ops.structural import STRUCTURAL

    shown = {id(o) for o in graph.outputs if o is not None}
    readers: dict = {}
    for n in reversed(nodes):
        if id(n) not in shown:
            continue
        skip = STRUCTURAL[n.op].shape_args if n.op in STRUCTURAL else ()
        for a in {id(a) for i, a in enumerate(n.args) if i not in skip}:
            readers[a] = readers.get(a, 0) + 1
            shown.add(a)
    for o in graph.outputs:
        if o is not None:
            readers[id(o)] = readers.get(id(o), 0) + 1
    return readers, shown


def shared_terms(graph, derivation=None):
    """{id(node): name} for the values a derivation of `graph` names (see SHARED_TERM_NODES),
    and the nodes in order. Sizes are measured with the named terms already named."""

    nodes = graph.nodes()
    readers, shown = _readers(graph, nodes)
    taken = {n.name for n in nodes} | set(graph.output_names)
    user = {} if graph.dag else {k: v for k, v in _user_names(graph, nodes, taken).items()
                                 if readers.get(k)}
    if derivation is not None:
        derivation.taken |= taken | set(user.values())
    named: dict = {}
    memo: dict = {}
    sizes: dict = {}
    terms = []
    for n in nodes:
        memo[id(n)] = _inline_one(n, memo, named, derivation, graph.dag)
        if n.op == "input" or n in graph.outputs or id(n) not in shown:
            continue
        shared = readers.get(id(n), 0) >= 2
        # a large program (Graph.dag) names every shared value, and any formula long enough
        # to be a term of its own, so that each line of the derivation stays short
        if graph.dag:
            if shared or _tree_size(memo[id(n)], sizes) >= 4 * SHARED_TERM_NODES:
                named[id(n)] = n.name
                terms.append(n)
        elif id(n) in user or shared and _tree_size(memo[id(n)], sizes) >= \
                SMALL_SHARED_TERM_NODES:
            named[id(n)] = user.get(id(n), n.name)
            terms.append(n)
    return named, terms, memo


# A formula whose printed tree has more nodes than this is summarized, not printed: printing
# is linear in the *tree* (shared subexpressions repeat), which for oscillator8's backward is
# seconds of compile time for a docstring nobody reads; the generated steps show the formula.
MAX_FORMULA_NODES = 1000
MAX_TOTAL_FORMULA_NODES = 4000   # per graph: later formulas are summarized past this budget
_FORMULA_CACHE: dict = {}   # id(graph) -> (weakref to graph, width, lines)


def _tree_size(expr, memo):
    """Nodes of expr's expression tree, shared subtrees counted once per occurrence (DAG walk).
    A number is one node, never looked up (a Float's hash is recomputed on every lookup)."""
    if expr.is_Number:
        return 1
    hit = memo.get(expr)
    if hit is not None:
        return hit
    stack = [(expr, False)]   # iterative: a derivation's terms can nest deeply
    while stack:
        e, ready = stack.pop()
        if e in memo:
            continue
        if ready or not e.args:
            memo[e] = 1 + sum(1 if a.is_Number else memo[a] for a in e.args)
        else:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args if not a.is_Number and a not in memo)
    return memo[expr]


def _derivation_rows(graph):
    """(derivation, rows): a row (name, expr) per named term and output, in order; expr is
    None for an absent gradient and an int (its node count) for a formula too large to print."""
    derivation = _Derivation(graph, ())
    if graph.dag:
        return derivation, _dag_rows(graph, derivation)
    named, terms, memo = shared_terms(graph, derivation)
    sizes = {}
    budget = MAX_TOTAL_FORMULA_NODES
    rows = []
    for name, node in [(named[id(t)], t) for t in terms] + list(zip(graph.output_names,
                                                                     graph.outputs)):
        if node is None:
            rows.append((name, None))
            continue
        expr = memo[id(node)]
        size = _tree_size(expr, sizes)
        if size > MAX_FORMULA_NODES or budget < size:
            rows.append((name, size))
            continue
        budget -= size
        rows.append((name, expr))
    if not graph.dag:
        taken = {n.name for n in graph.nodes()} | set(graph.output_names) | set(named.values())
        printable = [(n, e) for n, e in rows if isinstance(e, sympy.Basic)]
        extra, printable = _display_cse(printable, taken | derivation.taken)
        it = iter(printable)
        rows = [next(it) if isinstance(e, sympy.Basic) else (n, e) for n, e in rows]
        rows = _place_terms(extra, rows)
    return derivation, rows


def _dag_rows(graph, derivation):
    """A large program's rows: shared_terms' terms in order until the first one that does not
    fit the budget (MAX_FORMULA_NODES, MAX_TOTAL_FORMULA_NODES); then one row saying that the
    rest is in the steps, and the outputs (those not inlined yet are not inlined at all: the
    remaining formulas are never built, which was a fifth of a large program's emit)."""

    nodes = graph.nodes()
    readers, shown = _readers(graph, nodes)
    derivation.taken |= {n.name for n in nodes} | set(graph.output_names)
    outputs = {id(o) for o in graph.outputs if o is not None}
    named: dict = {}
    memo: dict = {}
    sizes: dict = {}
    budget = MAX_TOTAL_FORMULA_NODES
    rows = []
    rest = 0
    for n in nodes:
        memo[id(n)] = _inline_one(n, memo, named, derivation, True)
        if n.op == "input" or id(n) in outputs or id(n) not in shown:
            continue
        if readers.get(id(n), 0) >= 2 or _tree_size(memo[id(n)], sizes) >= 4 * SHARED_TERM_NODES:
            named[id(n)] = n.name
            size = _tree_size(memo[id(n)], sizes)
            if size > MAX_FORMULA_NODES or budget < size:
                rest = 1
                break
            budget -= size
            rows.append((n.name, memo[id(n)]))
    if rest:
        rows.append(("...", "the remaining terms: see the steps below"))
    for name, node in zip(graph.output_names, graph.outputs):
        if node is None:
            rows.append((name, None))
            continue
        expr = memo.get(id(node)) if not rest else None
        size = _tree_size(expr, sizes) if expr is not None else None
        if expr is None or size > MAX_FORMULA_NODES or budget < size:
            rows.append((name, "see the steps below" if expr is None else size))
            continue
        budget -= size
        rows.append((name, expr))
    return rows


def _place_terms(extra, rows):
    """rows with each term of `extra` (in dependency order) placed just before the first row
    that reads it (directly or through a later term)."""
    if not extra:
        return rows
    first = {}
    for name, e in reversed(extra):
        sym = sympy.Symbol(name, real=True)
        at = [i for i, (_, r) in enumerate(rows) if isinstance(r, sympy.Basic)
              and r.has(sym)]
        at += [first[n] for n, t in extra if n in first and t.has(sym)]
        first[name] = min(at, default=len(rows))
    out = []
    for i, row in enumerate(rows + [None]):
        out.extend((n, t) for n, t in extra if first[n] == i)
        if row is not None:
            out.append(row)
    return out


def formula_lines(graph, width=96):
    """The derivation of `graph`'s outputs, wrapped: a 'name = formula' line per named term
    (shared values, the user's named reductions), then one per output, then the 'where' line
    naming the constants and counts they use (cached per graph)."""
    import weakref

    hit = _FORMULA_CACHE.get(id(graph))
    if hit is not None and hit[0]() is graph and hit[1] == width:
        return list(hit[2])
    derivation, rows = _derivation_rows(graph)
    printer = _FormulaStrPrinter()
    printer.constant_names = frozenset(derivation.constant_values) | frozenset(
        derivation.count_notes)
    dag_printer = _DagStrPrinter() if graph.dag else None
    lines = []
    for name, expr in rows:
        if expr is None:
            lines.append(f"{name} = None")
        elif isinstance(expr, str):
            lines.append(f"{name} = <{expr}>" if name != "..." else f"... <{expr}>")
        elif not isinstance(expr, sympy.Basic):
            lines.append(f"{name} = <an expression of {expr} nodes: see the steps below>")
        else:
            # a large program prints its sums in their stored order (no sort per term)
            text = dag_printer.doprint(expr) if graph.dag else printer.doprint(expr)
            lines.extend(_wrap(f"{name} = {text}", width))
    where = derivation.where("\n".join(lines))
    if where:
        lines.extend(_wrap("where " + ", ".join(where), width))
    try:
        if len(_FORMULA_CACHE) > 256:
            _FORMULA_CACHE.clear()
        _FORMULA_CACHE[id(graph)] = (weakref.ref(graph), width, tuple(lines))
    except TypeError:  # a graph that cannot be weakly referenced is not cached
        pass
    return lines


def _display_cse(rows, taken):
    """rows [(name, expr or None)] with the subexpressions repeated within or across them (of at
    least SMALL_SHARED_TERM_NODES nodes) shown once as terms q1, q2, ...: the derivation of a
    program that is one elementwise region (Black-Scholes' d1, GELU's gate), whose formula
    would otherwise repeat them. For reading only: the generated statements have their own CSE."""
    exprs = [e for _, e in rows if e is not None]
    if not exprs:
        return [], rows

    def names():
        k = 1
        while True:
            if f"q{k}" not in taken:
                yield sympy.Symbol(f"q{k}", real=True)
            k += 1
    try:
        reps, reduced = sympy.cse(exprs, symbols=names(), order="none")
    except Exception:   # a formula SymPy's cse cannot walk is shown whole
        return [], rows
    back, kept, sizes = {}, [], {}
    for sym, sub in reps:
        sub = sub.xreplace(back)
        if _tree_size(sub, sizes) >= SMALL_SHARED_TERM_NODES:
            kept.append((sym, sub))
        else:
            back[sym] = sub
    if not kept:
        return [], rows
    gen = names()
    rename = {sym: next(gen) for sym, _ in kept}
    terms = [(rename[sym].name, sub.xreplace(rename)) for sym, sub in kept]
    out, it = [], iter(reduced)
    for name, e in rows:
        out.append((name, None if e is None else next(it).xreplace(back).xreplace(rename)))
    return terms, out


def _wrap(text, width):
    return textwrap.wrap(text, width, subsequent_indent="    ", break_long_words=True,
                         break_on_hyphens=False) or [text]


def formula_text(graph) -> str:
    return "\n".join(formula_lines(graph))


def formula_latex(graph) -> str:
    derivation, rows_in = _derivation_rows(graph)
    printer = _FormulaLatexPrinter()
    printer.constant_names = frozenset(derivation.constant_values) | frozenset(
        derivation.count_notes)
    rows = []
    used = set()
    for name, expr in rows_in:
        if expr is None:
            continue
        if isinstance(expr, str):
            body = rf"\text{{{expr}}}"
        elif not isinstance(expr, sympy.Basic):
            body = rf"\text{{an expression of {expr} nodes}}"
        else:
            body = printer.doprint(expr)
            used |= {s.name for s in expr.free_symbols}
            used |= {a.name.split("=", 1)[1] for e in expr.atoms(_Op) for a in e.args
                     if a.is_Symbol and a.name.startswith("count=")}
        rows.append(_latex_name(name) + " &= " + body)
    for name, value in derivation.constant_values.items():
        if name in used:
            rows.append(_latex_name(name) + " &= " + printer.doprint(sympy.Float(value)))
    for key, name in derivation.counts.items():
        if name in used:
            body = (printer.doprint(sympy.Integer(key)) if not isinstance(key, tuple)
                    else r"\text{the number of elements averaged}")
            rows.append(_latex_name(name) + " &= " + body)
    return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"
