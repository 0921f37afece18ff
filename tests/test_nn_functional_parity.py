"""torch-parity regressions of sg.nn.functional / sg.special found by an audit against torch
2.13 (CPU, float64); torch's observed values are written as literals (no torch import)."""
import numpy as np
import pytest

import symgrad as sg

F = sg.nn.functional
X = [[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]]
T = [[0.0, 1.0, 1.0], [-1.0, 0.5, 0.5]]
W = [[1.0, 2.0, 0.5], [0.25, 3.0, 1.0]]

# torch 2.13: weighted mse_loss / l1_loss mean is sum(w * loss) / sum(w); huber_loss's is mean
WEIGHTED = {
    "mse_loss": (1.5564516129032258, [[0.12903225806451613, -1.032258064516129,
                                       0.12903225806451613], [0.16129032258064516,
                                       -0.3870967741935484, -0.25806451612903225]]),
    "l1_loss": (1.0483870967741935, [[0.12903225806451613, -0.25806451612903225,
                                      0.06451612903225806], [0.03225806451612903,
                                      -0.3870967741935484, -0.12903225806451613]]),
    "huber_loss": (0.7916666666666666, [[1 / 12, -1 / 3, 1 / 12], [1 / 24, -0.25, -1 / 6]]),
}


def _x():
    return sg.tensor(X, dtype=sg.float64, requires_grad=True)


@pytest.mark.parametrize("name", sorted(WEIGHTED))
def test_weighted_regression_loss_mean_is_torchs(name):
    x = _x()
    y = getattr(F, name)(x, sg.tensor(T, dtype=sg.float64), weight=sg.tensor(W, dtype=sg.float64))
    (g,) = sg.autograd.grad(y, x)
    value, grad = WEIGHTED[name]
    np.testing.assert_allclose(y.item(), value, rtol=1e-13)
    np.testing.assert_allclose(g.numpy(), grad, rtol=1e-13)
    assert y.grad_fn.name() == ("MeanBackward0" if name == "huber_loss" else "DivBackward0")


def test_weighted_loss_mean_traced_too():
    fn = lambda x, t, w: F.mse_loss(x, t, weight=w)   # noqa: E731
    a = [np.array(v) for v in (X, T, W)]
    mod = sg.compile(fn, *a)
    np.testing.assert_allclose(mod.forward(*a), WEIGHTED["mse_loss"][0], rtol=1e-13)


def test_weight_of_another_size_is_a_value_error():
    x = _x()
    for name in WEIGHTED:
        with pytest.raises(ValueError, match="Weights and input must have the same size"):
            getattr(F, name)(x, sg.tensor(T, dtype=sg.float64), weight=sg.ones(3))


@pytest.mark.parametrize("name,fn,slope", [
    ("elu", lambda a: F.elu(a, alpha=0.7), 0.7),
    ("selu", F.selu, 1.7580993408473766),
    ("celu", lambda a: F.celu(a, alpha=2.0), 1.0),
])
def test_elu_family_second_derivative_at_zero_is_torchs(name, fn, slope):
    z = sg.tensor([-0.0, 0.0], dtype=sg.float64, requires_grad=True)
    y = fn(z)
    assert np.signbit(y.detach().numpy()).tolist() == [True, False]
    (g,) = sg.autograd.grad(y.sum(), z, create_graph=True)
    (gg,) = sg.autograd.grad(g.sum(), z)
    np.testing.assert_allclose(g.detach().numpy(), [slope, slope], rtol=1e-15)
    np.testing.assert_array_equal(gg.numpy(), [0.0, 0.0])


def test_node_names_per_reduction_do_not_stick():
    x = _x()
    t = sg.tensor(T, dtype=sg.float64)
    # torch 2.13's grad_fn.name() of each call, in this order (the first must not stick)
    expected = [
        (lambda: F.l1_loss(x, t, reduction="none"), "AbsBackward0"),
        (lambda: F.l1_loss(x, t), "MeanBackward0"),
        (lambda: F.l1_loss(x, t, reduction="sum"), "SumBackward0"),
        (lambda: F.smooth_l1_loss(x, t, reduction="sum", beta=0.0), "SumBackward0"),
        (lambda: F.mse_loss(x, t, reduction="none", weight=t), "MulBackward0"),
        (lambda: F.mse_loss(x, t, reduction="sum", weight=t), "SumBackward0"),
        (lambda: F.kl_div(x, t.abs(), reduction="none"), "SubBackward0"),
        (lambda: F.kl_div(x, t, reduction="none", log_target=True), "MulBackward0"),
        (lambda: F.kl_div(x, t.abs(), reduction="batchmean"), "DivBackward0"),
        (lambda: F.kl_div(x, t.abs(), reduction="sum"), "SumBackward0"),
        (lambda: F.poisson_nll_loss(x, t.abs(), reduction="none"), "SubBackward0"),
        (lambda: F.poisson_nll_loss(x, t.abs(), full=True, reduction="none"), "AddBackward0"),
        (lambda: F.poisson_nll_loss(x, t.abs(), reduction="sum"), "SumBackward0"),
        (lambda: F.gaussian_nll_loss(x, t, t.abs() + 1, reduction="none"), "MulBackward0"),
        (lambda: F.gaussian_nll_loss(x, t, t.abs() + 1, full=True, reduction="none"),
         "AddBackward0"),
        (lambda: F.gaussian_nll_loss(x, t, t.abs() + 1), "MeanBackward0"),
        (lambda: F.celu(x), "CeluBackward0"),
        (lambda: F.elu(x), "EluBackward0"),
        (lambda: sg.special.ndtr(x), "MulBackward1"),
        (lambda: sg.special.xlog1py(x, t.abs()), "SpecialXlog1PyBackward0"),
    ]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [fn().grad_fn.name() for fn, _ in expected]
    assert got == [name for _, name in expected]


