"""Compositions a user writes by hand, at extreme inputs: value and gradient through the
NumPy and C targets and a forward-only Function, float32 and float64, against exact values
(mpmath references rounded to literals).

Found by the composition audit (log(sigmoid), softmax, hypot, KL, Black-Scholes, ... at
±0, 1e-300 ... 1e300, ±inf, nan); each test failed before its fix."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import symgrad as sg


def inverse_softplus(x):
    return sg.log(sg.exp(x) - 1)


TARGETS = ["numpy"] + (["c"] if shutil.which("cc") or shutil.which("gcc") else [])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype, points", [
    (np.float64, [1e4, 1e30, 1e300, 700.0, 30.0]),
    (np.float32, [100.0, 1e4, 1e30, 30.0]),
])
def test_inverse_softplus_is_finite_where_exp_overflows(target, dtype, points):
    """log(exp(x) - 1) is x + log(1 - exp(-x)): x itself for x >= 40, with gradient
    1/(1 - exp(-x)) = 1. expm1(x) overflowed from x = 710 (89 in float32): the value was inf.
    Fixed by log(expm1(u)) -> u + log1mexp(u) (the log1mexp rewrite)."""
    x = np.array(points, dtype=dtype)
    mod = sg.compile(inverse_softplus, x, target=target, cache_ok=False)
    value = mod.forward(x)
    value = value[0] if isinstance(value, (tuple, list)) else value
    (grad,) = mod.backward(np.ones_like(x), x)
    assert value.dtype == dtype and grad.dtype == dtype
    # x + log1p(-exp(-x)) rounds to x from x = 40; at 30, log1p(-exp(-30)) = -9.357622968840175e-14
    want = np.array([p + (-9.357622968840175e-14 if p == 30.0 else 0.0) for p in points])
    want_grad = np.array([1.0 + (9.357622968841051e-14 if p == 30.0 else 0.0) for p in points])
    rtol = 1e-15 if dtype == np.float64 else 1e-7
    np.testing.assert_allclose(value, want.astype(dtype), rtol=rtol)
    np.testing.assert_allclose(grad, want_grad.astype(dtype), rtol=rtol)


def test_inverse_softplus_function_on_tensors_and_small_x():
    """Forward-only Function on runtime tensors; at small x the value is log(x) (log(1e-300)
    = -690.7755278982137) and the gradient 1 + 1/expm1(x) ~ 1/x + 1/2."""

    class InvSoftplus(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return sg.log(sg.exp(x) - 1)

    for dtype, pts in ((sg.float64, [1e-300, 1e-8, 1e4, 1e300]), (sg.float32, [1e-30, 1e4])):
        x = sg.tensor(pts, dtype=dtype, requires_grad=True)
        y = InvSoftplus.apply(x)
        y.sum().backward()
        got, g = y.detach().numpy(), x.grad.numpy()
        assert got.dtype == g.dtype == np.dtype("float64" if dtype == sg.float64 else "float32")
        ref = {1e-300: (-690.7755278982137, 1e300), 1e-8: (-18.420680738952367, 100000000.5),
               1e4: (1e4, 1.0), 1e300: (1e300, 1.0), 1e-30: (-69.07755278982137, 1e30)}
        want = np.array([ref[p][0] for p in pts])
        want_g = np.array([ref[p][1] for p in pts])
        tol = 1e-14 if dtype == sg.float64 else 1e-6
        np.testing.assert_allclose(got, want, rtol=tol)
        np.testing.assert_allclose(g, want_g, rtol=tol)


def gaussian_log_normalizer(sigma):
    return 0.5 * sg.log(2 * np.pi * sigma ** 2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype, sigmas", [
    (np.float64, [1e-200, 1e200, 1e-3, -2.0]),
    (np.float32, [1e-25, 1e25, 1e-3, -2.0]),
])
def test_log_of_a_power_keeps_the_scale(target, dtype, sigmas):
    """A Gaussian's log normalizer log(2*pi*sigma**2)/2 is log(2*pi)/2 + log|sigma|: sigma**2
    underflowed to 0 (value -inf, truly -459.6 at 1e-200) or overflowed to inf, and the
    gradient 1/sigma was nan or 0 there. Fixed by the log_power rewrite."""
    s = np.array(sigmas, dtype=dtype)
    mod = sg.compile(gaussian_log_normalizer, s, target=target, cache_ok=False)
    value = mod.forward(s)
    value = value[0] if isinstance(value, (tuple, list)) else value
    (grad,) = mod.backward(np.ones_like(s), s)
    want = 0.5 * np.log(2 * np.pi) + np.log(np.abs(np.array(sigmas, dtype=np.float64)))
    rtol = 1e-14 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(value, want.astype(dtype), rtol=rtol)
    np.testing.assert_allclose(grad, (1 / s).astype(dtype), rtol=rtol)


def test_log_of_two_squares_is_log_hypot():
    """0.5*log(x**2 + y**2) is log(hypot(x, y)): finite at 1e300 and 1e-300 (was inf, -inf),
    gradient x / (x**2 + y**2) without forming the squares."""
    f = lambda x, y: 0.5 * sg.log(x ** 2 + y ** 2)   # noqa: E731
    x = np.array([1e300, 1e-300, 3.0])
    y = np.array([1e300, 0.0, 4.0])
    mod = sg.compile(f, x, y, cache_ok=False)
    np.testing.assert_allclose(mod.forward(x, y), [690.7755278982137 + 0.34657359027997264,
                                                   -690.7755278982137, np.log(5.0)], rtol=1e-15)
    gx, gy = mod.backward(np.ones(3), x, y)
    np.testing.assert_allclose(gx, [0.5e-300, 1e300, 3 / 25], rtol=1e-14)
    np.testing.assert_allclose(gy, [0.5e-300, 0.0, 4 / 25], rtol=1e-14)


@pytest.mark.parametrize("target", TARGETS)
def test_three_squares_under_a_root_are_one_hypot(target):
    """sqrt(x**2 + y**2 + z**2) and a softened 1/sqrt(r**2 + eps) are hypot(x, y, z[, ...]):
    the squares overflowed from |x| ~ 1e154 (value inf, gradient 0 or nan); only two squares
    became a hypot. The derivative x/h is flat over the arguments, so (0, 0, 1) gives 0, not
    the nested hypot's 0/0."""
    norm = lambda x, y, z: (x * x + y * y + z * z).sqrt()   # noqa: E731
    soft = lambda x, y, z: 1 / (x ** 2 + y ** 2 + z ** 2 + 1e-4).sqrt()   # noqa: E731
    x = np.array([1e200, 0.0, 3.0, 1e-200])
    y = np.array([1e200, 0.0, 4.0, 0.0])
    z = np.array([1e200, 1.0, 12.0, 0.0])
    mod = sg.compile(norm, x, y, z, target=target, cache_ok=False)
    np.testing.assert_allclose(mod.forward(x, y, z), [np.sqrt(3) * 1e200, 1.0, 13.0, 1e-200],
                               rtol=1e-15)
    gx, gy, gz = mod.backward(np.ones(4), x, y, z)
    third = 1 / np.sqrt(3)
    np.testing.assert_allclose(gx, [third, 0.0, 3 / 13, 1.0], rtol=1e-15)
    np.testing.assert_allclose(gz, [third, 1.0, 12 / 13, 0.0], rtol=1e-15)
    mod = sg.compile(soft, x, y, z, target=target, cache_ok=False)
    np.testing.assert_allclose(mod.forward(x, y, z)[0], 1 / (np.sqrt(3) * 1e200), rtol=1e-14)
    (gx, _, _) = mod.backward(np.ones(4), x, y, z)
    np.testing.assert_allclose(gx[0], -third / (3 * 1e400 / 1e200) / 1e200, rtol=1e-13)
