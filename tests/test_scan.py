"""sg.scan and sg.fori_loop: loops traced and differentiated once, emitted as loops
(issue 18, item 5).

Against the unrolled program and against torch (a Python loop), first and second order, on
runtime tensors (eager) and compiled (NumPy and C targets); the generated module holds one
loop whose size does not depend on the step count; every bad input is a clear error.
"""
import numpy as np
import pytest

import symgrad as sg
from deep_programs import rk4, rk4_scan

try:
    import torch
except ImportError:  # pragma: no cover - torch is an optional oracle
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is the oracle")
H = 8


def _compile(fwd, examples, target="numpy"):
    return sg.compile(fwd, *examples, target=target, dtype="float64", cache_ok=False)


def _first(value):
    return value[0] if isinstance(value, tuple) else value


# --------------------------------------------------------------------------- programs
def lstm_scan(m, scan):
    """An LSTM over the rows of xs, its weights read by the cell through its closure; the
    loss reads the final state and every step's h (the ys)."""
    def forward(xs, Wx, Wh, b):
        def cell(state, x):
            h, c = state
            z = x @ Wx + h @ Wh + b
            i, f = m.sigmoid(z[:, 0:H]), m.sigmoid(z[:, H:2 * H])
            g, o = m.tanh(z[:, 2 * H:3 * H]), m.sigmoid(z[:, 3 * H:4 * H])
            c = f * c + i * g
            h = o * m.tanh(c)
            return (h, c), h

        h0 = (xs[0] @ Wx)[:, 0:H] * 0.0 + 0.1   # no captured array: the CUDA check's raw call
        (h, c), hs = scan(cell, (h0, h0 * 0.5), xs)
        if isinstance(hs, list):
            hs = m.stack(hs)
        return (h * h).sum() + 0.1 * (hs ** 2).sum() + c.sum()

    rng = np.random.default_rng(0)
    return forward, (rng.standard_normal((5, 3, 4)), 0.3 * rng.standard_normal((4, 4 * H)),
                     0.3 * rng.standard_normal((H, 4 * H)), 0.1 * rng.standard_normal(4 * H))


def tuple_reverse(m, scan):
    """A reverse scan with a nested tuple carry, two xs and a tuple of ys."""
    def forward(a, b, u, v):
        def step(carry, x):
            (p, q), r = carry
            xu, xv = x
            p2 = p * m.cos(xu) + 0.3 * q
            q2 = q + 0.1 * m.sin(p * xv) * r
            return ((p2, q2), r * 0.9 + 0.01 * xu), (p2 * q2, xv * p)

        ((p, q), r), (ys1, ys2) = scan(step, ((a, b), a * 0.5), (u, v), reverse=True)
        if isinstance(ys1, list):
            ys1, ys2 = m.stack(ys1), m.stack(ys2)
        w = m.arange(1, ys1.shape[0] + 1, dtype=m.float64).reshape(-1, 1)
        return (p * q).sum() + r.sum() + (ys1 * w).sum() + (ys2 * ys2 * w).sum()

    rng = np.random.default_rng(1)
    return forward, (rng.standard_normal(3), rng.standard_normal(3),
                     rng.standard_normal((6, 3)), rng.standard_normal((6, 3)))


def fori(m, loop):
    def forward(x, w):
        def body(i, val):
            y, acc = val
            y = 0.8 * y * m.cos(w) + 0.05 * i
            return y, acc + y * y
        y, acc = loop(0, 7, body, (x, x * 0.0))
        return acc.sum() + (y * w).sum()

    rng = np.random.default_rng(2)
    return forward, (rng.standard_normal(4), rng.standard_normal(4))


def _torch_fori(lower, upper, body, val):
    for i in range(lower, upper):
        val = body(i, val)
    return val


def _loop_scan(f, init, xs=None, length=None, reverse=False):
    from deep_programs import loop_scan

    if xs is not None:
        xs = list(zip(*xs)) if isinstance(xs, tuple) else xs
    carry, ys = loop_scan(f, init, xs, length, reverse)
    if ys and isinstance(ys[0], tuple):
        ys = tuple(list(col) for col in zip(*ys))
    return carry, ys


PROGRAMS = {
    "lstm": (lambda m: lstm_scan(m, m.scan if m is sg else _loop_scan)),
    "tuple_reverse": (lambda m: tuple_reverse(m, m.scan if m is sg else _loop_scan)),
    "fori": (lambda m: fori(m, sg.fori_loop if m is sg else _torch_fori)),
    "rk4": (lambda m: rk4_scan(4, m)),
}


