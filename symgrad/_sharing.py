"""Sharing across a routine's expressions before CSE (the optimizer, symgrad/optimize.py, calls
it): a sum of squares beside the hypot of the same roots is read as the named square of that
hypot (reuse_hypot), a sum SymPy distributed a number over beside the sum is named once
(share_sums)."""
from __future__ import annotations


import sympy
from sympy import Add, Mul, Pow

from symgrad.ops.elementwise import hypot


def _square_root_of_term(term):
    """r with term = r**2 (c*b**(2k)*..., c > 0 a number), else None."""
    coeff, rest = term.as_coeff_Mul()
    if not coeff.is_positive:
        return None
    if rest == 1:
        return sympy.sqrt(coeff)
    factors = rest.args if isinstance(rest, Mul) else (rest,)
    roots = []
    for f in factors:
        if not (isinstance(f, Pow) and f.exp.is_Integer and f.exp % 2 == 0):
            return None
        roots.append(Pow(f.base, f.exp / 2))
    return sympy.sqrt(coeff) * Mul(*roots)


def _hypot_key(roots):
    """The roots of a hypot up to order and sign (hypot(-a, b) = hypot(a, b))."""
    return tuple(sorted((-r if r.could_extract_minus_sign() else r for r in roots),
                        key=sympy.default_sort_key))


def _unique_nodes(exprs):
    """Every node of exprs once (a shared subtree is walked once)."""
    seen, stack = set(), list(exprs)
    while stack:
        e = stack.pop()
        if id(e) in seen or e.is_Atom:
            continue
        seen.add(id(e))
        yield e
        stack.extend(e.args)


def reuse_hypot(exprs, taken=frozenset()):
    """a**2 + b**2 + ... -> h_2 = hypot(a, b, ...)**2 where the same routine computes hypot(a,
    b, ...): the derivative of a norm holds its square beside it (1/|v|**2; a forward's
    A = F/(m*D) squared is F**2/(m**2*(a**2 + b**2))), and the sum of squares is then 2-3
    passes that the norm already paid for. The square is a named value (so that SymPy does not
    merge it with the other powers of the norm into h**3, which overflows where h**2 and h do
    not), and the norm's even powers elsewhere are read from it (1/h**2 -> 1/h_2). Ranges do
    not change: the sum of squares overflows and underflows where the norm's square does, and
    h*h is as accurate.

    Returns (rewritten exprs, [(square symbol, its definition)]); the symbols are named
    `h<k>_2`, never one of `taken`. exprs come back unchanged when no sum matched."""
    norms = {}
    for node in _unique_nodes(exprs):
        if isinstance(node, hypot):
            norms.setdefault(_hypot_key(node.args), node)
    if not norms:
        return list(exprs), []
    sums = {}
    for node in _unique_nodes(exprs):
        if not isinstance(node, Add) or len(node.args) < 2:
            continue
        roots = [_square_root_of_term(t) for t in node.args]
        if None in roots:
            continue
        norm = norms.get(_hypot_key(roots))
        if norm is not None:
            sums[node] = norm
    if not sums:
        return list(exprs), []
    squares, defs, k = {}, [], 0
    for norm in sorted(set(sums.values()), key=sympy.default_sort_key):
        k += 1
        while f"h{k}_2" in taken:
            k += 1
        squares[norm] = sympy.Symbol(f"h{k}_2", real=True)
        defs.append((squares[norm], Pow(norm, 2)))
    replace = {node: squares[norm] for node, norm in sums.items()}
    for node in _unique_nodes(exprs):
        if (isinstance(node, Pow) and node.base in squares and node.exp.is_Integer
                and node.exp % 2 == 0):
            replace[node] = Pow(squares[node.base], node.exp / 2)
    return [e.xreplace(replace) for e in exprs], defs


def _sum_and_factor(add):
    """(c, a + b + ...) with add = c*(a + b + ...), c the common number of its terms (the
    sum's first term's sign taken out, so that a + b and -a - b meet), else None."""
    split = [t.as_coeff_Mul() for t in add.args]
    c = split[0][0]
    if c == 1 or any(k != c for k, _ in split[1:]):
        c, inner = sympy.S.One, add
    else:
        inner = Add(*[rest for _, rest in split])
    if not isinstance(inner, Add):
        return None
    if inner.could_extract_minus_sign():
        c, inner = -c, -inner
    return c, inner


def share_sums(exprs, taken=frozenset()):
    """A sum that SymPy distributed a number over (2*(a + b) is kept as 2*a + 2*b, and
    -(a + b) as -a - b), beside the sum itself or another multiple of it, is named once:
    s = a + b, then 2*s and -s. CSE cannot see the common sum in the distributed form, so
    the terms were added twice (and each scaled: 2*a + 2*b is two passes more than 2*s).

    Returns (rewritten exprs, [(sum symbol, its definition)]); the symbols are named `s<k>`,
    never one of `taken`. exprs come back unchanged when no sum is shared."""
    forms: dict = {}
    for node in _unique_nodes(exprs):
        if isinstance(node, Add) and len(node.args) >= 2 and not node.is_number:
            split = _sum_and_factor(node)
            if split is not None:
                forms.setdefault(split[1], {})[node] = split[0]
    shared = {inner: nodes for inner, nodes in forms.items()
              if len(nodes) >= 2 and any(c != 1 for c in nodes.values())}
    if not shared:
        return list(exprs), []
    # a shared sum inside another one (a + b inside 2*(a + b + c)) is named first
    defs, replace, k = [], {}, 0
    for inner in sorted(shared, key=lambda e: (sympy.count_ops(e), sympy.default_sort_key(e))):
        k += 1
        while f"s{k}" in taken:
            k += 1
        sym = sympy.Symbol(f"s{k}", real=True)
        defs.append((sym, inner))
        for node, c in shared[inner].items():
            replace[node] = c * sym
    defs = [(sym, inner.func(*[a.xreplace(replace) for a in inner.args])) for sym, inner in defs]
    return [e.xreplace(replace) for e in exprs], defs
