"""The memos of _fastsym's structural rebuilds (issue 18, compile time of large programs):
each must give what the unmemoized path gives, srepr for srepr, on hand-made corner cases
(Floats equal in value but not in precision, non-commutative products, canonical and CSE
order) and on the formulas of fuzzer-made and unrolled programs."""
import importlib

import pytest
import sympy
from sympy.functions.elementary.piecewise import ExprCondPair

FS = importlib.import_module("symgrad._fastsym")


def _rebuilt_both_ways(expr, args, canonical=True):
    FS._REBUILT.clear()
    first = FS.rebuild(expr, args, canonical)
    again = FS.rebuild(expr, list(args), canonical)      # a memo hit
    assert again is first
    assert sympy.srepr(first) == sympy.srepr(FS._rebuild(expr, args, canonical))
    return first


def test_rebuild_memo_tells_apart_what_sympy_tells_apart():
    x, y = sympy.symbols("x y", real=True)
    a, b = sympy.symbols("a b", commutative=False)
    f15, f30 = sympy.Float("0.1", 15), sympy.Float("0.1", 30)
    e = x + y
    one = _rebuilt_both_ways(e, [y, f15 * x])
    other = _rebuilt_both_ways(e, [y, f30 * x])
    # same value, other precision: another node (printed with other digits)
    FS._REBUILT.clear()
    assert FS.rebuild(e, [y, f15 * x]) is not FS.rebuild(e, [y, f30 * x])
    assert sympy.srepr(one) != sympy.srepr(other)
    # canonical order (sorted as SymPy sorts) and CSE's order (as given) are other entries
    s = _rebuilt_both_ways(e, [sympy.sin(y), x])
    u = _rebuilt_both_ways(e, [sympy.sin(y), x], canonical=False)
    assert s.args != u.args
    # a non-commutative product keeps its order
    assert _rebuilt_both_ways(a * b, [b, a]).args == (b, a)
    for node, args in [(sympy.sin(x), [y]), (x ** y, [y, x]), (sympy.Tuple(x, y), [y, x]),
                       (sympy.Piecewise((x, y > 0), (0, True)),
                        [ExprCondPair(y, x > 0), ExprCondPair(0, True)])]:
        _rebuilt_both_ways(node, args)


def _formulas_of(fwd, examples):
    import symgrad as sg

    m = sg.compile(fwd, *examples, dtype="float64", cache_ok=False)
    return [n.expr for g in (m.graph,) for n in g.nodes() if n.op == "elementwise"]


@pytest.mark.parametrize("seed", [3, 11])
def test_rename_with_the_rebuild_memo_equals_rename_without_on_fuzz_formulas(seed,
                                                                            monkeypatch):
    import numpy as np
    from fuzz_programs import generate
    from test_shape_memo import _loss_of

    prog = generate(seed)
    xs = [np.asarray(x, dtype=np.float64) for x in prog.inputs]
    exprs = _formulas_of(_loss_of(prog.function(), len(xs)), xs)
    assert exprs
    for expr in exprs:
        syms = sorted(expr.free_symbols, key=lambda s: s.name)
        # renamed in reverse name order: every sum and product is sorted anew
        mapping = {s: sympy.Symbol(f"r{len(syms) - i}", **s.assumptions0)
                   for i, s in enumerate(syms)}
        FS._REBUILT.clear()
        cold = FS.rename(expr, mapping, {})
        warm = FS.rename(expr, mapping, {})
        with monkeypatch.context() as m:
            m.setattr(FS, "rebuild", lambda e, args, canonical=True: FS._rebuild(
                e, args, canonical))
            plain = FS.rename(expr, mapping, {})
        assert sympy.srepr(cold) == sympy.srepr(warm) == sympy.srepr(plain)
        assert plain == expr.xreplace(mapping) or plain.has(sympy.core.relational.Relational)


def _reference_canonical(expr):
    """canonical() as first written: placeholders by first appearance, renamed node by node."""
    order = FS._first_appearance(expr)
    forward = {s: FS._placeholder(i, s) for s, i in order.items()}
    return FS.rename(expr, forward, {}), forward


def _program_formulas():
    import numpy as np
    from deep_programs import coupled, rk4
    from fuzz_programs import generate
    from test_shape_memo import _loss_of

    import symgrad as sg

    out = []
    for seed in (1, 5):
        prog = generate(seed)
        xs = [np.asarray(x, dtype=np.float64) for x in prog.inputs]
        out += _formulas_of(_loss_of(prog.function(), len(xs)), xs)
    for make, n in ((rk4, 2), (coupled, 3)):
        fwd, examples = make(n, sg)
        out += _formulas_of(fwd, examples)
    return out


