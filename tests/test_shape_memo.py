"""Formulas built once per shape (issue 18, compile time of large unrolled programs).

A large program repeats a few formula shapes over new symbols; its trace (past
`SHAPE_MEMO_MIN` ops), its replay, stabilizing rewrites and adjoints build each shape's SymPy
formula once over placeholders (`_fastsym.canonical`) and rename it back. These tests check
that the renamed formulas compute what the SymPy path computes: on random programs of the
fuzzer with the fast paths forced on from the first op, against the same programs compiled
without them, and on a large program against torch.
"""
import importlib

import numpy as np
import pytest
import sympy

import symgrad as sg
from deep_programs import coupled, rk4
from fuzz_programs import generate

TR = importlib.import_module("symgrad._tracer")
EW = importlib.import_module("symgrad._trace_elementwise")
FS = importlib.import_module("symgrad._fastsym")
D = importlib.import_module("symgrad.differentiate")

try:
    import torch
except ImportError:  # pragma: no cover - torch is an optional oracle
    torch = None


def test_canonical_form_is_shared_by_formulas_of_one_shape():
    a, b = sympy.symbols("v10 v5", real=True)
    c, d = sympy.symbols("v110 v105", real=True)
    n = sympy.Symbol("n", integer=True)
    e1 = -9.81 * sympy.sin(a + 0.025 * b) + a * b ** 2 + n
    e2 = -9.81 * sympy.sin(c + 0.025 * d) + c * d ** 2 + n
    s1, f1 = FS.canonical(e1)
    s2, f2 = FS.canonical(e2)
    assert s1 == s2 and s1.free_symbols.isdisjoint({a, b, c, d, n})
    assert s1 is s2   # built once per structure key (_fastsym._structure)
    # the key tells apart what the canonical form tells apart: constants, assumptions
    assert FS._structure(e1)[0] != FS._structure(e1.xreplace({n: sympy.Symbol("m")}))[0]
    assert FS._structure(e1)[0] != FS._structure(e1.xreplace({sympy.Float(-9.81): -9.8}))[0]
    # a placeholder keeps its symbol's assumptions; renaming back restores the formula
    assert f1[n].is_integer and f1[a].is_real and not f1[a].is_integer
    assert FS.rename(s2, {p: s for s, p in f2.items()}, {}) == e2
    # a formula of another shape (other constants) has another canonical form
    assert FS.canonical(-9.81 * sympy.sin(c + 0.05 * d) + c * d ** 2 + n)[0] != s1


def test_substitute_equals_xreplace():
    x, y, z, u = sympy.symbols("x y z u", real=True)
    memo = {}
    for expr, mapping in [
        (0.05 * x * sympy.sin(y), {x: z + 2 * u, y: u}),
        (0.05 * x * sympy.sin(y), {x: u + 2 * z, y: z}),          # same shape: a memo hit
        (x * y + sympy.exp(-x), {x: y, y: x}),                      # a swap
        (sympy.Piecewise((x, y > 0), (0, True)), {x: 3 * z, y: -u}),
    ]:
        assert FS.substitute(expr, mapping, memo) == expr.xreplace(mapping)
    assert len(memo) == 3
    # a formula already over placeholders (a region's partial): matched by the placeholders'
    # names, keyed apart from `substitute`'s entries (which match by first appearance)
    shape, forward = FS.canonical(0.05 * x * sympy.sin(y) + y)
    p, q = forward[x], forward[y]
    for values in [{p: z + 2 * u, q: u}, {p: u, q: z + 2 * u}, {p: y, q: x}]:
        assert FS.substitute_shaped(shape, values, memo) == shape.xreplace(values)
    assert FS.substitute(shape, {p: u, q: z + 2 * u}, memo) == \
        shape.xreplace({p: u, q: z + 2 * u})


