"""The emit stage's shortcuts give the slow path's text, byte for byte, and the dependence maps
the compiler records between emit and load are the slow path's (issue 18: the emit half of a
large program's compile).

- `_formulas._DagStrPrinter`, which prints a large program's docstring derivations, against
  `sympy.sstr(expr, order="none")` (what it replaced);
- `emit.render._printable`'s fast path (text with nothing to escape) against the escaping walk;
- `emit.statements._sigmoids` against SymPy's `atoms`.
- `Graph.dependencies` with its memo of subexpression maps shared across nodes against the
  same walk with a memo per node.
(`_print_by_shape`, the printing once per shape, is checked in test_shape_memo.py.)
"""
import importlib

import pytest
import sympy
from deep_programs import coupled, lstm, rk4
from fuzz_programs import generate
from hypothesis import given, settings
from hypothesis import strategies as st

import symgrad as sg

C = importlib.import_module("symgrad.compiler")
G = importlib.import_module("symgrad.graph")
F = importlib.import_module("symgrad._formulas")
R = importlib.import_module("symgrad.emit.render")
S = importlib.import_module("symgrad.emit.statements")
stable = importlib.import_module("symgrad.ops.stable")

x, y, z = sympy.symbols("x y z", real=True)
w = sympy.Symbol("w")


def _dag_print(expr):
    return F._DagStrPrinter().doprint(expr)


@pytest.mark.parametrize("program, n", [(coupled, 24), (rk4, 3)])
def test_dag_formula_printer_prints_what_sstr_prints(monkeypatch, program, n):
    """Every row of a large program's derivations (forward and backward docstrings) prints as
    sympy.sstr(order="none") prints it, and the docstring lines are those sstr gave."""
    rows = []
    real = F._derivation_rows

    def capture(graph):
        derivation, out = real(graph)
        if graph.dag:
            rows.extend(e for _, e in out if isinstance(e, sympy.Basic))
        return derivation, out

    monkeypatch.setattr(F, "_derivation_rows", capture)
    fwd, examples = program(n, sg)
    module = sg.compile(fwd, *examples, dtype="float64", cache_ok=False)
    assert module.graph.dag and len(rows) > 20
    negated = 0
    for expr in rows:
        assert _dag_print(expr) == sympy.sstr(expr, order="none"), sympy.srepr(expr)
        negated += sum(1 for m in expr.atoms(sympy.Mul) if m.args[0].is_Number
                       and m.args[0] < 0)
    assert negated > 10   # the products with a negative coefficient (the fast path) occur


_FIXED = [
    -x, -2.5 * x, -x * y, sympy.Float(-0.5) * sympy.sin(x), -sympy.Rational(3, 2) * x * y,
    -2 * x / y, -x / (y * z), -sympy.Float(2.0) * (x + y), -3 * (x + y) ** -2,
    x * y ** sympy.Rational(-1, 2), -x ** -3, sympy.Mul(-1, x, y + z, evaluate=False),
    sympy.Mul(sympy.Float(-2.0), x, evaluate=False) + y, -sympy.zoo * x, -sympy.oo * x,
    sympy.Float("-inf") * x, sympy.Float("nan") * x, -x * sympy.exp(y), -2 * sympy.sqrt(2) * x,
    sympy.Mul(-2, sympy.Pow(2, sympy.Rational(-1, 2)), x, evaluate=False),
    x - y * z, -(x - y) * z, sympy.Piecewise((-x, y > 0), (2 * x, True)) * -3,
    stable.sigmoid(-x) * -y, -w * x, sympy.Float(-0.0) * x, -sympy.pi * x,
    sympy.Mul(sympy.Float(-1.5), sympy.Mul(x, y, evaluate=False), evaluate=False),
    -sympy.Abs(x) * y ** 2, -(x * y) ** -1, -1 / (x * y) ** 2,
]


@pytest.mark.parametrize("expr", _FIXED, ids=range(len(_FIXED)))
def test_dag_formula_printer_on_edge_products(expr):
    assert _dag_print(expr) == sympy.sstr(expr, order="none")


_ATOMS = st.sampled_from([x, y, z, w, sympy.Integer(2), sympy.Integer(-3), sympy.Float(-0.25),
                          sympy.Float(1.5), sympy.Rational(-2, 3), sympy.Rational(5, 7),
                          sympy.pi])


