"""Stage 3 — optimize: stabilizing rewrites, then one common-subexpression elimination across
every elementwise expression of a routine (forward recompute and all gradients share temps).

The result, a `Routine`, is exactly what the emitters read: an ordered list of steps over
final variable names. Temporaries are placed just before their first use, so every target can
evaluate the steps top to bottom.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import sympy

from . import _fastsym
from .errors import CompileError
from .graph import Graph, Node
from .ops.structural import STRUCTURAL
from .ops.elementwise import quotient
from .ops.table import costs, structural_costs
from .rewrites import reuse_hypot, share_sums
from .trace import symbol_of


@dataclass(frozen=True)
class Step:
    """One assignment. `node` is None for a CSE temporary."""

    target: str
    expr: object = None            # SymPy expression over variable names (elementwise / temp)
    node: Node | None = None       # the graph node computed (None for temps)


@dataclass
class Routine:
    """One generated function (forward, or backward) after optimization."""

    name: str
    graph: Graph
    args: tuple[str, ...]
    params: tuple[str, ...]
    steps: list[Step]
    returns: tuple[str | None, ...]
    names: dict[int, str]                     # id(node) -> variable name
    ops_before: int = 0
    ops_after: int = 0
    rewrites: tuple[str, ...] = ()
    timings: dict = field(default_factory=dict)

    def name_of(self, node):
        return self.names[id(node)]


def schedule(graph: Graph) -> list[Node]:
    """The nodes the outputs need, in creation order. An operand read only for its shape is
    not needed when that shape is known at compile time."""
    needed: dict[int, Node] = {}
    stack = [n for n in graph.outputs if n is not None]
    while stack:
        node = stack.pop()
        if id(node) in needed:
            continue
        needed[id(node)] = node
        rule = STRUCTURAL.get(node.op)
        free = node.expr.free_symbols if node.op == "elementwise" and node.shape is not None \
            else None   # computed once per node: free_symbols walks the whole expression
        for i, arg in enumerate(node.args):
            if rule is not None and i in rule.shape_args and arg.shape is not None:
                continue
            if free is not None and symbol_of(arg) not in free:
                continue
            stack.append(arg)
    return sorted(needed.values(), key=lambda n: n.index)


def name_of_symbol(s) -> str:
    """str(s) of a symbol, without SymPy's printer (a sixth of emitting a large program was
    str() of the symbols its steps read)."""
    return s.name if type(s) is sympy.Symbol else str(s)


def _stabilize(expr):
    """Stabilizing rewrites of one expression, memoized (the saving plan re-optimizes the
    backward's expressions, and a SymPy rewrite pass is the costliest stage) in the memo
    differentiation fills: the forward's regions were stabilized when they were replayed."""
    from .differentiate import _stabilize_cached

    return _stabilize_cached(expr)


def _stabilize_large(expr):
    """`_stabilize` of a large program's formula: once per formula shape
    (differentiate._stabilize_shape)."""
    from .differentiate import _stabilize_shape

    return _stabilize_shape(expr)


def optimize(graph: Graph, name: str, cse: bool = True, count: bool = True) -> Routine:
    """Rewrite, CSE and order one routine of `graph` (`count`: op counts for the stats)."""
    t0 = time.perf_counter()
    nodes = schedule(graph)
    nodes, same = _dedupe(nodes, graph)
    names: dict[int, str] = {}
    for node in graph.inputs:
        names[id(node)] = node.name
    for node, out_name in zip(graph.outputs, graph.output_names):
        if node is not None and id(node) not in names:
            names[id(node)] = out_name
    k = 0
    for node in nodes:
        if id(node) not in names:
            # a large program's values keep their trace names (v<creation number>): renaming
            # them v0, v1, ... would rebuild every formula of the program
            names[id(node)] = node.name if graph.dag else f"v{k}"
            k += 1
    rename = {symbol_of(n): _var(names[id(n)], n) for n in nodes + list(graph.inputs)
              if id(n) in names}
    for dup, rep in same:   # a repeated value is read from its first computation
        names[id(dup)] = names[id(rep)]
        rename[symbol_of(dup)] = _var(names[id(rep)], rep)
    if graph.dag:   # outputs and repeats only
        rename = {s: t for s, t in rename.items() if s != t}

    exprs, owners, fired = [], [], []
    memo: dict = {}
    for node in nodes:
        if node.op != "elementwise":
            continue
        try:
            expr, names_fired = _stabilize_large(node.expr) if graph.dag else \
                _stabilize(node.expr)
            if not graph.dag:
                expr = expr.xreplace(rename)
            elif any(symbol_of(a) in rename for a in node.args):
                # structural (_fastsym): a symbol for a symbol, nothing to re-canonicalize
                expr = _fastsym.rename(expr, rename, memo)
        except RecursionError:
            where = f" (at {node.site})" if node.site else ""
            raise CompileError(f"optimizing {node.op}{where} of {name}: the expression is "
                               "nested too deeply for SymPy (RecursionError); split it into "
                               "smaller steps (a reduction or reshape between them ends a "
                               "region)") from None
        for r in names_fired:
            if r not in fired:
                fired.append(r)
        exprs.append(expr)
        owners.append(node)
    t1 = time.perf_counter()

    ops_before = _count(exprs, graph.dag) if count else 0
    if cse and exprs:
        plain = exprs
        squares = []   # named values the expressions read (h1_2 = hypot(a, b)**2, s1 = a + b)
        if not graph.dag:
            exprs, squares = reuse_hypot(exprs, set(names.values()))
            k = len(exprs)
            exprs, sums = share_sums(exprs + [e for _, e in squares], set(names.values()))
            squares = sums + [(h, e) for (h, _), e in zip(squares, exprs[k:])]
            exprs = exprs[:k]
        exprs, powers = share_powers(exprs + [e for _, e in squares],
                                     set(names.values()) | {str(s) for s, _ in squares})
        if squares:   # their definitions read the shared powers too
            powers = list(zip((s for s, _ in squares), exprs[-len(squares):])) + powers
            exprs = exprs[:-len(squares)]
        temps, reduced = _cse(exprs + [e for _, e in powers], graph.dag)
        if powers:
            named = list(zip((p for p, _ in powers), reduced[len(exprs):]))
            # a named value that CSE reduced to one of its temps (x4_2 = t15: the temp also
            # reads it) names that temp instead of copying it
            temp_syms = {t for t, _ in temps}
            alias = {e: p for p, e in named if e in temp_syms}
            alias = {t: p for t, p in alias.items() if list(alias.values()).count(p) == 1}
            temps = _topological([(alias.get(t, t), e.xreplace(alias)) for t, e in temps]
                                 + [(p, e) for p, e in named if e not in alias])
            reduced = [e.xreplace(alias) for e in reduced[:len(exprs)]]
        temps, reduced = _inline_reciprocals(temps, reduced)
        temps, reduced = _merge_quotients(temps, reduced)
        temps, reduced = _share_multiples(temps, reduced)
        temps, reduced = order_products(temps, reduced, _input_degrees(graph, names),
                                        nodes, owners, names, plain)
    else:
        temps, reduced = [], list(exprs)
    ops_after = (_count([e for _, e in temps], graph.dag) + _count(reduced, graph.dag)
                 if count else 0)
    t2 = time.perf_counter()

    # place each temp right before the first step that needs it (directly or through temps)
    position = {id(n): i for i, n in enumerate(nodes)}
    node_expr = {id(n): e for n, e in zip(owners, reduced)}
    first_use: dict = {}
    for n, e in zip(owners, reduced):
        for s in e.free_symbols:
            first_use[s] = min(first_use.get(s, 1 << 30), position[id(n)])
    for sym, e in reversed(temps):
        for s in e.free_symbols:
            if sym in first_use:
                first_use[s] = min(first_use.get(s, 1 << 30), first_use[sym])
    # a temp goes before the first non-input node at or after its first use, temps in their
    # order (bucketed: a scan of the pending temps per node was quadratic in a large program)
    at: dict = {}
    later = [0] * (len(nodes) + 1)   # later[i]: the first non-input position >= i
    later[len(nodes)] = len(nodes)
    for i in range(len(nodes) - 1, -1, -1):
        later[i] = i if nodes[i].op != "input" else later[i + 1]
    for s, e in temps:
        i = first_use.get(s, 1 << 30)
        if i < len(nodes):
            at.setdefault(later[i], []).append((s, e))
    steps: list[Step] = []
    for i, node in enumerate(nodes):
        if node.op == "input":
            continue
        steps.extend(Step(name_of_symbol(s), e) for s, e in at.get(i, ()))
        steps.append(Step(names[id(node)], node_expr.get(id(node)), node))
    t3 = time.perf_counter()
    return Routine(name=name, graph=graph, args=tuple(names[id(n)] for n in graph.inputs),
                   params=graph.params, steps=steps,
                   returns=tuple(None if n is None else names[id(n)] for n in graph.outputs),
                   names=names, ops_before=ops_before, ops_after=ops_after,
                   rewrites=tuple(dict.fromkeys(graph.rewrites + tuple(fired))),
                   timings={"stabilize": t1 - t0, "cse": t2 - t1, "schedule": t3 - t2})


def _merge_quotients(temps, reduced):
    """A temp a*b**-1 beside a temp quotient(a, b) (the stable rewrites' one division, and the
    plain derivative's a/b) is read from the quotient: the printers form both as a/b, so CSE's
    two names were one division computed twice."""
    quotients = {}
    for s, e in temps:
        if isinstance(e, quotient):
            quotients.setdefault(sympy.Mul(e.args[0], sympy.Pow(e.args[1], -1)), s)
    if not quotients:
        return temps, reduced
    same = {s: quotients[e] for s, e in temps if isinstance(e, sympy.Mul) and e in quotients}
    if not same:
        return temps, reduced
    temps = _topological([(s, e.xreplace(same)) for s, e in temps if s not in same])
    return temps, [e.xreplace(same) for e in reduced]


def _signed_content(add):
    """(c, a + b - ...) with add = c*(a + b - ...), c > 0 the common magnitude of its terms'
    numbers (2*a - 2*b: (2, a - b)), else None."""
    split = [t.as_coeff_Mul() for t in add.args]
    c = abs(split[0][0])
    if c == 0 or any(abs(k) != c for k, _ in split[1:]):
        return None
    return c, sympy.Add(*[rest if k > 0 else -rest for k, rest in split])


def _share_multiples(temps, reduced):
    """A sum that is a multiple of a temp's sum (2*t36 - 2*t35 beside t37 = t36 - t35, or
    its negation) is read from it: c*t37 is one pass where the sum is two or more. CSE cannot
    see it: SymPy keeps 2*(a - b) distributed."""
    sums = {}
    for s, e in temps:
        if isinstance(e, sympy.Add):
            sums.setdefault(e, s)
    if not sums:
        return temps, reduced
    order = {s: i for i, (s, _) in enumerate(temps)}

    def sub(e, limit):
        if e.is_Atom or isinstance(e, (sympy.core.relational.Relational,
                                       sympy.logic.boolalg.Boolean, sympy.Piecewise)):
            return e
        args = [sub(a, limit) for a in e.args]
        out = e.func(*args) if any(a is not b for a, b in zip(args, e.args)) else e
        if isinstance(out, sympy.Add):
            split = _signed_content(out)
            if split is not None and (split[0] != 1 or len(out.args) > 2):
                c, inner = split
                for value, sign in ((inner, 1), (-inner, -1)):
                    sym = sums.get(value)
                    if sym is not None and order[sym] < limit and (c, sign) != (1, 1):
                        return c * sign * sym
        return out

    new_temps = [(s, sub(e, order[s])) for s, e in temps]
    new_reduced = [sub(e, len(temps)) for e in reduced]
    return new_temps, new_reduced


def _inline_reciprocals(temps, reduced):
    """CSE's shared `t = 1/b` of a named value b, put back as a division where a product
    holds it as its only divisor.

    `S*t` (t = 1/K) is S*(1/K): two roundings, so log(S*t) at S = K = 49 is log(1 - 2**-53),
    not 0, and Black-Scholes' d1 at small T (that error over sqrt(T)) moves the delta from
    N(0) = 0.5 to 0.29 at T = 1e-30.
    A product with other divisors keeps t (a/(K*T) could underflow where a*t/T does not).
    Temps left are renumbered t0, t1, ... in order."""
    recip = {s: e for s, e in temps if isinstance(e, sympy.Pow) and e.exp == -1
             and isinstance(e.base, sympy.Symbol)}
    if not recip:
        return temps, reduced

    def sub(e):
        if e.is_Atom:
            return e
        args = [sub(a) for a in e.args]
        if isinstance(e, sympy.Mul):
            mine = [a for a in args if a in recip]
            if len(mine) == 1 and not any(a.is_Pow and a.exp.is_negative for a in args):
                args = [recip.get(a, a) for a in args]
        return e.func(*args) if args != list(e.args) else e

    temps = [(s, sub(e)) for s, e in temps]
    reduced = [sub(e) for e in reduced]
    used = set().union(*(e.free_symbols for e in reduced), *(e.free_symbols for _, e in temps))
    temps = [(s, e) for s, e in temps if s not in recip or s in used]
    rename, k = {}, 0
    for s, _ in temps:
        if re.fullmatch(r"t\d+", s.name):
            if s.name != f"t{k}":
                rename[s] = sympy.Symbol(f"t{k}")
            k += 1
    if rename:
        temps = [(rename.get(s, s), e.xreplace(rename)) for s, e in temps]
        reduced = [e.xreplace(rename) for e in reduced]
    return temps, reduced


# --------------------------------------------------------------------------- scale order
# Products are evaluated left to right, so a product's partial products are intermediates
# too: -t0*t6*v (t0 = g/|n2|, t6 = 9 c**2 (c/(|n1||n2|)), v = |n1|) is 1e-120 * 1e-240 = 0
# at a dihedral's coordinates of 1e60, where t0*v*t6 = 1 * 1e-240 is exact (torch's chain rule
# multiplies in that order). The scale of a value is estimated by its degree: the power of a
# common factor s of the inputs that it carries when every float input is multiplied by s
# (|n1| ~ s**2 there, a dot of two normals ~ s**4), at a small and at a large s. The factors
# of a product of mixed degrees are multiplied, powers split, in an order whose partial
# products stay inside the envelope of 0, the product and the values it reads (see
# docs/numerics-at-scale.md).
_SAME_DEGREE = ("maximum", "minimum", "hypot", "Abs", "relu", "clamp", "Max", "Min")
_STRUCTURAL_SAME_DEGREE = ("sum", "mean", "amax", "amin", "getitem", "reshape", "reshape_like",
                           "unreduce", "index_put_zeros", "sum_to", "expand", "transpose",
                           "permute", "cat", "stack", "squeeze", "unsqueeze", "flip",
                           "broadcast_to", "index_back", "max_dim", "min_dim", "cumsum",
                           "narrow", "movedim", "flatten", "unflatten", "repeat", "tile",
                           "roll", "diag", "index_select", "gather", "zeros_like", "copy")


ZERO = (0.0, 0.0)


def _input_degrees(graph, names):
    """Degree of each input of `graph` (a derivative graph's adjoint seeds: 0)."""
    degrees = []
    g = graph
    while g.derivative_of is not None:
        g = g.derivative_of
    n_forward = len(g.inputs)
    n_seeds = len(graph.inputs) - n_forward
    for i, node in enumerate(graph.inputs):
        degrees.append((_var(names[id(node)], node),
                        ZERO if i < n_seeds or node.dtype != "float" else (1.0, 1.0)))
    return dict(degrees)


def degree(e, deg, memo=None):
    """The degree of e (see above) given the degrees of its symbols, as a pair: at a small
    common scale, and at a large one (x**2 + 1: (0, 2); x**-2 + 1: (-2, 0); a homogeneous
    value's two are equal); None for a function of a non-constant scale (exp(x))."""
    return _memo_degree(e, deg, {} if memo is None else memo)


def _degree(e, deg, memo):
    def degree(a, deg):
        return _memo_degree(a, deg, memo)

    if e.is_Number or e.is_NumberSymbol:
        return ZERO
    if e.is_Symbol:
        return deg.get(e)
    if isinstance(e, (sympy.core.relational.Relational, sympy.logic.boolalg.Boolean)):
        return ZERO
    if isinstance(e, sympy.Add):
        ds = [degree(a, deg) for a in e.args]
        if None in ds:
            return None
        # the term of the lowest degree dominates at a small scale, the highest at a large
        return min(d[0] for d in ds), max(d[1] for d in ds)
    if isinstance(e, sympy.Mul):
        lo = hi = 0.0
        for a in e.args:
            d = degree(a, deg)
            if d is None:
                return None
            lo, hi = lo + d[0], hi + d[1]
        return lo, hi
    if isinstance(e, sympy.Pow):
        d = degree(e.base, deg)
        if d is None:
            return None
        if e.exp.is_number:
            p = float(e.exp)
            return d[0] * p, d[1] * p
        return ZERO if d == ZERO and degree(e.exp, deg) == ZERO else None
    if isinstance(e, sympy.Piecewise):
        ds = {degree(p.expr, deg) for p in e.args if p.expr != 0}
        return ds.pop() if len(ds) == 1 else (ZERO if not ds else None)
    name = type(e).__name__
    if name == "quotient":
        a, b = (degree(x, deg) for x in e.args)
        return None if a is None or b is None else (a[0] - b[0], a[1] - b[1])
    if name in _SAME_DEGREE:
        ds = {degree(a, deg) for a in e.args if not a.is_number}
        return ds.pop() if len(ds) == 1 else None
    if name == "sign":
        return ZERO
    if isinstance(e, sympy.Function):
        return ZERO if all(degree(a, deg) == ZERO for a in e.args) else None
    return None


def _memo_degree(e, deg, memo):
    hit = memo.get(e, memo)
    if hit is not memo:
        return hit
    out = _degree(e, deg, memo)
    memo[e] = out
    return out


def _node_degree(node, names, deg):
    if node.op in _STRUCTURAL_SAME_DEGREE or node.op.startswith("sum"):
        ds = {deg.get(_var(names[id(a)], a)) for a in node.args
              if id(a) in names and a.dtype == "float"}
        return ds.pop() if len(ds) == 1 else None
    if node.op == "matmul":
        ds = [deg.get(_var(names[id(a)], a)) for a in node.args if id(a) in names]
        return None if None in ds else (sum(d[0] for d in ds), sum(d[1] for d in ds))
    return None


def _power_of(e, power_of):
    """(b, n) when e is b**n (n a number), also through named powers (share_powers' r_3 =
    r_2*r); else None."""
    if e.is_Symbol:
        return power_of.get(e, (e, sympy.S.One))
    if isinstance(e, sympy.Pow) and e.exp.is_number:
        inner = _power_of(e.base, power_of)
        return None if inner is None else (inner[0], inner[1] * e.exp)
    if isinstance(e, sympy.Mul):
        parts = [_power_of(a, power_of) for a in e.args]
        if None in parts or len({b for b, _ in parts}) != 1:
            return None
        return parts[0][0], sympy.Add(*[n for _, n in parts])
    return None


def _units(f, d_base, power_of=None):
    """f = b**n as |n| factors b**(+-1) (and one b**(+-1/2) for a half-integer n), when b has a
    known non-zero degree: the powers are split so that they can interleave ("powers split");
    else [f]. A named power (1/r_3, r_3 = r_2*r) is split as the power of r it is."""
    power = f
    if power_of and isinstance(f, (sympy.Pow, sympy.Symbol)):
        named = _power_of(f, power_of)
        if named is not None and named[0] != f and named[1] != 1:
            power = sympy.Pow(*named, evaluate=False)
    if isinstance(power, sympy.Pow) and power.exp.is_Rational and power.exp.q in (1, 2) \
            and d_base and d_base != ZERO:
        n2 = int(power.exp * 2)   # the exponent in halves
        whole, half = divmod(abs(n2), 2)
        if abs(n2) >= 3:
            sign = 1 if n2 > 0 else -1
            return [sympy.Pow(power.base, sign)] * whole + \
                ([sympy.Pow(power.base, sympy.Rational(sign, 2))] if half else [])
    return [f]


_VANISHING = frozenset({"exp", "sigmoid", "erfc"})


def _vanishes(e, defs, depth=3):
    """Whether e (through the temps' definitions, a few levels deep) holds an exp, sigmoid or
    erfc: a factor that is exactly 0 (or inf) far out, where a power beside it overflows."""
    if depth < 0:
        return False
    for a in sympy.preorder_traversal(e):
        if type(a).__name__ in _VANISHING:
            return True
        if a.is_Symbol and a in defs and _vanishes(defs[a], defs, depth - 1):
            return True
    return False


def _powers_last(factors, power_of, defs=None):
    """A product with a factor of unknown scale (sigmoid(-u): 0 far out) and a power b**n
    (|n| >= 2) of a value: the other factors first, then b (or 1/b) one at a time, or None.
    Each partial product is then between the first factors' and the whole product's
    magnitude, where forming b**n alone can overflow: gelu-tanh's gradient held
    x**3 * sigmoid(u) * sigmoid(-u), inf * 0 = nan from |x| = 6e102, where torch's chain
    rule multiplies the 0 by x**2 (1 from there on)."""
    powers, others = [], []
    for f in factors:
        named = _power_of(f, power_of) if isinstance(f, (sympy.Pow, sympy.Symbol)) else None
        if (named is None or named[1] == 1) and defs and f in defs:
            # a named multiple of a power: t6 = 0.214*x_3
            coeff, rest = defs[f].as_coeff_Mul()
            inner = _power_of(rest, power_of)
            if coeff != 1 and inner is not None and inner[1].is_Integer and abs(inner[1]) >= 2:
                others.append(coeff)
                named = inner
        if (named is not None and named[1].is_Integer and abs(named[1]) >= 2
                and not named[0].is_number):
            b, n = named
            powers.extend([sympy.Pow(b, 1 if n > 0 else -1)] * abs(int(n)))
        else:
            others.append(f)
    if not powers or not others:
        return None
    return others + powers


def _excess(r, envelope):
    """How far the degree pair r lies outside the envelope (per regime: the range of 0, the
    whole product's degree and the degrees of the values the product reads, which exist
    whatever the order) in either regime."""
    return max(max(0.0, v - hi, lo - v) for v, (lo, hi) in zip(r, envelope))


def _envelope(factors, final, deg, power_of):
    values = [ZERO, final]
    for f in factors:
        b = f.base if isinstance(f, sympy.Pow) else f
        if b.is_Symbol and not (b in power_of and abs(power_of[b][1]) >= 2):
            values.append(degree(b, deg) or ZERO)
    return tuple((min(v[k] for v in values), max(v[k] for v in values)) for k in (0, 1))


def _worst(sequence, deg, power_of, envelope):
    """The largest excess (see _excess) among the intermediates the printers form for the
    product of `sequence` (left to right; a divisor b**-n of a symbol b divides n times; a
    power of a compound value is formed on its own, as is a named power: r_3 = r_2*r), a
    lower bound of what they form."""
    r, w = (0.0, 0.0), 0.0

    def dg(f):
        return degree(f, deg) or ZERO

    def formed(b):   # a named integer power is formed for this product (r_3 = r_2*r)
        return b in power_of and abs(power_of[b][1]) >= 2

    for f in sequence:
        if isinstance(f, sympy.Pow) and f.exp.is_Integer and f.exp < 0 and f.base.is_Symbol:
            db = dg(f.base)
            if formed(f.base):
                w = max(w, _excess((-db[0], -db[1]), envelope))
            for _ in range(int(-f.exp)):
                r = (r[0] - db[0], r[1] - db[1])
                w = max(w, _excess(r, envelope))
            continue
        d = dg(f)
        if not f.is_Symbol or formed(f):
            w = max(w, _excess(d, envelope))
        r = (r[0] + d[0], r[1] + d[1])
        w = max(w, _excess(r, envelope))
    return w


def _scale_order(factors, deg, power_of=None):
    """The product's factors as a sequence (powers split, equal neighbours merged back into
    powers) whose partial products stay inside the envelope (see _excess) in both regimes as
    far as they can, with the largest excess its intermediates reach, and that of the
    printers' own order."""
    power_of = power_of or {}
    units = []
    for f in factors:
        named = _power_of(f, power_of)
        base = named[0] if named is not None else f
        units.extend(_units(f, degree(base, deg), power_of))
    ds = [degree(u, deg) or ZERO for u in units]
    envelope = _envelope(factors, (sum(d[0] for d in ds), sum(d[1] for d in ds)), deg, power_of)
    numerators = [f for f in factors if not (f.is_Pow and f.exp.is_negative)]
    given = _worst(numerators + [f for f in factors if f.is_Pow and f.exp.is_negative], deg,
                   power_of, envelope)
    left, order, r = list(range(len(units))), [], (0.0, 0.0)
    while left:
        def cost(k):
            new = (r[0] + ds[k][0], r[1] + ds[k][1])
            return _excess(new, envelope), max(abs(new[0]), abs(new[1])), k
        i = min(left, key=cost)
        left.remove(i)
        order.append(i)
        r = (r[0] + ds[i][0], r[1] + ds[i][1])
    merged: list = []   # [base, exponent] runs
    for i in order:
        u = units[i]
        b, e = (u.base, u.exp) if isinstance(u, sympy.Pow) else (u, sympy.S.One)
        db = degree(b, deg) or ZERO
        if merged and merged[-1][0] == b and (merged[-1][1] > 0) == (e > 0) and _excess(
                (db[0] * float(merged[-1][1] + e), db[1] * float(merged[-1][1] + e)),
                envelope) == 0:   # a run of one base is one power unless that power overflows
            merged[-1][1] += e
        else:
            merged.append([b, e])
    sequence = [sympy.Pow(b, e) for b, e in merged]
    worst = _worst(sequence, deg, power_of, envelope)
    # a run b*b*b whose power a temp already names (x4_3 = x4_2*x4) is read from it: the same
    # products, in the same order (a divisor is left: 1/x0/x0 does not form x0**2)
    named = {v: k for k, v in power_of.items()}
    sequence = [named.get((f.base, f.exp), f) if isinstance(f, sympy.Pow) and f.exp.is_Integer
                and f.exp >= 2 else f for f in sequence]
    return sequence, worst, given


def order_products(temps, reduced, input_degrees, nodes, owners, names, exprs):
    """Products of mixed-degree factors, computed in scale order through new temporaries
    (SymPy flattens a nested product, so each partial product is a named temp)."""
    deg = dict(input_degrees)
    node_memo: dict = {}   # the nodes' expressions (before CSE and share_powers)
    memo: dict = {}        # the temps' and steps' (a symbol is read after it is defined)
    owner_expr = {id(n): e for n, e in zip(owners, exprs)}
    for node in nodes:
        if node.op == "input" or id(node) not in names:
            continue
        sym = _var(names[id(node)], node)
        if node.dtype != "float":
            deg[sym] = ZERO
        elif node.op == "elementwise":
            deg[sym] = degree(owner_expr[id(node)], deg, node_memo) \
                if id(node) in owner_expr else None
        else:
            deg[sym] = _node_degree(node, names, deg)
    taken = {name_of_symbol(s) for s, _ in temps} | set(names.values())
    counter = [len(temps)]
    new_temps: list = []

    def fresh():
        while f"t{counter[0]}" in taken:
            counter[0] += 1
        name = f"t{counter[0]}"
        taken.add(name)
        return sympy.Symbol(name)

    def visit(e):
        if e.is_Atom or isinstance(e, (sympy.core.relational.Relational,
                                       sympy.logic.boolalg.Boolean)):
            return e
        # unchanged arguments come back as the same objects: compared by identity (SymPy's
        # == on each argument was a fifth of this pass on a large program)
        if isinstance(e, sympy.Piecewise):
            args = [visit(p.expr) for p in e.args]
            out = sympy.Piecewise(*[(a, p.cond) for a, p in zip(args, e.args)]) \
                if any(a is not p.expr for a, p in zip(args, e.args)) else e
        else:
            args = [visit(a) for a in e.args]
            out = e.func(*args) if any(a is not b for a, b in zip(args, e.args)) else e
        if not isinstance(out, sympy.Mul):
            return out
        numbers = [f for f in out.args if f.is_number]
        # the checks below do not depend on the factors' order: SymPy's print order (a sort
        # key per factor) is asked for only when the product is reordered
        factors = [f for f in out.args if not f.is_number]
        if len(factors) < 2:
            return out
        raw = [degree(f, deg, memo) for f in factors]
        if None in raw:
            if not any(d is None and _vanishes(f, defs) for f, d in zip(factors, raw)):
                return out
            factors = [f for f in out.as_ordered_factors() if not f.is_number]
            ordered = _powers_last(factors, power_of, defs)
            if ordered is None:
                return out
        else:
            if not (any(d[0] > 0 or d[1] > 0 for d in raw)
                    and any(d[0] < 0 or d[1] < 0 for d in raw)):
                return out
            factors = [f for f in out.as_ordered_factors() if not f.is_number]
            ordered, best, given = _scale_order(factors, deg, power_of)
            if best > given - 0.5 or len(ordered) < 2:
                return out
        numbers += [f for f in ordered if f.is_number]
        ordered = [f for f in ordered if not f.is_number]
        if len(ordered) < 2:
            return out
        acc = ordered[0]
        for f in ordered[1:-1]:
            value = acc * f
            sym = known.get(value)   # a partial product another product (or a temp) formed
            if sym is None:
                sym = fresh()
                deg[sym] = degree(value, deg, memo)
                new_temps.append((sym, value))
                known[value] = sym
            acc = sym
        return sympy.Mul(*numbers, acc, ordered[-1])

    out_temps = []
    power_of: dict = {}   # named powers: r_3 -> (r, 3)
    defs: dict = {}
    known: dict = {}      # value -> the temp defined (earlier) as it
    for sym, e in temps:
        defs[sym] = e
        named = _power_of(e, power_of)
        if named is not None and named[1] != 1:
            power_of[sym] = named
        new_temps.clear()
        e2 = visit(e)
        out_temps.extend(new_temps)
        out_temps.append((sym, e2))
        known.setdefault(e2, sym)
        if isinstance(e2, quotient):   # printed as the product a/b is
            known.setdefault(sympy.Mul(e2.args[0], sympy.Pow(e2.args[1], -1)), sym)
        deg[sym] = degree(e2, deg, memo)
    new_temps.clear()
    out_reduced = [visit(e) for e in reduced]
    out_temps.extend(new_temps)
    return out_temps, out_reduced


def _dedupe(nodes, graph):
    """`nodes` without repeated computations: a node with the same op, operands (up to
    repeats), attributes or expression, shape and dtype as an earlier one is read from that
    one. Returns (kept nodes, [(repeat, first)]). Outputs are always kept."""
    outputs = {id(n) for n in graph.outputs if n is not None}
    canon: dict[int, Node] = {}
    seen: dict = {}
    kept, same = [], []
    for node in nodes:
        if node.op == "input":
            kept.append(node)
            continue
        args = tuple(id(canon.get(id(a), a)) for a in node.args)
        if node.op == "elementwise":
            sub = {symbol_of(a): symbol_of(canon[id(a)]) for a in node.args if id(a) in canon}
            body = node.expr if not sub else (
                _fastsym.rename(node.expr, sub, {}) if graph.dag else node.expr.xreplace(sub))
        else:
            body = node.attrs
        try:
            key = (node.op, args, body, node.shape, node.dtype, node.attrs)
            rep = seen.get(key)
        except TypeError:   # an unhashable attribute: never merged
            key, rep = None, None
        if rep is not None and id(node) not in outputs:
            canon[id(node)] = rep
            same.append((node, rep))
            continue
        if key is not None:
            seen.setdefault(key, node)
        kept.append(node)
    return kept, same


# --------------------------------------------------------------------------- powers
MAX_SHARED_POWER = 64


def share_powers(exprs, taken=frozenset()):
    """Integer and half-integer powers of one base, shared before CSE.

    SymPy keeps r**-6, r**-7, r**-12, r**-13 as unrelated powers, so CSE cannot see that
    r**13 = r**12 * r = (r**6)**2 * r. For every base with two or more such exponents this
    names each power once (`r_3 = r_2*r`, `r_6 = r_3**2`, `r_7 = r_6*r`, `r_12 = r_6**2`, ...)
    and divides by the positive power for a negative exponent: 1/r**12 stays 1/r_12, never
    (1/r**6)**2, so overflow and underflow happen exactly where they did. A half-integer power
    b**(k/2) with |k| >= 3 becomes b**(k//2) * sqrt(b) (numpy.power costs ~20 multiplies).

    Returns (rewritten exprs, [(power symbol, its definition)]) in dependency order; the
    symbols are named `<base>_<n>` (`p<k>_<n>` for a compound base), never one of `taken`.
    """
    found: dict = {}
    for expr in exprs:
        for p in sympy.preorder_traversal(expr):
            if isinstance(p, sympy.Pow) and p.exp.is_number and not p.base.is_number:
                k2 = float(p.exp) * 2   # rational or float exponent, in halves
                if k2 == int(k2) and abs(k2) != 2 and abs(k2) <= 2 * MAX_SHARED_POWER:
                    found.setdefault(p.base, {}).setdefault(int(k2), set()).add(p)
    replace: dict = {}
    defs: list = []
    used = set(taken)
    compound = 0
    for base, halves in sorted(found.items(), key=lambda kv: sympy.default_sort_key(kv[0])):
        ints = {abs(h) // 2 for h in halves if h % 2 == 0}
        odd = {abs(h) for h in halves if h % 2 and abs(h) >= 3}
        ints |= {h // 2 for h in odd if h >= 5}
        if len(ints) < 2 and not odd:
            continue   # one integer power: the printer's squarings are as good
        if isinstance(base, sympy.Symbol):
            label = str(base)
        else:
            compound += 1
            label = f"p{compound}"

        def fresh(n, label=label):   # n: the exponent, or "sqrt"
            name, k = f"{label}_{n}", 1
            while name in used:
                name, k = f"{label}_{n}_{k}", k + 1
            used.add(name)
            return sympy.Symbol(name, real=True)

        have = {1: base}
        wanted = _chain_powers(ints)
        for n in sorted(ints):
            _power_chain(n, have, defs, fresh, wanted)
        root = None
        if odd:   # a symbol, so that SymPy does not fold b * sqrt(b) back into b**(3/2)
            root = fresh("sqrt")
            defs.append((root, sympy.sqrt(base)))
        for h, pows in halves.items():
            m = abs(h) // 2
            if h % 2 and root is None:
                continue
            value = have[m] if h % 2 == 0 else (root if m == 0 else have[m] * root)
            for p in pows:
                replace[p] = value if h > 0 else 1 / value
    if not replace:
        return list(exprs), []
    # a compound base holding a shared power (hypot(x1/x0 - x4**2, q)**2, x4**2 -> x4_2) is
    # defined over the shared one too, else CSE sees two bases and computes both
    inner = {b: b.xreplace(replace) for b in found if not isinstance(b, sympy.Symbol)}
    inner = {b: r for b, r in inner.items() if r is not b}
    try:
        if inner:
            defs = [(s, v.xreplace(inner)) for s, v in defs]
        return [e.xreplace(replace) for e in exprs], defs
    except RecursionError:
        # rebuilding a Piecewise whose conditions read the renamed powers can send SymPy's
        # canonicalization of relationals into an endless Piecewise.eval loop (softplus(x)**2.5
        # compared with (softplus(x) + 0.1)**tanh(x)): sharing is an optimization, so skip it
        return list(exprs), []


def _chain_powers(ints):
    """The powers _power_chain forms for `ints` (u**4 forms u**2: u**3 is then u_2*u, not a
    second u*u*u)."""
    need: set = set()

    def walk(n):
        if n <= 1 or n in need:
            return
        need.add(n)
        if n % 2 == 0:
            walk(n // 2)
        elif n != 3:
            walk(n - 1)

    for n in ints:
        walk(n)
    return need


def _power_chain(n, have, defs, fresh, wanted):
    """have[n]: a symbol defined in defs from smaller powers (squares, then one product)."""
    if n in have:
        return have[n]
    if n == 2 or (n == 3 and 2 not in wanted):
        value = have[1] ** n   # printed as products
    elif n % 2 == 0:
        value = _power_chain(n // 2, have, defs, fresh, wanted) ** 2
    else:
        value = _power_chain(n - 1, have, defs, fresh, wanted) * have[1]
    sym = fresh(n)
    defs.append((sym, value))
    have[n] = sym
    return sym


def _topological(temps):
    """Temps ordered so that each comes after the temps it reads (stable otherwise)."""
    by_sym = {s: e for s, e in temps}
    done: set = set()
    out = []

    def visit(sym):
        if sym in done:
            return
        done.add(sym)
        for dep in sorted(by_sym[sym].free_symbols, key=str):
            if dep in by_sym:
                visit(dep)
        out.append((sym, by_sym[sym]))

    for sym, _ in temps:
        visit(sym)
    return out


def _var(name, node):
    if node.dtype == "int":
        return sympy.Symbol(name, integer=True)
    if node.dtype == "bool":
        return sympy.Symbol(name)
    return sympy.Symbol(name, real=True)


def _cse(exprs, dag):
    """SymPy's CSE; for a large program (`Graph.dag`) its hashing pass alone: SymPy's search
    for common argument subsets of sums and products (opt_cse) is quadratic in the number of
    them, and was 60% of a 100-step integrator's compile. Bindings already share every value
    the program reuses; hashing finds the common terms the derivative rules create."""
    if not dag:
        return sympy.cse(exprs, symbols=_temp_symbols(), order="canonical", ignore=())
    return _fastsym.hash_cse(list(exprs), _temp_symbols())


def _temp_symbols():
    k = 0
    while True:
        yield sympy.Symbol(f"t{k}")
        k += 1


def _count(exprs, fast=False):
    """Operations in `exprs` for the stats header: SymPy's count_ops, or (`fast`, for a large
    program's many bindings, where count_ops is a tenth of the compile time) the operations
    of the expression trees, one per function or operator node."""
    if fast:
        from .trace import tree_size

        memo: dict = {}
        return int(sum(tree_size(e, memo) for e in exprs))
    return int(sum(sympy.count_ops(e) for e in exprs))


# --------------------------------------------------------------------------- saving
# Relative cost of one elementwise pass of each function (a multiply is 1), measured with
# NumPy 2.4 on AVX2 at 1e5 elements, float32 (float64 in brackets where it differs much).
# The elementwise ops' costs are their op table entries' (symgrad/ops/table.py); these are the
# other functions (where, the n-ary logsumexp of stable).
OP_COST = {**costs(), "Piecewise": 12, "logsumexp": 16}
# A reduction reads its operand with a strided, non-SIMD-friendly loop (~3 multiply passes).
# sum_to sums a broadcast gradient down (a reduction); index_back fills zeros and scatters.
# The op table's structural entries' costs.
STRUCTURAL_COST = structural_costs()
SAVED_ARRAY_COST = 3                 # one more write, one more read, memory held between calls
# A saved value is charged SAVED_ARRAY_COST times its size relative to the routine's largest
# array (a reduced row max or sum is ~free to keep), and nothing when it only renames another
# saved value.
# Saving is emitted when it removes at least this fraction of the plain cost (and 4 passes).
# Calibration (1e5 elements, fwd+bwd, float32 / float64, measured gain of forward_saving +
# backward_saved over forward + backward, on a loaded 2-core AVX2 machine, so +-0.1 noise):
#   gelu_erf  model 0.32  measured 0.53 / 0.52     tanh_sin_chain30  0.35  0.34 / 0.35
#   mlp_loss  model 0.38  measured 0.50 / -0.04    exp (built-in)    0.29  0.35 / 0.40
#   tanh      model 0.38  measured -0.8* / 0.21    tan (built-in)    0.32  0.22 / 0.21
#   sigmoid   model 0.21  measured 0.06 / 0.10     swish             0.19  -0.35* / 0.07 (not emitted)
#   pow       model 0.16  measured -0.09 / 0.07 (not emitted)   gelu_tanh 0.08  0.20 / 0.17 (not)
#   rational6 model -0.15 measured -0.05 / -0.19   oscillator8  -0.08  0.07 / 0.14 (not)
# (* outliers of the concurrent load). Below ~0.2 the measured gain is within noise.
MIN_SAVING_FRACTION = 0.2
MIN_SAVING_GAIN = 4
# The torch target prices a saved value at nothing: sg.to_torch keeps it by reference
# (ctx.save_for_backward, as torch's eager autograd keeps its own intermediates), and every
# array a torch step makes is a fresh allocation either way, so keeping one costs no pass.
# Calibration (fwd+bwd through sg.to_torch, float32, every plan forced against none, ratio to
# eager, interleaved best-of-3 on a loaded 2-core machine, 1e5 / 1e6): gelu_tanh 0.68 -> 0.58
# / 0.62 -> 0.60, softplus_b2 0.87 -> 0.79 / 0.72 -> 0.62, swish 0.85 -> 0.73 / equal,
# rational6 0.92 -> 0.84 / noise, lennard_jones 0.47 -> 0.39 / 0.55 -> 0.48, oscillator8
# 1.47 -> 1.30 / 0.73 -> 0.68, mish, tanh_sin_chain30: equal; none slower.
SAVED_ARRAY_COST_BY_TARGET = {"torch": 0}
MIN_SAVING_FRACTION_BY_TARGET = {"torch": 0.02}


def expr_cost(expr, seen=None):
    """Elementwise passes of expr in multiply units (shared subtrees counted once)."""
    seen = set() if seen is None else seen
    if expr in seen or expr.is_Atom:
        return 0
    seen.add(expr)
    name = type(expr).__name__
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer:
        own = min(abs(int(expr.exp)), 4)
    else:
        own = OP_COST.get(name, getattr(expr, "numpy_cost", None) or max(len(expr.args) - 1, 1))
    return own + sum(expr_cost(a, seen) for a in expr.args)


def step_cost(step):
    if step.node is not None and step.node.op not in ("elementwise",):
        return STRUCTURAL_COST.get(step.node.op,
                                   getattr(STRUCTURAL.get(step.node.op), "cost", 1))
    return expr_cost(step.expr) if step.expr is not None else 0


@dataclass
class SavingPlan:
    """forward_saving / backward_saved as two routines over one optimized routine's names."""

    forward: Routine          # forward_saving: returns forward outputs, then `saved`
    backward: Routine         # backward_saved: args grads, saved, inputs
    n_outputs: int
    saved: tuple[str, ...]
    costs: dict


def with_forward_outputs(graph: Graph, vjp: Graph) -> Graph:
    """The VJP graph with the forward's outputs as extra outputs (replayed over the VJP's own
    input nodes, so that one optimization shares work between them)."""
    from .differentiate import replay, tracer_of
    from .trace import Tracer, dissolve_bindings

    # a large program's forward is already replayed in the tracer that differentiated it:
    # its outputs are read from there (one replay, and the forward's nodes are the VJP's)
    tr = tracer_of(vjp) if vjp.dag else None
    if tr is None:
        tr = Tracer(generic=vjp.generic)
        nodes = vjp.nodes()
        tr.names = {n.name for n in nodes} | set(vjp.output_names) | set(graph.output_names)
        tr.count = max(n.index for n in nodes)
        tr.symbol_node = {symbol_of(n): n for n in nodes}
        n_grads = len(vjp.inputs) - len(graph.inputs)
        xs = [tr._leaf_value(n) for n in vjp.inputs[n_grads:]]
        replay(graph, tr, xs)
    outs = []
    for o in graph.outputs:
        value = tr.value_of(o)
        node = tr.materialize(value)
        if node in vjp.inputs or node in vjp.outputs or node in outs:
            node = tr.materialize(value, copy=True)
        outs.append(node)
    names = tuple(f"{n}_" if n in set(vjp.output_names) | {i.name for i in vjp.inputs} else n
                  for n in graph.output_names)
    combined = Graph(name=vjp.name, inputs=vjp.inputs, outputs=tuple(vjp.outputs) + tuple(outs),
                     output_names=tuple(vjp.output_names) + names, constants=vjp.constants,
                     source=vjp.source, params=vjp.params, generic=vjp.generic,
                     rewrites=vjp.rewrites, derivative_of=vjp.derivative_of, dag=vjp.dag)
    # the replay's bindings, as differentiate's: inlined for a small program
    return combined if vjp.dag else dissolve_bindings(combined, tr.bindings, float("inf"))


def saving_plan(graph: Graph, vjp: Graph, forward: Routine, backward: Routine,
                target: str = "numpy"):
    """Split forward+backward into forward_saving and backward_saved when the cost model says
    that keeping the forward's intermediates beats recomputing them; else None.

    Cost model (units: one elementwise multiply pass over the data):
      plain  = cost(forward) + cost(backward)          (backward recomputes the forward)
      saving = cost(forward_saving) + cost(backward_saved) + SAVED_ARRAY_COST * len(saved)
    saving is emitted when plain - saving >= MIN_SAVING_GAIN and >= MIN_SAVING_FRACTION * plain
    (calibration figures beside the constants; `target` "torch" has its own: a saved tensor
    is kept by reference, SAVED_ARRAY_COST_BY_TARGET / MIN_SAVING_FRACTION_BY_TARGET).
    """
    n_out = len(graph.outputs)
    n_grads = len(vjp.inputs) - len(graph.inputs)
    try:
        combined = with_forward_outputs(graph, vjp)
    except Exception:   # a graph that cannot be replayed here keeps the recomputing backward
        return None
    routine = optimize(combined, "backward_saved", count=False)
    grads = set(routine.args[:n_grads])
    tainted = set(grads)
    fwd_steps, bwd_steps = [], []
    for step in routine.steps:
        if _reads(step, routine) & tainted:
            tainted.add(step.target)
            bwd_steps.append(step)
        else:
            fwd_steps.append(step)
    grad_returns = routine.returns[:len(vjp.outputs)]
    fwd_returns = routine.returns[len(vjp.outputs):]
    defined = {s.target for s in fwd_steps}
    read_later = set()
    for step in bwd_steps:
        read_later |= _reads(step, routine)
    saved = [s.target for s in fwd_steps
             if s.target in read_later or s.target in grad_returns]
    sizes = None   # the other targets price a temporary without a node as full-size
    if target == "c":
        sizes = _sizes(routine)
        saved, bwd_steps = _recompute_cheap(routine, fwd_steps, bwd_steps, saved,
                                            grad_returns, sizes)
    if any(r is not None and r in defined and r not in saved for r in grad_returns):
        return None
    # forward_saving: only what the outputs and the saved values need
    need = set(r for r in fwd_returns if r is not None) | set(saved)
    kept = []
    for step in reversed(fwd_steps):
        if step.target in need:
            kept.append(step)
            need |= _reads(step, routine)
    kept.reverse()
    saved_t = tuple(saved)
    costs = {
        "forward": sum(step_cost(s) for s in forward.steps),
        "backward": sum(step_cost(s) for s in backward.steps),
        "forward_saving": sum(step_cost(s) for s in kept),
        "backward_saved": sum(step_cost(s) for s in bwd_steps),
        "saved": len(saved_t),
    }
    costs["plain"] = costs["forward"] + costs["backward"]
    costs["saving"] = (costs["forward_saving"] + costs["backward_saved"]
                       + _saved_cost(routine, saved_t,
                                     SAVED_ARRAY_COST_BY_TARGET.get(target, SAVED_ARRAY_COST),
                                     sizes))
    gain = costs["plain"] - costs["saving"]
    fraction = MIN_SAVING_FRACTION_BY_TARGET.get(target, MIN_SAVING_FRACTION)
    if not saved_t or gain < MIN_SAVING_GAIN or gain < fraction * costs["plain"]:
        return None
    f = Routine(name="forward_saving", graph=graph, args=routine.args[n_grads:],
                params=routine.params, steps=kept, returns=tuple(fwd_returns) + saved_t,
                names=routine.names, rewrites=routine.rewrites)
    b = Routine(name="backward_saved", graph=vjp,
                args=routine.args[:n_grads] + saved_t + routine.args[n_grads:],
                params=routine.params, steps=bwd_steps, returns=tuple(grad_returns),
                names=routine.names, rewrites=routine.rewrites)
    return SavingPlan(f, b, n_out, saved_t, costs)


def _sizes(routine):
    """Per name of the routine (arguments, step targets), its element count, or None where
    unknown (shape-generic): a temporary without a node (an elementwise expression) has its
    operands' broadcast size (a row statistic's (781, 1), not the data's (781, 128))."""
    sizes = {}
    for a, node in zip(routine.args, routine.graph.inputs):
        sizes[a] = _size(node)
    for step in routine.steps:
        if step.node is not None:
            sizes[step.target] = _size(step.node)
        else:
            got = [sizes.get(r) for r in _reads(step, routine)]
            sizes[step.target] = None if any(n is None for n in got) else max(got, default=1)
    return sizes


def _recompute_cheap(routine, fwd_steps, bwd_steps, saved, grad_returns, sizes):
    """The C target's choice of what to save: a full-size elementwise value that costs less
    than keeping it (step_cost < SAVED_ARRAY_COST) is recomputed in backward_saved, from
    its operands (saved in its place, or recomputed in turn), instead of saved. C fuses the
    recomputation into the backward's loop (register work, no pass of its own), while a saved
    full-size array is one more write and read; what is left to save are the reductions and
    the values as small as theirs (layer norm's row means and variances: a pass over the data
    each, when recomputed, for a few bytes per row kept), and the costly elementwise values
    (erf, tanh). Returns (saved, backward steps), in the routine's order."""
    known = [n for n in sizes.values() if n is not None]
    if not known or any(sizes.get(s.target) is None for s in fwd_steps):
        return saved, bwd_steps   # shape-generic: sizes unknown
    full = max(known)
    by_target = {s.target: s for s in fwd_steps}
    returned = set(grad_returns)
    recompute = set()
    while True:
        # what the backward (and the values it recomputes) reads the values of: a static
        # operand read for its shape only (sum_to's, unreduce's `like`) is printed as a
        # literal shape, neither kept nor recomputed
        read_later = set()
        for step in bwd_steps + [s for s in fwd_steps if s.target in recompute]:
            read_later |= _value_reads(step, routine)
        saved = [s.target for s in fwd_steps if s.target not in recompute
                 and (s.target in read_later or s.target in returned)]
        cheap = [n for n in saved if n not in returned and sizes[n] >= full
                 and (by_target[n].node is None or by_target[n].node.op == "elementwise")
                 and step_cost(by_target[n]) < SAVED_ARRAY_COST]
        if not cheap:
            break
        recompute.update(cheap)
    if not recompute:
        return saved, bwd_steps
    return saved, [s for s in fwd_steps if s.target in recompute] + bwd_steps


def _value_reads(step, routine):
    """_reads without the static operands a structural step reads for their shape only."""
    node = step.node
    if node is None or node.op == "elementwise" or node.op not in STRUCTURAL:
        return _reads(step, routine)
    skip = STRUCTURAL[node.op].shape_args
    out = {name_of_symbol(s) for s in step.expr.free_symbols} if step.expr is not None \
        else set()
    for i, a in enumerate(node.args):
        if id(a) in routine.names and not (i in skip and a.shape is not None):
            out.add(routine.names[id(a)])
    return out


def _saved_cost(routine, saved, per_array=SAVED_ARRAY_COST, by_name=None):
    """`per_array` (SAVED_ARRAY_COST) per saved array, scaled by its size (see
    SAVED_ARRAY_COST). `by_name`: the sizes of _sizes (the C target's); without them a
    temporary that has no node counts as full-size."""
    by_target = {s.target: s for s in routine.steps}
    sizes = [_size(s.node) for s in routine.steps if s.node is not None]
    full = max([n for n in sizes if n is not None] or [None], key=lambda n: n or 0)
    total = 0.0
    for name in saved:
        step = by_target.get(name)
        if step is not None and isinstance(step.expr, sympy.Symbol) and str(step.expr) in saved:
            continue   # an alias of another saved value
        size = _size(step.node) if step is not None and step.node is not None else None
        if size is None and by_name is not None:
            size = by_name.get(name)
        total += per_array * (1.0 if size is None or not full else min(size / full, 1.0))
    total = round(total, 2)
    return int(total) if total == int(total) else total


def _size(node):
    if node.shape is None:
        return None
    n = 1
    for d in node.shape:
        n *= int(d)
    return n


def _reads(step, routine):
    """Variable names a step reads."""
    out = set()
    if step.expr is not None:
        out |= {name_of_symbol(s) for s in step.expr.free_symbols}
    node = step.node
    if node is not None and (node.op != "elementwise" or node.attr("broadcast")
                             or step.expr is None or not step.expr.free_symbols):
        for a in node.args:   # structural operands; shape sources of a broadcast or constant
            if id(a) in routine.names:
                out.add(routine.names[id(a)])
    return out
