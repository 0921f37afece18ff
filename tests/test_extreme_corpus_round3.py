"""Round 3 of the extreme-input corpus (symgrad vs torch 2.13 and closed forms, values, first and
second derivatives, runtime / traced Function / NumPy / C): each test pins one fix. Torch's
values are written in as literals or closed forms (CI has no torch)."""
import os
import shutil

import mpmath
import numpy as np
import pytest

import symgrad as sg

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
TARGETS = ["numpy", pytest.param("c", marks=pytest.mark.skipif(not HAVE_CC, reason="no C compiler"))]
DTYPES = [np.float32, np.float64]
SG_DTYPE = {np.float32: sg.float32, np.float64: sg.float64}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path))


def _first_and_second(fn, *values, dtype=np.float64, function=False):
    """value, first derivatives (of sum) and the row sums of the Hessian, on runtime tensors or
    through a traced forward-only Function."""
    ts = [sg.tensor(np.asarray(v, dtype), requires_grad=True) for v in values]
    if function:
        class F(sg.Function):
            @staticmethod
            def forward(ctx, *xs):
                return fn(*xs)
        y = F.apply(*ts)
    else:
        y = fn(*ts)
    gs = sg.autograd.grad(y.sum(), ts, create_graph=True)
    hs = sg.autograd.grad(sum(g.sum() for g in gs), ts, allow_unused=True)
    return (y.detach().numpy(), [g.detach().numpy() for g in gs],
            [None if h is None else h.numpy() for h in hs])


# ----------------------------------------------------------------------------- asin, acos, atanh

INVERSE = {
    # op, second derivative (closed form, mpmath)
    "asin": (lambda x: x.asin(), lambda t: t / (1 - t * t) ** 1.5),
    "acos": (lambda x: x.acos(), lambda t: -t / (1 - t * t) ** 1.5),
    "atanh": (lambda x: x.atanh(), lambda t: 2 * t / (1 - t * t) ** 2),
}


@pytest.mark.parametrize("function", [False, True], ids=["runtime", "Function"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(INVERSE))
def test_inverse_function_second_derivative_near_zero_and_at_one(name, dtype, function):
    # (1 - x**2) is computed as (1 - x)*(1 + x) (difference_of_squares); differentiated as that
    # product its derivative was (1 - x) - (1 + x): asin'' at 1e-30 was 0 (truly 1e-30), at
    # 1e-8 5e-10 off, and at x = ±1 inf - inf = nan (torch: ±inf)
    fn, second = INVERSE[name]
    x = np.asarray([1e-30, -1e-30, 1e-8, 0.5, -0.75, 1 - 2.0 ** -20], dtype)
    _, _, (h,) = _first_and_second(fn, x, dtype=dtype, function=function)
    with mpmath.workdps(50):
        ref = [float(second(mpmath.mpf(float(t)))) for t in x]
    np.testing.assert_allclose(h, np.asarray(ref, dtype), rtol=64 * np.finfo(dtype).eps, atol=0)
    _, _, (h,) = _first_and_second(fn, [1.0, -1.0], dtype=dtype, function=function)
    sign = -1.0 if name == "acos" else 1.0
    assert h.tolist() == [sign * np.inf, -sign * np.inf]


# ----------------------------------------------------------------------------- hypot

@pytest.mark.parametrize("target", TARGETS)
def test_hypot_gradient_at_float32_subnormals(target):
    # grad_out/hypot(a, b) was formed first: 1/1e-40 overflows float32, so d/da was inf where it
    # is 1 and nan (0*inf) where it is 0; torch: 1 and 0
    a = np.asarray([0.0, 1e-40, 1e-40, -1e-40, 3e-45], np.float32)
    b = np.asarray([1e-40, 0.0, 1e-40, 1e-40, 4e-45], np.float32)
    mod = sg.compile(lambda a, b: a.hypot(b), a, b, target=target, cache_ok=False)
    ga, gb = mod.backward(np.ones_like(a), a, b)
    h = np.hypot(a, b).astype(np.float64)   # rounded to a subnormal, as the forward's
    np.testing.assert_allclose(ga, a / h, rtol=1e-6, atol=0)
    np.testing.assert_allclose(gb, b / h, rtol=1e-6, atol=0)
    ta, tb = (sg.tensor(v, requires_grad=True) for v in (a, b))
    sg.hypot(ta, tb).sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), a / h, rtol=1e-6, atol=0)
    np.testing.assert_allclose(tb.grad.numpy(), b / h, rtol=1e-6, atol=0)


