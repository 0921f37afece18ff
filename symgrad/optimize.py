"""Stage 3 — optimize: stabilizing rewrites, then one common-subexpression elimination across
every elementwise expression of a routine (forward recompute and all gradients share temps).

The result, a `Routine`, is exactly what the emitters read: an ordered list of steps over
final variable names. Temporaries are placed just before their first use, so every target can
evaluate the steps top to bottom.
"""
from __future__ import annotations

import re
import time
from operator import is_not
from dataclasses import dataclass, field

import sympy

from . import _fastsym
from .errors import CompileError
from .graph import Graph, Node
from .ops.structural import STRUCTURAL
from .ops.elementwise import quotient
from .ops.table import costs, structural_costs
from ._sharing import reuse_hypot, share_sums
from ._scale_order import _input_degrees, order_products  # noqa: F401  (degree: below)
from ._symbols import name_of_symbol  # noqa: F401  (emit.statements reads it here)
from ._symbols import symbol_named
from .trace import symbol_of


def _var(name, node):
    """symbol_named(name, node): the node's own symbol (cached) where `name` is its own name
    (a large program's values keep their trace names; SymPy's Symbol cache misses past a few
    thousand symbols, and each miss rebuilds the assumptions)."""
    return symbol_of(node) if name == node.name else symbol_named(name, node)


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
    # what another optimize over the same nodes may reuse (optimize's `reuse`): the nodes'
    # degrees (order_products) and the input degrees they were computed from
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def name_of(self, node):
        return self.names[id(node)]


_FREE: dict = {}   # id(expression) -> (the expression, its free symbols): free_symbols
_FREE_OWN = sympy.Basic.__dict__["free_symbols"]


def free_symbols(expr):
    """`expr.free_symbols`, as a frozenset, remembered per expression object for the process
    (bounded; keyed by identity, which the entry keeps alive: SymPy's == on a structurally
    equal key cost more than the walk). SymPy walks the whole tree on every read, and the
    optimizer, the saving plan and the emitters read the same steps' symbols again and again
    (a large program's: ~60 000 walks). A frozenset: iterate it only where the order does not
    matter (SymPy's own set need not iterate in the same order)."""
    if not isinstance(expr, sympy.Basic):
        return frozenset(getattr(expr, "free_symbols", ()))
    hit = _FREE.get(id(expr))
    if hit is not None:
        return hit[1]
    if len(_FREE) > 400_000:   # a long-running process: forget, do not grow
        _FREE.clear()
    try:
        return _free(expr)
    except RecursionError:     # a deep small-program formula: SymPy's own walk
        return frozenset(expr.free_symbols)


def _free(e):
    hit = _FREE.get(id(e))
    if hit is not None:
        return hit[1]
    args = e.args
    if not args:
        out = _NONE if type(e).free_symbols is _FREE_OWN else frozenset(e.free_symbols)
    elif type(e).free_symbols is not _FREE_OWN:   # classes with bound variables
        out = frozenset(e.free_symbols)
    elif len(args) == 1:
        out = _free(args[0])
    else:
        out = frozenset().union(*[_free(a) for a in args])
    _FREE[id(e)] = (e, out)
    return out


_NONE = frozenset()


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
        free = free_symbols(node.expr) if node.op == "elementwise" and node.shape is not None \
            else None
        for i, arg in enumerate(node.args):
            if rule is not None and i in rule.shape_args and arg.shape is not None:
                continue
            if free is not None and symbol_of(arg) not in free:
                continue
            stack.append(arg)
    return sorted(needed.values(), key=lambda n: n.index)


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


