"""Issue 19, item 3: automatic dynamic shapes. A Function seen with a second shape of the
same ranks and dtypes gets one shape-generic module for every further shape: 20 batch sizes
cost at most 2 compiles, with the right gradients for each."""
import numpy as np
import pytest

import symgrad as sg
from symgrad import compiler


@pytest.fixture
def counted(monkeypatch, tmp_path):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))   # no disk hits
    calls = []
    real = compiler.compile_graph

    def compile_graph(build, target, *a, **k):
        calls.append(target)
        return real(build, target, *a, **k)

    monkeypatch.setattr(compiler, "compile_graph", compile_graph)
    return calls


def _make():
    class Score(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            return ((x * w).tanh() ** 2).sum(dim=-1)
    return Score


def _check(F, b, rng):
    x = sg.tensor(rng.standard_normal((b, 4)), requires_grad=True)
    w = sg.tensor(rng.standard_normal(4), requires_grad=True)
    F.apply(x, w).sum().backward()
    t = np.tanh(x.detach().numpy() * w.detach().numpy())
    d = 2 * t * (1 - t * t)
    np.testing.assert_allclose(x.grad.numpy(), d * w.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), (d * x.detach().numpy()).sum(0), rtol=1e-12)


def test_twenty_batch_sizes_cost_at_most_two_compiles(counted):
    F = _make()
    rng = np.random.default_rng(0)
    for b in range(1, 21):
        _check(F, b, rng)
    assert len(counted) <= 2, counted
    _check(F, 1, rng)          # the first shape keeps its static module
    _check(F, 57, rng)         # and any new size uses the generic one
    assert len(counted) <= 2, counted


def test_another_rank_or_dtype_is_another_family(counted):
    F = _make()
    rng = np.random.default_rng(1)
    _check(F, 3, rng)
    _check(F, 5, rng)
    n = len(counted)
    x = sg.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32), requires_grad=True)
    w = sg.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    F.apply(x, w).sum().backward()
    assert len(counted) == n + 1 and x.grad.shape == (2, 3, 4)


def test_dynamic_shapes_false_keeps_every_shape_static(counted):
    F = _make()
    F.dynamic_shapes = False
    rng = np.random.default_rng(2)
    for b in (2, 3, 4):
        _check(F, b, rng)
    assert len(counted) == 3


def test_a_forward_that_needs_its_shapes_stays_static_and_right(counted):
    class Norm(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            n = x.shape[0]           # Python arithmetic on a size: no generic trace
            return (x * x).sum() / n

    rng = np.random.default_rng(3)
    for b in (2, 3, 4):
        x = sg.tensor(rng.standard_normal(b), requires_grad=True)
        Norm.apply(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy() / b, rtol=1e-12)
