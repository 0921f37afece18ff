"""Extreme inputs, found by a differential harness (symgrad NumPy/C, float32/float64 vs mpmath
and torch): each test pins one bug that returned a silently wrong number, against mpmath."""
import math
import os
import shutil

import mpmath
import numpy as np
import pytest

import symgrad as sg

mpmath.mp.dps = 50
HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
TARGETS = ["numpy", pytest.param("c", marks=pytest.mark.skipif(not HAVE_CC, reason="no C compiler"))]
RTOL = {np.float32: 2e-6, np.float64: 1e-13}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path))


def _grad(fn, x, target):
    mod = sg.compile(fn, x, target=target, cache_ok=False)
    y = mod.forward(x)
    y = y[0] if isinstance(y, tuple) else y
    (g,) = mod.backward(np.ones_like(x), x)
    assert y.dtype == x.dtype and g.dtype == x.dtype
    return y, g


def _close(got, ref, dtype):
    ref = np.asarray([float(r) for r in ref])
    tiny = float(np.finfo(dtype).tiny)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=RTOL[dtype], atol=4 * tiny)


# tanh's derivative is 1 - tanh(x)**2, as in torch and JAX: accurate to a few ulp of 1
# (absolutely) everywhere, relatively where it is not tiny; in the far tail (|x| > 9 float32,
# 19 float64) it is 0 like torch's. The exact sech(x)**2 form costs an exp per tanh (the
# 30-deep tanh/sin chain took 1.6x as long); README "Numerics" says so.
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_gradient_is_accurate_to_ulps_of_one(dtype, target):
    pts = [-40.0, -20.0, -10.0, -3.0, 1e-30, 0.5, 5.0, 10.0, 20.0, 40.0]
    x = np.asarray(pts, dtype)
    _, g = _grad(lambda x: sg.tanh(x), x, target)
    ref = np.asarray([float(mpmath.sech(mpmath.mpf(float(v))) ** 2) for v in x])
    eps = float(np.finfo(dtype).eps)
    assert np.all(g >= 0)
    np.testing.assert_allclose(g.astype(np.float64), ref, rtol=0, atol=4 * eps)
    big = ref > 0.01
    np.testing.assert_allclose(g[big].astype(np.float64), ref[big], rtol=300 * eps)
    torch = pytest.importorskip("torch")
    t = torch.tensor(x, requires_grad=True)
    torch.tanh(t).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=0, atol=4 * eps)


def test_tanh_gradient_through_the_library_path():
    x = sg.tensor([0.3, 10.0, 20.0, -40.0], dtype=sg.float64, requires_grad=True)
    sg.tanh(x).sum().backward()
    ref = [float(mpmath.sech(v) ** 2) for v in (0.3, 10, 20, -40)]
    np.testing.assert_allclose(x.grad.numpy(), ref, rtol=1e-15, atol=4e-16)


def test_tanh_second_derivative_near_zero_and_far():
    x = np.asarray([1e-20, 1e-10, 0.5, 10.0, 20.0])
    mod = sg.compile(lambda x: sg.tanh(x), x, cache_ok=False).grad_module()
    h = mod.backward(np.ones(5), np.ones(5), x)[1]
    ref = [-2 * mpmath.tanh(v) * mpmath.sech(v) ** 2 for v in map(mpmath.mpf, x.tolist())]
    np.testing.assert_allclose(h[:3], [float(r) for r in ref[:3]], rtol=1e-13)
    np.testing.assert_allclose(h[3:], [float(r) for r in ref[3:]], rtol=0, atol=1e-15)


@pytest.mark.parametrize("target", TARGETS)
def test_swish_float32_below_exp_overflow(target):
    # C printed sigmoid as 1/(1 + exp(-x)): exp(89) = inf in float, so swish(-89) = -0 and
    # its gradient 0 where the true values (-2e-37) are normal float32 numbers
    x = np.asarray([-100.0, -95.0, -89.0, -88.0, -20.0, 0.0, 89.0], np.float32)
    y, g = _grad(lambda x: x * sg.sigmoid(x), x, target)
    xs = [mpmath.mpf(float(v)) for v in x]
    sig = [1 / (1 + mpmath.exp(-v)) for v in xs]
    _close(y, [v * s for v, s in zip(xs, sig)], np.float32)
    _close(g, [s + v * s * (1 - s) for v, s in zip(xs, sig)], np.float32)
    assert y[2] < 0 and g[2] < 0


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_c_matches_numpy_in_the_subnormal_tail(dtype):
    x = np.asarray([-745.0, -720.0, -103.0, -95.0, -89.0, -1.0, 0.0, 30.0, np.inf, -np.inf,
                    np.nan], dtype)
    for fn in (lambda x: sg.sigmoid(x), lambda x: x.softplus(), lambda x: x * sg.sigmoid(x)):
        yc, gc = _grad(fn, x, "c")
        yn, gn = _grad(fn, x, "numpy")
        np.testing.assert_allclose(yc, yn, rtol=4 * np.finfo(dtype).eps, atol=0)
        np.testing.assert_allclose(gc, gn, rtol=4 * np.finfo(dtype).eps, atol=0)


def test_erf_float32_subnormal_input():
    # c*p/q underflowed in c*p: erf(1.4e-45) was 0, erf(1e-40) 3e-4 off
    x = np.asarray([1e-45, 1e-40, 1e-38, -1e-40], np.float32)
    y, g = _grad(lambda x: sg.erf(x), x, "numpy")
    ref = [mpmath.erf(mpmath.mpf(float(v))) for v in x]
    assert y[0] == np.float32(float(ref[0])) and y[0] > 0
    np.testing.assert_allclose(y[1:].astype(np.float64), [float(r) for r in ref[1:]], rtol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_gelu_erf_float32_far_left_tail_is_zero(target):
    # erfc_f32 clipped its argument at 10, where erfc is float32's smallest subnormal (not 0):
    # gelu(-1e38) = -1e38 * 1.4e-45 / 2 = -1.4e-7
    x = np.asarray([-1e38, -1e30, -700.0, -100.0, -20.0, -5.0], np.float32)
    y, g = _grad(lambda x: 0.5 * x * (1 + sg.erf(x / math.sqrt(2))), x, target)
    ref_y = [v * mpmath.ncdf(v) for v in map(mpmath.mpf, x.astype(float).tolist())]
    ref_g = [mpmath.ncdf(v) + v * mpmath.npdf(v) for v in map(mpmath.mpf, x.astype(float).tolist())]
    _close(y, ref_y, np.float32)
    _close(g, ref_g, np.float32)
    assert np.all(y[:-1] == 0)


@pytest.mark.parametrize("target", TARGETS)
def test_sigmoid_difference_keeps_relative_accuracy_near_zero(target):
    # sigmoid(x) - sigmoid(-x) cancels near 0 (0 at x = 1e-20); rewritten to tanh(x/2)
    x = np.asarray([1e-20, -1e-10, 1e-3, 0.5, 30.0])
    y, g = _grad(lambda u: sg.sigmoid(u) - sg.sigmoid(-u), x, target)
    _close(y, [mpmath.tanh(mpmath.mpf(float(v)) / 2) for v in x], np.float64)
    ref = [float(mpmath.sech(mpmath.mpf(float(v)) / 2) ** 2 / 2) for v in x]
    np.testing.assert_allclose(g[:4], ref[:4], rtol=1e-13)
    np.testing.assert_allclose(g[4], ref[4], rtol=0, atol=1e-15)   # tanh's 1 - t**2 far out