def optimize(graph: Graph, name: str, cse: bool = True, count: bool = True,
             reuse: Routine | None = None) -> Routine:
    """Rewrite, CSE and order one routine of `graph` (`count`: op counts for the stats).
    `reuse`: a routine optimized before over nodes this graph shares (the saving plan's
    combined graph is the backward's and a few forward outputs): what it computed per node is
    taken where the names agree (see _reusable_degrees); the result is the same."""
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
    xmemo: dict = {}
    for node in nodes:
        if node.op != "elementwise":
            continue
        try:
            expr, names_fired = _stabilize_large(node.expr) if graph.dag else \
                _stabilize(node.expr)
            if not graph.dag:
                expr = _fastsym.xreplace(expr, rename, xmemo)
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

    counted: dict = {}   # _tree_ops' memo, for the counts before and after (by identity)
    ops_before = _count(exprs, graph.dag, counted) if count else 0
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
        # a large program's CSE leaves what it found for another optimize over these
        # expressions and more (the saving plan's: `reuse`), which takes what is exact
        kept = {} if graph.dag and reuse is None else None
        found = reuse.memo.pop("cse", None) if graph.dag and reuse is not None else None
        before = {"cse": found} if found is not None else None
        temps, reduced = _cse(exprs + [e for _, e in powers], graph.dag, before, kept)
        if powers:
            named = list(zip((p for p, _ in powers), reduced[len(exprs):]))
            # a named value that CSE reduced to one of its temps (x4_2 = t15: the temp also
            # reads it) names that temp instead of copying it
            # (the first name of a temp takes it; a second name of the same temp copies the
            # first; every definition, the named ones too, reads the temps by their new names:
            # fuzz seed 213 read a renamed t7)
            temp_syms = {t for t, _ in temps}
            alias: dict = {}
            for p, e in named:
                if e in temp_syms and e not in alias:
                    alias[e] = p
            temps = _topological([(alias.get(t, t), e.xreplace(alias)) for t, e in temps]
                                 + [(p, e.xreplace(alias)) for p, e in named
                                    if alias.get(e) != p])
            reduced = [e.xreplace(alias) for e in reduced[:len(exprs)]]
        temps, reduced = _inline_reciprocals(temps, reduced)
        temps, reduced = _merge_quotients(temps, reduced)
        temps, reduced = _share_multiples(temps, reduced)
        inputs = _input_degrees(graph, names)
        degrees = _reusable_degrees(reuse, graph, names, inputs)
        temps, reduced = order_products(temps, reduced, inputs, nodes, owners, names, plain,
                                        degrees)
        reusable = {"degrees": degrees, "inputs": inputs, **(kept or {})}
    else:
        temps, reduced = [], list(exprs)
        reusable = {}
    ops_after = (_count([e for _, e in temps], graph.dag, counted)
                 + _count(reduced, graph.dag, counted) if count else 0)
    t2 = time.perf_counter()

    # place each temp right before the first step that needs it (directly or through temps)
    position = {id(n): i for i, n in enumerate(nodes)}
    node_expr = {id(n): e for n, e in zip(owners, reduced)}
    first_use: dict = {}
    for n, e in zip(owners, reduced):
        for s in free_symbols(e):
            first_use[s] = min(first_use.get(s, 1 << 30), position[id(n)])
    for sym, e in reversed(temps):
        for s in free_symbols(e):
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
                   timings={"stabilize": t1 - t0, "cse": t2 - t1, "schedule": t3 - t2},
                   memo=reusable)


def _reusable_degrees(reuse, graph, names, inputs):
    """The node degrees `reuse` computed (order_products' memo, keyed by expression: a degree
    is a function of the expression and its symbols' degrees), to be extended by this
    routine's, where that is exact: every symbol stands for the same value in both (each node
    both name has one name in both; a node only this one names has a name `reuse` never
    used) and the inputs have the same degrees, so each node's degree is the same (in
    creation order: from its operands'); else a new dict."""
    old = reuse.memo.get("degrees") if reuse is not None else None
    if old is None or reuse.graph.dag != graph.dag or reuse.memo.get("inputs") != inputs:
        return {}
    before = reuse.names
    taken = set(before.values())
    for key, name in names.items():
        was = before.get(key)
        if was is None:
            if name in taken:
                return {}
        elif was != name:
            return {}
    return old


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
    # Forming inner and negating it (SymPy distributes the -1 over its terms) was most of this
    # pass on a large program; +-inner can equal a temp's sum only where the terms' parts
    # after their numbers are the same (see _rest_parts), so they are formed only there
    parts: set | None = set()
    for e in sums:
        key = _rest_parts(e)
        if key is None:   # a sum whose parts say nothing: every candidate is formed
            parts = None
            break
        parts.add(key)

    def sub(e, limit):
        if e.is_Atom or isinstance(e, _KEEP_WHOLE):
            return e
        # (an atom argument is its own result: not called for; unchanged arguments are the
        # same objects, compared by identity)
        old = e.args
        args = [a if a.is_Atom else sub(a, limit) for a in old]
        out = e.func(*args) if any(map(is_not, args, old)) else e
        if isinstance(out, sympy.Add):
            # out = c*inner (c > 0 the common magnitude of its terms' numbers: 2*a - 2*b);
            # the terms are split one by one, up to the first other magnitude (most sums)
            terms = out.args
            first = terms[0].as_coeff_Mul()
            c = abs(first[0])
            if c == 0 or (c == 1 and len(terms) <= 2):
                return out
            split = [first]
            for t in terms[1:]:
                kr = t.as_coeff_Mul()
                if abs(kr[0]) != c:
                    return out
                split.append(kr)
            if parts is not None:
                key = _parts_key(split)
                if key is not None and key not in parts:
                    return out   # neither c*inner nor -c*inner can be a temp's sum
            inner = sympy.Add(*[rest if k > 0 else -rest for k, rest in split])
            sym = sums.get(inner)
            if sym is not None and order[sym] < limit and c != 1:
                return c * sym
            sym = sums.get(-inner)
            if sym is not None and order[sym] < limit:
                return -c * sym
        return out

    new_temps = [(s, sub(e, order[s])) for s, e in temps]
    new_reduced = [sub(e, len(temps)) for e in reduced]
    return new_temps, new_reduced


