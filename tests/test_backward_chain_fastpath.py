"""The engine's backward of a small graph without branches (engine._one_node): a chain of
module nodes into leaves. Each case compares with torch (the oracle) or with the general
engine (the same backward with a hook that sends it there), so the fast path keeps every
check a user relies on: version checks, freeing, accumulation, stealing rules, hooks."""
import numpy as np
import pytest

import symgrad as sg
from symgrad.autograd import engine

torch = pytest.importorskip("torch")


class XExp(sg.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * sg.exp(y)


class Ident(sg.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0


class Two(sg.Function):
    @staticmethod
    def forward(ctx, x):
        return sg.sin(x), x * x


def _pair(seed=0, n=5):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    return a, b


def _counting(monkeypatch):
    """Count the fast path's runs that did the work (True)."""
    calls = []
    real = engine._one_node

    def spy(*args):
        r = real(*args)
        calls.append(r)
        return r

    monkeypatch.setattr(engine, "_one_node", spy)
    return calls


def test_explicit_gradient_matches_torch_and_takes_the_fast_path(monkeypatch):
    calls = _counting(monkeypatch)
    a, b = _pair()
    g = np.linspace(-1, 1, 5)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    XExp.apply(x, y).backward(sg.tensor(g))
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (tx * torch.exp(ty)).backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)
    assert calls == [True]


def test_chain_into_sum_matches_torch(monkeypatch):
    calls = _counting(monkeypatch)
    a, b = _pair(1)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    XExp.apply(x, y).sum().backward()
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (tx * torch.exp(ty)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)
    assert calls == [True]


def test_second_backward_raises_and_retain_graph_accumulates_in_place():
    a, b = _pair(2)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    out = XExp.apply(x, y)
    out.backward(sg.ones_like(out), retain_graph=True)
    first = x.grad
    out.backward(sg.ones_like(out))
    assert x.grad is first   # torch: accumulated in place, grad mode off
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(b), rtol=1e-12)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward(sg.ones_like(out))


def test_inplace_change_of_a_saved_input_raises_torchs_error():
    a, b = _pair(3)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    xc = x.clone()
    out = XExp.apply(xc, y)
    with sg.no_grad():
        pass
    xc.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward(sg.ones_like(out))


def test_an_identity_gradient_is_not_the_seed():
    a, _ = _pair(4)
    x = sg.tensor(a, requires_grad=True)
    seed = sg.tensor(np.full(5, 2.0))
    Ident.apply(x).backward(seed)
    np.testing.assert_allclose(x.grad.numpy(), 2.0)
    seed.numpy()[:] = 7.0   # the user's seed: .grad must not share its memory
    np.testing.assert_allclose(x.grad.numpy(), 2.0)


def test_one_leaf_reached_twice_is_summed(monkeypatch):
    calls = _counting(monkeypatch)
    a, _ = _pair(5)
    x = sg.tensor(a, requires_grad=True)
    XExp.apply(x, x).backward(sg.ones(5, dtype=sg.float64))
    tx = torch.tensor(a, requires_grad=True)
    (tx * torch.exp(tx)).backward(torch.ones(5, dtype=torch.float64))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    assert calls == [False]   # the general engine sums first
    assert x.grad._version == 0


def test_hooks_and_retain_grad_go_through_the_general_engine(monkeypatch):
    a, b = _pair(6)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
    acc = []
    y.register_post_accumulate_grad_hook(lambda t: acc.append(t.grad.numpy().copy()))
    out = XExp.apply(x, y)
    mid = out * 1.0
    mid.retain_grad()
    mid.sum().backward()
    np.testing.assert_allclose(seen[0], np.exp(b), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(b), rtol=1e-12)
    np.testing.assert_allclose(acc[0], a * np.exp(b), rtol=1e-12)
    np.testing.assert_allclose(mid.grad.numpy(), 1.0)


def test_a_gradient_of_another_dtype_or_shape():
    a, b = _pair(7)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    out = XExp.apply(x, y)
    out.backward(sg.tensor(np.ones(5, np.float32)))   # torch: cast to the output's dtype
    assert x.grad.dtype == sg.float64
    out2 = XExp.apply(x, y)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        out2.backward(sg.ones(4, dtype=sg.float64))


