"""sg.to_torch on the C target: CPU tensors run the fused C module (symgrad/_torch_c.py),
checked against torch's own autograd, finite differences (gradcheck / gradgradcheck), and for
what the C path must not do: return memory a later call writes, ignore torch's thread count,
or run where it cannot (CUDA / meta tensors, float16, a create_graph backward)."""
from __future__ import annotations

import os
import shutil
import warnings

import numpy
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler")

from test_torch_target import SHAPE_CASES  # (after the skip: it imports torch)

F64, F32 = torch.float64, torch.float32


def _c_calls(G):
    """The C calls of G's call keys (None where the key runs the torch target)."""
    return [e.c for e in G.c_path.entries.values()]


def _leaves(args):
    return [a.detach().clone().requires_grad_() if a.is_floating_point() else a for a in args]


def _gelu_erf(x, w):
    z = x * w
    return 0.5 * z * (1 + (z * 0.7071067811865476).erf())


def _logsumexp_rows(x):
    return x.logsumexp(1)


def _layernorm(x, weight, bias):
    m = x.mean(1, keepdim=True)
    v = ((x - m) ** 2).mean(1, keepdim=True)
    return (x - m) / (v + 1e-5).sqrt() * weight + bias


def _mlp_loss(x, W1, b1, W2, b2, y):
    h = (x @ W1 + b1).tanh()
    return ((h @ W2 + b2 - y) ** 2).mean()


def _with_index(x, w):
    return (x * w).sin(), x.argmax(-1)


CASES = [
    ("elementwise", _gelu_erf, lambda: [torch.randn(64), torch.randn(64)]),
    ("broadcasting", _gelu_erf, lambda: [torch.randn(8, 16), torch.randn(16)]),
    ("reduction", _logsumexp_rows, lambda: [torch.randn(8, 33)]),
    ("layernorm", _layernorm, lambda: [torch.randn(6, 20), torch.randn(20), torch.randn(20)]),
    ("matmul", _mlp_loss, lambda: [torch.randn(16, 3), torch.randn(3, 8), torch.randn(8),
                                   torch.randn(8, 1), torch.randn(1), torch.randn(16, 1)]),
    ("non_differentiable_output", _with_index, lambda: [torch.randn(5, 7), torch.randn(7)]),
] + [c for c in SHAPE_CASES if c[0] in ("two_outputs", "reductions", "matmul", "gather")]


def _compare(G, fn, args, dtype, rtol):
    args = [a.to(dtype).requires_grad_() if a.is_floating_point() else a for a in args]
    ref = _leaves(args)
    ours, theirs = G.apply(*args), fn(*ref)
    ours_t = ours if isinstance(ours, tuple) else (ours,)
    theirs_t = theirs if isinstance(theirs, tuple) else (theirs,)
    for a, b in zip(ours_t, theirs_t):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=rtol, atol=rtol)
    floats = [a for a in args if a.is_floating_point()]
    ref_floats = [a for a in ref if a.is_floating_point()]
    diff = [(a, b) for a, b in zip(ours_t, theirs_t) if a.is_floating_point()]
    seeds = [torch.randn_like(b) for _, b in diff]
    g1 = torch.autograd.grad([a for a, _ in diff], floats, seeds)
    g2 = torch.autograd.grad([b for _, b in diff], ref_floats, seeds)
    for a, b in zip(g1, g2):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=rtol, atol=rtol)
    return args


