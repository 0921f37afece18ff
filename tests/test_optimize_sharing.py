"""The optimizer reuses what a routine already computes: a norm's square, a sum that SymPy
distributed a number over, a named power, a quotient (issue 23's oscillator8 backward had
37 divisions to torch eager's 26)."""
import numpy
import pytest
import sympy

import symgrad as sg
from symgrad.ops.elementwise import hypot
from symgrad.rewrites import reuse_hypot, share_sums

torch = pytest.importorskip("torch")

a, b, c = sympy.symbols("a b c", real=True)


def _body(source, routine):
    """The statements of `routine` in a generated NumPy module (docstring left out)."""
    return source.split(f"\ndef {routine}(")[1].split('"""')[2].split("\ndef ")[0]


def test_reuse_hypot_names_the_square_of_the_norm():
    h = hypot(a, b)
    exprs, defs = reuse_hypot([h + 1 / (a**2 + b**2), c / h**4, (b**2 + a**2) * c])
    (sq, value), = defs
    assert value == h**2
    assert exprs == [h + 1 / sq, c / sq**2, sq * c]
    # the sign of a root does not matter (hypot(-a, b) = hypot(a, b)); no norm, no change
    assert reuse_hypot([hypot(a - b, c) * ((b - a)**2 + c**2)])[1]
    assert reuse_hypot([a**2 + b**2, sympy.sqrt(a) * (a**2 + b**2)]) == \
        ([a**2 + b**2, sympy.sqrt(a) * (a**2 + b**2)], [])


def test_share_sums_names_a_sum_beside_its_multiple():
    exprs, defs = share_sums([(a + b)**2 / 2 + c * (2 * a + 2 * b), sympy.exp(-a - b)])
    (s, value), = defs
    assert value == a + b
    assert exprs == [s**2 / 2 + 2 * c * s, sympy.exp(-s)]
    # a sum alone is left to CSE
    assert share_sums([(a + b) * c, sympy.exp(a + b)])[1] == []


def _norm_and_square(x, y):
    d = sg.sqrt(x * x + y * y)
    return d + 1.0 / (x * x + y * y)


def test_norm_square_is_read_from_the_norm_and_keeps_its_range():
    x = numpy.array([3.0, 1e200, 1e-200, -2.0, 1e-5])
    y = numpy.array([4.0, 1e200, 0.0, 1e-300, 3e-5])
    mod = sg.compile(_norm_and_square, x, y, target="numpy")
    for routine in ("forward", "backward"):
        body = _body(mod.source, routine)
        assert body.count("hypot(") == 1, body
        assert "x*x" not in body.replace(" ", "") and "x**2" not in body, body
    out = mod.forward(x, y)
    gx, gy = mod.backward(numpy.ones_like(x), x, y)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.tensor(y, requires_grad=True)
    # torch's reference with the norm computed safely (the naive one overflows at 1e200)
    ref = torch.hypot(xt, yt) + 1.0 / torch.hypot(xt, yt) ** 2
    gxt, gyt = torch.autograd.grad(ref.sum(), (xt, yt))
    numpy.testing.assert_allclose(out, ref.detach().numpy(), rtol=1e-14)
    ok = numpy.isfinite(gxt.numpy())
    numpy.testing.assert_allclose(gx[ok], gxt.numpy()[ok], rtol=1e-13)
    numpy.testing.assert_allclose(gy[ok], gyt.numpy()[ok], rtol=1e-13)
    assert numpy.isfinite(out[:2]).all()           # 1e200: no overflow of the squares
    assert gx[1] == pytest.approx(gxt.numpy()[1], rel=1e-13)


def _damped(m, k, c, w):
    gamma = c / (2.0 * m)
    dw = k / m - w * w
    g2w = 2.0 * gamma * w
    d = sg.sqrt(dw * dw + g2w * g2w)
    amp = 1.0 / (m * d)
    return 0.5 * m * amp * amp + dw / d


