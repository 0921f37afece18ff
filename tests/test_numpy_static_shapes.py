"""The NumPy target's static-shape lowerings (sum_to with known axes, plain matmuls for matmul
gradients, the reduction helpers) give the numbers of the shape-generic ones and of closed
forms, for every broadcasting pattern."""
from __future__ import annotations

import numpy as np
import pytest

import symgrad as sg

RNG = np.random.default_rng(7)


def _arr(shape, dtype=np.float64):
    return RNG.uniform(-1.5, 1.5, size=shape).astype(dtype)


def _both(fn, *arrays):
    """Backward of sum(fn) compiled for the arrays' shapes and shape-generic."""
    static = sg.compile(fn, *arrays, target="numpy")
    generic = sg.compile(fn, target="numpy")
    out = static.forward(*arrays)           # one output: the array itself
    seed = np.ones_like(out)
    return static, static.backward(seed, *arrays), generic.backward(seed, *arrays)


@pytest.mark.parametrize("sa, sb", [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
    ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 5)),
])
def test_matmul_gradients_match_closed_form(sa, sb):
    a, b = _arr(sa), _arr(sb)

    def f(x, y):
        return sg.matmul(x, y)

    static, (ga, gb), (ha, hb) = _both(f, a, b)
    # closed form of d sum(a @ b): ones @ b^T and a^T @ ones, summed down to the operand shapes
    a2 = a if a.ndim > 1 else a[None, :]
    b2 = b if b.ndim > 1 else b[:, None]
    ones = np.ones(np.matmul(a2, b2).shape)
    ra = _reduce_to(np.matmul(ones, np.swapaxes(b2, -1, -2)), a2.shape).reshape(a.shape)
    rb = _reduce_to(np.matmul(np.swapaxes(a2, -1, -2), ones), b2.shape).reshape(b.shape)
    np.testing.assert_allclose(ga, ra, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb, rb, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ga, ha)
    np.testing.assert_array_equal(gb, hb)
    if a.ndim == b.ndim == 2:   # the plain case prints as one matmul with a transpose
        assert "def _matmul_grad" not in static.source
        assert ".T)" in static.source


@pytest.mark.parametrize("sa, sb", [
    ((5, 1), (1, 4)), ((2, 5, 1), (1, 4)), ((5, 1), (3, 1, 4)), ((6, 3), (3, 1)),
    ((1, 3), (3, 4)), ((2, 1, 3), (2, 3, 1)),
])
def test_matmuls_contracting_one_are_multiplies_with_matmul_numbers(sa, sb):
    """Products over a size-1 dimension (an outer product, or a gradient of a matmul with one
    row or one column: an MLP's n x 1 head) print as broadcast multiplies; forward and both
    gradients, under a random seed, equal NumPy's matmul and the shape-generic module."""
    a, b = _arr(sa), _arr(sb)

    def f(x, y):
        return sg.tanh(sg.matmul(sg.sin(x), y))

    static = sg.compile(f, a, b, target="numpy")
    generic = sg.compile(f, target="numpy")
    out = static.forward(a, b)   # one output: the array itself
    np.testing.assert_allclose(out, np.tanh(np.matmul(np.sin(a), b)), rtol=1e-13, atol=1e-15)
    seed = _arr(out.shape)
    ga, gb = static.backward(seed, a, b)
    u = seed * (1 - np.tanh(np.matmul(np.sin(a), b)) ** 2)
    ra = _reduce_to(np.matmul(u, np.swapaxes(b, -1, -2)), a.shape) * np.cos(a)
    rb = _reduce_to(np.matmul(np.swapaxes(np.sin(a), -1, -2), u), b.shape)
    np.testing.assert_allclose(ga, ra, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gb, rb, rtol=1e-12, atol=1e-14)
    for x, y in zip(static.backward(seed, a, b), generic.backward(seed, a, b)):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=1e-15)
    assert "numpy.multiply(" in static.source


@pytest.mark.parametrize("sx, sy", [
    ((2, 3), (3,)), ((2, 3), (2, 1)), ((4, 2, 3), (2, 1)), ((4, 2, 3), (1, 3)),
    ((2, 3), ()), ((1, 3), (3,)), ((5, 1, 3), (4, 3)),
])
def test_broadcast_adjoints_sum_to_the_operand_shapes(sx, sy):
    x, y = _arr(sx), _arr(sy)

    def f(u, v):
        return sg.sin(u * v) + v

    static, (gx, gy), (hx, hy) = _both(f, x, y)
    c = np.cos(x * y)
    full_x, full_y = np.broadcast_to(y * c, np.broadcast(x, y).shape), x * c + 1.0
    np.testing.assert_allclose(gx, _reduce_to(full_x, sx), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy, _reduce_to(full_y, sy), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(gx, hx)
    np.testing.assert_array_equal(gy, hy)
    assert gx.shape == sx and gy.shape == sy
    assert "_sum_to(" not in static.source      # the axes were worked out at compile time


def _reduce_to(a, shape):
    lead = a.ndim - len(shape)
    a = a.sum(tuple(range(lead))) if lead else a
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and a.shape[i] != 1)
    return a.sum(axes, keepdims=True).reshape(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, True), (1, False), ((0, 2), True),
                                          (-1, False)])
def test_reductions_and_their_adjoints(dtype, dim, keepdim):
    x = _arr((3, 4, 5), dtype)

    def f(u):
        kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
        return sg.mean(u * u, **kw) * 3.0 + sg.sum(sg.exp(u), **kw)

    static, (gx,), (hx,) = _both(f, x)
    axes = None if dim is None else dim
    count = x.size if dim is None else np.prod([x.shape[d] for d in np.atleast_1d(dim)])
    # float32: 6x/count and exp(x) cancel where x is near -count/6 * exp(x) (a gradient of
    # -0.0146 off by 3.6e-8, 2.5e-6 relative): the rounding is relative to the terms' size
    np.testing.assert_allclose(gx, 6.0 * x / count + np.exp(x),
                               rtol=2e-6 if dtype == np.float32 else 1e-13,
                               atol=4e-7 if dtype == np.float32 else 0)
    assert gx.dtype == dtype
    np.testing.assert_array_equal(gx, hx)
    out = static.forward(x)
    ref = (np.mean(x * x, axis=axes, keepdims=keepdim) * 3.0
           + np.sum(np.exp(x), axis=axes, keepdims=keepdim))
    np.testing.assert_allclose(out, ref, rtol=2e-6 if dtype == np.float32 else 1e-13)
    assert np.asarray(out).dtype == dtype and np.shape(out) == np.shape(ref)


@pytest.mark.parametrize("fn, np_fn", [(sg.amax, np.max), (sg.amin, np.min)])
def test_max_min_values_and_tie_sharing(fn, np_fn):
    x = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5]])

    def f(u):
        return fn(u, dim=1, keepdim=True) * 2.0

    static, (gx,), (hx,) = _both(f, x)
    np.testing.assert_array_equal(static.forward(x), np_fn(x, axis=1, keepdims=True) * 2.0)
    best = x == np_fn(x, axis=1, keepdims=True)
    np.testing.assert_allclose(gx, 2.0 * best / best.sum(1, keepdims=True))
    np.testing.assert_array_equal(gx, hx)