@pytest.mark.parametrize("function", [False, True], ids=["runtime", "Function"])
def test_hypot_second_derivative_tiny_and_huge(function):
    # d/da (a/h) = 1/h - a*a/h**3 was a*h**-2: 0*inf = nan at (0, 1e-300) (truly 1e300), and
    # inf/inf = nan at (0, 1e300) (d/db (a/h + b/h) = 1/h - b*b/h**3 = 0)
    a = [0.0, 0.0, 1e-300, 3.0]
    b = [1e-300, 1e300, 1e-300, 4.0]
    _, _, (ha, hb) = _first_and_second(lambda a, b: a.hypot(b), a, b, function=function)
    # row sums of the Hessian of h: (b*b - a*b)/h**3 and (a*a - a*b)/h**3
    want_a = [1e300, 1e-300, 0.0, (16 - 12) / 125]
    want_b = [0.0, 0.0, 0.0, (9 - 12) / 125]
    np.testing.assert_allclose(ha, want_a, rtol=1e-14, atol=1e-320)
    np.testing.assert_allclose(hb, want_b, rtol=1e-14, atol=1e-300)


# ----------------------------------------------------------------------------- clamp with tensors

@pytest.mark.parametrize("dtype", DTYPES)
def test_runtime_clamp_with_tensor_bounds_has_torchs_gradients(dtype):
    # clamp(x, min=t, max=u) was maximum(minimum(...)): at a tie x == bound each side got half;
    # torch (ClampBackward0) gives x the gradient where lo <= x <= hi, lo where x < lo < hi, hi
    # where x > hi or hi < lo, nothing to a bound that is NaN
    nan = np.nan
    x = sg.tensor(np.asarray([0.0, 1.0, 3.0, 1.0, 4.5, 2.0], dtype), requires_grad=True)
    lo = sg.tensor(np.asarray([0.0, 1.0, 2.0, 3.0, 5.0, nan], dtype), requires_grad=True)
    hi = sg.tensor(np.asarray([0.0, 0.5, 2.0, nan, 4.0, 9.0], dtype), requires_grad=True)
    y = sg.clamp(x, min=lo, max=hi)
    assert y.grad_fn.name() == "ClampBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), np.asarray([0, 0.5, 2, nan, 4, nan], dtype))
    np.testing.assert_array_equal(x.grad.numpy(), [1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(lo.grad.numpy(), [0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(hi.grad.numpy(), [0, 1, 1, 0, 1, 0])
    # one bound only: the tie goes to x
    x = sg.tensor(np.asarray([1.0, 0.0, 2.0], dtype), requires_grad=True)
    b = sg.tensor(np.asarray([1.0, 1.0, 1.0], dtype), requires_grad=True)
    sg.clamp(x, min=b).sum().backward()
    assert x.grad.tolist() == [1, 0, 1] and b.grad.tolist() == [0, 1, 0]
    x.grad = b.grad = None
    sg.clamp(x, max=b).sum().backward()
    assert x.grad.tolist() == [1, 1, 0] and b.grad.tolist() == [0, 0, 1]
    assert sg.clamp(x, min=b).dtype == SG_DTYPE[dtype]


# ----------------------------------------------------------------------------- C division

@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_c_division_gradient_at_a_float32_subnormal_divisor():
    # d(a/b)/db = -a/b/b: printed -a*(1/b)*(1/b) in C, where 1/b overflows for b = 1e-40 (float)
    # and 0*inf was nan at a = 0 (torch: -0.0; NumPy target: -0.0)
    a = np.asarray([0.0, 1e-45, 1.0, 2.0], np.float32)
    b = np.asarray([1e-40, 1e-40, 1e-40, 4.0], np.float32)
    mod = sg.compile(lambda a, b: a / b, a, b, target="c", cache_ok=False)
    _, gb = mod.backward(np.ones_like(a), a, b)
    want = -(a.astype(np.float64) / b) / b
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(gb, want.astype(np.float32))
    assert np.signbit(gb[0])