def _loss_of(fn, n_inputs):
    """forward(x0, x1, ...) -> a weighted sum of the program's outputs (one scalar loss)."""
    names = ", ".join(f"x{i}" for i in range(n_inputs))
    scope = {"fn": fn, "sg": sg}
    exec(f"def forward({names}):\n"
         f"    outs = fn(sg, {names})\n"
         "    outs = outs if isinstance(outs, tuple) else (outs,)\n"
         "    total = (outs[0] * 1.5).sum()\n"
         "    for k, o in enumerate(outs[1:]):\n"
         "        total = total + (o * (k + 2.5)).sum()\n"
         "    return total\n", scope)
    return scope["forward"]


def _run(prog):
    xs = [np.asarray(x, dtype=np.float64) for x in prog.inputs]
    m = sg.compile(_loss_of(prog.function(), len(xs)), *xs, dtype="float64", cache_ok=False)
    return m, float(m.forward(*xs)), m.backward(np.ones(()), *xs)


@pytest.mark.slow
def test_fast_paths_compute_what_the_sympy_paths_compute_on_fuzz_programs(monkeypatch):
    """Each program twice: as compiled (a small program: SymPy's own passes), and with every
    program large (short bindings, kept: Graph.dag) and every op of its trace built by
    shape."""
    plain = {}
    seeds = range(16)
    for seed in seeds:
        plain[seed] = _run(generate(seed))
    calls = []
    real = FS.substitute
    monkeypatch.setattr(TR, "DISSOLVE_MAX", 0)
    monkeypatch.setattr(TR, "REUSE_MIN", 1)      # many bindings: a DAG of short formulas
    monkeypatch.setattr(TR, "CHAIN_MAX", 6)
    monkeypatch.setattr(EW, "SHAPE_MEMO_MIN", 0)
    monkeypatch.setattr(FS, "substitute", lambda *a, **k: calls.append(1) or real(*a, **k))
    large = 0
    for seed in seeds:
        m, value, grads = _run(generate(seed))
        large += m.graph.dag
        _, ref_value, ref_grads = plain[seed]
        np.testing.assert_allclose(value, ref_value, rtol=1e-10, err_msg=f"seed {seed}")
        for g, r in zip(grads, ref_grads):
            np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-12, err_msg=f"seed {seed}")
    assert large >= 8 and calls   # the fast paths ran


@pytest.mark.skipif(torch is None, reason="torch is the oracle")
@pytest.mark.parametrize("make,n", [pytest.param(rk4, 6, marks=pytest.mark.slow), (coupled, 40)],
                         ids=["rk4", "coupled"])
def test_large_program_built_by_shape_matches_torch(monkeypatch, make, n):
    """Gradients of a large unrolled program, every op past the 50th of its trace built by
    shape (and its replay and adjoints, as any large program's), against torch."""
    monkeypatch.setattr(EW, "SHAPE_MEMO_MIN", 50)
    seen = []
    real = D._partials_of_shape
    monkeypatch.setattr(D, "_partials_of_shape", lambda *a: seen.append(1) or real(*a))
    fwd, examples = make(n, sg)
    module = sg.compile(fwd, *examples, dtype="float64", cache_ok=False)
    assert module.graph.dag and seen
    tfwd, _ = make(n, torch)
    ts = [torch.tensor(e, dtype=torch.float64, requires_grad=True) for e in examples]
    y = tfwd(*ts)
    grads = torch.autograd.grad(y, ts)
    np.testing.assert_allclose(float(module.forward(*examples)), float(y.detach()), rtol=1e-12)
    for g, ref in zip(module.backward(np.ones(()), *examples), grads):
        np.testing.assert_allclose(g, ref.numpy(), rtol=1e-9, atol=1e-12)


def test_printing_by_shape_prints_what_the_printer_prints(monkeypatch):
    """A large program's NumPy formulas are printed once per shape and renamed in the text
    (emit.statements._print_by_shape): every step's text equals the printer's own."""
    E = importlib.import_module("symgrad.emit.statements")
    real = E._print_by_shape
    checked = []

    def both(printer, memo, expr):
        text = real(printer, memo, expr)
        assert text == printer.doprint(expr), expr
        checked.append(1)
        return text

    monkeypatch.setattr(E, "_print_by_shape", both)
    fwd, examples = coupled(24, sg)
    module = sg.compile(fwd, *examples, dtype="float64", cache_ok=False)
    assert module.graph.dag and len(checked) > 100