def test_multi_output_function_one_output_used():
    a, _ = _pair(8)
    x = sg.tensor(a, requires_grad=True)
    s, q = Two.apply(x)
    q.backward(sg.ones(5, dtype=sg.float64))
    np.testing.assert_allclose(x.grad.numpy(), 2 * a, rtol=1e-12)
    x.grad = None
    s, q = Two.apply(x)
    (s.sum() * 3.0).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.cos(a), rtol=1e-12)


def test_a_leaf_that_needs_no_grad_and_an_existing_grad_of_other_layout():
    a, b = _pair(9)
    x = sg.tensor(a, requires_grad=True)
    y = sg.tensor(b)   # no grad
    XExp.apply(x, y).sum().backward()
    assert y.grad is None
    np.testing.assert_allclose(x.grad.numpy(), np.exp(b), rtol=1e-12)
    # a leaf given a non-contiguous .grad beforehand: accumulated into it, in place
    base = sg.tensor(np.zeros(10))
    g0 = base[::2]
    x.grad = g0
    XExp.apply(x, y).sum().backward()
    assert x.grad is g0
    np.testing.assert_allclose(base.numpy()[::2], np.exp(b), rtol=1e-12)


def test_grad_mode_off_inside_the_backward_and_restored():
    a, b = _pair(10)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    XExp.apply(x, y).sum().backward()
    assert sg.is_grad_enabled()
    assert x.grad.grad_fn is None and not x.grad.requires_grad
    with sg.no_grad():
        out = XExp.apply(x, y)
    assert out.grad_fn is None


def test_anomaly_mode_and_detect_nan_still_apply():
    x = sg.tensor(np.array([0.0, 1.0]), requires_grad=True)

    class Sqrt(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return sg.sqrt(x)

    out = Sqrt.apply(x)
    with sg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="returned nan values"):
            (out * 0.0).sum().backward()


class Three(sg.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        return sg.tanh(x * w + b)


class MixedTwo(sg.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * 2.0, x * y


def test_apply_fast_lookup_three_inputs_and_mixed_dtypes_on_later_calls():
    """Function.apply's direct signature lookup (second and later calls) gives what the first
    call gives: values, gradients, and torch's per-output dtypes of a mixed-precision call."""
    rng = np.random.default_rng(11)
    arrs = [rng.standard_normal(6) for _ in range(3)]
    grads = []
    for _ in range(3):
        ts = [sg.tensor(a, requires_grad=True) for a in arrs]
        out = Three.apply(*ts)
        out.sum().backward()
        grads.append([t.grad.numpy() for t in ts])
    tt = [torch.tensor(a, requires_grad=True) for a in arrs]
    torch.tanh(tt[0] * tt[1] + tt[2]).sum().backward()
    for got in grads:
        for g, t in zip(got, tt):
            np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12)
    for _ in range(3):
        x = sg.tensor(np.ones(4, np.float32), requires_grad=True)
        y = sg.tensor(np.ones(4), requires_grad=True)
        a, b = MixedTwo.apply(x, y)
        assert a.dtype == sg.float32 and b.dtype == sg.float64   # torch's promotion per op
        (a.sum() + b.sum()).backward()
        assert x.grad.dtype == sg.float32 and y.grad.dtype == sg.float64
        np.testing.assert_allclose(x.grad.numpy(), 3.0)


def test_post_accumulate_grad_hook_alone_runs_once(monkeypatch):
    calls = _counting(monkeypatch)
    a, b = _pair(12)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    XExp.apply(x, y).backward(sg.ones(5, dtype=sg.float64))
    assert calls == [False] and len(seen) == 1
    np.testing.assert_allclose(seen[0], np.exp(b), rtol=1e-12)


def test_saved_tensor_hooks_graph_goes_general_and_a_later_plain_graph_does_not(monkeypatch):
    calls = _counting(monkeypatch)
    a, b = _pair(13)
    x, y = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    unpacked = []

    def unpack(t):
        unpacked.append(1)
        return t

    with sg.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        out = XExp.apply(x, y)
    out.backward(sg.ones(5, dtype=sg.float64))
    assert calls == [False] and unpacked   # the unpack hooks ran, in the general engine
    np.testing.assert_allclose(x.grad.numpy(), np.exp(b), rtol=1e-12)
    x.grad = y.grad = None
    XExp.apply(x, y).backward(sg.ones(5, dtype=sg.float64))
    assert calls == [False, True]
    np.testing.assert_allclose(y.grad.numpy(), a * np.exp(b), rtol=1e-12)
