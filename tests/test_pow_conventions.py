"""x ** y as torch differentiates it: 0 where the derivative is 0 * inf or 0 * log(0).

torch masks pow's gradients (pow_backward_self: 0 where the exponent is 0; _exponent: 0 where
the base is 0 and the exponent >= 0). The runtime's built-in pow module, the shape-generic
trace and a specialised trace all gave nan or -inf there. Expected values are torch 2.13's."""
import numpy as np
import pytest

import symgrad as sg

INF, NAN = np.inf, np.nan


def _grads(f, *values):
    ts = [sg.tensor(v, dtype=sg.float64, requires_grad=True) for v in values]
    y = f(*ts)
    y.sum().backward()
    return y, [t.grad.numpy() for t in ts]


def _same(got, want):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want, dtype=np.float64))


Z = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN]


@pytest.mark.parametrize("f, value, grad", [
    (lambda x: x ** 0, [1] * 7, [0.0] * 7),
    (lambda x: sg.pow(x, 0.0), [1] * 7, [0.0] * 7),
    (lambda x: x ** 2, [0, 0, 1, 1, INF, INF, NAN], [0, -0.0, 2, -2, INF, -INF, NAN]),
    (lambda x: x ** 3, [0, -0.0, 1, -1, INF, -INF, NAN], [0, 0, 3, 3, INF, INF, NAN]),
    (lambda x: x ** 1.5, [0, 0, 1, NAN, INF, INF, NAN], [0, -0.0, 1.5, NAN, INF, NAN, NAN]),
    (lambda x: x ** -1, [INF, -INF, 1, -1, 0, -0.0, NAN],
     [-INF, -INF, -1, -1, -0.0, -0.0, NAN]),
    # torch computes these as sqrt and rsqrt: -0.0 ** 0.5 is -0.0, with gradient -inf
    (lambda x: x ** 0.5, [0, -0.0, 1, NAN, INF, NAN, NAN], [INF, -INF, 0.5, NAN, 0, NAN, NAN]),
])
def test_number_exponent(f, value, grad):
    y, (g,) = _grads(f, Z)
    _same(y.detach().numpy(), value)
    _same(g, grad)
    assert y.grad_fn.name() == "PowBackward0"


def test_tensor_exponent_and_number_base():
    y, (gx, gy) = _grads(lambda x, e: x ** e, [0, 0, 0, 2, -2, 0], [2, 0, -1, 0.5, 2, -0.0])
    _same(gx, [0, 0, -INF, 0.5 * 2 ** -0.5, -4, 0])
    _same(gy, [0, 0, -INF, np.sqrt(2) * np.log(2), NAN, 0])
    assert y.grad_fn.name() == "PowBackward1"
    y, (g,) = _grads(lambda e: 0 ** e, [0.0, 1.0, 2.0, -1.0])
    _same(g, [0, 0, 0, -INF])
    assert y.grad_fn.name() == "PowBackward2"


@pytest.mark.parametrize("examples", [False, True], ids=["generic", "specialised"])
def test_traced_forward_has_the_same_masks(examples):
    x = np.array([0.0, 0.0, 0.0, 2.0])
    e = np.array([2.0, 0.0, -1.0, 0.5])
    mod = sg.compile(lambda x, e: x ** e, *((x, e) if examples else ()), cache_ok=False)
    gx, ge = mod.backward(np.ones(4), x, e)
    _same(gx, [0, 0, -INF, 0.5 * 2 ** -0.5])
    _same(ge, [0, 0, -INF, np.sqrt(2) * np.log(2)])


def test_number_exponent_keeps_torchs_higher_order_graph():
    """x**2's derivatives stay connected to x at every order, as torch's PowBackward0 chain
    (2 x**1, then 2 x**0, ...): the third derivative is a zero that requires grad."""
    x = sg.tensor([1.5, -2.0], dtype=sg.float64, requires_grad=True)
    g = x ** 2
    values = []
    for _ in range(3):
        (g,) = sg.autograd.grad(g.sum(), x, create_graph=True)
        values.append(g.detach().numpy().tolist())
        assert g.requires_grad
    assert values == [[3.0, -4.0], [2.0, 2.0], [0.0, 0.0]]


def test_number_exponent_module_computes_no_exponent_gradient():
    from symgrad._generated import pow_scalar

    a, b = np.array([0.5, 2.0]), np.asarray(3.0)
    grad_a, grad_b = pow_scalar.backward(np.ones(2), a, b)
    assert grad_b is None
    _same(grad_a, 3 * a ** 2)
