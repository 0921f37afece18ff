"""sg.scan in the torch and jax targets (issue 18, item 5): sg.to_torch / sg.to_jax of a
forward with a loop run the generated loop -- a Python `for` over torch statements, a
`jax.lax.scan` -- forward, backward (the reverse scan) and second order, against torch's
autograd / jax.grad of the same loop written natively; the generated module holds one loop
whose size does not depend on the step count."""
import types

import numpy as np
import pytest
from deep_programs import rk4_scan
from test_scan import _loop_scan, _nested, _torch_fori, fori, lstm_scan

import symgrad as sg

try:
    import torch
except ImportError:  # pragma: no cover - optional framework
    torch = None
try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - optional framework
    jax = jnp = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_jax = pytest.mark.skipif(jax is None, reason="jax is not installed")


@pytest.fixture
def x64():
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def reverse_tuple(m, scan):
    """A reverse scan with a nested tuple carry, two xs and a tuple of ys, the ys weighted by
    an input (so their order counts); no captured array (sg.to_torch / sg.to_jax do not pass
    captured arrays yet)."""
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
        return (p * q).sum() + r.sum() + (ys1 * u).sum() + (ys2 * ys2 * v).sum()

    rng = np.random.default_rng(1)
    return forward, (rng.standard_normal(3), rng.standard_normal(3),
                     rng.standard_normal((6, 3)), rng.standard_normal((6, 3)))


PROGRAMS = {
    "lstm": (lambda m: lstm_scan(m, m.scan if m is sg else _loop_scan)),
    "reverse_tuple": (lambda m: reverse_tuple(m, m.scan if m is sg else _loop_scan)),
    "fori": (lambda m: fori(m, sg.fori_loop if m is sg else _torch_fori)),
    "rk4": (lambda m: rk4_scan(4, m)),
}


def _torch_grads(name, examples, vs=None):
    """torch's autograd through the loop written as a Python loop of torch ops."""
    fwd, _ = PROGRAMS[name](torch)
    ts = [torch.tensor(e, requires_grad=True) for e in examples]
    y = fwd(*ts)
    gs = torch.autograd.grad(y, ts, create_graph=vs is not None)
    if vs is None:
        return float(y.detach()), [g.numpy() for g in gs]
    dot = sum((g * torch.tensor(v)).sum() for g, v in zip(gs, vs))
    return [h.numpy() for h in torch.autograd.grad(dot, ts)]


def _source(n, target):
    fwd, examples = rk4_scan(n, sg)
    module = sg.compile(fwd, *examples, target=target, dtype="float64", cache_ok=False)
    return "\n".join(t for name, t in sorted(module.files.items()) if name.endswith(".py"))


# --------------------------------------------------------------------------- torch
def _torch_ours(name, examples, double_backward=None, vs=None):
    fwd, _ = PROGRAMS[name](sg)
    G = sg.to_torch(fwd, double_backward=double_backward)
    ts = [torch.tensor(e, requires_grad=True) for e in examples]
    y = G.apply(*ts)
    gs = torch.autograd.grad(y, ts, create_graph=vs is not None)
    if vs is None:
        return float(y.detach()), [g.numpy() for g in gs]
    dot = sum((g * torch.tensor(v)).sum() for g, v in zip(gs, vs))
    return [h.numpy() for h in torch.autograd.grad(dot, ts)]


@needs_torch
@pytest.mark.parametrize("name", ["rk4", "lstm", "reverse_tuple", "fori"])
def test_to_torch_first_order_matches_torch(name):
    _, examples = PROGRAMS[name](sg)
    value, grads = _torch_ours(name, examples)
    want, want_grads = _torch_grads(name, examples)
    np.testing.assert_allclose(value, want, rtol=1e-12)
    for ours, ref in zip(grads, want_grads):
        np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("mode", ["generated", "torch"])
@pytest.mark.parametrize("name", ["rk4", "lstm"])
def test_to_torch_second_order_matches_torch(name, mode):
    """Double backward: symgrad's second-order module (its loops the VJP of the reverse
    scan) or torch recording the backward's loop (the loop without in-place steps)."""
    _, examples = PROGRAMS[name](sg)
    rng = np.random.default_rng(3)
    vs = [rng.standard_normal(e.shape) for e in examples]
    ours = _torch_ours(name, examples, mode, vs)
    for got, ref in zip(ours, _torch_grads(name, examples, vs)):
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-11)


@needs_torch
def test_to_torch_gradcheck_and_gradgradcheck():
    fwd, examples = PROGRAMS["reverse_tuple"](sg)
    G = sg.to_torch(fwd)
    ts = [torch.tensor(e, requires_grad=True) for e in examples]
    assert torch.autograd.gradcheck(G.apply, ts)
    assert torch.autograd.gradgradcheck(G.apply, ts)


@needs_torch
def test_to_torch_nested_loop_and_float32():
    fwd, examples = _nested(sg, sg.scan)
    tfwd, _ = _nested(torch, lambda f, init, xs=None, length=None: _torch_loop(
        f, init, xs, length))
    G = sg.to_torch(fwd)
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        ts = [torch.tensor(e, dtype=dtype, requires_grad=True) for e in examples]
        y = G.apply(*ts)
        assert y.dtype == dtype
        gs = torch.autograd.grad(y, ts)
        ts2 = [torch.tensor(e, dtype=dtype, requires_grad=True) for e in examples]
        gs2 = torch.autograd.grad(tfwd(*ts2), ts2)
        for a, b in zip(gs, gs2):
            assert a.dtype == dtype
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


def _torch_loop(f, init, xs, length):
    carry, ys = init, []
    steps = range(length) if xs is None else xs
    for x in steps:
        carry, y = f(carry, None if xs is None else x)
        ys.append(y)
    return carry, (torch.stack(ys) if ys and ys[0] is not None else None)


