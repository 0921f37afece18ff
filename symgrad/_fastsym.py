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

import zlib
from itertools import islice
from operator import is_

import sympy
from sympy.core.basic import _args_sortkey
from sympy.core.function import Function
from sympy.core.singleton import Singleton

_STRUCTURAL = (sympy.Add, sympy.Mul, sympy.Pow)


def _memo_float_hash():
    """SymPy's `Float.__hash__`, remembered per value. SymPy recomputes a Float's hash on every
    call (`hash(float(self))`: a normalization and a conversion, ~2 us), and every new node
    holding a Float hashes it once; a large program builds hundreds of thousands of such nodes
    over the same few constants (RK4-100: 280 000 Float hashes, a tenth of its compile). The
    memo is keyed on the Float's own exact state (`_mpf_`, `_prec`), so the hash returned is
    the one SymPy computes, bit for bit (sets and dicts iterate in the same order). Installed
    once, when the compiler first imports this module; bounded (a long-running process
    forgets past 100 000 distinct values)."""
    cls = sympy.Float
    if getattr(cls.__hash__, "_symgrad_memo", False):
        return
    original = cls.__hash__
    memo: dict = {}

    def __hash__(self):
        key = (self._mpf_, self._prec)
        h = memo.get(key)
        if h is None:
            if len(memo) > 100_000:
                memo.clear()
            h = memo[key] = original(self)
        return h

    __hash__._symgrad_memo = True
    __hash__.__wrapped__ = original
    cls.__hash__ = __hash__


_memo_float_hash()


def _memo_cmp_name():
    """SymPy's `sympy.core.basic._cmp_name` (the class order by which `Basic.compare`, the
    sort key of every sum's and product's arguments, compares two objects first), remembered
    per pair of classes. SymPy's looks both class names up in `ordering_of_classes` (a list:
    two linear searches, and a ValueError for a class not in it) on every comparison, about
    2.5 us; a large program's compile compares ~70 000 pairs of a few classes. The answer is
    a function of the two classes and that list (the memo starts afresh if the list is
    replaced), so it is SymPy's, and every sort comes out as before. Installed once, when the
    compiler first imports this module; bounded."""
    from sympy.core import basic

    original = basic._cmp_name
    if getattr(original, "_symgrad_memo", False):
        return
    memo: dict = {}
    seen = [basic.ordering_of_classes]

    def _cmp_name(x, y):
        if basic.ordering_of_classes is not seen[0]:
            memo.clear()
            seen[0] = basic.ordering_of_classes
        c = memo.get((x, y))
        if c is None:
            if len(memo) > 10_000:
                memo.clear()
            c = memo[(x, y)] = original(x, y)
        return c

    _cmp_name._symgrad_memo = True
    _cmp_name.__wrapped__ = original
    basic._cmp_name = _cmp_name


_memo_cmp_name()


def rebuild(expr, args, canonical=True):
    """`expr`'s operator over new `args`, without re-evaluation where that is safe (sums,
    products, powers and functions: their meaning does not depend on canonical form), else
    SymPy's constructor. `canonical`: a sum's or product's arguments sorted as SymPy sorts
    them (so that it equals, and hashes as, the same sum built by SymPy); else in the order
    they come (CSE's final formulas: nothing compares them again).
    Remembered per (operator, arguments, canonical, commutative) (`_REBUILT`): a large
    program rebuilds the same node again and again (a step's sin(v12) in its trace, replay and
    partials; RK4-100's derivative: 16 000 distinct of 32 000 rebuilds), each a sort of its
    arguments by `Basic.compare` or a function's constructor. The result is a function of
    that key (SymPy's equality tells Floats of other precisions apart), so a hit is an equal
    expression; a long-running process forgets past 200 000 entries."""
    key = (type(expr), tuple(args), canonical, expr.is_commutative)
    hit = _REBUILT.get(key)
    if hit is None:
        if len(_REBUILT) > 200_000:
            _REBUILT.clear()
        hit = _REBUILT[key] = _rebuild(expr, args, canonical)
    return hit


_REBUILT: dict = {}


def _rebuild(expr, args, canonical):
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        if canonical and expr.is_commutative:
            if len(args) == 2:
                # sorted()'s one comparison for two items, without its key objects: the
                # second first where it compares less (a stable sort keeps ties in order)
                a, b = args
                args = (b, a) if b.compare(a) < 0 else (a, b)
            else:
                args = sorted(args, key=_args_sortkey)
        return type(expr)._from_args(args, expr.is_commutative)
    if isinstance(expr, sympy.Pow):
        return sympy.Pow(*args, evaluate=False)
    if isinstance(expr, Function):
        return expr.func(*args, evaluate=False)
    return expr.func(*args)