def _torch_grads(name, examples, vs=None):
    fwd, _ = PROGRAMS[name](torch)
    ts = [torch.tensor(e, requires_grad=True) for e in examples]
    y = fwd(*ts)
    gs = torch.autograd.grad(y, ts, create_graph=vs is not None)
    if vs is None:
        return float(y.detach()), [g.numpy() for g in gs]
    dot = sum((g * torch.tensor(v)).sum() for g, v in zip(gs, vs))
    return [h.numpy() for h in torch.autograd.grad(dot, ts)]


# --------------------------------------------------------------------------- gradients
@needs_torch
@pytest.mark.parametrize("target", ["numpy", pytest.param("c", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_compiled_scan_first_order_matches_torch(name, target):
    fwd, examples = PROGRAMS[name](sg)
    module = _compile(fwd, examples, target)
    value, grads = _torch_grads(name, examples)
    np.testing.assert_allclose(float(_first(module.forward(*examples))), value, rtol=1e-12)
    for ours, ref in zip(module.backward(np.ones(()), *examples), grads):
        np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)


def _hvp_symgrad(fwd, examples, vs):
    class Program(sg.Function):
        @staticmethod
        def forward(ctx, *xs):
            return fwd(*xs)

    xs = [sg.tensor(e, dtype=sg.float64, requires_grad=True) for e in examples]
    gs = sg.autograd.grad(Program.apply(*xs), xs, create_graph=True)
    dot = sum((g * sg.tensor(v)).sum() for g, v in zip(gs, vs))
    return [h.numpy() for h in sg.autograd.grad(dot, xs)]


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_compiled_scan_second_order_matches_torch(name):
    """Hessian-vector products through generated modules (the backward is a reverse scan;
    its derivative a scan again) against torch's double backward."""
    fwd, examples = PROGRAMS[name](sg)
    rng = np.random.default_rng(3)
    vs = [rng.standard_normal(e.shape) for e in examples]
    for ours, ref in zip(_hvp_symgrad(fwd, examples, vs), _torch_grads(name, examples, vs)):
        np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_eager_scan_first_and_second_order_match_torch(name):
    fwd, examples = PROGRAMS[name](sg)
    rng = np.random.default_rng(4)
    vs = [rng.standard_normal(e.shape) for e in examples]
    xs = [sg.tensor(e, dtype=sg.float64, requires_grad=True) for e in examples]
    y = fwd(*xs)
    value, grads = _torch_grads(name, examples)
    np.testing.assert_allclose(float(y.item()), value, rtol=1e-12)
    gs = sg.autograd.grad(y, xs, create_graph=True)
    for ours, ref in zip(gs, grads):
        np.testing.assert_allclose(ours.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    dot = sum((g * sg.tensor(v)).sum() for g, v in zip(gs, vs))
    hv = sg.autograd.grad(dot, xs)
    for ours, ref in zip(hv, _torch_grads(name, examples, vs)):
        np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-9, atol=1e-12)


def test_scan_equals_the_unrolled_program():
    """The loop and the unrolled integrator (tests/deep_programs.py) compile to the same
    numbers, value and gradient."""
    loop, examples = rk4_scan(5, sg)
    unrolled, _ = rk4(5, sg)
    a, b = _compile(loop, examples), _compile(unrolled, examples)
    np.testing.assert_allclose(a.forward(*examples), b.forward(*examples), rtol=1e-13)
    for x, y in zip(a.backward(np.ones(()), *examples), b.backward(np.ones(()), *examples)):
        np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-14)


def test_ys_and_final_carry_as_outputs():
    """The stacked ys and the carry are outputs of the compiled module, equal to the eager
    loop's."""
    def fwd(x, w):
        def step(c, xt):
            c = sg.tanh(c * w + xt)
            return c, c * 2.0
        return sg.scan(step, x[0], x)

    x, w = np.linspace(-1, 1, 12).reshape(4, 3), np.array([0.5, -0.7, 1.1])
    module = _compile(fwd, (x, w))
    final, ys = module.forward(x, w)
    e_final, e_ys = fwd(sg.tensor(x), sg.tensor(w))
    np.testing.assert_allclose(final, e_final.numpy(), rtol=1e-14)
    np.testing.assert_allclose(ys, e_ys.numpy(), rtol=1e-14)
    assert ys.shape == (4, 3)


# --------------------------------------------------------------------------- emitted loops
def _source(n, target="numpy"):
    fwd, examples = rk4_scan(n, sg)
    module = _compile(fwd, examples, target)
    return "\n".join(t for name, t in sorted(module.files.items()) if name.endswith(".py"))


def test_generated_module_is_a_loop_of_constant_size():
    small, large = _source(10), _source(10_000)
    assert "for _t in range(10000)" in large and "for _t in range(10000 - 1, -1, -1)" in large
    assert "numpy.sin(" in large   # the body's statements are inside the loop
    # only the step count and the packed sizes differ: same number of lines
    assert abs(len(large.splitlines()) - len(small.splitlines())) <= 2
    assert abs(len(large) - len(small)) < 200
    assert _source(10) == small   # deterministic


@pytest.mark.slow
def test_c_target_runs_the_loop_in_c():
    """An elementwise body is one C segment: the loop itself is a C function (one ctypes call
    runs every step), around the body's fused loop."""
    fwd, examples = rk4_scan(1000, sg)
    files = _compile(fwd, examples, "c").files
    c_text = next(t for name, t in files.items() if name.endswith(".c"))
    loader = next(t for name, t in files.items() if name.endswith("_grad_c.py"))
    assert c_text.count("for (int64_t s = 0; s < 1000; ++s)") == 2   # forward and backward
    assert "const int64_t t = 999 - s;" in c_text                     # the reverse loop
    assert "# C: the loop of sg.scan (1000 steps)" in loader
    assert "for _t in range" not in loader
    fwd, examples = rk4_scan(30, sg)
    unrolled, _ = rk4(30, sg)
    a = _compile(fwd, examples, "c")
    b = _compile(unrolled, examples)
    np.testing.assert_allclose(a.forward(*examples), b.forward(*examples), rtol=1e-12)


@pytest.mark.slow
def test_cuda_target_compiles_and_matches_on_the_host(tmp_path):
    """The CUDA target: its loader runs the loop (CuPy calls per step; NumPy standing in
    here), the .cu of the rest compiles with nvcc."""
    import shutil
    import subprocess

    from test_target_cuda import _close, _host_module

    fwd, examples = PROGRAMS["lstm"](sg)
    mod = sg.compile(fwd, *examples, target="cuda", dtype="float64", cache_ok=False)
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        cu = tmp_path / "scan.cu"
        cu.write_text(next(t for name, t in mod.files.items() if name.endswith(".cu")))
        proc = subprocess.run([nvcc, "-ptx", "-arch=sm_80", "-o", str(tmp_path / "scan.ptx"),
                               str(cu)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    ref = _compile(fwd, examples)
    host = _host_module(mod, tmp_path)
    for got, want in zip(host.forward(*examples), ref.raw.forward(*examples)):
        _close(got, want, "float64")
    seed = np.ones(())
    for got, want in zip(host.backward(seed, *examples), ref.raw.backward(seed, *examples)):
        _close(got, want, "float64")


def test_fori_loop_three_argument_form_and_eager_index():
    seen = []

    def body(i, v):
        seen.append(i)
        return v * 2.0 + i

    out = sg.fori_loop(3, body, sg.tensor([1.0]))
    assert seen == [0, 1, 2] and float(out.item()) == ((1 * 2 + 0) * 2 + 1) * 2 + 2

    def fwd(x):
        return sg.fori_loop(2, 5, lambda i, v: v * 0.5 + i, x).sum()

    module = _compile(fwd, (np.array([1.0, 3.0]),))
    want = np.array([1.0, 3.0])
    for i in range(2, 5):
        want = want * 0.5 + i
    np.testing.assert_allclose(module.forward(np.array([1.0, 3.0])), want.sum())
    np.testing.assert_allclose(module.backward(np.ones(()), np.array([1.0, 3.0]))[0],
                               [0.125, 0.125])


def test_scan_with_length_only_and_captured_array():
    """xs=None with length; a NumPy array captured by the body is a constant of the loop."""
    table = np.array([0.5, 2.0, -1.0])

    def fwd(x):
        carry, _ = sg.scan(lambda c, _: (sg.sin(c) * table + c, None), x, length=3)
        return carry.sum()

    x = np.array([0.1, 0.2, 0.3])
    module = _compile(fwd, (x,))
    c = x.copy()
    for _ in range(3):
        c = np.sin(c) * table + c
    np.testing.assert_allclose(module.forward(x), c.sum(), rtol=1e-14)
    ours = module.backward(np.ones(()), x)[0]
    eps = 1e-6
    fd = [(fwd(sg.tensor(x + eps * e)).item() - fwd(sg.tensor(x - eps * e)).item()) / (2 * eps)
          for e in np.eye(3)]
    np.testing.assert_allclose(ours, fd, rtol=1e-7, atol=1e-9)


# --------------------------------------------------------------------------- bad input
def _traced(fwd, *examples):
    return sg.trace(fwd, *examples)


BAD = np.ones((4, 3))


@pytest.mark.parametrize("mode", ["eager", "traced"])
def test_errors_name_the_argument_and_the_line(mode):
    def run(fwd, *examples):
        if mode == "eager":
            return fwd(*[sg.tensor(e) for e in examples])
        return _traced(fwd, *examples)

    def grows(x):
        return sg.scan(lambda c, _: (sg.cat([c, c]), None), x[0], length=2)[0].sum()

    with pytest.raises(sg.ShapeError, match=r"sg.scan: the body .* returned a carry carry of "
                       r"shape \(6,\), but init's is \(3,\).*test_scan.py:\d+"):
        run(grows, BAD)

    def mismatched(x):
        return sg.scan(lambda c, xt: (c + xt[0] * xt[1], None), x[0], (x, x[:3]))[0].sum()

    with pytest.raises(sg.ShapeError, match=r"mismatched leading lengths \(xs\[0\] has 4, "
                       r"xs\[1\] has 3\).*test_scan.py:\d+"):
        run(mismatched, BAD)

    def disagree(x):
        return sg.scan(lambda c, xt: (c + xt, None), x[0], x, length=5)[0].sum()

    with pytest.raises(sg.ShapeError, match=r"length=5 disagrees with the leading length of "
                       r"xs \(xs has 4\)"):
        run(disagree, BAD)

    def no_length(x):
        return sg.scan(lambda c, xt: (c, None), x)[0].sum()

    with pytest.raises(ValueError, match=r"with xs=None give length="):
        run(no_length, BAD)

    def not_a_pair(x):
        return sg.scan(lambda c, xt: c + xt, x[0], x)[0].sum()

    with pytest.raises(sg.TraceError, match=r"must return \(carry, y\), got Tensor|must "
                       r"return \(carry, y\), got SymbolicTensor"):
        run(not_a_pair, BAD)

    def string_y(x):
        return sg.scan(lambda c, xt: (c + xt, "y"), x[0], x)[0].sum()

    with pytest.raises(sg.TraceError, match=r"sg.scan: y is a str, not a tensor"):
        run(string_y, BAD)

    def structure(x):
        return sg.scan(lambda c, xt: ((c[0], c[1], c[0]), None), (x[0], x[1]), x)[0][0].sum()

    with pytest.raises(sg.TraceError, match=r"carry of structure \(tensor, tensor, tensor\), "
                       r"but init is \(tensor, tensor\)"):
        run(structure, BAD)

    def zero_d_xs(x):
        return sg.scan(lambda c, xt: (c, None), x[0], x.sum())[0].sum()

    with pytest.raises(sg.ShapeError, match=r"xs is 0-d"):
        run(zero_d_xs, BAD)


def test_traced_errors_dtype_and_generic():
    def to_bool(x):
        return sg.scan(lambda c, xt: (c > 0, None), x[0], x)[0].sum()

    with pytest.raises(sg.TraceError, match=r"returned a carry carry of dtype bool, but init's "
                       r"is float"):
        _traced(to_bool, BAD)

    def fwd(x):
        return sg.scan(lambda c, xt: (c + xt, None), x[0], x)[0].sum()

    with pytest.raises(sg.TraceError, match=r"shape-generic trace"):
        sg.trace(fwd)
    with pytest.raises(TypeError, match=r"sg.fori_loop: upper must be a Python int"):
        sg.fori_loop(0, 2.5, lambda i, v: v, sg.tensor(1.0))
    with pytest.raises(TypeError, match=r"sg.fori_loop takes"):
        sg.fori_loop(lambda i, v: v, sg.tensor(1.0))


# --------------------------------------------------------------------------- more shapes of loops
def _nested(m, scan):
    """A scan whose body runs a scan (an inner fixed-point-like loop per outer step)."""
    def forward(x, w):
        def outer(c, xt):
            def inner(d, _):
                return 0.5 * d + 0.2 * m.sin(d * w + xt), None
            d, _ = scan(inner, c, length=3)
            return d + 0.1 * c, d * d
        c, ys = scan(outer, x[0], x)
        if isinstance(ys, list):
            ys = m.stack(ys)
        return (c * c).sum() + ys.sum()

    rng = np.random.default_rng(5)
    return forward, (rng.standard_normal((4, 3)), rng.standard_normal(3))


@needs_torch
def test_nested_scan_first_and_second_order():
    fwd, examples = _nested(sg, sg.scan)
    tfwd, _ = _nested(torch, _loop_scan)
    ts = [torch.tensor(e, requires_grad=True) for e in examples]
    y = tfwd(*ts)
    tg = torch.autograd.grad(y, ts, create_graph=True)
    module = _compile(fwd, examples)
    np.testing.assert_allclose(float(module.forward(*examples)), float(y.detach()), rtol=1e-12)
    for ours, ref in zip(module.backward(np.ones(()), *examples), tg):
        np.testing.assert_allclose(ours, ref.detach().numpy(), rtol=1e-9, atol=1e-12)
    assert module.source.count("for _t in range(3)") >= 1   # the inner loop, once
    vs = [np.ones(e.shape) for e in examples]
    thv = torch.autograd.grad(sum((g * torch.tensor(v)).sum() for g, v in zip(tg, vs)), ts)
    for ours, ref in zip(_hvp_symgrad(fwd, examples, vs), thv):
        np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-9, atol=1e-12)


def test_zero_steps():
    """length 0: the carry is init, the ys are empty with the step's shape (eager and
    compiled agree)."""
    def fwd(x):
        c, ys = sg.scan(lambda c, xt: (c * xt, c + xt), x[0], x[:0])
        return c, ys

    x = np.arange(6.0).reshape(2, 3) + 1
    c, ys = _compile(fwd, (x,)).forward(x)
    ec, eys = fwd(sg.tensor(x))
    np.testing.assert_array_equal(c, x[0])
    np.testing.assert_array_equal(ec.numpy(), x[0])
    assert ys.shape == (0, 3) and tuple(eys.shape) == (0, 3)


def test_eager_carry_dtype_change_is_refused():
    with pytest.raises(sg.TraceError, match=r"returned a carry carry of dtype .*float32.* but "
                       r"init's is .*float64.*test_scan.py:\d+"):
        sg.scan(lambda c, _: (c.float(), None), sg.tensor([1.0], dtype=sg.float64), length=2)


def test_command_line_compiles_a_loop(tmp_path):
    import subprocess
    import sys

    (tmp_path / "loop.py").write_text(
        "import symgrad as sg\n\n\n"
        "def decay(x):\n"
        "    c, _ = sg.scan(lambda c, _: (c * 0.9 + sg.sin(c), None), x, length=500)\n"
        "    return c.sum()\n")
    out = tmp_path / "build"
    proc = subprocess.run([sys.executable, "-m", "symgrad", "compile", "loop.py:decay",
                           "--shape", "x=3", "-o", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = "\n".join(p.read_text() for p in out.rglob("*.py"))
    assert "for _t in range(500)" in text and "# from loop.py:5" in text


@pytest.mark.slow
def test_c_runs_basic_slices_in_c_and_the_lstm_loop_natively():
    """Ints and positive-step slices are strided views in C (their adjoint: zeros with g in
    the view), so an LSTM step (gates sliced from one matmul) is one C segment and its loop,
    forward and backward, runs in C."""
    def f(x):
        a = x[1:, ::2] * x[0, 1:4].sum()
        return (sg.tanh(a) * x[-1, 0:5:2]).sum() + x[2, 3] * x[:, 1:2].sum()

    x = np.linspace(-1, 1, 20).reshape(4, 5)
    c, ref = _compile(f, (x,), "c"), _compile(f, (x,))
    c_text = next(t for name, t in c.files.items() if name.endswith(".c"))
    assert "a strided view" in c_text and "in a strided view" in c_text
    np.testing.assert_allclose(c.forward(x), ref.forward(x), rtol=1e-13)
    np.testing.assert_allclose(c.backward(np.ones(()), x)[0], ref.backward(np.ones(()), x)[0],
                               rtol=1e-12, atol=1e-15)
    fwd, examples = PROGRAMS["lstm"](sg)
    module = _compile(fwd, examples, "c")
    c_text = next(t for name, t in module.files.items() if name.endswith(".c"))
    assert c_text.count("once a step */") == 2
    value, grads = _torch_grads("lstm", examples) if torch is not None else (None, None)
    if torch is not None:
        np.testing.assert_allclose(float(module.forward(*examples)), value, rtol=1e-12)
        for ours, want in zip(module.backward(np.ones(()), *examples), grads):
            np.testing.assert_allclose(ours, want, rtol=1e-9, atol=1e-12)