@pytest.mark.parametrize("dtype", [F64, F32], ids=["float64", "float32"])
@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_first_order_on_c_matches_torch_autograd(name, fn, make, dtype):
    torch.manual_seed(0)
    G = sg.to_torch(fn, target="c")
    _compare(G, fn, make(), dtype, 1e-10 if dtype == F64 else 2e-5)
    assert G.runs == {"c": 1, "torch": 0}
    (c,) = _c_calls(G)
    assert c.is_c and c.rm.compiled.target == "c"


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_second_order_falls_back_to_the_torch_target(name, fn, make):
    """create_graph: the backward of a C forward runs the torch target's generated
    second-order path; first and second derivatives equal torch's."""
    torch.manual_seed(1)
    args = [a.double().requires_grad_() if a.is_floating_point() else a for a in make()]
    ref = _leaves(args)
    G = sg.to_torch(fn, target="c")
    outs, theirs = G.apply(*args), fn(*ref)
    outs = outs if isinstance(outs, tuple) else (outs,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    floats = [a for a in args if a.is_floating_point()]
    ref_floats = [a for a in ref if a.is_floating_point()]
    s1 = sum((o * (i + 1.5)).sum() for i, o in enumerate(outs) if o.is_floating_point())
    s2 = sum((o * (i + 1.5)).sum() for i, o in enumerate(theirs) if o.is_floating_point())
    g1 = torch.autograd.grad(s1, floats, create_graph=True)
    g2 = torch.autograd.grad(s2, ref_floats, create_graph=True)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    h1 = torch.autograd.grad(sum((g * g).sum() for g in g1), floats, allow_unused=True)
    h2 = torch.autograd.grad(sum((g * g).sum() for g in g2), ref_floats, allow_unused=True)
    for a, b in zip(h1, h2):
        if a is None or b is None:
            left = a if a is not None else b
            assert left is None or float(left.abs().max()) < 1e-12
        else:
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    assert G.runs["c"] == 1
    assert G.modules.by_signature    # the torch target's module: compiled for the backward


@pytest.mark.parametrize("name,fn,make", [c for c in CASES if c[0] in (
    "elementwise", "broadcasting", "layernorm", "matmul", "non_differentiable_output",
    "two_outputs")], ids=lambda v: v if isinstance(v, str) else "")
def test_gradcheck_and_gradgradcheck(name, fn, make):
    torch.manual_seed(2)
    args = tuple(a.double().requires_grad_() if a.is_floating_point() else a for a in make())
    G = sg.to_torch(fn, target="c")
    assert torch.autograd.gradcheck(G.apply, args)
    assert torch.autograd.gradgradcheck(G.apply, args)
    assert G.runs["c"] > 0


def test_outputs_and_gradients_never_alias_a_later_call():
    torch.manual_seed(3)
    G = sg.to_torch(_gelu_erf, target="c")
    x = torch.randn(1000, requires_grad=True)
    w = torch.randn(1000, requires_grad=True)
    y1 = G.apply(x, w)
    g1 = torch.autograd.grad(y1.sum(), (x, w))
    keep_y, keep_g = y1.clone(), [g.clone() for g in g1]
    y2 = G.apply(2 * x.detach(), w)
    g2 = torch.autograd.grad(G.apply(x, 3 * w.detach()).sum(), x)
    torch.testing.assert_close(y1, keep_y, rtol=0, atol=0)
    for a, b in zip(g1, keep_g):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    storages = {t.untyped_storage().data_ptr() for t in (y1, y2, *g1, *g2, x, w)}
    assert len(storages) == 7
    # an output the module returns as one of its inputs is a copy, not the input's memory
    H = sg.to_torch(lambda a, b: (a, a * b), target="c")
    a, b = torch.randn(5, requires_grad=True), torch.randn(5)
    out0, _ = H.apply(a, b)
    assert out0.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
    before = a.detach().clone()
    with torch.no_grad():
        out0.add_(1.0)
    torch.testing.assert_close(a.detach(), before, rtol=0, atol=0)
    # a gradient that is the incoming gradient itself is handed back as it came, as torch's
    # own AddBackward does (no tensor of ours shares its memory under another identity)
    S = sg.to_torch(lambda p, q: p + q, target="c")
    p, q = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    seed = torch.randn(4)
    gp, gq = torch.autograd.grad(S.apply(p, q), (p, q), seed)
    ep, eq = torch.autograd.grad(p + q, (p, q), seed)
    assert (gp is seed, gq is seed) == (ep is seed, eq is seed) == (True, True)


def test_non_contiguous_and_expanded_inputs():
    torch.manual_seed(4)
    G = sg.to_torch(_gelu_erf, target="c")
    base = torch.randn(16, 8, dtype=F64)
    cases = [
        (base.t(), torch.randn(16, dtype=F64)),                         # transposed
        (base[:, ::2], torch.randn(4, dtype=F64)),                      # strided
        (torch.randn(8, 1, dtype=F64).expand(8, 5), torch.randn(5, dtype=F64)),   # stride 0
    ]
    for x0, w0 in cases:
        assert not x0.is_contiguous()
        x, w = x0.detach().requires_grad_(), w0.detach().requires_grad_()
        y = G.apply(x, w)
        gx, gw = torch.autograd.grad(y, (x, w), torch.cos(y))
        xr, wr = x0.detach().clone().requires_grad_(), w0.detach().clone().requires_grad_()
        yr = _gelu_erf(xr, wr)
        rx, rw = torch.autograd.grad(yr, (xr, wr), torch.cos(yr))
        torch.testing.assert_close(y, yr, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(gx, rx, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(gw, rw, rtol=1e-12, atol=1e-12)
    assert G.runs["torch"] == 0
    # a gradient torch hands over expanded (the backward of .sum()): read as it is
    x = torch.randn(6, 7, dtype=F64, requires_grad=True)
    w = torch.randn(7, dtype=F64, requires_grad=True)
    G.apply(x, w).sum().backward()
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    _gelu_erf(xr, wr).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w.grad, wr.grad, rtol=1e-12, atol=1e-12)


def test_tiered_first_calls_torch_target_then_c(auto):
    def softsign_chain(x, w):     # a forward of its own: nothing of another test in memory
        return (x * w).sin().exp() / (1 + (x - w).abs())

    G = sg.to_torch(softsign_chain)
    torch.manual_seed(5)
    x = torch.randn(50, dtype=F64, requires_grad=True)
    w = torch.randn(50, dtype=F64, requires_grad=True)
    results = []
    for _ in range(2):
        y = G.apply(x, w)
        results.append((y.detach(), torch.autograd.grad(y.sum(), (x, w))))
    assert G.runs == {"c": 0, "torch": 2}
    assert _c_calls(G) == [None]
    assert sg.wait_for_builds(120)
    y = G.apply(x, w)
    results.append((y.detach(), torch.autograd.grad(y.sum(), (x, w))))
    assert G.runs == {"c": 1, "torch": 2}
    (c,) = _c_calls(G)
    assert c.is_c
    for y, (gx, gw) in results[1:]:
        torch.testing.assert_close(y, results[0][0], rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(gx, results[0][1][0], rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(gw, results[0][1][1], rtol=1e-12, atol=1e-14)
    # another Function of the same forward finds the built module: C from its first call
    H = sg.to_torch(softsign_chain)
    H.apply(x, w)
    assert H.runs == {"c": 1, "torch": 0}


def test_pinned_numpy_cpu_target_means_the_torch_target():
    assert sg.get_cpu_target() == "numpy"      # tests/conftest.py
    G = sg.to_torch(_gelu_erf)
    x = torch.randn(10, requires_grad=True)
    G.apply(x, x).sum().backward()
    assert G.runs == {"c": 0, "torch": 1}
    assert _c_calls(G) == [None]


def test_cpu_target_c_builds_before_the_first_call():
    previous = sg.set_cpu_target("c")
    try:
        G = sg.to_torch(_gelu_erf)
        x = torch.randn(10, requires_grad=True)
        G.apply(x, x).sum().backward()
        assert G.runs == {"c": 1, "torch": 0}
        # not pinned by the call: a tensor C cannot take runs the torch target, no error
        meta = torch.empty(10, device="meta")
        assert G.apply(meta, meta).device.type == "meta"
        assert G.runs == {"c": 1, "torch": 1}
    finally:
        sg.set_cpu_target(previous)


def test_no_compiler_means_the_torch_target_and_one_warning(auto, monkeypatch):
    monkeypatch.setenv("CC", "symgrad-no-such-cc")
    G = sg.to_torch(lambda x: (x * 1.5).tanh())
    x = torch.randn(7, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            G.apply(x).sum().backward()
    msgs = [str(w.message) for w in caught if "symgrad" in str(w.message)]
    assert len(msgs) == 1 and "no C compiler" in msgs[0] and "sg.to_torch" in msgs[0]
    assert G.runs == {"c": 0, "torch": 3}


def test_target_pins_and_their_errors():
    x = torch.randn(4, requires_grad=True)
    T = sg.to_torch(_gelu_erf, target="torch")
    T.apply(x, x).sum().backward()
    assert T.runs == {"c": 0, "torch": 0} and T.c_path is None     # nothing to choose
    C = sg.to_torch(_gelu_erf, target="c")
    meta = torch.empty(4, device="meta")
    with pytest.raises(ValueError, match=r"target='c' runs the C module on CPU tensors.*meta"):
        C.apply(meta, meta)
    with pytest.raises(TypeError, match="argument 0 is float16.*float32 or float64"):
        C.apply(x.half(), x.half())
    with pytest.raises(TypeError, match="argument 0 is bfloat16"):
        C.apply(x.bfloat16(), x.bfloat16())
    with pytest.raises(ValueError, match="target must be None.*'torch' or 'c'"):
        sg.to_torch(_gelu_erf, target="cuda")
    with pytest.raises(ValueError, match="compile=True.*target='c'"):
        sg.to_torch(_gelu_erf, target="c", compile=True)
    # the default on a meta tensor (no CUDA here) runs the torch target, as on CUDA
    D = sg.to_torch(_gelu_erf)
    out = D.apply(meta, meta)
    assert out.device.type == "meta" and D.runs["c"] == 0


def test_threads_follow_torch_get_num_threads(monkeypatch, tmp_path):
    monkeypatch.setenv("SYMGRAD_NUM_THREADS", "2")      # a library with OpenMP loops
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))

    def cube_sin(x):             # a forward of its own: its library is built here
        return (x * x * x).sin()

    G = sg.to_torch(cube_sin, target="c")
    x = torch.randn(200_000, dtype=F64, requires_grad=True)
    old = torch.get_num_threads()
    try:
        seen = []
        for n in (1, 2, 1):
            torch.set_num_threads(n)
            y = G.apply(x)
            (c,) = _c_calls(G)
            seen.append(c.threads.value)
            g, = torch.autograd.grad(y.sum(), x)
            seen.append(c.threads.value)
            torch.testing.assert_close(g, 3 * x.detach() ** 2 * torch.cos(x.detach() ** 3))
        assert seen == [1, 1, 2, 2, 1, 1]
    finally:
        torch.set_num_threads(old)


def test_mixed_dtypes_constants_and_needs_input_grad():
    def scaled(x, w, k):
        return (x * w * k).sin()

    G = sg.to_torch(scaled, target="c")
    T = sg.to_torch(scaled, target="torch")
    x = torch.randn(6, dtype=F32, requires_grad=True)
    w = torch.randn(6, dtype=F64, requires_grad=True)
    for k in (2.0, 3.0):
        a, b = G.apply(x, w, k), T.apply(x, w, k)
        assert a.dtype == b.dtype == F64
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
        ga = torch.autograd.grad(a.sum(), (x, w))
        gb = torch.autograd.grad(b.sum(), (x, w))
        for p, q in zip(ga, gb):
            assert p.dtype == q.dtype
            torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-6)
    assert len(G.c_path.entries) == 2 and G.runs == {"c": 2, "torch": 0}
    # only x needs a gradient: w's is not returned (torch would refuse an unused one too)
    w2 = w.detach()
    gx, = torch.autograd.grad(G.apply(x, w2, 2.0).sum(), x)
    torch.testing.assert_close(gx, (w2 * 2 * torch.cos(x * w2 * 2)).float(), rtol=1e-5,
                               atol=1e-6)


def test_an_output_of_float32_inputs_alone_stays_float32_on_c():
    """Mixed float32 / float64 inputs: torch promotes op by op, so an output computed from
    float32 inputs alone is float32 (the torch target casts it since the fuzzer's seeds 9-20;
    the C path returned the module's float64 for all three outputs here), and its float32
    gradient reaches the C backward in the module's dtype."""
    def f(x, y, W):
        return x.sin() * 2, x * y, (x @ W).tanh()

    G = sg.to_torch(f, target="c")
    x = torch.rand(3, 4, dtype=F32, requires_grad=True)
    y = torch.rand(3, 4, dtype=F64, requires_grad=True)
    W = torch.rand(4, 2, dtype=F32, requires_grad=True)
    got, want = G.apply(x, y, W), f(x, y, W)
    assert [o.dtype for o in got] == [o.dtype for o in want] == [F32, F64, F32]
    for o, r in zip(got, want):
        torch.testing.assert_close(o, r, rtol=1e-6, atol=1e-6)
    ga = torch.autograd.grad(sum(o.sum() for o in got), (x, y, W))
    gb = torch.autograd.grad(sum(o.sum() for o in want), (x, y, W))
    for p, q in zip(ga, gb):
        assert p.dtype == q.dtype
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert G.runs == {"c": 1, "torch": 0}


def test_captured_arrays_are_read_on_each_call():
    table = numpy.linspace(0.5, 1.5, 8)

    def weighted(x):
        return (x * sg.tensor(table)).exp()

    G = sg.to_torch(weighted, target="c")
    x = torch.randn(8, dtype=F64, requires_grad=True)
    y = G.apply(x)
    g, = torch.autograd.grad(y.sum(), x)
    tt = torch.from_numpy(table)
    torch.testing.assert_close(y, torch.exp(x * tt))
    torch.testing.assert_close(g, tt * torch.exp(x * tt))
    assert G.runs == {"c": 1, "torch": 0}


def test_saving_plan_and_saved_tensor_semantics():
    """The C module's forward_saving / backward_saved; an input modified in place before the
    backward is refused as torch refuses it; a second backward needs retain_graph."""
    G = sg.to_torch(_gelu_erf, target="c")
    x = torch.randn(300, dtype=F64, requires_grad=True)
    w = torch.randn(300, dtype=F64, requires_grad=True)
    y = G.apply(x, w)
    (c,) = _c_calls(G)
    assert c.saving is not None     # erf and the products are kept for the backward
    g1 = torch.autograd.grad(y.sum(), x, retain_graph=True)[0]
    g2 = torch.autograd.grad(y.sum(), x)[0]
    torch.testing.assert_close(g1, g2, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(y.sum(), x)
    y = G.apply(x, w)
    with torch.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_compiled_module_as_F():
    torch.manual_seed(6)
    x0, w0 = numpy.random.default_rng(0).standard_normal((2, 5, 4))
    for target in ("numpy", "c"):
        module = sg.compile(_gelu_erf, x0, w0, target=target)
        G = sg.to_torch(module, target="c")
        x = torch.tensor(x0, requires_grad=True)
        w = torch.tensor(w0, requires_grad=True)
        y = G.apply(x, w)
        gx, gw = torch.autograd.grad(y.sum(), (x, w))
        xr, wr = _leaves([x, w])
        yr = _gelu_erf(xr, wr)
        rx, rw = torch.autograd.grad(yr.sum(), (xr, wr))
        torch.testing.assert_close(y, yr)
        torch.testing.assert_close(gx, rx)
        torch.testing.assert_close(gw, rw)
        assert G.runs == {"c": 1, "torch": 0}


def test_torch_compile_traces_the_torch_target():
    """Inside torch.compile's tracing the torch target runs (its ops are what dynamo can
    capture; a call key that started on C compiled it too); outside, the same Function runs
    C."""
    torch._dynamo.reset()
    G = sg.to_torch(_gelu_erf)
    previous = sg.set_cpu_target("c")
    try:
        x = torch.randn(12, requires_grad=True)
        w = torch.randn(12, requires_grad=True)

        def user(a, b):
            return G.apply(a, b).sum()

        want = user(x, w)
        assert G.runs["c"] == 1
        compiled = torch.compile(user, backend="eager", fullgraph=True)
        got = compiled(x, w)
        gx, = torch.autograd.grad(got, x)
        assert G.runs["c"] == 1
        rx, = torch.autograd.grad(want, x)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(gx, rx, rtol=1e-6, atol=1e-6)
    finally:
        sg.set_cpu_target(previous)


def test_double_backward_through_torch_ops_after_a_c_forward():
    G = sg.to_torch(_gelu_erf, target="c", double_backward="torch")
    args = (torch.randn(6, dtype=F64, requires_grad=True),
            torch.randn(6, dtype=F64, requires_grad=True))
    assert torch.autograd.gradgradcheck(G.apply, args)
    assert G.runs["c"] > 0