def test_keys_made_of_the_arguments_keys_give_the_canonical_form_of_before():
    """_keyed builds a node's key from its arguments' (remembered per object); canonical()
    and canonical_args() must still give the canonical form and placeholders of before, cold
    and from the memos, for every formula of fuzzer-made and unrolled programs and for
    tuples of them (the shape memo's operands)."""
    exprs = _program_formulas()
    assert len(exprs) > 20
    for warm in (False, True):
        if not warm:
            FS._KEYS.clear()
            FS._CANONICAL.clear()
        for i, expr in enumerate(exprs):
            ref, ref_forward = _reference_canonical(expr)
            got, forward = FS.canonical(expr)
            assert sympy.srepr(got) == sympy.srepr(ref) and forward == ref_forward
            operands = (expr, exprs[i - 1], sympy.Float("0.5"), *sorted(
                expr.free_symbols, key=lambda s: s.name)[:2])
            ref, ref_forward = _reference_canonical(sympy.Tuple(*operands))
            got, forward = FS.canonical_args(operands)
            assert sympy.srepr(got) == sympy.srepr(ref) and forward == ref_forward


def test_structure_keys_tell_apart_how_symbols_are_shared():
    x, y, z, u = sympy.symbols("x y v w", real=True)   # (v*w sorts as x*y does)
    n = sympy.Symbol("n", integer=True)
    key = lambda e: FS._structure(e)[0]
    assert key(x * y + sympy.sin(x)) == key(z * u + sympy.sin(z))
    assert key(x * y + sympy.sin(x)) != key(x * y + sympy.sin(y))    # which one is shared
    assert key(x * y + sympy.sin(z)) != key(x * y + sympy.sin(x))
    assert key(x + sympy.sin(y)) != key(n + sympy.sin(y))             # assumptions
    assert key(sympy.Float("0.1", 15) * x) != key(sympy.Float("0.1", 30) * x)
    # canonical_args: the operands' keys and how the operands share symbols
    a, fa = FS.canonical_args((x + y, sympy.sin(x)))
    b, fb = FS.canonical_args((z + u, sympy.sin(z)))
    c, _ = FS.canonical_args((x + y, sympy.sin(y)))
    assert a is b and a != c and [fa[x], fa[y]] == [fb[z], fb[u]]


def test_by_shape_seeds_the_tree_size_of_what_it_renames_back(monkeypatch):
    """_by_shape records the tree size of a renamed-back formula (the shape's: a renaming of
    symbols keeps it), so Tracer.bind does not walk it; each seeded size must be the walk's."""
    import symgrad as sg
    from deep_programs import coupled, rk4

    EW = importlib.import_module("symgrad._trace_elementwise")
    TRACE = importlib.import_module("symgrad.trace")
    monkeypatch.setattr(EW, "SHAPE_MEMO_MIN", 0)
    seen = []
    real = EW._by_shape

    def spy(tracer, name, fn, operands):
        out = real(tracer, name, fn, operands)
        seen.append((tracer, out[0]))
        return out

    monkeypatch.setattr(EW, "_by_shape", spy)
    for make, n in ((rk4, 2), (coupled, 4)):
        fwd, examples = make(n, sg)
        sg.compile(fwd, *examples, dtype="float64", cache_ok=False)
    checked = 0
    for tracer, expr in seen:
        if isinstance(expr, sympy.Basic) and expr.args and expr in tracer.sizes:
            assert tracer.sizes[expr] == TRACE.tree_size(expr, {})
            checked += 1
    assert checked > 100


def _cse_lists(seed):
    """(earlier expressions, later ones): the later are the earlier with a few more inserted
    (a value repeated only now, before or after where the lists part; a new symbol), or one
    of the earlier ones left out; over a small pool, so that many sub-expressions repeat."""
    import random

    rng = random.Random(seed)
    x, y, z, t3 = sympy.symbols("x y z t3", real=True)
    pool = [x, y, z, sympy.Float("0.1", 15), sympy.Integer(2)]
    for _ in range(30):
        a, b = rng.choice(pool), rng.choice(pool)
        op = rng.choice([sympy.Add, sympy.Mul, lambda u, v: sympy.sin(u) * v,
                         lambda u, v: sympy.Pow(u, 3) + v])
        e = op(a, b)
        if e.args:
            pool.append(e)
    big = [e for e in pool if e.args]
    earlier = [rng.choice(big) + rng.choice(big) for _ in range(12)]
    later = list(earlier)
    for _ in range(rng.randint(1, 3)):
        new = rng.choice(big) * rng.choice(big + [t3])
        later.insert(rng.randint(0, len(later)), new)
    if seed % 5 == 0:
        later.pop(rng.randrange(len(later)))
    if seed % 7 == 0:   # the same objects again: equal values that are other objects
        later = [sympy.sympify(str(e), locals={"x": x, "y": y, "z": z}) for e in later]
    return earlier, later


def _temps():
    k = 0
    while True:
        yield sympy.Symbol(f"t{k}")
        k += 1


@pytest.mark.parametrize("seed", range(60))
def test_hash_cse_taking_an_earlier_calls_findings_gives_what_it_gives_alone(seed):
    earlier, later = _cse_lists(seed)
    kept = {}
    first = FS.hash_cse(earlier, _temps(), None, kept)
    assert [sympy.srepr(e) for e in first[1]] == \
        [sympy.srepr(e) for e in FS.hash_cse(earlier, _temps())[1]]
    alone = FS.hash_cse(later, _temps())
    taken = FS.hash_cse(later, _temps(), kept, None)
    assert [(sympy.srepr(s), sympy.srepr(e)) for s, e in taken[0]] == \
        [(sympy.srepr(s), sympy.srepr(e)) for s, e in alone[0]]
    assert [sympy.srepr(e) for e in taken[1]] == [sympy.srepr(e) for e in alone[1]]


