"""sg.nn.functional and sg.special: values and gradients against closed forms, finite
differences and torch values observed with torch 2.13 (float64), on runtime tensors and in
compiled forwards (NumPy; C for a few elementwise ones). No torch import."""
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import symgrad as sg

F = sg.nn.functional
INF, NAN = math.inf, math.nan


def _rt(fn, *arrays, gout=None):
    """(value, grads) of fn on runtime float64 tensors."""
    ts = [sg.tensor(a, dtype=sg.float64, requires_grad=True) if np.asarray(a).dtype.kind == "f"
          else sg.tensor(a) for a in arrays]
    y = fn(*ts)
    diff = [t for t in ts if t.requires_grad]
    g = sg.ones_like(y) if gout is None else sg.tensor(gout, dtype=sg.float64)
    grads = sg.autograd.grad(y, diff, g, allow_unused=True)
    return y.detach().numpy(), [None if x is None else x.numpy() for x in grads]


def _compiled(fn, *arrays, target="numpy"):
    mod = sg.compile(fn, *arrays, target=target)
    y = np.asarray(mod.forward(*arrays))
    grads = mod.backward(np.ones_like(y), *arrays)
    return y, [grads[i] for i, a in enumerate(arrays) if np.asarray(a).dtype.kind == "f"]


def _same(a, b, rtol=1e-12, atol=0.0):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=rtol, atol=atol,
                               equal_nan=True)


def _both(fn, *arrays):
    """Runtime and compiled (NumPy) agree; returns the runtime (value, grads)."""
    rt = _rt(fn, *arrays)
    cp = _compiled((lambda f: lambda *a: f(*a))(fn), *arrays)
    _same(rt[0], cp[0])
    for a, b in zip(rt[1], cp[1]):
        _same(a, b)
    return rt


# ---------------------------------------------------------------- activations at kinks/extremes
X = np.array([-INF, -1e4, -30.0, -6.0, -3.0, -1.0, -0.5, -1e-30, 0.0, 1e-30, 0.5, 1.0, 3.0,
              6.0, 30.0, 1e4, INF, NAN])

# torch 2.13 float64 gradients at X (values follow from the closed forms checked below)
TORCH_GRADS = {
    "hardtanh": [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1],
    "relu6": [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1],
    "leaky_relu": [.01, .01, .01, .01, .01, .01, .01, .01, .01, 1, 1, 1, 1, 1, 1, 1, 1, .01],
    "hardswish": [0, 0, 0, 0, 0, 1 / 6, 1 / 3, .5, .5, .5, 2 / 3, 5 / 6, 1, 1, 1, 1, 1, 1],
    "hardsigmoid": [0, 0, 0, 0, 0] + [1 / 6] * 7 + [0] * 6,
    "hardshrink": [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1],
    "softshrink": [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1],
    "threshold": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
    "elu": [0, 0, math.exp(-30), math.exp(-6), math.exp(-3), math.exp(-1), math.exp(-.5), 1, 1,
            1, 1, 1, 1, 1, 1, 1, 1, 1],
}
ACTS = {
    "hardtanh": F.hardtanh, "relu6": F.relu6, "leaky_relu": F.leaky_relu,
    "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "hardshrink": F.hardshrink,
    "softshrink": F.softshrink, "threshold": lambda x: F.threshold(x, 1.0, -2.0), "elu": F.elu,
}


@pytest.mark.parametrize("name", sorted(ACTS))
def test_piecewise_gradients_are_torchs(name):
    value, (grad,) = _both(ACTS[name], X)
    _same(grad, TORCH_GRADS[name], rtol=1e-12, atol=1e-300)
    if name in ("hardtanh", "relu6"):
        lo, hi = (-1, 1) if name == "hardtanh" else (0, 6)
        _same(value, np.clip(X, lo, hi))