_KEEP_WHOLE = (sympy.core.relational.Relational, sympy.logic.boolalg.Boolean, sympy.Piecewise)


def _rest_parts(add):
    """The parts of a sum's terms after their numbers (a - 2*b*c: {a, b*c}), or None where
    that is no signature (two terms with one part, a part that is a sum, an infinite number).
    Where two sums have signatures, add == other or add == -other implies equal signatures
    (-other's terms are -1 times other's, whose parts are other's parts), and a sum of
    distinct parts with numbers +-1 (_share_multiples' inner) has its parts' signature."""
    return _parts_key([t.as_coeff_Mul() for t in add.args])


def _parts_key(split):
    rests = [r for _, r in split]
    key = frozenset(rests)
    if len(key) != len(rests) or any(isinstance(r, sympy.Add) or not k.is_finite
                                     for k, r in split):
        return None
    return key


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
        for p, k2 in _powers_in(expr):
            found.setdefault(p.base, {}).setdefault(k2, set()).add(p)
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
    memo: dict = {}
    inner = {b: _fastsym.xreplace(b, replace, memo) for b in found
             if not isinstance(b, sympy.Symbol)}
    inner = {b: r for b, r in inner.items() if r is not b}
    try:
        if inner:
            defs = [(s, v.xreplace(inner)) for s, v in defs]
        return [_fastsym.xreplace(e, replace, memo) for e in exprs], defs
    except RecursionError:
        # rebuilding a Piecewise whose conditions read the renamed powers can send SymPy's
        # canonicalization of relationals into an endless Piecewise.eval loop (softplus(x)**2.5
        # compared with (softplus(x) + 0.1)**tanh(x)): sharing is an optimization, so skip it
        return list(exprs), []


_POWERS: dict = {}   # id(expression) -> (the expression, its powers): _powers_in


def _powers_in(expr):
    """[(p, k2)] for each power p = b**(k2/2) in expr that share_powers shares (a number
    exponent, in halves, |k2| != 2 and up to MAX_SHARED_POWER, b not a number), remembered per
    expression object for the process (bounded; the saving plan optimizes the backward's
    formulas again). Each distinct sub-expression object is visited once: share_powers keeps
    sets of them, so the order and repeats of a tree walk do not matter."""
    hit = _POWERS.get(id(expr))
    if hit is not None:
        return hit[1]
    if len(_POWERS) > 200_000:   # a long-running process: forget, do not grow
        _POWERS.clear()
    out = []
    seen: set = set()
    stack = [expr]
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        args = p.args
        if not args:
            continue
        if isinstance(p, sympy.Pow) and p.exp.is_number and not p.base.is_number:
            k2 = float(p.exp) * 2   # rational or float exponent, in halves
            if k2 == int(k2) and abs(k2) != 2 and abs(k2) <= 2 * MAX_SHARED_POWER:
                out.append((p, int(k2)))
        stack.extend(args)
    out = tuple(out)
    _POWERS[id(expr)] = (expr, out)
    return out


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