def rename(expr, mapping, memo, canonical=True):
    """`expr.xreplace(mapping)` for a mapping of symbols to symbols, rebuilt structurally
    (see the module docstring); `memo` (a dict) carries results between calls of one pass.
    A symbol may also map to an expression: the result is then pasted, not folded (a sum
    inside a sum stays nested), which a derivation shown for reading may do. Recursive, as
    xreplace is: for the bounded formulas of a large program's bindings. `canonical=False`:
    sums and products keep their arguments' order (a form to print, never compared)."""
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
                out = rebuild(e, new, canonical)
                break
        else:
            out = e
        memo[e] = out
        return out

    return walk(expr)


def rename_back(expr, forward, shape, originals):
    """`rename(expr, {p: s for s, p in forward.items()}, {})` for `expr`, a formula built
    over `shape` (the canonical form of `originals`: `canonical(Tuple(*originals))`'s result
    and mapping): each sub-expression of an original that its canonical form holds in the
    same places (same classes, arities and numbers; each symbol at its placeholder's place)
    is taken as it stands instead of rebuilt. The same result: renaming such a canonical
    sub-expression back rebuilds the original's own nodes, in the original's own argument
    order (a sum or product SymPy built, or `rename` rebuilt, has its arguments sorted as
    `rebuild` sorts them). An operand folded into the formula whole (a sum into a sum: its
    terms) is then never rebuilt; a large program's ops were two thirds such rebuilding."""
    memo: dict = {}
    for c, o in zip(shape.args, originals):
        if isinstance(o, sympy.Basic):
            _match(c, o, forward, memo)
    return rename(expr, {p: s for s, p in forward.items()}, memo)


def _match(c, o, forward, memo):
    """True when `c` is `o` with each symbol replaced by forward[symbol], argument by
    argument; then memo[c] = o, for each matching sub-expression (a node of Add, Mul, Pow or
    an applied function: whose rebuild is exact, see `rebuild`)."""
    oa = o.args
    if not oa:
        if c is o or forward.get(o) is c:
            return True
        # a number equal in class, value and precision (the shape's own object)
        return o.is_Number and type(c) is type(o) and c == o and (
            not o.is_Float or c._prec == o._prec)
    ca = c.args
    if type(c) is not type(o) or len(ca) != len(oa):
        return False
    ok = True
    for x, y in zip(ca, oa):
        if not _match(x, y, forward, memo):
            ok = False
    if ok and isinstance(o, _MATCHED):
        memo[c] = o
    return ok


_MATCHED = (sympy.Add, sympy.Mul, sympy.Pow, Function)


# ----------------------------------------------------------------- rename-back plans
# `rename_back` matches each operand against its canonical form node by node, then walks the
# formula with a dict lookup (a SymPy hash) per node. Both walks depend only on the operands'
# structure key (classes, arities, numbers, where each symbol is) and on the formula, not on
# the symbols' names: an unrolled program's step repeats them with other symbols. A plan,
# made once per (key, formula) by running them on the first operands, records their outcome:
# slots holding the symbols (by number) and the formula's constants, then a straight list of
# steps, each taking an operand's sub-expression by its path or rebuilding a node of the
# formula over earlier slots (`rebuild`, as `rename` does; the node taken as it is where no
# argument changed). Running it is `rename_back`'s result: the same expression, argument for
# argument.
PLANS_PER_KEY = 64   # formulas remembered per key (a long-running process: forget, not grow)