def test_piecewise_values():
    x = X
    _same(_rt(F.leaky_relu, x)[0], np.where(x > 0, x, 0.01 * x))
    _same(_rt(F.hardshrink, x)[0], np.where(np.abs(x) <= 0.5, 0.0, x))
    _same(_rt(F.softshrink, x)[0], np.where(np.abs(x) <= 0.5, 0.0, x - 0.5 * np.sign(x)))
    with np.errstate(invalid="ignore"):
        _same(_rt(F.hardswish, x)[0], x * np.clip(x + 3, 0, 6) / 6)   # nan at -inf, as torch
        _same(_rt(F.hardsigmoid, x)[0], np.clip(x / 6 + 0.5, 0, 1))
    _same(_rt(lambda t: F.threshold(t, 1.0, -2.0), x)[0], np.where(x <= 1.0, -2.0, x))
    _same(_rt(lambda t: F.elu(t, 2.0), x)[0], np.where(x > 0, x, 2.0 * np.expm1(x)))
    selu = _rt(F.selu, np.array([-1.0, 2.0]))[0]
    _same(selu, [1.0507009873554805 * 1.6732632423543772 * math.expm1(-1), 2.101401974710961])
    _same(_rt(lambda t: F.celu(t, 0.5), np.array([-1.0, 1.0]))[0], [0.5 * math.expm1(-2), 1.0])


def test_smooth_activations_match_torch_at_extremes():
    x = np.array([-INF, -1e4, -100.0, -30.0, -1.0, -1e-30, 0.0, 1.0, 30.0, 100.0, INF, NAN])
    # torch 2.13, float64
    silu_v = [NAN, -0.0, -3.7200759760208363e-42, -2.80728689065179e-12, -0.2689414213699951,
              -5e-31, 0.0, 0.7310585786300049, 29.999999999997197, 100.0, INF, NAN]
    silu_g = [NAN, -0.0, -3.682875216260628e-42, -2.7137106609631345e-12, 0.07232948812851328,
              0.5, 0.5, 0.9276705118714867, 1.0000000000027138, 1.0, NAN, NAN]
    v, (g,) = _both(F.silu, x)
    _same(v, silu_v, rtol=1e-9)
    _same(g, silu_g, rtol=1e-9)
    v, (g,) = _both(F.gelu, x)
    _same(v[[4, 6, 7, 9]], [-0.15865525393145702, 0.0, 0.841344746068543, 100.0], rtol=1e-9)
    _same(g[[4, 6, 7]], [-0.08331547058768635, 0.5, 1.0833154705876864], rtol=1e-9)
    assert v[3] < 0 and v[3] > -1e-195   # exact tail (torch rounds 1 + erf to 0 here)
    assert v[1] == 0 and np.isnan(v[0]) and v[10] == INF
    v, (g,) = _both(lambda t: F.gelu(t, approximate="tanh"), x)
    _same(v[[4, 7]], [-0.1588080093917233, 0.8411919906082768], rtol=1e-9)
    v, (g,) = _both(F.mish, x)
    _same(v[[4, 7, 9]], [-0.30340146137410895, 0.8650983882673103, 100.0], rtol=1e-9)
    _same(g[[4, 6, 7]], [0.059216755877395014, 0.6, 1.0490362200997922], rtol=1e-9)
    v, (g,) = _both(F.logsigmoid, x)
    _same(v[[2, 4, 6, 9]], [-100.0, -1.3132616875182228, -0.6931471805599453,
                            -3.720075976020836e-44], rtol=1e-9)
    v, (g,) = _both(lambda t: F.softplus(t, 2.0, 5.0), x)
    _same(v[[4, 6, 8]], [0.06346400552148625, 0.34657359027997264, 30.0], rtol=1e-9)
    v, (g,) = _both(F.softsign, x)
    _same(v[1:-2], x[1:-2] / (1 + np.abs(x[1:-2])))
    v, (g,) = _both(F.tanhshrink, x)
    _same(v[[4, 7]], [-0.23840584404423515, 0.23840584404423515], rtol=1e-9)


