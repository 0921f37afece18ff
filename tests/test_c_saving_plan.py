"""The C target's saving plan (_saving_plan._recompute_cheap: cheap full-size elementwise values
recomputed in the backward's fused loop, reductions and values as small as theirs kept) and
the scratch block every loaded C module shares (native.SCRATCH), checked against torch."""
import os
import shutil

import numpy as np
import pytest

import symgrad as sg
from symgrad import native

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                              reason="no C compiler")
EPS = 1e-5


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))


def _ln(x, w, b):
    mu = x.mean(dim=-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(dim=-1, keepdim=True)
    return d / sg.sqrt(var + EPS) * w + b


class LayerNorm(sg.Function):
    cpu_target = "c"

    @staticmethod
    def forward(ctx, x, w, b):
        return _ln(x, w, b)


def _torch_ln(x, w, b, g):
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    y = torch.nn.functional.layer_norm(xt, (x.shape[-1],), wt, bt, eps=EPS)
    y.backward(torch.tensor(g))
    return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()


@needs_cc
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_layer_norm_keeps_only_row_statistics(dtype):
    """The C module of a layer norm saves the row means and variances (a few bytes per row),
    not x - mean (full-size, recomputed in the backward's loop); the runtime's node keeps
    them, and the values and gradients are torch's."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 64)).astype(dtype)
    w, b = rng.standard_normal(64).astype(dtype), rng.standard_normal(64).astype(dtype)
    g = rng.standard_normal((37, 64)).astype(dtype)
    xs, ws, bs = (sg.tensor(a, requires_grad=True) for a in (x, w, b))
    y = LayerNorm.apply(xs, ws, bs)
    node = y.grad_fn
    assert node._mod.compiled.target == "c"
    assert callable(node._mod.forward_saving)
    extra = node._extra
    assert extra is not None and len(extra) >= 2
    assert all(np.size(e) <= x.shape[0] for e in extra)   # per row, never per element
    y.backward(sg.tensor(g))
    ry, rgx, rgw, rgb = _torch_ln(x, w, b, g)
    tol = {"rtol": 1e-11, "atol": 1e-12} if dtype == np.float64 else {"rtol": 2e-4, "atol": 2e-4}
    np.testing.assert_allclose(y.detach().numpy(), ry, **tol)
    np.testing.assert_allclose(xs.grad.numpy(), rgx, **tol)
    np.testing.assert_allclose(ws.grad.numpy(), rgw, **tol)
    np.testing.assert_allclose(bs.grad.numpy(), rgb, **tol)
    # backward_saved equals the recomputing backward
    mod = node._mod
    _, saved = mod.forward_saving(x, w, b)
    want = mod.backward(g, x, w, b)
    for got, ref in zip(mod.backward_saved(g, *saved, x, w, b), want):
        np.testing.assert_allclose(got, ref, rtol=1e-12 if dtype == np.float64 else 1e-5,
                                   atol=1e-12 if dtype == np.float64 else 1e-5)


@needs_cc
def test_cheap_full_size_values_are_recomputed_not_kept():
    """x - max(x) is one subtraction per element: the C plan recomputes it in the backward
    and keeps the row max and the row sum; the NumPy plan (one array op per step, no fusion)
    is not changed by it."""
    from symgrad.compiler import RuntimeModule

    def f(x):
        m = x.amax(dim=-1, keepdim=True)
        e = sg.exp(x - m)
        return sg.log(e.sum(dim=-1, keepdim=True)) + m

    x = np.random.default_rng(4).standard_normal((50, 40))
    mod = sg.compile(f, x, target="c", cache_ok=False)
    rm = RuntimeModule(mod)
    assert rm.forward_saving is not None
    outs, saved = rm.forward_saving(x)
    # every saved value is a row statistic or exp(x - m) (costly: kept), never x - m itself
    full = [s for s in saved if np.size(s) == x.size]
    assert len(full) <= 1
    if full:
        np.testing.assert_allclose(full[0], np.exp(x - x.max(-1, keepdims=True)), rtol=1e-14)
    g = np.random.default_rng(5).standard_normal((50, 1))
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.logsumexp(xt, dim=-1, keepdim=True)
    yt.backward(torch.tensor(g))
    (gx,) = rm.backward_saved(g, *saved, x)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(outs[0], yt.detach().numpy(), rtol=1e-12, atol=1e-13)


@needs_cc
def test_c_modules_share_one_scratch_block():
    """Two C modules (a Function's runtime module, the symgrad.compile module of the same
    function) take their temporaries from one block per thread; calls alternating between
    them give torch's numbers."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((33, 48))
    w, b = rng.standard_normal(48), rng.standard_normal(48)
    g = rng.standard_normal((33, 48))
    mod = sg.compile(lambda x, w, b: _ln(x, w, b), x, w, b, target="c", cache_ok=False)
    assert mod.raw._thread is native.SCRATCH
    ry, rgx, rgw, rgb = _torch_ln(x, w, b, g)
    for _ in range(3):
        xs, ws, bs = (sg.tensor(a, requires_grad=True) for a in (x, w, b))
        y = LayerNorm.apply(xs, ws, bs)
        assert y.grad_fn._mod.compiled.raw._thread is native.SCRATCH
        np.testing.assert_allclose(mod.forward(x, w, b), ry, rtol=1e-11, atol=1e-12)
        gx, gw, gb = mod.backward(g, x, w, b)
        y.backward(sg.tensor(g))
        for got, ref in ((gx, rgx), (gw, rgw), (gb, rgb), (xs.grad.numpy(), rgx),
                         (ws.grad.numpy(), rgw), (bs.grad.numpy(), rgb)):
            np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-12)
