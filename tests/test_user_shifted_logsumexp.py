"""A logsumexp or log_softmax the user max-shifted by hand, m + log(sum(exp(x - m))), is traced
as log(sum(exp(x - m'))) + m' - m (m' = m without gradient): the user's m cancels, so the
backward carries no gradient through the max (no argmax, scatter or extra reduction), and every
derivative is the closed form's."""
import numpy as np
import pytest

import symgrad as sg


def lse_values(x):
    m = sg.max(x, dim=-1, keepdim=True).values
    return m + sg.log(sg.sum(sg.exp(x - m), dim=-1, keepdim=True))


def lse_amax(x):
    m = sg.amax(x, dim=1, keepdim=True)
    return sg.log(sg.exp(x - m).sum(dim=1, keepdim=True)) + m


def log_softmax_by_hand(x):
    m = sg.max(x, dim=-1, keepdim=True).values
    return x - m - sg.log(sg.sum(sg.exp(x - m), dim=-1, keepdim=True))


def lse_min_shift(x):            # any shift constant along the summed dim is exact
    m = sg.amin(x, dim=-1, keepdim=True)
    return m + sg.log(sg.sum(sg.exp(x - m), dim=-1, keepdim=True))


def lse_all(x):                  # a full reduction: the shift is a 0-d amax
    m = sg.amax(x)
    return m + sg.log(sg.sum(sg.exp(x - m)))


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("fn", [lse_values, lse_amax, lse_min_shift])
def test_gradient_is_softmax_and_backward_has_no_max_path(fn):
    rng = np.random.default_rng(0)
    x = rng.normal(0, 3, (5, 7))
    mod = sg.compile(fn, x)
    out = mod.forward(x)
    want = np.log(np.exp(x).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(out, want, rtol=1e-13)
    g = rng.normal(size=(5, 1))
    (gx,) = mod.backward(g, x)
    np.testing.assert_allclose(gx, g * _softmax(x), rtol=1e-13, atol=1e-16)
    backward = mod.source[mod.source.index("def backward("):]
    backward = backward[:backward.index("\ndef ", 5)] if "\ndef " in backward[5:] else backward
    assert "argmax" not in backward and "_index_back" not in backward


def test_log_softmax_by_hand_and_full_reduction():
    rng = np.random.default_rng(1)
    x = rng.normal(0, 3, (4, 6))
    mod = sg.compile(log_softmax_by_hand, x)
    g = rng.normal(size=x.shape)
    (gx,) = mod.backward(g, x)
    p = _softmax(x)
    np.testing.assert_allclose(gx, g - p * g.sum(axis=-1, keepdims=True), rtol=1e-12, atol=1e-14)
    mod = sg.compile(lse_all, x)
    (gx,) = mod.backward(np.array(2.0), x)
    np.testing.assert_allclose(gx, 2.0 * _softmax(x.reshape(-1)).reshape(x.shape), rtol=1e-13)


def test_extreme_logits_stay_finite():
    x = np.array([[800.0, 799.0, -800.0], [-800.0, -801.0, -1e4]])
    mod = sg.compile(lse_values, x)
    out = mod.forward(x)
    np.testing.assert_allclose(out[:, 0], [800 + np.log1p(np.exp(-1.0)),
                                           -800 + np.log1p(np.exp(-1.0))], rtol=1e-15)
    (gx,) = mod.backward(np.ones((2, 1)), x)
    assert np.isfinite(gx).all()
    np.testing.assert_allclose(gx.sum(axis=-1), 1.0, rtol=1e-15)


def test_second_order_through_the_runtime():
    rng = np.random.default_rng(2)
    x = sg.tensor(rng.normal(size=(3, 4)), dtype=sg.float64, requires_grad=True)

    class LSE(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return lse_values(x)

    assert sg.autograd.gradcheck(LSE.apply, (x,))
    assert sg.autograd.gradgradcheck(LSE.apply, (x,))
    # the Hessian of logsumexp per row: diag(p) - p p^T
    h = sg.autograd.functional.hessian(lambda t: LSE.apply(t).sum(), x).numpy()
    p = _softmax(x.detach().numpy())
    for r in range(3):
        block = h[r, :, r, :]
        np.testing.assert_allclose(block, np.diag(p[r]) - np.outer(p[r], p[r]), atol=1e-12)


def test_a_shift_that_varies_along_the_sum_is_left_alone():
    def f(x):
        m = sg.amax(x, dim=0, keepdim=True)            # constant along dim 0, summed over dim 1
        return m + sg.log(sg.sum(sg.exp(x - m), dim=1, keepdim=True))
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 4))
    mod = sg.compile(f, x)
    out = mod.forward(x)
    m = x.max(axis=0, keepdims=True)
    np.testing.assert_allclose(out, m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)),
                               rtol=1e-13)
    g = rng.normal(size=out.shape)
    (gx,) = mod.backward(g, x)
    eps = 1e-6
    for i, j in ((0, 0), (1, 2), (2, 3)):
        d = np.zeros_like(x)
        d[i, j] = eps
        fd = ((mod.forward(x + d) - mod.forward(x - d)) * g).sum() / (2 * eps)
        assert gx[i, j] == pytest.approx(fd, rel=1e-6, abs=1e-9)
