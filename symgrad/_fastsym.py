"""Structural SymPy rebuilds for large programs (`Graph.dag`): renaming symbols and CSE
without re-canonicalizing every rebuilt node.

SymPy's `xreplace` and `tree_cse` rebuild each changed node with `node.func(*args)`: a full
constructor (Add/Mul flattening, a function's `eval`, the assumption system's queries), about
two thirds of their time, and all of it wasted when the change only puts one symbol in place
of another, or a sub-expression's temporary in its place: the node was canonical already.
Here such a node is rebuilt as it is (`evaluate=False`: same operator, same argument order),
which is exact (the same arithmetic, in the same order), deterministic (the order is the
canonical order the node had), and linear in the distinct sub-expressions (a memo per call).

Only large programs use these (their generated code may differ from a full rebuild's in the
order of a sum's terms); small programs keep SymPy's own passes, byte for byte.
"""
from __future__ import annotations

import sympy
from sympy.core.basic import _args_sortkey
from sympy.core.function import Function

_STRUCTURAL = (sympy.Add, sympy.Mul, sympy.Pow)


def rebuild(expr, args, canonical=True):
    """`expr`'s operator over new `args`, without re-evaluation where that is safe (sums,
    products, powers and functions: their meaning does not depend on canonical form), else
    SymPy's constructor. `canonical`: a sum's or product's arguments sorted as SymPy sorts
    them (so that it equals, and hashes as, the same sum built by SymPy); else in the order
    they come (CSE's final formulas: nothing compares them again)."""
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        if canonical and expr.is_commutative:
            args = sorted(args, key=_args_sortkey)
        return type(expr)._from_args(args, expr.is_commutative)
    if isinstance(expr, sympy.Pow):
        return sympy.Pow(*args, evaluate=False)
    if isinstance(expr, Function):
        return expr.func(*args, evaluate=False)
    return expr.func(*args)


def rename(expr, mapping, memo):
    """`expr.xreplace(mapping)` for a mapping of symbols to symbols, rebuilt structurally
    (see the module docstring); `memo` (a dict) carries results between calls of one pass.
    A symbol may also map to an expression: the result is then pasted, not folded (a sum
    inside a sum stays nested), which a derivation shown for reading may do. Recursive, as
    xreplace is: for the bounded formulas of a large program's bindings."""
    def walk(e):
        args = e.args
        if not args:
            return e if e.is_Number else mapping.get(e, e)
        hit = memo.get(e)
        if hit is not None:
            return hit
        new = [walk(a) for a in args]
        for x, y in zip(new, args):
            if x is not y:
                out = rebuild(e, new)
                break
        else:
            out = e
        memo[e] = out
        return out

    return walk(expr)


def hash_cse(exprs, symbols):
    """SymPy's `tree_cse` (repeated sub-expressions found by hashing, each named once by a
    temporary from `symbols`), with the rebuild structural and arguments taken in their
    canonical order (SymPy sorts them again with `ordered`, a sort key per argument).
    Returns (replacements, reduced exprs) as tree_cse does."""
    seen: set = set()
    repeated: set = set()
    excluded: set = set()
    stack = list(reversed(exprs))
    while stack:
        e = stack.pop()
        if not isinstance(e, sympy.Basic):
            continue
        if e.is_Atom:
            if e.is_Symbol:
                excluded.add(e.name)
            continue
        if e in seen:
            if not isinstance(e, sympy.functions.elementary.piecewise.ExprCondPair):
                repeated.add(e)
            continue
        seen.add(e)
        stack.extend(reversed(e.args))
    names = (s for s in symbols if s.name not in excluded)

    replacements = []
    done: dict = {}

    def build(root):
        # post-order, children left to right, as tree_cse's recursion numbers temporaries
        work = [(root, False)]
        while work:
            e, ready = work.pop()
            if e in done:
                continue
            if not isinstance(e, sympy.Basic) or not e.args:
                done[e] = e
                continue
            if not ready:
                work.append((e, True))
                work.extend((a, False) for a in reversed(e.args) if a not in done)
                continue
            args = tuple(done[a] for a in e.args)
            new = e if all(x is y for x, y in zip(args, e.args)) else rebuild(e, args, False)
            if e in repeated:
                sym = next(names)
                replacements.append((sym, new))
                new = sym
            done[e] = new
        return done[root]

    reduced = [build(e) if isinstance(e, sympy.Basic) else e for e in exprs]
    return replacements, reduced
