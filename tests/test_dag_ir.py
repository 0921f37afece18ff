"""The DAG IR: values used more than once are bindings, so every stage is linear in the
traced program (issue: compile time on value-reusing programs).

Gradients of deep, value-reusing programs (unrolled RK4, coupled map, LSTM, residual MLP)
against torch (first and second order) or, without torch, against symgrad's runtime; and size
properties that would fail on a tree IR (a region's formula, the derivative and the generated
code grow linearly with the unroll count, never exponentially).
"""
import importlib

import numpy as np
import pytest

import symgrad as sg
from deep_programs import coupled, lstm, resmlp, rk4

T = importlib.import_module("symgrad.trace")
try:
    import torch
except ImportError:  # pragma: no cover - torch is an optional oracle
    torch = None

CASES = [("rk4", rk4, 3), ("coupled", coupled, 12), ("lstm", lstm, 6), ("resmlp", resmlp, 8)]


def _reference_grads(make, n, examples):
    """Gradients of the forward at `examples`: torch's if installed, else symgrad's runtime."""
    if torch is not None:
        fwd, _ = make(n, torch)
        ts = [torch.tensor(e, dtype=torch.float64, requires_grad=True) for e in examples]
        y = fwd(*ts)
        return float(y.detach()), [g.numpy() for g in torch.autograd.grad(y, ts)]
    fwd, _ = make(n, sg)
    ts = [sg.tensor(e, dtype=sg.float64, requires_grad=True) for e in examples]
    y = fwd(*ts)
    return float(y.item()), [g.numpy() for g in sg.autograd.grad(y, ts)]


