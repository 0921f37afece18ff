"""The optimizer's scale order: products evaluated in an order whose partial products stay
finite (stage 3, optimize, below `optimize.optimize`, which calls `order_products`).

A value's scale is estimated by its degree in a common factor of the inputs; the factors of a
product of mixed degrees are multiplied, powers split, so that no partial product leaves the
envelope of 0, the product and the values it reads (docs/numerics-at-scale.md).
"""
from __future__ import annotations

from operator import is_not

import sympy

from ._symbols import name_of_symbol
from .ops.elementwise import quotient
from ._symbols import symbol_named, symbol_of as _symbol_of


def _var(name, node):
    """symbol_named(name, node): the node's own symbol (cached) where `name` is its own name
    (a large program's values keep their trace names; SymPy's Symbol cache misses past a few
    thousand symbols, and each miss rebuilds the assumptions)."""
    return _symbol_of(node) if name == node.name else symbol_named(name, node)


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
_LOGICAL = (sympy.core.relational.Relational, sympy.logic.boolalg.Boolean)


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
    if e.is_Number:   # (_degree's first answer: no lookup, where SymPy's == on an equal
        return ZERO   # Float that is another object calls Float.__eq__)
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


def _vanishes(e, defs, depth=3, memo=None):
    """Whether e (through the temps' definitions, a few levels deep) holds an exp, sigmoid or
    erfc: a factor that is exactly 0 (or inf) far out, where a power beside it overflows.
    `memo` (a dict kept by order_products): the answers per (e, depth), which stay true as
    temps are defined (a temp reads only temps defined before it)."""
    if depth < 0:
        return False
    if memo is not None:
        hit = memo.get((e, depth))
        if hit is not None:
            return hit
    out = False
    stack = [e]   # every node of e, in any order: the answer is whether one of them holds
    while stack:
        a = stack.pop()
        if type(a).__name__ in _VANISHING or (
                a.is_Symbol and a in defs and _vanishes(defs[a], defs, depth - 1, memo)):
            out = True
            break
        stack.extend(a.args)
    if memo is not None:
        memo[(e, depth)] = out
    return out


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


def order_products(temps, reduced, input_degrees, nodes, owners, names, exprs,
                   node_memo=None):
    """Products of mixed-degree factors, computed in scale order through new temporaries
    (SymPy flattens a nested product, so each partial product is a named temp).
    `node_memo`: the degrees of the nodes' expressions (a dict, filled here), which another
    call over the same nodes under the same names may pass on (optimize's `reuse`)."""
    deg = dict(input_degrees)
    if node_memo is None:
        node_memo = {}   # the nodes' expressions (before CSE and share_powers)
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
        if e.is_Atom or isinstance(e, _LOGICAL):
            return e
        # unchanged arguments come back as the same objects: compared by identity (SymPy's
        # == on each argument was a fifth of this pass on a large program); an atom argument
        # is its own result (not called for)
        if isinstance(e, sympy.Piecewise):
            args = [visit(p.expr) for p in e.args]
            out = sympy.Piecewise(*[(a, p.cond) for a, p in zip(args, e.args)]) \
                if any(a is not p.expr for a, p in zip(args, e.args)) else e
        else:
            old = e.args
            args = [a if a.is_Atom else visit(a) for a in old]
            out = e.func(*args) if any(map(is_not, args, old)) else e
        if not isinstance(out, sympy.Mul):
            return out
        # the checks below do not depend on the factors' order: SymPy's print order (a sort
        # key per factor) is asked for only when the product is reordered
        numbers, factors = [], []
        for f in out.args:
            (numbers if f.is_number else factors).append(f)
        if len(factors) < 2:
            return out
        raw = [_memo_degree(f, deg, memo) for f in factors]   # (degree's, memo given)
        if None in raw:
            if not any(d is None and _vanishes(f, defs, memo=vanishes)
                       for f, d in zip(factors, raw)):
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
    vanishes: dict = {}   # _vanishes' answers
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