def _ops(body):
    return sum(body.count(op) for op in ("*", "/", "+", " - ", "(")) - body.count("**")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_oscillator_like_backward_matches_torch(dtype):
    rng = numpy.random.default_rng(0)
    xs = [rng.uniform(lo, hi, 64).astype(dtype)
          for lo, hi in ((0.5, 2.0), (1.0, 4.0), (0.05, 0.5), (0.2, 0.6))]
    mod = sg.compile(_damped, *xs, target="numpy")
    body = _body(mod.source, "backward")
    assert body.count("hypot(") == 1, body
    grads = mod.backward(numpy.ones_like(xs[0]), *xs)
    ts = [torch.tensor(v, requires_grad=True) for v in xs]
    m, k, c, w = ts
    gamma = c / (2.0 * m)
    dw = k / m - w * w
    d = torch.sqrt(dw * dw + (2.0 * gamma * w) ** 2)
    amp = 1.0 / (m * d)
    ref = torch.autograd.grad((0.5 * m * amp * amp + dw / d).sum(), ts)
    tol = 2e-5 if dtype == "float32" else 1e-12
    for g, r in zip(grads, ref):
        numpy.testing.assert_allclose(g, r.numpy(), rtol=tol, atol=tol * abs(r.numpy()).max())


def test_named_power_is_reused_in_a_scale_ordered_product():
    # x**3 is named (x_3 = x_2*x, the backward holds x**2 and x**3); a product of mixed
    # degrees reads it rather than forming x*x*x again
    x = numpy.linspace(0.5, 2.0, 7)
    y = numpy.linspace(1.0, 3.0, 7)
    mod = sg.compile(lambda u, v: u ** 4 * v ** 3 / (u + 1.0) + u ** 3 / v ** 2, x, y,
                     target="numpy")
    body = _body(mod.source, "backward")
    assert "u*u*u" not in body.replace(" ", ""), body
    gx, gy = mod.backward(numpy.ones_like(x), x, y)
    numpy.testing.assert_allclose(
        gx, 4 * x**3 * y**3 / (x + 1) - x**4 * y**3 / (x + 1)**2 + 3 * x**2 / y**2, rtol=1e-13)
    numpy.testing.assert_allclose(gy, 3 * x**4 * y**2 / (x + 1) - 2 * x**3 / y**3, rtol=1e-13)


def test_share_multiples_reads_a_multiple_of_a_temp_sum():
    from symgrad.optimize import _share_multiples

    t0, t1 = sympy.symbols("t0 t1")
    temps, reduced = _share_multiples([(t0, a - b), (t1, sympy.exp(2 * a - 2 * b))],
                                      [-3 * a + 3 * b + 0 * c, b - a, a - b + c])
    assert temps == [(t0, a - b), (t1, sympy.exp(2 * t0))]
    # b - a alone is one pass either way; a sum with another term is left to CSE
    assert reduced == [-3 * t0, b - a, a - b + c]


def test_distributed_number_reads_the_shared_difference():
    x = numpy.linspace(0.5, 2.0, 7)
    y = numpy.linspace(2.0, 0.1, 7)
    mod = sg.compile(lambda u, v: (u - v) ** 2 * sg.exp(u - v), x, y, target="numpy")
    body = _body(mod.source, "backward")
    assert "2*u" not in body.replace(" ", ""), body
    gu, gv = mod.backward(numpy.ones_like(x), x, y)
    d = x - y
    numpy.testing.assert_allclose(gu, (2 * d + d**2) * numpy.exp(d), rtol=1e-14)
    numpy.testing.assert_allclose(gv, -(2 * d + d**2) * numpy.exp(d), rtol=1e-14)


def test_named_values_read_temps_by_their_new_names():
    """A named value (a shared sum, a power) whose definition reads a CSE temp that another
    named value took the name of reads it by that name (fuzz seed 213: forward_saving read
    `t7`, renamed away, and raised NameError); values and gradients against torch."""
    pytest.importorskip("torch")
    import test_fuzz_differential as fuzz

    fuzz.check_seed(213, modes=("eager", "numpy"))