@needs_torch
def test_to_torch_carry_returned_as_output_is_not_clobbered():
    """The final carry and every step's y as outputs of the forward (views of the loop's
    packed result): a later call, and the backward, leave the returned values alone."""
    def forward(x, w):
        def step(c, xt):
            c2 = sg.tanh(c * w + xt)
            return c2, c2 * 2.0
        c, ys = sg.scan(step, x[0], x)
        return c, ys

    x = np.linspace(-1, 1, 12).reshape(4, 3)
    w = np.array([0.5, -0.3, 0.8])
    G = sg.to_torch(forward)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    c, ys = G.apply(tx, tw)
    c0, ys0 = c.detach().clone(), ys.detach().clone()
    G.apply(tx * 2, tw)
    (c.sum() + (ys * ys).sum()).backward()
    assert torch.equal(c.detach(), c0) and torch.equal(ys.detach(), ys0)
    rx, rw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    rc, rys = rx[0], []
    for t in range(4):
        rc = torch.tanh(rc * rw + rx[t])
        rys.append(rc * 2.0)
    rys = torch.stack(rys)
    np.testing.assert_allclose(c0.numpy(), rc.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(ys0.numpy(), rys.detach().numpy(), rtol=1e-13)
    (rc.sum() + (rys * rys).sum()).backward()
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(tw.grad.numpy(), rw.grad.numpy(), rtol=1e-12)


@needs_torch
def test_torch_module_is_one_loop_of_constant_size():
    small, large = _source(10, "torch"), _source(10_000, "torch")
    assert "for _t in range(10000):" in large
    assert "for _t in range(10000 - 1, -1, -1):" in large
    assert "torch.sin(" in large
    assert abs(len(large.splitlines()) - len(small.splitlines())) <= 2
    assert abs(len(large) - len(small)) < 400


# --------------------------------------------------------------------------- jax
def _jax_namespace():
    return types.SimpleNamespace(sigmoid=jax.nn.sigmoid, tanh=jnp.tanh, sin=jnp.sin,
                                 cos=jnp.cos, arange=jnp.arange, float64=jnp.float64,
                                 stack=jnp.stack)


def _jax_programs():
    m = _jax_namespace()
    return {
        "rk4": rk4_scan(4, types.SimpleNamespace(scan=jax.lax.scan, sin=jnp.sin)),
        "lstm": lstm_scan(m, jax.lax.scan),
        "reverse_tuple": reverse_tuple(m, jax.lax.scan),
        "fori": fori(m, jax.lax.fori_loop),
    }


@needs_jax
@pytest.mark.parametrize("name", [pytest.param("rk4", marks=pytest.mark.slow),
                                  pytest.param("lstm", marks=pytest.mark.slow),
                                  pytest.param("reverse_tuple", marks=pytest.mark.slow),
                                  "fori"])
def test_to_jax_matches_jax_grad_first_and_second_order(name, x64):
    native, _ = _jax_programs()[name]
    fwd, examples = PROGRAMS[name](sg)
    f = sg.to_jax(fwd)
    xs = [jnp.asarray(e) for e in examples]
    argnums = tuple(range(len(xs)))
    np.testing.assert_allclose(float(jax.jit(f)(*xs)), float(native(*xs)), rtol=1e-12)
    ours = jax.jit(jax.grad(f, argnums))(*xs)
    want = jax.grad(native, argnums)(*xs)
    for a, b in zip(ours, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(4)
    vs = [jnp.asarray(rng.standard_normal(e.shape)) for e in examples]

    def hvp(fn):
        def dot(*a):
            return sum((g * v).sum() for g, v in zip(jax.grad(fn, argnums)(*a), vs))
        return jax.grad(dot, argnums)(*xs)

    for a, b in zip(hvp(f), hvp(native)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-11)


@needs_jax
def test_to_jax_under_vmap(x64):
    native, _ = _jax_programs()["rk4"]
    fwd, examples = PROGRAMS["rk4"](sg)
    f = sg.to_jax(fwd)
    batch = [jnp.stack([jnp.asarray(e) * s for s in (1.0, 0.7, -1.3)]) for e in examples]
    np.testing.assert_allclose(np.asarray(jax.vmap(f)(*batch)),
                               np.asarray(jax.vmap(native)(*batch)), rtol=1e-12)
    ours = jax.vmap(jax.grad(f, (0, 1)))(*batch)
    want = jax.vmap(jax.grad(native, (0, 1)))(*batch)
    for a, b in zip(ours, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


@needs_jax
def test_jax_module_is_one_lax_scan_of_constant_size():
    small, large = _source(10, "jax"), _source(10_000, "jax")
    assert "length=10000, reverse=False" in large and "length=10000, reverse=True" in large
    assert large.count("jax.lax.scan(") == 2   # the forward's loop and the backward's
    assert "jnp.sin(" in large
    assert abs(len(large.splitlines()) - len(small.splitlines())) <= 2
    assert abs(len(large) - len(small)) < 400


@needs_torch
def test_torch_target_int_tensor_times_python_float_is_float64():
    """`0.05 * n` of an int64 tensor: torch computes it in float32 (its default dtype), the
    NumPy target in float64; the torch target casts n to the routine's dtype first (this
    failed before: 1.5e-9 off, and sg.fori_loop's index, an int, lost digits every step)."""
    def f(x, n):
        return (x * (0.05 * n + 0.1)).sum()

    G = sg.to_torch(f)
    n = torch.arange(3) * 7
    got = float(G.apply(torch.ones(3, dtype=torch.float64), n))
    assert got == float((0.05 * np.arange(3) * 7 + 0.1).sum())