def rename_back_planned(expr, shape, order, entry, originals):
    """(rename_back(expr, forward, shape, originals), alike) for `canonical_args_entry(
    originals)`'s (shape, order, entry), by the plan remembered in `entry` for `expr` (made
    on first use). alike: True when the result is `expr` renamed node for node (the same
    classes, numbers and argument order). Operands without a key (entry None) take
    `rename_back` (alike False)."""
    if entry is None:
        return rename_back(expr, order, shape, originals), False
    plans = entry[2]
    hit = plans.get(id(expr))
    if hit is None or hit[0] is not expr:
        if len(plans) >= PLANS_PER_KEY:
            plans.clear()
        hit = plans[id(expr)] = (expr, _plan(expr, dict(zip(order, entry[1])), shape,
                                             originals))
    plan, keyed = hit[1]
    if plan is None:   # (a formula the plan cannot stand for: see _plan)
        return rename_back(expr, dict(zip(order, entry[1])), shape, originals), False
    consts, steps, root = plan
    vals = list(order)   # the slots: the symbols, the formula's constants, then each step's
    vals += consts
    push = vals.append
    alike = True   # every rebuilt node holds its arguments in the formula's order
    for a, b, c in steps:
        if c is None:        # an operand's sub-expression: originals[a].args[i].args[j]...
            o = originals[a]
            for i in b:
                o = o.args[i]
            push(o)
            continue
        # a node of the formula over earlier slots: rebuilt where an argument changed
        new = tuple([vals[i] for i in b])
        args, cls, commutative = c
        for x, y in zip(new, args):
            if x is not y:
                # rebuild(a, new, True), its memo read here (the key's class and
                # commutativity are the plan's)
                key = (cls, new, True, commutative)
                out = _REBUILT.get(key)
                if out is None:   # (rebuild's miss, without its second lookup)
                    if len(_REBUILT) > 200_000:
                        _REBUILT.clear()
                    out = _REBUILT[key] = _rebuild(a, new, True)
                if alike and (type(out) is not cls or out.args != new):
                    alike = False
                push(out)
                break
        else:
            push(a)
    out = vals[root]
    if alike and keyed is not None and out.args:
        # the result is the formula with its placeholders renamed, node for node: its
        # structure key is the formula's (`_keyed`), over the symbols the placeholders stand
        # for; remembered, so that an op reading it as an operand need not walk it
        if len(_KEYS) > 300_000:
            _KEYS.clear()
        _KEYS[id(out)] = (out, keyed[0], tuple([order[i] for i in keyed[1]]))
    return out, alike


def _plan(expr, forward, shape, originals):
    """(the steps of rename_back(expr, forward, shape, originals) (see above), or None where
    its outcome could depend on more than the operands' key: an atom other than a symbol, a
    number or a singleton (compared by identity), or a symbol matched by identity only;
    (the formula's structure key, the numbers of its symbols in order) or None)."""
    paths: dict = {}
    for n, (c, o) in enumerate(zip(shape.args, originals)):
        if isinstance(o, sympy.Basic) and _match_paths(c, o, forward, paths, n, ()) is None:
            return None, None
    number = {p: i for i, p in enumerate(forward.values())}
    consts: list = []
    steps: list = []
    slot: dict = {}    # node -> ("n", its step) (rename's memo)
    atoms: dict = {}   # id(atom) -> ("s", its symbol's number) or ("c", its constant's)

    def walk(e):
        # rename's walk (rename_back's memo: `paths`), each distinct node one step
        args = e.args
        if not args:
            ref = atoms.get(id(e))
            if ref is None:
                i = None if e.is_Number else number.get(e)
                if i is not None:
                    ref = ("s", i)
                else:
                    ref = ("c", len(consts))
                    consts.append(e)
                atoms[id(e)] = ref
            return ref
        ref = slot.get(e)
        if ref is not None:
            return ref
        where = paths.get(e)
        if where is not None:
            steps.append((where[0], where[1], None))
        else:
            kids = tuple(walk(a) for a in args)
            steps.append((e, kids, (args, type(e), e.is_commutative)))
        ref = slot[e] = ("n", len(steps) - 1)
        return ref

    try:
        root = walk(expr)
        keyed = _keyed(expr)
    except RecursionError:
        return None, None
    # slots: the symbols (0 .. n-1), the constants, the steps' results in order
    base = {"s": 0, "c": len(number), "n": len(number) + len(consts)}

    def at(ref):
        return base[ref[0]] + ref[1]

    steps = [(a, b, None) if c is None else (a, tuple(at(r) for r in b), c)
             for a, b, c in steps]
    plan = (tuple(consts), tuple(steps), at(root))
    # the result's structure key, where it is the formula's: each of the formula's symbols a
    # placeholder (never a symbol of its own, which a renamed one could equal) of the kind
    # of the symbol it stands for
    symbols = list(forward)
    numbers = [number.get(p) for p in keyed[1]]
    if None in numbers or any(_keyed(p)[0] != _keyed(symbols[i])[0]
                              for p, i in zip(keyed[1], numbers)):
        return plan, None
    return plan, (keyed[0], tuple(numbers))


