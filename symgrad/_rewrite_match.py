"""The stabilizing rewrites' tools (symgrad/rewrites.py): the bottom-up tree walk and the
helpers that read SymPy's canonical forms (an exp term, a sum of positive exps, 1 + exp(u),
a product's factors, a constant plus a multiple of a function)."""
from __future__ import annotations

from collections.abc import Callable

import sympy
from sympy import Add, Mul, Pow, exp, log

from symgrad.ops.stable import (logaddexp,
                                logsumexp, softplus)


MAX_PASSES = 12   # a rewrite run to a fixed point, per node and over the whole expression


# ----------------------------------------------------------------------------- tree walking


def _bottom_up(local: Callable[[sympy.Basic], sympy.Basic | None]):
    """Turn a node rewrite (returns None when it does not apply) into a tree transform."""

    def apply(expr: sympy.Basic) -> sympy.Basic:
        memo: dict[sympy.Basic, sympy.Basic] = {}

        def visit(node: sympy.Basic) -> sympy.Basic:
            if node in memo:
                return memo[node]
            out = node
            if node.args:
                args = tuple(visit(arg) for arg in node.args)
                if args != node.args:
                    out = node.func(*args)
            if isinstance(out, sympy.Expr):
                for _ in range(MAX_PASSES):  # the result may match again at the same node
                    new = local(out)
                    if new is None or new == out:
                        break
                    out = new
            memo[node] = out
            return out

        return visit(expr)

    return apply


# ----------------------------------------------------------------------------- matching helpers


def _exp_term(term: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr] | None:
    """``c * exp(u)`` with c a positive number -> (c, u); a positive number c -> (c, 0)."""
    coeff, rest = term.as_coeff_Mul()
    if not coeff.is_positive:
        return None
    if rest is sympy.S.One:
        return coeff, sympy.S.Zero
    if isinstance(rest, exp):
        return coeff, rest.args[0]
    return None


def _positive_exp_sum(expr: sympy.Expr) -> list[sympy.Expr] | None:
    """If expr = sum_i c_i exp(u_i) (c_i > 0 numbers, one exp at least): the exponents
    u_i + log(c_i), in canonical order. Otherwise None."""
    if not isinstance(expr, Add):
        return None
    if all(term.is_Number for term in expr.args):
        return None
    exponents = []
    for term in expr.args:
        match = _exp_term(term)
        if match is None:
            return None
        coeff, u = match
        exponents.append(u + log(coeff) if coeff != 1 else u)
    return sorted(exponents, key=sympy.default_sort_key)


def _lse(exponents: list[sympy.Expr]) -> sympy.Expr:
    """log(sum(exp(exponents))) as the cheapest stable primitive."""
    if len(exponents) == 1:
        return exponents[0]
    if len(exponents) == 2:
        a, b = exponents
        if a == 0:
            return softplus(b)
        if b == 0:
            return softplus(a)
        return logaddexp(a, b)
    return logsumexp(*exponents)


def _one_plus_exp(base: sympy.Expr) -> sympy.Expr | None:
    """base = 1 + exp(u) -> u."""
    if isinstance(base, Add) and len(base.args) == 2 and sympy.S.One in base.args:
        other = base.args[0] if base.args[1] == 1 else base.args[1]
        if isinstance(other, exp):
            return other.args[0]
    return None


def _factors(mul: sympy.Expr) -> list[tuple[sympy.Expr, sympy.Expr]]:
    """A product as (base, exponent) pairs; exp(u) stays whole (its as_base_exp is (E, u))."""
    return [(arg.base, arg.exp) if isinstance(arg, Pow) else (arg, sympy.S.One)
            for arg in Mul.make_args(mul)]


def _rebuild_mul(pairs) -> sympy.Expr:
    return Mul(*[Pow(b, e) for b, e in pairs])


def _constant_and_multiple(add: Add, fn) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr] | None:
    """In ``add``, a numeric term k and a term s*k*fn(u) (s = +1 or -1).

    Returns (k, s, the fn(u) node) or None; the first match in canonical order.
    """
    constants = [t for t in add.args if t.is_Number]
    if len(constants) != 1:
        return None
    k = constants[0]
    for term in add.args:
        coeff, rest = term.as_coeff_Mul()
        if isinstance(rest, fn):
            if coeff == k:
                return k, sympy.S.One, rest
            if coeff == -k:
                return k, sympy.S.NegativeOne, rest
    return None


def _replace_terms(add: Add, drop: tuple[sympy.Expr, ...], new: sympy.Expr) -> sympy.Expr:
    terms = list(add.args)
    for term in drop:
        terms.remove(term)
    return Add(*terms, new)
