"""The NumPy target's speed forms: freed intermediates, shared powers, saved forward values."""
import numpy
import pytest
import sympy

import symgrad as sg
from symgrad.compiler import RuntimeModule
from symgrad.optimize import share_powers


def _gelu(x):
    return 0.5 * x * (1.0 + sg.erf(x * 0.7071067811865476))


def _chain(x):
    for _ in range(4):
        x = sg.sin(sg.tanh(x))
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", [_gelu, _chain])
def test_forward_saving_backward_saved_match_backward(fn, dtype):
    x = numpy.linspace(-3, 3, 101).astype(dtype)
    mod = sg.compile(fn, x, target="numpy")
    rm = RuntimeModule(mod)
    assert rm.forward_saving is not None and rm.backward_saved is not None
    outs, saved = rm.forward_saving(x)
    assert isinstance(outs, tuple) and isinstance(saved, tuple) and saved
    numpy.testing.assert_array_equal(outs[0], rm.forward(x)[0])
    g = numpy.ones_like(x)
    ref = rm.backward(g, x)
    got = rm.backward_saved(g, *saved, x)
    assert got[0].dtype == numpy.dtype(dtype)
    numpy.testing.assert_allclose(got[0], ref[0], rtol=1e-6 if dtype == "float32" else 1e-13)
    assert mod.stats["saving"]["saved"]


def test_no_saving_where_it_does_not_pay():
    x = numpy.linspace(1, 2, 11)
    rm = RuntimeModule(sg.compile(lambda a: a * a + 3 * a, x, target="numpy"))
    assert rm.forward_saving is None and rm.backward_saved is None


def test_builtin_exp_saves_its_output():
    from symgrad._generated import exp

    x = numpy.linspace(-2, 2, 7, dtype=numpy.float32)
    (out,), saved = exp.forward_saving(x)
    numpy.testing.assert_array_equal(out, exp.forward(x)[0])
    (g,) = exp.backward_saved(numpy.ones_like(x), *saved, x)
    numpy.testing.assert_array_equal(g, exp.backward(numpy.ones_like(x), x)[0])
    assert g.dtype == numpy.float32


def test_powers_share_one_chain():
    r = sympy.Symbol("r", real=True)
    exprs, defs = share_powers([4 / r**12 - 4 / r**6, 24 / r**7 - 48 / r**13])
    names = [str(s) for s, _ in defs]
    assert names == ["r_3", "r_6", "r_7", "r_12", "r_13"]
    values = dict(defs)
    assert values[sympy.Symbol("r_12", real=True)] == sympy.Symbol("r_6", real=True) ** 2
    # negative powers divide by the positive power: same overflow behaviour as 1/r**12
    assert exprs[0] == 4 / sympy.Symbol("r_12", real=True) - 4 / sympy.Symbol("r_6", real=True)


def test_half_integer_powers_use_sqrt():
    x = numpy.linspace(0.5, 2.0, 9)
    mod = sg.compile(lambda a: a ** 1.5 + a ** 2.5, x, target="numpy")
    assert "**" not in mod.source.split("def backward")[1].split('"""')[2]
    (g,) = mod.backward(numpy.ones_like(x), x)
    numpy.testing.assert_allclose(g, 1.5 * x ** 0.5 + 2.5 * x ** 1.5, rtol=1e-14)


def test_intermediates_are_freed_after_last_use():
    x = numpy.linspace(1, 2, 11)
    mod = sg.compile(lambda a: sg.exp(sg.sin(a) * a) + sg.cos(a) ** 3, x, target="numpy")
    body = mod.source.split("def backward")[1]
    assert "\n    del " in body


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_backward_saved_checks_inputs_of_different_shapes(target):
    """backward_saved(*grads, *saved, *inputs) checked each input against the VJP graph's
    input at the same position, i.e. a saved value's slot: an MLP loss (inputs (n, 64),
    (64, 64), (64, 1), (n, 1)) raised "input 'x0' has shape (n, 64), but this module was
    generated for shape (n, 1)" through the runtime."""
    import os
    import shutil

    import torch

    if target == "c" and shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler")

    class MLP(sg.Function):
        cpu_target = target

        @staticmethod
        def forward(ctx, x0, x1, x2, x3):
            d = (x0 @ x1).tanh() @ x2 - x3
            return (d * d).sum() * (1.0 / 64)

    r = numpy.random.default_rng(7)
    arrays = [r.standard_normal((50, 64)), r.standard_normal((64, 64)) / 8,
              r.standard_normal((64, 1)) / 8, r.standard_normal((50, 1))]
    ts = [sg.tensor(a, requires_grad=True) for a in arrays]
    y = MLP.apply(*ts)
    mod = y.grad_fn._mod
    assert callable(getattr(mod, "backward_saved", None)), "no saving plan: the test is vacuous"
    y.backward()
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    d = torch.tanh(tt[0] @ tt[1]) @ tt[2] - tt[3]
    ((d * d).sum() * (1.0 / 64)).backward()
    for t, u in zip(ts, tt):
        numpy.testing.assert_allclose(t.grad.numpy(), u.grad.numpy(), rtol=1e-10, atol=1e-12)
    # the check still refuses a wrong shape, naming the input
    saved = mod.forward_saving(*arrays)[1]
    with pytest.raises(ValueError, match="backward_saved: input 'x0' has shape"):
        mod.backward_saved(numpy.ones(()), *saved, numpy.zeros((3, 64)), *arrays[1:])