def _match_paths(c, o, forward, paths, n, path):
    """_match(c, o, forward, memo), each memo entry recorded as (operand n, the path to its
    sub-expression) in `paths`; None where the outcome could depend on more than the key."""
    oa = o.args
    if not oa:
        if forward.get(o) is c:
            return True
        if o.is_Symbol:
            return None if c is o else False
        if not o.is_Number:   # (one object per class: `c is o` is decided by the key)
            return c is o if isinstance(type(o), Singleton) else None
        return type(c) is type(o) and c == o and (not o.is_Float or c._prec == o._prec)
    ca = c.args
    if type(c) is not type(o) or len(ca) != len(oa):
        return False
    ok = True
    for i, (x, y) in enumerate(zip(ca, oa)):
        m = _match_paths(x, y, forward, paths, n, path + (i,))
        if m is None:
            return None
        if not m:
            ok = False
    if ok and isinstance(o, _MATCHED):
        paths[c] = (n, path)
    return ok


def hash_cse(exprs, symbols, before=None, after=None):
    """SymPy's `tree_cse` (repeated sub-expressions found by hashing, each named once by a
    temporary from `symbols`), with the rebuild structural and arguments taken in their
    canonical order (SymPy sorts them again with `ordered`, a sort key per argument).
    Returns (replacements, reduced exprs) as tree_cse does.

    `after`: a dict where this call leaves what it found (under "cse"), for a later call over
    the same expressions and more (the saving plan's combined graph: the backward's, and the
    forward's outputs) to pass as `before`, with the same `symbols` sequence. That call then
    takes, where it is exact, (1) the repeated sub-expressions: which are repeated is a
    function of the multiset of expressions, not of their order (each distinct one is
    expanded once, a sub-expression is repeated when it is met twice), so when every earlier
    expression is among the new ones (by identity) only the others are walked; (2) the
    reduced forms and temporaries of the expressions both calls start with (by identity),
    when the same names are excluded and no sub-expression they reach is repeated only now:
    the reduction of those is then the same step for step. The result is the one without
    `before` (tests/test_fastsym_memos.py)."""
    exprs = list(exprs)
    base = before.get("cse") if before else None
    extras = exprs
    if base is not None:
        left: dict = {}
        for e in base["exprs"]:
            left[id(e)] = left.get(id(e), 0) + 1
        extras = []
        for e in exprs:   # (both lists' objects are alive: an id stands for one object)
            n = left.get(id(e))
            if n:
                left[id(e)] = n - 1
            else:
                extras.append(e)
        if any(left.values()):   # an expression of the earlier call is gone: no reuse
            base, extras = None, exprs
    if base is not None:
        seen, repeated, excluded = set(base["seen"]), set(base["repeated"]), \
            set(base["excluded"])
    else:
        seen, repeated, excluded = set(), set(), set()
    stack = list(reversed(extras))
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
    done: dict = {}    # sub-expression (by value) -> its reduced form
    by_id: dict = {}   # id(object) -> done[object]: each object is looked up by value once
    # (SymPy's == on an equal object that is another one walks both: a Float's own __eq__ per
    # number, and a large program holds many equal copies; the objects stay alive in `exprs`
    # for the call, so their ids stand for them)
    missing = by_id    # a sentinel no sub-expression is
    marks = []         # per expression: (len(done), len(by_id), len(replacements)) before it
    reduced = []
    start = _shared_start(base, exprs, repeated, excluded) if base is not None else 0
    if start:
        n_done, n_id, n_temps = base["marks"][start]
        done.update(islice(base["done"].items(), n_done))
        by_id.update(islice(base["by_id"].items(), n_id))
        replacements = base["replacements"][:n_temps]
        for _ in range(n_temps):
            next(names)
        marks = base["marks"][:start]
        reduced = base["reduced"][:start]

    def build(root):
        # post-order, children left to right, as tree_cse's recursion numbers temporaries
        work = [(root, False)]
        pop, push, extend = work.pop, work.append, work.extend
        while work:
            e, ready = pop()
            if not ready:
                if id(e) in by_id:
                    continue
                hit = done.get(e, missing)
                if hit is not missing:   # an equal sub-expression, reduced before
                    by_id[id(e)] = hit
                    continue
                if not isinstance(e, sympy.Basic) or not e.args:
                    done[e] = by_id[id(e)] = e
                    continue
                push((e, True))
                extend([(a, False) for a in reversed(e.args) if id(a) not in by_id])
                continue
            # (e is not done yet: nothing below e equals e)
            old = e.args
            args = tuple([by_id[id(a)] for a in old])
            new = e if all(map(is_, args, old)) else rebuild(e, args, False)
            if e in repeated:
                sym = next(names)
                replacements.append((sym, new))
                new = sym
            done[e] = by_id[id(e)] = new
        return by_id[id(root)]

    for e in exprs[start:]:
        marks.append((len(done), len(by_id), len(replacements)))
        reduced.append(build(e) if isinstance(e, sympy.Basic) else e)
    marks.append((len(done), len(by_id), len(replacements)))
    if after is not None:
        after["cse"] = {"exprs": exprs, "seen": seen, "repeated": repeated,
                        "excluded": excluded, "done": done, "by_id": by_id,
                        "replacements": list(replacements), "reduced": list(reduced),
                        "marks": marks}
    return replacements, reduced