def test_hash_cse_takes_the_shared_start_only_where_it_is_reduced_alike():
    x, y, z = sympy.symbols("x y z", real=True)
    a, b, c = sympy.sin(x) + y, sympy.cos(y) * z, sympy.exp(z) + x
    earlier = [a * b, b + c, c * x]
    kept = {}
    FS.hash_cse(earlier, _temps(), None, kept)
    base = kept["cse"]

    def same(later):
        assert FS.hash_cse(later, _temps(), kept, None) == FS.hash_cse(later, _temps())

    # a new expression after the first two, repeating nothing they reach: both taken
    assert FS._shared_start(base, earlier[:2] + [c * y] + earlier[2:],
                            base["repeated"] | {c}, base["excluded"]) == 2
    # ... and a value the first one reaches, repeated only now: nothing taken
    assert FS._shared_start(base, earlier[:2] + [a * y] + earlier[2:],
                            base["repeated"] | {a}, base["excluded"]) == 0
    # a new name among the excluded (t0 is a temporary's name): nothing taken
    assert FS._shared_start(base, earlier + [sympy.Symbol("t0") * x], base["repeated"],
                            base["excluded"] | {"t0"}) == 0
    for later in (earlier[:2] + [c * y] + earlier[2:], earlier[:2] + [a * y] + earlier[2:],
                  earlier + [sympy.Symbol("t0") * x], earlier[1:], earlier[::-1]):
        same(later)


def test_class_order_memo_is_sympys():
    """SymPy's `_cmp_name` (Basic.compare's class order) remembered per pair of classes
    (_fastsym._memo_cmp_name): the same answer for every pair, sorts as before, and a
    replaced `ordering_of_classes` is read afresh."""
    import itertools
    import random

    from sympy.core import basic
    from sympy.core.basic import _args_sortkey

    original = basic._cmp_name.__wrapped__
    assert basic._cmp_name._symgrad_memo
    classes = [sympy.Symbol, sympy.Dummy, sympy.Mul, sympy.Add, sympy.Pow, sympy.sin,
               sympy.exp, sympy.Float, sympy.Integer, sympy.Rational, sympy.Piecewise,
               sympy.Tuple, sympy.Function("f"), type(sympy.S.One), type(sympy.S.Half)]
    for a, b in itertools.product(classes, repeat=2):
        assert basic._cmp_name(a, b) == basic._cmp_name(a, b) == original(a, b), (a, b)
    assert basic._cmp_name(sympy.Symbol, int) == original(sympy.Symbol, int) == -1
    x, y, z = sympy.symbols("x y z", real=True)
    terms = [x, 2 * y, sympy.sin(z), x ** 2, sympy.exp(-y), sympy.Float("0.5"), x * y * z,
             sympy.Function("g")(x), sympy.Rational(1, 3) * z, sympy.Piecewise((x, y > 0), (z, True))]
    rng = random.Random(0)
    for _ in range(50):
        picked = rng.sample(terms, 5)
        memo = sorted(picked, key=_args_sortkey)
        saved, basic._cmp_name = basic._cmp_name, original
        try:
            plain = sorted(picked, key=_args_sortkey)
        finally:
            basic._cmp_name = saved
        assert memo == plain
    # a replaced class order: answered from the new list, not the memo
    saved_order = basic.ordering_of_classes
    try:
        basic.ordering_of_classes = ["Add", "Symbol"]
        assert basic._cmp_name(sympy.Add, sympy.Symbol) == -1
        basic.ordering_of_classes = ["Symbol", "Add"]
        assert basic._cmp_name(sympy.Add, sympy.Symbol) == 1
    finally:
        basic.ordering_of_classes = saved_order
    assert basic._cmp_name(sympy.Add, sympy.Symbol) == original(sympy.Add, sympy.Symbol)


def test_keyed_symbols_are_the_free_symbols():
    """keyed_symbols (what Tracer.materialize reads a region's leaves from): each symbol of a
    keyed formula once, Piecewise conditions included; None for a formula never keyed."""
    x, y, z = sympy.symbols("x y z", real=True)
    n = sympy.Symbol("n", integer=True)
    exprs = [x + 2 * y, sympy.sin(x) * sympy.exp(-x * y) + n, sympy.Float("0.5") * z ** 2,
             sympy.Piecewise((x, y > 0), (z, True)), x * (y + z) + x * y]
    for e in exprs:
        fresh = e + sympy.Symbol("w_never_keyed", real=True)
        assert FS.keyed_symbols(fresh) is None
        FS._keyed(e)
        got = FS.keyed_symbols(e)
        assert len(got) == len(set(got)) and set(got) == e.free_symbols, e