@pytest.mark.parametrize("name,make,n", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("target", ["numpy", pytest.param("c", marks=pytest.mark.slow)])
def test_deep_program_gradients(name, make, n, target):
    fwd, examples = make(n, sg)
    module = sg.compile(fwd, *examples, target=target, dtype="float64", cache_ok=False)
    value, grads = _reference_grads(make, n, examples)
    np.testing.assert_allclose(float(module.forward(*examples)), value, rtol=1e-12)
    ours = module.backward(np.ones(()), *examples)
    for g, ref in zip(ours, grads):
        np.testing.assert_allclose(g, ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("make,n", [(rk4, 3), (lstm, 16), (resmlp, 8)],
                         ids=["rk4", "lstm", "resmlp"])
def test_deep_program_saving_routines(make, n):
    """A large program's forward_saving / backward_saved (its forward's outputs are read from
    the tracer that differentiated it: _saving_plan.with_forward_outputs) equal the reference."""
    from symgrad.compiler import RuntimeModule

    fwd, examples = make(n, sg)
    module = sg.compile(fwd, *examples, dtype="float64", cache_ok=False)
    rm = RuntimeModule(module)
    assert rm.forward_saving is not None and module.stats["saving"]["saved"]
    value, grads = _reference_grads(make, n, examples)
    outs, saved = rm.forward_saving(*examples)
    np.testing.assert_allclose(float(outs[0]), value, rtol=1e-12)
    ours = rm.backward_saved(np.ones(()), *saved, *examples)
    for g, ref in zip(ours, grads):
        np.testing.assert_allclose(g, ref, rtol=1e-9, atol=1e-12)


def test_large_compile_pauses_the_cyclic_collector_and_restores_it():
    """A large program compiles with gc disabled (its passes over millions of SymPy objects
    grew with the program), and gc is enabled again after, also when compiling fails; a
    caller that disabled gc keeps it disabled."""
    import gc

    seen = []
    fwd, examples = coupled(12, sg)
    real = sg.compiler._compile_built

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    sg.compiler._compile_built = spy
    try:
        assert gc.isenabled()
        sg.compile(fwd, *examples, cache_ok=False)
        assert seen == [False] and gc.isenabled()

        def broken(*args, **kwargs):
            raise RuntimeError("boom")

        sg.compiler._compile_built = broken
        with pytest.raises(RuntimeError, match="boom"):
            sg.compile(fwd, *examples, cache_ok=False)
        assert gc.isenabled()
        sg.compiler._compile_built = spy
        gc.disable()
        try:
            sg.compile(fwd, *examples, cache_ok=False)
            assert seen[-1] is False and not gc.isenabled()
        finally:
            gc.enable()
    finally:
        sg.compiler._compile_built = real


@pytest.mark.slow
@pytest.mark.parametrize("name,make,n", [c for c in CASES if c[0] != "resmlp"],
                         ids=[c[0] for c in CASES if c[0] != "resmlp"])
def test_deep_program_second_order(name, make, n):
    """Hessian-vector products through a forward-only Function (generated second-order
    modules) against torch's double backward."""
    if torch is None:
        pytest.skip("torch is the oracle for second order")
    fwd, examples = make(n, sg)

    class Program(sg.Function):
        @staticmethod
        def forward(ctx, *xs):
            return fwd(*xs)

    rng = np.random.default_rng(3)
    vs = [rng.standard_normal(e.shape) for e in examples]
    xs = [sg.tensor(e, dtype=sg.float64, requires_grad=True) for e in examples]
    y = Program.apply(*xs)
    gs = sg.autograd.grad(y, xs, create_graph=True)
    dot = sum((g * sg.tensor(v)).sum() for g, v in zip(gs, vs))
    hv = sg.autograd.grad(dot, xs, allow_unused=True)

    tfwd, _ = make(n, torch)
    ts = [torch.tensor(e, requires_grad=True) for e in examples]
    tg = torch.autograd.grad(tfwd(*ts), ts, create_graph=True)
    thv = torch.autograd.grad(sum((g * torch.tensor(v)).sum() for g, v in zip(tg, vs)), ts,
                              allow_unused=True)
    for ours, ref in zip(hv, thv):
        if ref is None:
            assert ours is None or not np.any(ours.numpy())
            continue
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-8, atol=1e-10)


def _stage_sizes(make, n):
    """(total tree size of the forward's regions, of the VJP's, the largest region's)."""
    from symgrad.differentiate import differentiate

    fwd, examples = make(n, sg)
    graph = T.trace(fwd, *examples)
    vjp = differentiate(graph)
    memo: dict = {}
    sizes = []
    for g in (graph, vjp):
        regions = [x for x in g.nodes() if x.op == "elementwise"]
        sizes.append([T.tree_size(x.expr, memo) for x in regions])
    return sum(sizes[0]), sum(sizes[1]), max(sizes[0] + sizes[1])


@pytest.mark.parametrize("make", [rk4, coupled], ids=["rk4", "coupled"])
def test_ir_size_is_linear_in_the_unroll_count(make):
    """On a tree IR the coupled map's backward held 772 086 operations at 8 iterations and
    doubled per iteration; here 4x the iterations is at most ~4x the work, and no region grows."""
    base = 8 if make is coupled else 2
    small = _stage_sizes(make, base)
    large = _stage_sizes(make, 4 * base)
    assert large[0] <= 5 * small[0], (small, large)
    assert large[1] <= 5 * small[1], (small, large)
    assert large[2] <= 4 * T.CHAIN_MAX * 8, (small, large)   # bounded, whatever the depth


@pytest.mark.slow
def test_generated_code_size_is_linear():
    lengths = []
    for n in (10, 20, 40):
        fwd, examples = coupled(n, sg)
        lengths.append(len(sg.compile(fwd, *examples, cache_ok=False).source))
    # each doubling adds about the same amount of code (a tree IR doubled it per iteration)
    assert lengths[2] - lengths[1] <= 1.6 * (lengths[1] - lengths[0]), lengths


def test_a_value_reused_at_every_level_is_a_binding():
    """x <- x*x + x for 40 levels: 2**40 copies as a tree, 40 bindings as a DAG."""
    def forward(x):
        for _ in range(40):
            x = x * sg.sin(x) + x * 0.5
        return x.sum()

    x = np.linspace(0.1, 0.3, 5)
    graph = T.trace(forward, x)
    assert graph.dag
    assert len([n for n in graph.nodes() if n.op == "elementwise"]) >= 40
    module = sg.compile(forward, x, cache_ok=False)
    ref = sg.tensor(x, dtype=sg.float64, requires_grad=True)
    y = forward(ref)
    y.backward()
    np.testing.assert_allclose(module.forward(x), y.item(), rtol=1e-12)
    np.testing.assert_allclose(module.backward(np.ones(()), x)[0], ref.grad.numpy(),
                               rtol=1e-10)


def test_small_programs_keep_whole_formulas():
    """Below DISSOLVE_MAX operations the bindings are inlined again: the rewrites see the whole
    formula (softplus written out is rewritten to the stable primitive across a reuse)."""
    def forward(x):
        u = 2.0 * x * x + sg.sin(x) - 1.0
        return sg.log(1 + sg.exp(u)) + u * u

    x = np.array([0.5, 800.0, -800.0])
    graph = T.trace(forward, x)
    assert not graph.dag
    assert len([n for n in graph.nodes() if n.op == "elementwise"]) == 1
    module = sg.compile(forward, x, cache_ok=False)
    out = module.forward(x)
    assert np.all(np.isfinite(out)), out          # log(1 + exp(u)) at u ~ 1.3e6: softplus
    grad = module.backward(np.ones(3), x)[0]
    assert np.all(np.isfinite(grad)), grad


def test_docstring_is_a_derivation_with_named_terms():
    """A large program's docstring is a derivation: shared values are named terms read by name
    (on a tree IR it was one formula of 2**k nodes, summarized as unreadable)."""
    fwd, examples = coupled(10, sg)
    graph = T.trace(fwd, *examples)
    assert graph.dag
    source = sg.compile(fwd, *examples, cache_ok=False).source
    doc = source[source.index("def forward("):source.index("def backward(")]
    terms = [line.split("=")[0].strip() for line in doc.splitlines()
             if line.strip().startswith("v") and " = " in line]
    assert len(terms) >= 5, doc
    assert any(t in line for line in doc.splitlines() if line.strip().startswith("out =")
               for t in terms), doc
    assert "an expression of" not in doc


@pytest.mark.slow
@pytest.mark.parametrize("make,n", [(coupled, 12), (rk4, 3)], ids=["coupled", "rk4"])
def test_cuda_kernels_of_a_deep_program(make, n, tmp_path):
    """A fused CUDA loop runs a sequence of bindings: nvcc compiles it, and its per-element
    math, run on the host, matches the NumPy target."""
    import shutil
    import subprocess

    from test_target_cuda import _close, _host_module

    fwd, examples = make(n, sg)
    mod = sg.compile(fwd, *examples, target="cuda", dtype="float64", cache_ok=False)
    assert T.trace(fwd, *examples).dag
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        cu = tmp_path / "deep.cu"
        cu.write_text(next(t for name, t in mod.files.items() if name.endswith(".cu")))
        proc = subprocess.run([nvcc, "-ptx", "-arch=sm_80", "-o", str(tmp_path / "deep.ptx"),
                               str(cu)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    ref = sg.compile(fwd, *examples, target="numpy", dtype="float64", cache_ok=False)
    host = _host_module(mod, tmp_path)
    for got, want in zip(host.forward(*examples), ref.raw.forward(*examples)):
        _close(got, want, "float64")
    seed = np.ones(())
    for got, want in zip(host.backward(seed, *examples), ref.raw.backward(seed, *examples)):
        _close(got, want, "float64")


def test_large_derivation_stops_at_its_budget():
    """A large program's derivation prints terms up to its node budget, then one line saying
    the rest is in the steps (the formulas past it are never built); no summary line per term
    (RK4-100's docstring had 1 889), the same text on a second compile."""
    import sympy

    from symgrad import _formulas as FM

    fwd, examples = rk4(32, sg)
    graph = T.trace(fwd, *examples)
    assert graph.dag
    lines = FM.formula_lines(graph)
    assert "... <the remaining terms: see the steps below>" in lines, lines[-5:]
    assert lines[-1] == "out = <see the steps below>", lines[-5:]
    assert not any("an expression of" in line for line in lines)
    shown = sum(FM._tree_size(e, {}) for _, e in FM._derivation_rows(graph)[1]
                if isinstance(e, sympy.Basic))
    assert 0 < shown <= FM.MAX_TOTAL_FORMULA_NODES
    fwd2, examples2 = rk4(32, sg)
    again = T.trace(fwd2, *examples2)
    assert FM.formula_lines(again) == lines