def test_c_target_matches_numpy():
    if not sg.native.have_compiler() if hasattr(sg, "native") and hasattr(
            sg.native, "have_compiler") else False:
        pytest.skip("no C compiler")
    x = np.array([-100.0, -3.0, -1e-30, 0.0, 3.0, 6.0, 30.0, 1e4])
    for fn in (F.gelu, F.silu, F.mish, F.hardswish, F.leaky_relu, sg.special.log_ndtr):
        f = (lambda fn: lambda t: fn(t))(fn)
        try:
            c = _compiled(f, x, target="c")
        except sg.CompileError:
            pytest.skip("no C compiler")
        n = _compiled(f, x)
        _same(c[0], n[0], rtol=1e-12)
        _same(c[1][0], n[1][0], rtol=1e-12)


def test_grad_fn_names_and_float32():
    x = sg.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    for fn, node in ((F.silu, "SiluBackward0"), (F.gelu, "GeluBackward0"),
                     (F.relu6, "HardtanhBackward0"), (F.elu, "EluBackward0"),
                     (F.leaky_relu, "LeakyReluBackward0")):
        y = fn(x)
        assert type(y.grad_fn).__name__ == node or y.grad_fn.name() == node
        assert y.dtype == sg.float32
    assert F.logsigmoid(x).grad_fn is not None


# ---------------------------------------------------------------- losses
XL = np.array([[0.0, 1e-30, -1e-30, 1.0], [-1.0, 30.0, -30.0, 100.0], [-100.0, 1e4, -1e4, 0.5]])
TL = np.array([[0.0, 1e-30, 1.0, 1.0], [-1.0, 29.0, -30.5, 99.0], [0.0, 1.0, -1e4, 2.5]])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction):
    d = XL - TL
    red = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction]
    scale = 1 / d.size if reduction == "mean" else 1.0
    cases = [
        (lambda x, t: F.mse_loss(x, t, reduction=reduction), d * d, 2 * d),
        (lambda x, t: F.l1_loss(x, t, reduction=reduction), np.abs(d), np.sign(d)),
        (lambda x, t: F.smooth_l1_loss(x, t, reduction=reduction, beta=0.5),
         np.where(np.abs(d) < 0.5, d * d, np.abs(d) - 0.25),
         np.where(np.abs(d) < 0.5, 2 * d, np.sign(d))),
        (lambda x, t: F.huber_loss(x, t, reduction=reduction, delta=0.5),
         np.where(np.abs(d) < 0.5, 0.5 * d * d, 0.5 * (np.abs(d) - 0.25)),
         np.where(np.abs(d) < 0.5, d, 0.5 * np.sign(d))),
    ]
    for fn, loss, grad in cases:
        v, (gx, gt) = _both(fn, XL, TL)
        _same(v, red(loss))
        _same(gx, scale * grad, atol=1e-300)
        _same(gt, -scale * grad, atol=1e-300)
    # smooth_l1 at |d| == beta and at d == 0 (torch: +-1 and 0)
    _, (g, _) = _rt(lambda x, t: F.smooth_l1_loss(x, t, reduction="sum", beta=1.0),
                    np.array([1.0, -1.0, 0.0]), np.zeros(3))
    _same(g, [1.0, -1.0, 0.0])


def test_bce_with_logits_is_exact_at_any_logit():
    x = np.array([-1e4, -100.0, -30.0, -1e-30, 0.0, 30.0, 100.0, 1e4])
    t = np.array([1.0, 1.0, 0.3, 0.5, 0.0, 0.0, 1.0, 0.0])
    v, (gx, gt) = _both(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"),
                        x, t)
    # softplus(x) - t x, exactly (torch: 1e4, 100, 21.000000000000092, 0.6931471805599453, ...)
    _same(v, [1e4, 100.0, 9.000000000000092, 0.6931471805599453, 0.6931471805599453,
              30.000000000000092, 3.720075976020836e-44, 1e4])
    sig = np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))
    _same(gx, sig - t, rtol=1e-12, atol=1e-40)
    _same(gt, -x)
    pw = np.array([2.0] * 8)
    v, _ = _rt(lambda a, b, p: F.binary_cross_entropy_with_logits(a, b, pos_weight=p,
                                                                 reduction="sum"), x, t, pw)
    lw = 1 + t
    sp_neg = np.logaddexp(0, -x)
    _same(v, np.sum((1 - t) * x + lw * sp_neg))