def test_float_hash_memo_returns_sympys_hash():
    """_fastsym remembers Float hashes per exact value: the hash is SymPy's own (same dict and
    set order), for every precision, sign and magnitude, and two Floats equal in value but of
    different precision keep their own hashes."""
    importlib.import_module("symgrad._fastsym")
    memo_hash = sympy.Float.__hash__
    original = memo_hash.__wrapped__
    assert memo_hash is not original
    values = [sympy.Float(v) for v in ("0.05", "-2.5", "1e-300", "1e300", "0", "9.81")]
    values += [sympy.Float(1) / 3, sympy.Float("0.1", 50), sympy.Float("0.1", 15),
               sympy.Float(2.0 ** 60), sympy.Float(-7, 3)]
    for v in values:
        assert hash(v) == original(v) == hash(v), v
    assert hash(sympy.Float("0.1", 50)) == original(sympy.Float("0.1", 50))
    # a node holding Floats hashes as before (its hash is built from the Floats')
    x = sympy.Symbol("x")
    e = sympy.Float("0.05") * x + sympy.Float("9.81")
    assert {e: 1}[sympy.Float("9.81") + sympy.Float("0.05") * x] == 1


def _rename_back_checked(monkeypatch):
    """FS.rename_back, each result checked against the plain rename back (`rename` of the
    whole formula, every node rebuilt): equal, argument for argument, and printed alike."""
    real = FS.rename_back
    checked = []

    def both(expr, forward, shape, originals):
        out = real(expr, forward, shape, originals)
        ref = FS.rename(expr, {p: s for s, p in forward.items()}, {})
        assert out == ref and out.args == ref.args and sympy.srepr(out) == sympy.srepr(ref)
        checked.append(1)
        return out

    planned = FS.rename_back_planned

    def both_planned(expr, shape, order, entry, originals):
        # the plan's result (and the structure key it remembers for it) against rename_back's
        # and the plain rename's
        out, alike = planned(expr, shape, order, entry, originals)
        forward = order if entry is None else dict(zip(order, entry[1]))
        ref = FS.rename(expr, {p: s for s, p in forward.items()}, {})
        slow = real(expr, forward, shape, originals)
        for other in (ref, slow):
            assert out == other and out.args == other.args
            assert sympy.srepr(out) == sympy.srepr(other)
        if alike:   # expr renamed node for node
            renamed = FS.rename(expr, {p: s for s, p in forward.items()}, {}, canonical=False)
            assert sympy.srepr(out) == sympy.srepr(renamed)
        hit = FS._KEYS.get(id(out))
        if hit is not None and hit[0] is out:   # keyed afresh, with no key remembered
            saved, FS._KEYS = FS._KEYS, {}
            try:
                assert FS._keyed(out) == (hit[1], hit[2])
            finally:
                FS._KEYS = saved
        checked.append(1)
        return out, alike

    monkeypatch.setattr(FS, "rename_back", both)
    monkeypatch.setattr(FS, "rename_back_planned", both_planned)
    return checked