def _shared_start(base, exprs, repeated, excluded):
    """How many of `exprs`' first expressions hash_cse reduces as the call that left `base`
    did (see hash_cse): the common start (by identity), or 0 where the names excluded differ
    or a sub-expression reduced there is repeated only now."""
    old = base["exprs"]
    k, n = 0, min(len(old), len(exprs))
    while k < n and old[k] is exprs[k]:
        k += 1
    if not k or excluded != base["excluded"]:
        return 0
    new = repeated - base["repeated"] if len(repeated) != len(base["repeated"]) else ()
    if new:
        n_done = base["marks"][k][0]
        reached = dict(islice(base["done"].items(), n_done))
        if any(v in reached for v in new):
            return 0
    return k


# --------------------------------------------------------------------------- structure memos
# A large program repeats a few formula shapes over new symbols (RK4's stage k2 of step 40 is
# step 1's over other bindings). `canonical` renames an expression's symbols to placeholders
# numbered in order of first appearance, so that a pass over one shape (stabilizing rewrites,
# reverse accumulation) runs once per shape and is renamed back per use (`rename`: structural,
# no SymPy constructor). A placeholder has its original's assumptions (real, integer): a pass
# sees the same facts. Any pass whose result is an identity over the reals is exact this way;
# the result may differ from the pass run on the original in the order of a sum's terms.
_PLACEHOLDERS: dict = {}
_KIND: dict = {}


def _placeholder(i, sym):
    kind = _KIND.get(sym)
    if kind is None:
        if len(_KIND) > 200_000:   # a long-running process: forget, do not grow
            _KIND.clear()
        kind = _KIND[sym] = tuple(sorted(sym.assumptions0.items()))
    key = (i, kind)
    hit = _PLACEHOLDERS.get(key)
    if hit is None:
        # the name is a function of (i, kind) only: a canonical form (and the order SymPy
        # gives its arguments) never depends on what was compiled before in this process
        tag = zlib.crc32(repr(kind).encode())
        hit = _PLACEHOLDERS[key] = sympy.Symbol(f"_p{i}_{tag:08x}", **dict(kind))
    return hit


def canonical(expr):
    """(expr with its symbols renamed to placeholders numbered in order of first appearance,
    the mapping of each symbol to its placeholder). Two formulas of one shape over different
    symbols give the same canonical expression (when SymPy ordered their arguments alike).
    The canonical form is a function of `_structure`'s key, so it is built once per key (a
    structural rebuild and SymPy's argument sort per node, skipped for a repeated shape)."""
    try:
        key, order = _keyed(expr)
    except RecursionError:   # a formula too deep for the key's recursion: built directly
        return _canonical_of(expr, None, tuple(_first_appearance(expr)))
    return _canonical_of(expr, key, order)


def canonical_args(operands):
    """canonical(sympy.Tuple(*operands)), without building the Tuple when its shape was
    seen (its key is made of the operands' keys, remembered per object: `_keyed`)."""
    shape, order, entry = canonical_args_entry(operands)
    if entry is None:
        return shape, order
    return shape, dict(zip(order, entry[1]))