def test_nll_and_cross_entropy_node_names():
    c = sg.tensor([1, 0], dtype=sg.int64)
    x2 = sg.zeros(2, 3, requires_grad=True)
    assert F.cross_entropy(x2, c, label_smoothing=0.1).grad_fn.name() == "AddBackward0"
    assert F.cross_entropy(x2, c).grad_fn.name() == "NllLossBackward0"
    for nd in (3, 4, 5):
        x = sg.zeros(*(2, 3) + (2,) * (nd - 2), requires_grad=True)
        t = sg.zeros(*(2,) + (2,) * (nd - 2), dtype=sg.int64)
        names = [F.nll_loss(x, t, reduction=r).grad_fn.name() for r in ("none", "mean", "sum")]
        view = "NllLoss2DBackward0" if nd == 4 else "ViewBackward0"
        assert names == [view, "NllLoss2DBackward0", "NllLoss2DBackward0"]
        assert F.cross_entropy(x, t, reduction="none").grad_fn.name() == view
        assert F.cross_entropy(x, t, label_smoothing=0.2).grad_fn.name() == "AddBackward0"


@pytest.mark.parametrize("f", [
    lambda x: F.leaky_relu(x, 0.1), lambda x: F.hardtanh(x), lambda x: F.relu6(x),
    lambda x: F.threshold(x, 0.1, 2.0), lambda x: F.softshrink(x), lambda x: F.hardshrink(x),
    lambda x: F.nll_loss(x.reshape(1, 3), sg.tensor([1])),
], ids=["leaky_relu", "hardtanh", "relu6", "threshold", "softshrink", "hardshrink", "nll_loss"])
def test_first_gradient_of_a_mask_op_requires_grad_as_torch(f):
    """torch's leaky_relu_backward(grad, self), hardtanh_backward, nll_loss_backward ... take
    the input, so with create_graph the first gradient requires grad and its own gradient is
    zeros that do not (torch 2.13). The gradient had no graph: grad of it raised."""
    x = sg.tensor([-1.0, 0.3, 2.0], requires_grad=True)
    (g,) = sg.autograd.grad(f(x).sum(), x, create_graph=True)
    assert g.requires_grad
    (h,) = sg.autograd.grad(g.sum(), x, create_graph=True)
    assert not h.requires_grad
    assert h.tolist() == [0.0, 0.0, 0.0]


def test_log_ndtr_derivatives_in_the_upper_tail_and_at_inf():
    """log_ndtr' = phi/Phi is its own primitive with derivative -r*(x + r): the second
    derivative was nan at x = 80 (erfcx(-x/sqrt 2)**2 overflowed; torch -0) and -0 at 30 (for
    -4.42e-195), and the first was nan at +inf (torch 0). References: mpmath, torch 2.13."""
    x = sg.tensor([-40.0, 1.0, 30.0, 80.0, np.inf], dtype=sg.float64, requires_grad=True)
    (g,) = sg.autograd.grad(sg.special.log_ndtr(x).sum(), x, create_graph=True)
    (h,) = sg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), [40.02496884720726, 0.2875999709391784,
                                                    1.4736461348785476e-196, 0.0, 0.0],
                               rtol=1e-13, atol=0)
    np.testing.assert_allclose(h.numpy()[:4], [-0.9993773316214086, -0.3703137142233946,
                                                -4.420938404635642e-195, -0.0],
                               rtol=1e-12, atol=0)


def test_dim_out_of_range_is_an_index_error_as_torch():
    """softmax, cumsum, stack ... (traced composite ops) raised a RuntimeError subclass for a dim
    out of range; torch raises IndexError (and x.sum(5) already did)."""
    x = sg.tensor([1.0, 2.0])
    for f in (lambda: F.softmax(x, 5), lambda: x.cumsum(2), lambda: sg.stack([x, x], 3)):
        with pytest.raises(IndexError, match="(?i)dimension out of range"):
            f()