def _exprs():
    return st.recursive(_ATOMS, lambda kids: st.one_of(
        st.tuples(kids, kids).map(lambda p: p[0] * p[1]),
        st.tuples(kids, kids).map(lambda p: p[0] + p[1]),
        st.tuples(kids, kids).map(lambda p: p[0] - p[1]),
        st.tuples(kids, kids).map(lambda p: p[0] / p[1] if p[1] != 0 else p[0]),
        st.tuples(kids, st.sampled_from([-3, -2, -1, 2, 3, sympy.Rational(1, 2),
                                         sympy.Rational(-1, 2)]))
        .map(lambda p: p[0] ** p[1] if p[0] != 0 else p[0]),
        kids.map(lambda e: -e),
        kids.map(sympy.sin), kids.map(sympy.exp), kids.map(stable.sigmoid),
    ), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_exprs())
def test_dag_formula_printer_on_random_formulas(expr):
    assert _dag_print(expr) == sympy.sstr(expr, order="none")


def _slow_printable(text, also=""):
    return "".join(ch if ch.isprintable() and ch not in also else R._escape_char(ch)
                   for ch in str(text))


@settings(max_examples=300, deadline=None)
@given(st.text(), st.sampled_from(["", "\\", "*/"]))
def test_printable_fast_path_escapes_as_the_walk(text, also):
    assert R._printable(text, also) == _slow_printable(text, also)
    assert type(R._printable(R.Untrusted(text), also)) is str   # never Untrusted again


@settings(max_examples=200, deadline=None)
@given(_exprs())
def test_sigmoids_are_sympys_atoms(expr):
    S._SIGMOIDS.clear()
    assert S._sigmoids(expr) == frozenset(expr.atoms(stable.sigmoid))


def _graphs(monkeypatch, programs):
    """(graph, vjp) of each program as compiled."""
    got = []
    real = C._backward_depends

    def capture(graph, vjp):
        got.append((graph, vjp))
        return real(graph, vjp)

    monkeypatch.setattr(C, "_backward_depends", capture)
    for fwd, examples in programs:
        sg.compile(fwd, *examples, dtype="float64", cache_ok=False)
    monkeypatch.undo()
    return got


def _fuzz(seed):
    import numpy as np
    from test_shape_memo import _loss_of

    prog = generate(seed)
    xs = [np.asarray(v, dtype=np.float64) for v in prog.inputs]
    return _loss_of(prog.function(), len(xs)), xs


@pytest.mark.slow
def test_dependencies_with_shared_memo_are_the_per_node_walks(monkeypatch):
    programs = [rk4(2, sg), coupled(24, sg), lstm(2, sg)] + [_fuzz(s) for s in range(3)]
    graphs = _graphs(monkeypatch, programs)
    assert any(g.dag for g, _ in graphs)
    real = G._expr_map

    def per_node(expr, symbols, every_operand, memo=None):
        return real(expr, symbols, every_operand)   # a fresh memo for each node

    for graph, vjp in graphs:
        n_out = len(graph.outputs)
        fast = [graph.dependencies(), vjp.dependencies(n_out), vjp.dependencies(n_out, True)]
        monkeypatch.setattr(G, "_expr_map", per_node)
        slow = [graph.dependencies(), vjp.dependencies(n_out), vjp.dependencies(n_out, True)]
        monkeypatch.undo()
        assert fast == slow, graph.name


def test_shared_maps_are_dropped_when_a_symbol_read_gets_a_map():
    """A symbol read before it has a map (a constant then) and given one later: the
    remembered subexpressions over it are not reused."""
    x, y = sympy.symbols("x y", real=True)
    symbols = {x: {None: frozenset((0,))}}
    memo = G._SharedMaps()
    assert G._expr_map(sympy.sin(x * y), symbols, False, memo) == {None: frozenset((0,))}
    assert y in memo.read
    memo.clear()   # what Graph.dependencies does before giving y a map
    symbols[y] = {None: frozenset((1,))}
    assert G._expr_map(sympy.sin(x * y) + 1, symbols, False, memo) == \
        {None: frozenset((0, 1))}