def canonical_args_entry(operands):
    """`canonical_args` as (canonical form, the operands' symbols in order of first
    appearance, the key's `_CANONICAL` entry (form, placeholders, rename-back plans)); the
    entry is None for operands that have no key (then the second item is the mapping of each
    symbol to its placeholder, as canonical_args gives it). For `rename_back_planned`."""
    if not all(isinstance(o, sympy.Basic) for o in operands):
        return canonical(sympy.Tuple(*operands)) + (None,)
    try:
        key, order = _compose(sympy.Tuple, [_keyed(o) for o in operands])
    except RecursionError:
        return canonical(sympy.Tuple(*operands)) + (None,)
    hit = _CANONICAL.get(key)
    if hit is None:
        _canonical_of(sympy.Tuple(*operands), key, order)
        hit = _CANONICAL[key]
    return hit[0], order, hit


def _canonical_of(expr, key, order):
    hit = _CANONICAL.get(key) if key is not None else None
    if hit is not None:
        # the placeholders are a function of the key too (each symbol's number and kind)
        return hit[0], dict(zip(order, hit[1]))
    forward = {s: _placeholder(i, s) for i, s in enumerate(order)}
    hit = rename(expr, forward, {})
    if key is not None:
        if len(_CANONICAL) > 100_000:   # a long-running process: forget, do not grow
            _CANONICAL.clear()
        _CANONICAL[key] = (hit, tuple(forward.values()), {})
    return hit, forward


# _structure key -> (canonical form, its placeholders in order, {id(formula): (formula, its
# rename-back plan)} for the formulas built over that form: `rename_back_planned`)
_CANONICAL: dict = {}
_KIND_ID: dict = {}     # symbol -> a number for its assumptions (in _structure's keys)


def _structure(expr):
    """(a key of expr's structure, {symbol: its number in order of first appearance}
    (preorder, left to right, as `canonical` numbers them)). Equal keys: the same formula up
    to a renaming of its symbols that keeps their assumptions (and numbers them alike)."""
    key, order = _keyed(expr)
    return key, {s: i for i, s in enumerate(order)}


def _keyed(e):
    """(the structure key of `e`, its symbols in order of first appearance). The key is
    built from its arguments' keys: (class, the arguments' keys, per argument the numbers
    its symbols have in `e`'s order); a symbol's key is its assumptions, a number's its
    exact value. Equal keys mean the same formula up to a renaming of the symbols (by
    induction over the arguments: each argument's symbols are placed alike by the numbers).
    Remembered per object (by identity, the object kept): an operand's formula, an adjoint
    read by each leaf of a region, a sum grown term by term are keyed once, not per use."""
    hit = _KEYS.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1], hit[2]
    args = e.args
    if args:
        key, order = _compose(type(e), [_keyed(a) for a in args])
    elif e.is_Symbol:
        kind = _KIND_ID.get(e)
        if kind is None:
            if len(_KIND_ID) > 200_000:
                _KIND_ID.clear()
            kind = _KIND_ID[e] = _kind_number(e)
        key, order = ("s", kind), (e,)
    elif e.is_Float:
        key, order = ("f", e._mpf_, e._prec), ()
    elif e.is_Rational:
        key, order = ("q", e.p, e.q), ()
    else:
        key, order = ("a", e), ()
    if len(_KEYS) > 300_000:   # a long-running process: forget, do not grow
        _KEYS.clear()
    _KEYS[id(e)] = (e, key, order)
    return key, order


def _compose(cls, kids):
    """(key, order) of a node of class `cls` over arguments keyed `kids` ((key, order) each)."""
    if len(kids) == 1:   # (its symbols are its argument's, in the same order)
        return (cls, (kids[0][0],), None), kids[0][1]
    index: dict = {}
    links = []
    for _, order in kids:
        link = []
        for s in order:
            i = index.get(s)
            if i is None:
                i = index[s] = len(index)
            link.append(i)
        links.append(tuple(link))
    return (cls, tuple(k for k, _ in kids), tuple(links)), tuple(index)


_KEYS: dict = {}   # id(expression) -> (expression, key, order): _keyed


def keyed_symbols(expr):
    """The symbols of `expr` (every Symbol in it, each once, in order of first appearance)
    where its structure key is remembered (`_keyed`), else None: no walk."""
    hit = _KEYS.get(id(expr))
    return hit[2] if hit is not None and hit[0] is expr else None


_KIND_NUMBERS: dict = {}


def _kind_number(sym):
    kind = tuple(sorted(sym.assumptions0.items()))
    return _KIND_NUMBERS.setdefault(kind, len(_KIND_NUMBERS))


