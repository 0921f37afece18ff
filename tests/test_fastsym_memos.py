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