def test_rename_back_keeps_the_operands_it_matches():
    """An operand whose canonical form holds it in the same places is taken as it stands
    (not rebuilt); one its canonical form reorders (a placeholder's place differs), or a
    number of another precision, is rebuilt; the result is rename's either way."""
    x, y, z = sympy.symbols("x y z", real=True)
    cases = [
        ((x + 2 * y, sympy.sin(z)), lambda a, b: a * 0.5 + b),
        ((y, x + y), lambda a, b: a * b),            # x + y over (y -> p0, x -> p1): reordered
        ((0.025 * x + y ** 2, y), lambda a, b: a + b),
        ((sympy.Float("0.1", 30) * x, y), lambda a, b: a - b),
        ((sympy.Float("0.1", 15) * x, y), lambda a, b: a - b),   # the same key, another prec
        ((-9.81 * sympy.sin(x), 0.3 * y), lambda a, b: -a - b),
    ]
    for operands, fn in cases:
        shape, forward = FS.canonical(sympy.Tuple(*operands))
        expr = fn(*shape.args)
        out = FS.rename_back(expr, forward, shape, operands)
        ref = FS.rename(expr, {p: s for s, p in forward.items()}, {})
        assert out == ref == fn(*operands) and out.args == ref.args, operands
        assert sympy.srepr(out) == sympy.srepr(ref)
    # the first case's 2*y and sin(z) are the operands' own objects
    (a, b), fn = cases[0]
    shape, forward = FS.canonical(sympy.Tuple(a, b))
    out = FS.rename_back(fn(*shape.args), forward, shape, (a, b))
    assert any(t is b for t in out.args)


@pytest.mark.slow
def test_rename_back_equals_rename_on_fuzz_and_unrolled_programs(monkeypatch):
    """Every op of a trace built by shape (the fuzzer's programs made large, and an unrolled
    program), each renamed-back formula equal to the plain rename's; the gradients as the
    SymPy path's."""
    checked = _rename_back_checked(monkeypatch)
    seeds = range(4)
    plain = {seed: _run(generate(seed)) for seed in seeds}
    monkeypatch.setattr(TR, "DISSOLVE_MAX", 0)
    monkeypatch.setattr(TR, "REUSE_MIN", 1)
    monkeypatch.setattr(TR, "CHAIN_MAX", 6)
    monkeypatch.setattr(EW, "SHAPE_MEMO_MIN", 0)
    for seed in seeds:
        _, value, grads = _run(generate(seed))
        _, ref_value, ref_grads = plain[seed]
        np.testing.assert_allclose(value, ref_value, rtol=1e-10, err_msg=f"seed {seed}")
        for g, r in zip(grads, ref_grads):
            np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-12, err_msg=f"seed {seed}")
    fwd, examples = coupled(12, sg)
    sg.compile(fwd, *examples, dtype="float64", cache_ok=False)
    assert len(checked) > 50


def _slow_rename_back(expr, shape, order, entry, originals):
    """rename_back_planned without its plans: rename_back on the operands as they are."""
    forward = order if entry is None else dict(zip(order, entry[1]))
    return FS.rename_back(expr, forward, shape, originals), False


@pytest.mark.parametrize("program, size", [(rk4, 3), (coupled, 10), ("lstm", 2)])
def test_rename_back_plans_give_the_slow_paths_formulas(monkeypatch, program, size):
    """A large program's renamed-back formulas through the plans remembered per (operands'
    key, formula) (`rename_back_planned`), and the structure keys they remember for their
    results, checked one by one against rename_back's and a fresh `_keyed`; the generated
    module is the one compiled with every plan bypassed, byte for byte."""
    from deep_programs import lstm
    program = lstm if program == "lstm" else program
    monkeypatch.setattr(TR, "REUSE_MIN", 1)
    monkeypatch.setattr(TR, "CHAIN_MAX", 6)
    monkeypatch.setattr(EW, "SHAPE_MEMO_MIN", 0)
    fwd, examples = program(size, sg)
    with monkeypatch.context() as slow:
        slow.setattr(FS, "rename_back_planned", _slow_rename_back)
        reference = sg.compile(fwd, *examples, dtype="float64", cache_ok=False).source
    planned = {"runs": 0}
    real_plan = FS._plan

    def counted(*args):
        planned["runs"] += 1
        return real_plan(*args)

    monkeypatch.setattr(FS, "_plan", counted)
    checked = _rename_back_checked(monkeypatch)
    FS._CANONICAL.clear()   # plans made afresh, on this program's operands
    source = sg.compile(fwd, *examples, dtype="float64", cache_ok=False).source
    assert source == reference
    assert planned["runs"] > 5 and len(checked) > planned["runs"]   # (plans reused)