def _first_appearance(expr):
    """{symbol: its number in order of first appearance} (preorder, left to right)."""
    order: dict = {}
    seen: set = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        args = e.args
        if not args:
            if e.is_Symbol and e not in order:
                order[e] = len(order)
            continue
        if id(e) in seen:
            continue
        seen.add(id(e))
        stack.extend(reversed(args))
    return order


def substitute(expr, mapping, memo, post=None):
    """`post(expr.xreplace(mapping))` (post: None or a pass that is a function of the
    formula's shape), built once per shape of (expr, the values its symbols map to) in `memo`
    (a dict the caller keeps) and renamed back. The SymPy constructors that fold each value
    into its uses (a coefficient distributed over a sum, a function's evaluation) then run
    once per shape of an unrolled program's step, not once per step."""
    shape, forward = canonical(expr)
    originals = [mapping.get(s, s) for s in forward]
    values, order, entry = canonical_args_entry(originals)
    key = (shape, values)
    hit = memo.get(key)
    if hit is None:
        hit = xreplace(shape, dict(zip(forward.values(), values.args)), {})
        if post is not None:
            hit = post(hit)
        memo[key] = hit
    return rename_back_planned(hit, values, order, entry, originals)[0]


_SHAPE_SYMBOLS: dict = {}   # id(shape) -> (shape, its symbols sorted by name)


def substitute_shaped(shape, mapping, memo, post=None):
    """`substitute` for a formula that is already over placeholders (a pass's result on a
    `canonical` form, such as a region's partial derivative): post(shape.xreplace(mapping)),
    built once per (shape, shape of the values) without canonicalizing `shape` again or
    renaming it back first. Its symbols are matched to the values in order of their names."""
    hit = _SHAPE_SYMBOLS.get(id(shape))
    if hit is None or hit[0] is not shape:
        if len(_SHAPE_SYMBOLS) > 100_000:
            _SHAPE_SYMBOLS.clear()
        free = {e for e in subexpressions([shape]) if isinstance(e, sympy.Symbol)}
        hit = _SHAPE_SYMBOLS[id(shape)] = (shape, sorted(free, key=lambda s: s.name))
    symbols = hit[1]   # (a partial's, read by each use of its region's shape)
    originals = [mapping.get(s, s) for s in symbols]
    values, order, entry = canonical_args_entry(originals)
    key = ("shaped", shape, values)   # never equal to a `substitute` key (another matching)
    hit = memo.get(key)
    if hit is None:
        hit = xreplace(shape, dict(zip(symbols, values.args)), {})
        if post is not None:
            hit = post(hit)
        memo[key] = hit
    return rename_back_planned(hit, values, order, entry, originals)[0]


# ----------------------------------------------------------------- walks over shared trees
# A small program's formulas are SymPy trees whose repeated sub-expressions are one object
# (x = r*x*(1 - x) repeated: x's formula appears twice in the next one). SymPy's walks
# (preorder_traversal, xreplace) visit a shared sub-expression once per path to it, which is
# exponential in the depth of reuse; these visit each distinct sub-expression once, with the
# same results.


def subexpressions(exprs):
    """Every distinct sub-expression of `exprs` (theirs included), each once."""
    seen: set = set()
    out: list = []
    stack = list(reversed(exprs))
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        out.append(e)
        stack.extend(reversed(e.args))
    return out


def xreplace(expr, rule, memo):
    """`expr.xreplace(rule)`, the same expression, built with each distinct sub-expression
    visited once (`memo`: a dict the caller keeps across the formulas one rule applies to).
    As SymPy's, a sub-expression nothing in `rule` reaches is returned as it is (the object
    itself), and one that changed is rebuilt with its full constructor."""
    hit = memo.get(expr)
    if hit is not None:
        return hit[0] if hit[1] else expr
    stack = [(expr, False)]
    while stack:
        e, ready = stack.pop()
        if e in memo:
            continue
        if e in rule:
            memo[e] = (rule[e], True)
            continue
        if not ready:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args
                         if a not in memo and isinstance(a, sympy.Basic))
            continue
        done = [memo.get(a) if isinstance(a, sympy.Basic) else None for a in e.args]
        if any(d is not None and d[1] for d in done):
            args = [d[0] if d is not None and d[1] else a for a, d in zip(e.args, done)]
            memo[e] = (e.func(*args), True)
        else:
            memo[e] = (e, False)
    new, changed = memo[expr]
    return new if changed else expr