def _cse(exprs, dag, before=None, after=None):
    """SymPy's CSE; for a large program (`Graph.dag`) its hashing pass alone: SymPy's search
    for common argument subsets of sums and products (opt_cse) is quadratic in the number of
    them, and was 60% of a 100-step integrator's compile. Bindings already share every value
    the program reuses; hashing finds the common terms the derivative rules create.
    `before` / `after`: hash_cse's (what an earlier call found, taken where exact; where this
    one leaves its own)."""
    if not dag:
        return sympy.cse(exprs, symbols=_temp_symbols(), order="canonical", ignore=())
    return _fastsym.hash_cse(list(exprs), _temp_symbols(), before, after)


def _temp_symbols():
    k = 0
    while True:
        yield sympy.Symbol(f"t{k}")
        k += 1


# Past this many tree operations the stats count tree nodes (as a large program's do) rather
# than SymPy's count_ops (1 s per 150 000).
COUNT_OPS_MAX = 50_000


def _count(exprs, fast=False, memo=None):
    """Operations in `exprs` for the stats header: SymPy's count_ops, or (`fast`, for a large
    program's many bindings, where count_ops is a tenth of the compile time) the operations
    of the expression trees, one per function or operator node. `memo`: _tree_ops' (a dict
    one optimize keeps for its counts: what CSE left unchanged is counted once)."""
    memo = {} if memo is None else memo
    size = int(sum(_tree_ops(e, memo) for e in exprs))
    # count_ops walks the tree, a shared sub-expression once per path to it: a small program
    # with nested reuse (a logistic map's x = r*x*(1 - x)) has a tree far larger than its DAG
    if fast or size > COUNT_OPS_MAX:
        return size
    return int(sum(sympy.count_ops(e) for e in exprs))


def _tree_ops(expr, memo):
    """trace.tree_size(expr, {}) (the operations of expr counted as a tree; numbers and
    symbols 0), with `memo` keyed by identity: equal sub-expressions have equal counts, and
    SymPy's == on an equal key that is another object walked both trees. The objects must
    stay alive while `memo` is used (their ids stand for them)."""
    if not isinstance(expr, sympy.Basic) or not expr.args:
        return 0
    try:
        return _ops(expr, memo)
    except RecursionError:   # a deep small-program formula: the walk below
        pass
    stack = [(expr, False)]
    while stack:
        e, ready = stack.pop()
        k = id(e)
        if k in memo:
            continue
        args = e.args if isinstance(e, sympy.Basic) else ()
        if not args:
            memo[k] = 0
        elif ready:
            memo[k] = 1 + sum(memo[id(a)] for a in args if not a.is_Number)
        else:
            stack.append((e, True))
            stack.extend((a, False) for a in args if not a.is_Number and id(a) not in memo)
    return memo[id(expr)]


def _ops(e, memo):
    """_tree_ops of `e`, a SymPy node with arguments (recursive: an atom or a non-SymPy
    argument counts 0 and is not called for)."""
    n = memo.get(id(e))
    if n is None:
        n = 1
        for a in e.args:
            if isinstance(a, sympy.Basic) and a.args:
                n += _ops(a, memo)
        memo[id(e)] = n
    return n


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
def expr_cost(expr, seen=None):
    """Elementwise passes of expr in multiply units (shared subtrees counted once)."""
    seen = set() if seen is None else seen
    if expr.is_Atom or expr in seen:   # (an atom is never in `seen`: no lookup for it)
        return 0
    seen.add(expr)
    name = type(expr).__name__
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer:
        own = min(abs(int(expr.exp)), 4)
    else:
        own = OP_COST.get(name)
        if own is None:   # (the default is not formed for the functions OP_COST names)
            own = getattr(expr, "numpy_cost", None) or max(len(expr.args) - 1, 1)
    for a in expr.args:
        if not a.is_Atom:
            own += expr_cost(a, seen)
    return own


_COSTS: dict = {}   # id(expression) -> (the expression, expr_cost of it): step_cost


def step_cost(step):
    if step.node is not None and step.node.op not in ("elementwise",):
        return STRUCTURAL_COST.get(step.node.op,
                                   getattr(STRUCTURAL.get(step.node.op), "cost", 1))
    if step.expr is None:
        return 0
    # remembered per expression object (bounded): the saving plan prices forward, backward
    # and its own two routines, and the emitters price each routine again
    hit = _COSTS.get(id(step.expr))
    if hit is not None:
        return hit[1]
    if len(_COSTS) > 200_000:
        _COSTS.clear()
    cost = expr_cost(step.expr)
    _COSTS[id(step.expr)] = (step.expr, cost)
    return cost