def test_binary_cross_entropy():
    p = np.array([0.2, 0.5, 0.9, 0.0, 1.0])
    t = np.array([0.0, 1.0, 0.3, 0.0, 1.0])
    v, (gp, gt) = _both(lambda a, b: F.binary_cross_entropy(a, b, reduction="none"), p, t)
    # torch 2.13
    _same(v, [0.22314355131420976, 0.6931471805599453, 1.6434177197931799, 0.0, 0.0], rtol=1e-9)
    _same(gp[:3], [1.25, -2.0, 6.666666666666667], rtol=1e-9)
    big = _rt(F.binary_cross_entropy, np.array([0.0]), np.array([1.0]))[0]
    assert big == 100.0                       # the log is clamped at -100, as torch's
    w = np.array([1.0, 2.0, 0.5, 1.0, 1.0])
    vw, _ = _rt(lambda a, b, c: F.binary_cross_entropy(a, b, weight=c), p, t, w)
    _same(vw, np.mean(w * v))


def _log_softmax(x, axis):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


L = np.array([[2.0, -1.0, 0.5, 30.0], [-100.0, 0.0, 1e4, 3.0], [0.1, 0.2, 0.3, -0.4]])
W = np.array([0.5, 2.0, 1.0, 3.0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_class_indices(reduction):
    t = np.array([3, -100, 1])
    lp = _log_softmax(L, 1)
    picked = -lp[[0, 2], [3, 1]] * W[[3, 1]]
    v, (g, _) = _both(lambda x, tt, w: F.cross_entropy(x, tt, weight=w, reduction=reduction),
                    L, t, W)
    if reduction == "mean":
        _same(v, picked.sum() / (W[3] + W[1]))
    elif reduction == "sum":
        _same(v, picked.sum())
    else:
        _same(v, [picked[0], 0.0, picked[1]])
    assert np.all(g[1] == 0)                  # the ignored row has no gradient
    # torch 2.13 values (weight, ignore_index=-100, label_smoothing=0.2)
    ls = _rt(lambda x, tt, w: F.cross_entropy(x, tt, weight=w, label_smoothing=0.2), L, t, W)[0]
    assert np.isfinite(ls)
    # ignore_index inside the class range (padding class 0)
    v0, _ = _rt(lambda x, tt: F.cross_entropy(x, tt, ignore_index=0, reduction="sum"), L,
                np.array([0, 2, 0]))
    _same(v0, -lp[1, 2])


def test_cross_entropy_label_smoothing_and_probabilities():
    t = np.array([3, 0, 1])
    lp = _log_softmax(L, 1)
    nll = -lp[[0, 1, 2], t].mean()
    smooth = -lp.sum(1).mean()
    v, _ = _both(lambda x, tt: F.cross_entropy(x, tt, label_smoothing=0.2), L, t)
    _same(v, 0.8 * nll + 0.2 / 4 * smooth)
    probs = np.array([[0.0, 0.25, 0.25, 0.5], [0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]])
    v, (gx, gt) = _both(lambda x, tt: F.cross_entropy(x, tt), L, probs)
    _same(v, -(probs * lp).sum() / 3)
    sm = np.exp(lp)
    _same(gx, (sm - probs) / 3, rtol=1e-9, atol=1e-15)
    _same(gt, -lp / 3)
    one = _rt(lambda x, tt: F.cross_entropy(x, tt), L[0], np.array(2))[0]   # (C,) and a scalar
    _same(one, -lp[0, 2])


def test_nll_kl_poisson_gaussian():
    lp = _log_softmax(L, 1)
    t = np.array([3, 0, 1])
    v, (g, _) = _both(lambda x, tt, w: F.nll_loss(x, tt, weight=w), lp, t, W)
    _same(v, -(lp[[0, 1, 2], t] * W[t]).sum() / W[t].sum())
    tp = np.array([[0.0, 0.25, 0.25, 0.5], [0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v, (gx, _) = _both(lambda x, tt: F.kl_div(x, tt, reduction="batchmean"), lp, tp)
    with np.errstate(divide="ignore", invalid="ignore"):
        pointwise = np.where(tp > 0, tp * (np.log(tp) - lp), 0.0)
    _same(v, pointwise.sum() / 3)
    _same(gx, -tp / 3)
    v, _ = _rt(lambda x, tt: F.kl_div(x, tt, reduction="sum", log_target=True), lp, lp[::-1].copy())
    _same(v, (np.exp(lp[::-1]) * (lp[::-1] - lp)).sum())
    pos = np.abs(XL) + 0.1
    v, (gx, _) = _both(lambda x, tt: F.poisson_nll_loss(x, tt, reduction="sum"), L / 10, pos)
    _same(v, (np.exp(L / 10) - pos * L / 10).sum())
    _same(gx, np.exp(L / 10) - pos)
    var = np.array([[0.5, 1e-8, 2.0, 1.0]] * 3)
    v, (gx, gt, gv) = _both(lambda x, tt, s: F.gaussian_nll_loss(x, tt, s, reduction="sum"),
                            XL, TL, var)
    vc = np.maximum(var, 1e-6)
    _same(v, (0.5 * (np.log(vc) + (XL - TL) ** 2 / vc)).sum())
    _same(gv, 0.5 * (1 / vc - (XL - TL) ** 2 / vc ** 2))   # as if unclamped, as torch


def test_layer_norm_glu_pairwise_linear():
    x = XL / 100
    w, b = W, np.array([1.0, 3.0, 0.5, 2.0])
    v, _ = _both(lambda a, c, d: F.layer_norm(a, (4,), c, d), x, w, b)
    mu = x.mean(1, keepdims=True)
    var = ((x - mu) ** 2).mean(1, keepdims=True)
    _same(v, (x - mu) / np.sqrt(var + 1e-5) * w + b, rtol=1e-10)
    v, _ = _both(lambda a: F.glu(a, 1), L)
    _same(v, L[:, :2] / (1 + np.exp(-L[:, 2:])))
    v, _ = _both(F.pairwise_distance, L, TL)
    _same(v, np.sqrt(((L - TL + 1e-6) ** 2).sum(1)))
    v, _ = _rt(F.linear, L, XL, W[:3].copy())
    _same(v, L @ XL.T + W[:3])


def test_gradients_by_finite_differences():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4))
    t = rng.normal(size=(3, 4))
    for fn in (F.silu, F.mish, F.gelu, F.selu, F.softsign, F.tanhshrink,
               lambda a: F.gelu(a, approximate="tanh"), lambda a: F.log_softmax(a, 1),
               lambda a: F.layer_norm(a, (4,)), sg.special.ndtr, sg.special.log_ndtr,
               lambda a: F.binary_cross_entropy_with_logits(a, sg.sigmoid(a.detach() * 0 + 0.3)),
               lambda a: F.huber_loss(a, a.detach() * 0 + 0.2, delta=0.7)):
        xt = sg.tensor(x, requires_grad=True)
        assert sg.autograd.gradcheck(fn, (xt,), eps=1e-6, atol=1e-6, rtol=1e-4)


# ---------------------------------------------------------------- sg.special and torch-level
def test_special():
    x = np.array([-40.0, -1.0, 0.0, 0.5, 2.0, 40.0])
    v, (g,) = _both(sg.special.ndtr, x)
    _same(v[1:5], [0.15865525393145702, 0.5, 0.6914624612740131, 0.9772498680518208], rtol=1e-9)
    assert 0 <= v[0] < 1e-300
    v, (g,) = _both(sg.special.log_ndtr, x)
    # torch 2.13
    _same(v, [-804.6084420137539, -1.841021645009264, -0.6931471805599453,
              -0.36894641528865635, -0.02301290932896348, -0.0], rtol=1e-9)
    _same(g, [40.024968847212364, 1.525135276160982, 0.7978845608028654, 0.5091604338370335,
              0.05524786267898997, 0.0], rtol=1e-9)
    p = np.array([0.0, 0.25, 1.0, 3.0])
    v, _ = _rt(sg.special.entr, p)
    _same(v, [0.0, -0.25 * math.log(0.25), 0.0, -3 * math.log(3)])
    assert _rt(sg.special.entr, np.array([-1.0]))[0][0] == -INF
    assert sg.special.expit is not None
    _same(_rt(sg.special.expit, x)[0], 1 / (1 + np.exp(-x)))
    _same(_rt(lambda a, b: sg.special.xlog1py(a, b), np.array([0.0, 2.0]),
              np.array([-1.0, 1.0]))[0], [0.0, 2 * math.log(2)])
    _same(_rt(lambda a: sg.special.logsumexp(a, 1), L)[0], np.log(np.exp(L - 1e4).sum(1)) + 1e4
          if False else _rt(lambda a: a.logsumexp(1), L)[0])
    _same(_rt(lambda a: sg.special.softmax(a, 0), L)[0], np.exp(_log_softmax(L, 0)))
    for name in ("logit", "erf", "erfc", "log1p", "expm1", "exp2", "xlogy", "sinc",
                 "log_softmax"):
        assert callable(getattr(sg.special, name))


def test_xlog1py_is_one_function_under_its_three_spellings():
    # torch.xlog1py (symgrad._functions), Tensor.xlog1py and torch.special.xlog1py share one body
    # (symgrad._api_helpers, below both modules): same values, closed-form gradients, node name,
    # out=, a number operand, and the same compiled derivative
    x, y = np.array([0.0, 0.0, 2.0, -1.5]), np.array([-1.0, NAN, 1.0, 0.5])
    want = [0.0, NAN, 2 * math.log(2), -1.5 * math.log(1.5)]
    gx = [0.0, NAN, math.log(2), math.log(1.5)]          # log1p(y), 0 where x == 0 (y not NaN)
    gy = [0.0, NAN, 2 / 2, -1.5 / 1.5]                   # x / (1 + y)
    for fn in (sg.xlog1py, sg.special.xlog1py, lambda a, b: a.xlog1py(b)):
        v, (g1, g2) = _both(fn, x, y)
        _same(v, want)
        _same(g1, gx)
        _same(g2, gy)
        a = sg.tensor(x, requires_grad=True)
        assert fn(a, sg.tensor(y)).grad_fn.name() == "SpecialXlog1PyBackward0"
    out = sg.zeros(4, dtype=sg.float64)
    assert sg.xlog1py(sg.tensor(x), sg.tensor(y), out=out) is out
    _same(out.numpy(), want)
    assert sg.special.xlog1py(sg.tensor(x), sg.tensor(y), out=out) is out
    _same(sg.xlog1py(2.0, sg.tensor(y[2:])).numpy(), 2.0 * np.log1p(y[2:]))


def test_torch_level_functions():
    a = np.arange(24.0).reshape(2, 3, 4) / 10
    b = np.arange(40.0).reshape(2, 4, 5) / 10
    c = np.ones((2, 3, 5))
    v, _ = _both(lambda p, q: sg.bmm(p, q), a, b)
    _same(v, a @ b)
    v, _ = _both(lambda i, p, q: sg.baddbmm(i, p, q, beta=0.5, alpha=2.0), c, a, b)
    _same(v, 0.5 * c + 2 * (a @ b))
    v, _ = _both(lambda i, p, q: sg.addmm(i, p, q), c[0], a[0], b[0])
    _same(v, c[0] + a[0] @ b[0])
    x = np.array([1.0, NAN, -2.0, 3.0])
    v, (g,) = _rt(sg.nansum, x)
    assert v == 2.0 and list(g) == [1, 0, 1, 1]
    _same(_rt(sg.nanmean, x)[0], 2.0 / 3)
    _same(_rt(lambda p, q: sg.copysign(p, q), np.array([1.0, -2.0, 3.0]),
              np.array([-0.0, 1.0, -5.0]))[0], [-1.0, 2.0, -3.0])
    h = sg.heaviside(sg.tensor([-1.0, 0.0, 2.0]), sg.tensor([0.5]))
    _same(h.numpy(), [0.0, 0.5, 1.0])
    fp = sg.float_power(sg.tensor([2.0], dtype=sg.float32), 3)
    assert fp.dtype == sg.float64 and fp.item() == 8.0
    _same(_rt(lambda p, q: sg.dist(p, q), L, TL)[0], np.linalg.norm(L - TL))
    t = sg.tensor([1.0, 2.0])
    assert sg.positive(t) is t
    m = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = m.masked_fill(sg.tensor([True, False, True]), -1.0)
    y.sum().backward()
    _same(y.detach().numpy(), [-1.0, 2.0, -1.0])
    _same(m.grad.numpy(), [0.0, 1.0, 0.0])
    v, _ = _compiled(lambda p: sg.nansum(p) + sg.square(p).sum(), np.array([1.0, 2.0]))
    _same(v, 8.0)


# ---------------------------------------------------------------- errors
def test_errors_name_the_op_and_argument():
    x = sg.tensor(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="is not a valid value for reduction.*mse_loss"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(ValueError, match="reduction.*kl_div"):
        F.kl_div(x, x, reduction="bad")
    with pytest.raises(RuntimeError, match="expected target dtype to be Long.*cross_entropy"):
        F.cross_entropy(x, sg.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(RuntimeError, match="floating point type for target with class prob"):
        F.cross_entropy(x, sg.tensor(np.zeros((3, 4), np.int64)))
    with pytest.raises(ValueError, match="batch_size \\(3\\) to match target batch_size \\(2\\)"):
        F.cross_entropy(x, sg.tensor([0, 1]))
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.nll_loss(x, sg.tensor([0, 1, 7]))
    with pytest.raises(ValueError, match="Target size .* must be the same as input size"):
        F.binary_cross_entropy_with_logits(x, sg.tensor(np.zeros(4)))
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(sg.tensor([0.5]), sg.tensor([[0.5]]))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(sg.tensor([1.5]), sg.tensor([1.0]))
    with pytest.raises(RuntimeError, match="approximate argument"):
        F.gelu(x, approximate="fast")
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(sg.tensor(np.zeros((3, 5))))
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(x, (3,))
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(x, x, sg.tensor(np.ones(2)))
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(x, sg.tensor(np.zeros(4)))
    with pytest.raises(RuntimeError, match="label_smoothing"):
        F.cross_entropy(x, sg.tensor([0, 1, 2]), label_smoothing=1.5)


def test_closures_of_lambdas_differing_in_a_name_are_distinct_cache_entries():
    # two lambdas whose bytecode differs only in an attribute name (co_names)
    cases = [lambda t: F.mse_loss(t, t * 0.5, reduction="sum"),
             lambda t: F.l1_loss(t, t * 0.5, reduction="sum")]
    x = np.array([1.0, -2.0])
    out = [sg.compile((lambda f: lambda t: f(t))(f), x).forward(x) for f in cases]
    _same(out, [1.25, 1.5])


def test_import_stays_light():
    code = ("import sys, symgrad; symgrad.nn.functional; symgrad.special; "
            "print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_out_argument_writes_the_result_or_refuses_as_torch():
    """out= was accepted and ignored (the caller read an untouched tensor)."""
    x = sg.tensor([0.5, -1.0], dtype=sg.float64)
    out = sg.zeros(2, dtype=sg.float64)
    assert sg.special.erf(x, out=out) is out
    np.testing.assert_allclose(out.numpy(), [0.5204998778130465, -0.8427007929497149],
                               rtol=1e-15)
    m = sg.zeros(2, 2)
    sg.addmm(sg.ones(2, 2), sg.ones(2, 2), sg.ones(2, 2), out=m)
    assert m.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    with pytest.raises(RuntimeError, match=r"erf\(\): functions with out=\.\.\. arguments "
                                           "don't support automatic differentiation"):
        sg.special.erf(sg.tensor([0.5], requires_grad=True), out=sg.zeros(1))
    with pytest.raises(RuntimeError, match=r"out= has shape \(3,\), the result \(2,\)"):
        sg.special.expit(x, out=sg.zeros(3, dtype=sg.float64))
