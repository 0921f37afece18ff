"""Defects found by tools/audit_extreme.py (forward values and gradients at extreme inputs, NumPy
and C targets, float32 and float64, against mpmath at 50+ digits and torch's conventions): each
test pins one fix against mpmath truth or torch."""
import math
import os
import shutil

import mpmath
import numpy as np
import pytest
import sympy

import symgrad as sg
from symgrad.emit.cprinter import print_c

mpmath.mp.dps = 50
HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
TARGETS = ["numpy", pytest.param("c", marks=pytest.mark.skipif(not HAVE_CC, reason="no C compiler"))]
DTYPES = [np.float32, np.float64]
RTOL = {np.float32: 4e-6, np.float64: 2e-14}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path))


def _run(fn, xs, target):
    """forward and gradients (of sum) of fn at the arrays xs."""
    mod = sg.compile(fn, *xs, target=target, cache_ok=False)
    with np.errstate(all="ignore"):
        y = mod.forward(*xs)
        y = y[0] if isinstance(y, tuple) else y
        grads = mod.backward(np.ones_like(np.asarray(y)), *xs)
    assert np.asarray(y).dtype == xs[0].dtype
    return np.asarray(y), [np.asarray(g) for g in grads]


def _mp(values):
    return [mpmath.mpf(float(v)) for v in values]


def _close(got, ref, dtype, rtol=None):
    with np.errstate(over="ignore"):   # a value past the dtype's range is inf in it
        ref = np.asarray([float(r) for r in ref]).astype(dtype).astype(np.float64)
    tiny = float(np.finfo(dtype).tiny)
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=rtol or RTOL[dtype],
                               atol=4 * tiny)


# ----------------------------------------------------------------------------- C constants

def test_c_prints_number_valued_expressions_as_one_literal():
    # SymPy's C printer wrote log(2) as M_LN2 (a double in float code) and sqrt(pi) as
    # sqrtf(3.1415927f) (pi rounded before the root)
    x = sympy.Symbol("x")
    text = print_c(x - sympy.log(2) + x / sympy.sqrt(sympy.pi) + sympy.log(10) * x, "float")
    assert "M_" not in text and "sqrtf" not in text and "logf" not in text
    assert "0.6931472f" in text and "1.7724539f" in text and "2.3025851f" in text
    assert "0.6931471805599453" in print_c(x - sympy.log(2), "double")


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_c_float_log_cosh_is_exactly_zero_at_zero():
    # log(cosh(x)) -> logaddexp(x, -x) - log(2): with a double M_LN2 the float kernel gave
    # 1.9e-9 at x = 0 (log1pf(1) - M_LN2 evaluated in double)
    x = np.asarray([0.0, -0.0, 1e-30, 0.25, 3.0, 50.0], np.float32)
    y, g = _run(lambda x: sg.log(x.cosh()), [x], "c")
    yn, gn = _run(lambda x: sg.log(x.cosh()), [x], "numpy")
    assert y[0] == 0 and y[1] == 0 and y[2] == 0
    np.testing.assert_allclose(y, yn, rtol=4e-7, atol=0)
    ref = [mpmath.log(mpmath.cosh(v)) for v in _mp(x[3:])]
    _close(y[3:], ref, np.float32, rtol=1e-6)


# ----------------------------------------------------------------------------- a*b**-2

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_quotient_gradient_does_not_square_the_divisor(dtype, target):
    # d(x/y)/dy = -x/y**2 was printed -x/(y*y): y*y underflows (1e-300; 1e-30 in float) or
    # overflows (1e200; 1e30) where -(x/y)/y, torch's form, is finite
    big, small = (1e30, 1e-30) if dtype == np.float32 else (1e300, 1e-300)
    x = np.asarray([small, big, 1.0, small, 3.0], dtype)
    y = np.asarray([small, big, small ** 0.5, 1.0, 7.0], dtype)
    _, (gx, gy) = _run(lambda x, y: x / y, [x, y], target)
    xs, ys = _mp(x), _mp(y)
    _close(gx, [1 / b for b in ys], dtype)
    _close(gy, [-a / b ** 2 for a, b in zip(xs, ys)], dtype)


def test_numpy_divides_twice_only_by_full_size_arrays():
    # a/b/b is as many NumPy passes as a/(b*b) only when b is as large as the result: the row
    # sums of a softmax keep b*b (computed on the small array)
    x = np.ones((4, 8))
    src = sg.compile(lambda x, y: x / y, x, x, cache_ok=False).source
    assert "/y/y" in src and "(y*y)" not in src
    src = sg.compile(lambda x: x / x.sum(-1, keepdim=True), x, cache_ok=False).source
    import re
    assert not re.search(r"/(\w+)/\1\b", src)


# ----------------------------------------------------------------------------- removable singularities

def _deriv(f, x, n=1):
    """n-th derivative of mpmath function f at x, exactly enough: at 800 digits, where the
    closed forms' cancellation near 0 (1e-300) still leaves 100."""
    with mpmath.workdps(800):
        return mpmath.diff(f, mpmath.mpf(x), n, h=mpmath.mpf(10) ** -700) if x != 0 else None


RATIOS = {
    "sin(x)/x": (lambda x: sg.sin(x) / x, lambda t: mpmath.sin(t) / t, None),
    "(exp(x)-1)/x": (lambda x: (sg.exp(x) - 1) / x, lambda t: mpmath.expm1(t) / t, None),
    "expm1(x)/x": (lambda x: sg.expm1(x) / x, lambda t: mpmath.expm1(t) / t, None),
    "log1p(x)/x": (lambda x: sg.log1p(x) / x, lambda t: mpmath.log1p(t) / t, -1.0),
    "x/(exp(x)-1)": (lambda x: x / (sg.exp(x) - 1), lambda t: t / mpmath.expm1(t), None),
    "(sin(x)/x)**2": (lambda x: (sg.sin(x) / x) ** 2, lambda t: (mpmath.sin(t) / t) ** 2, None),
    "sin(3x)/x": (lambda x: sg.sin(3 * x) / x, lambda t: mpmath.sin(3 * t) / t, None),
    "x**2/expm1(x)": (lambda x: x ** 2 / sg.expm1(x), lambda t: t ** 2 / mpmath.expm1(t), None),
    "x/sinh(x)": (lambda x: x / x.sinh(), lambda t: t / mpmath.sinh(t), None),
    "sinh(x)/x": (lambda x: x.sinh() / x, lambda t: mpmath.sinh(t) / t, None),
    "tan(x)/x": (lambda x: sg.tan(x) / x, lambda t: mpmath.tan(t) / t, None),
    "x/tanh(x)": (lambda x: x / sg.tanh(x), lambda t: t / mpmath.tanh(t), None),
    "(1-cos(x))/x**2": (lambda x: (1 - sg.cos(x)) / (x * x),
                        lambda t: (1 - mpmath.cos(t)) / t ** 2, None),
    "log(cosh(x))": (lambda x: sg.log(x.cosh()), lambda t: mpmath.log(mpmath.cosh(t)), None),
    "log(x + sqrt(x*x + 1))": (lambda x: sg.log(x + sg.sqrt(x * x + 1)), mpmath.asinh, None),
}
MAGNITUDES = [1e-300, 1e-150, 1e-40, 1e-20, 1e-8, 1e-4, 0.3, 0.99, 1.01, 3.0, 30.0]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(RATIOS))
def test_removable_singularity_value_and_gradient_near_zero(name, dtype, target):
    # sin(x)/x, expm1(x)/x, ...: the gradient's closed form cancels near 0 (all digits lost
    # below |x| ~ 1e-8, -inf at 1e-300, nan at 0); rewritten to sinc/exprel/log1prel/inv_exprel,
    # whose Taylor branch is exact there
    fn, ref, lo = RATIOS[name]
    pts = sorted({float(dtype(s * m)) for m in MAGNITUDES for s in (1, -1)} - {0.0})
    pts = [p for p in pts if lo is None or p > lo]
    x = np.asarray(pts, dtype)
    y, (g,) = _run(fn, [x], target)
    with mpmath.workdps(800):   # the references cancel near 0 too: 1 - cos(1e-150)
        yref = [ref(t) for t in _mp(x)]
    _close(y, yref, dtype, rtol=16 * np.finfo(dtype).eps)  # 3*x rounds
    gref = [_deriv(ref, t) for t in x.tolist()]
    _close(g, gref, dtype, rtol=64 * np.finfo(dtype).eps)


@pytest.mark.parametrize("target", TARGETS)
def test_removable_singularity_at_exactly_zero(target):
    x = np.asarray([0.0, -0.0])
    for fn, value, slope in [(lambda x: sg.sin(x) / x, 1.0, 0.0),
                             (lambda x: (sg.exp(x) - 1) / x, 1.0, 0.5),
                             (lambda x: sg.log1p(x) / x, 1.0, -0.5),
                             (lambda x: x / sg.expm1(x), 1.0, -0.5)]:
        y, (g,) = _run(fn, [x], target)
        assert np.all(y == value) and np.all(g == slope)


def test_removable_singularity_second_derivative():
    x = np.asarray([1e-300, 1e-20, -1e-6, 0.2, -0.9, 2.5])
    for fn, ref in [(lambda x: sg.sin(x) / x, lambda t: mpmath.sin(t) / t),
                    (lambda x: sg.expm1(x) / x, lambda t: mpmath.expm1(t) / t),
                    (lambda x: x / sg.expm1(x), lambda t: t / mpmath.expm1(t))]:
        mod = sg.compile(fn, x, cache_ok=False).grad_module()
        h = mod.backward(np.ones_like(x), np.ones_like(x), x)[1]
        _close(h, [_deriv(ref, t, 2) for t in x.tolist()], np.float64, rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_exprel_family_far_from_zero_does_not_overflow_into_nan(dtype, target):
    # exprel'(u) = (exp(u)*(u-1) + 1)/u**2 is inf - inf in the Leibniz form where exp overflows;
    # u/expm1(u) and its derivative are finite (0) there
    x = np.asarray([80.0, 100.0, 700.0, 1e4, -1e4, -700.0], dtype)
    _, (g,) = _run(lambda x: x / (sg.exp(x) - 1), [x], target)
    _close(g, [_deriv(lambda t: t / mpmath.expm1(t), t) for t in x.tolist()], dtype,
           rtol=64 * np.finfo(dtype).eps)
    _, (g,) = _run(lambda x: sg.expm1(x) / x, [x], target)
    with np.errstate(over="ignore"):
        ref = np.asarray([float(_deriv(lambda t: mpmath.expm1(t) / t, t)) for t in x.tolist()],
                         dtype)
    _close(g, ref, dtype, rtol=64 * np.finfo(dtype).eps)   # inf where it overflows, never nan


@pytest.mark.parametrize("dtype", [sg.float32, sg.float64])
def test_runtime_division_gradient_does_not_square_the_divisor(dtype):
    # the built-in div op's module is shape-generic: _div_square decides when it runs (a/b/b
    # for a divisor as large as the quotient, b*b for a broadcast one)
    small = 1e-30 if dtype == sg.float32 else 1e-300
    x = sg.tensor([small, 2.0, 3.0], dtype=dtype, requires_grad=True)
    y = sg.tensor([small, small ** 0.5, 1.0 / small], dtype=dtype, requires_grad=True)
    (x / y).sum().backward()
    np_dtype = np.float32 if dtype == sg.float32 else np.float64
    xs, ys = _mp(x.detach().numpy()), _mp(y.detach().numpy())
    _close(y.grad.numpy(), [-a / b ** 2 for a, b in zip(xs, ys)], np_dtype)
    b = sg.tensor([small], dtype=dtype, requires_grad=True)       # broadcast divisor
    (x / b).sum().backward()
    _close(b.grad.numpy(), [-sum(xs) / ys[0] ** 2], np_dtype)


# ----------------------------------------------------------------------------- hypot, atan2, asin, ...

HYPOT_PAIRS = [(1e200, 1e200), (1e200, 1.0), (-1e200, 3e199), (1e-200, 1e-200), (1e-300, 0.0),
               (1e-160, 1e-160), (3.0, 4.0), (1e30, 1e30), (1e20, -1e20), (1e-30, 1e-30),
               (1e-25, 0.0), (0.0, -2.5)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sqrt_of_sum_of_squares_is_hypot(dtype, target):
    # sqrt(x*x + y*y) overflowed to inf (x = 1e200; 1e20 in float) or underflowed to 0 with an
    # inf gradient (1e-200; 1e-25) where the root is finite (torch too); rewritten to hypot
    with np.errstate(over="ignore"):
        pts = [(dtype(a), dtype(b)) for a, b in HYPOT_PAIRS
               if np.isfinite(dtype(a)) and np.isfinite(dtype(b)) and (dtype(a) or dtype(b))]
    x, y = (np.asarray([p[i] for p in pts], dtype) for i in (0, 1))
    out, (gx, gy) = _run(lambda x, y: sg.sqrt(x * x + y * y), [x, y], target)
    xs, ys = _mp(x), _mp(y)
    h = [mpmath.hypot(a, b) for a, b in zip(xs, ys)]
    _close(out, h, dtype)
    _close(gx, [a / r for a, r in zip(xs, h)], dtype)
    _close(gy, [b / r for b, r in zip(ys, h)], dtype)
    # sqrt(x**2 + c) and its reciprocal (squareplus, asinh's derivative): finite at 1e20 float
    big = np.asarray([1e20, -1e30, 1e-20, 2.0] if dtype == np.float32 else [1e200, -1e300, 2.0],
                     dtype)
    out, (g,) = _run(lambda x: 1 / sg.sqrt(x ** 2 + 4), [big], target)
    _close(out, [1 / mpmath.sqrt(t ** 2 + 4) for t in _mp(big)], dtype)
    _close(g, [-t / mpmath.sqrt(t ** 2 + 4) ** 3 for t in _mp(big)], dtype)


def test_numpy_hypot_helper_matches_numpy_hypot_on_both_paths():
    from symgrad.ops.stable import numpy_helper_namespace

    hyp = numpy_helper_namespace()["_hypot"]
    rng = np.random.default_rng(0)
    for dtype in DTYPES:
        info = np.finfo(dtype)
        mags = np.exp(rng.uniform(np.log(float(info.smallest_subnormal)), np.log(float(info.max)), 4000))
        a = (mags * rng.choice([-1, 1], mags.size)).astype(dtype)
        b = np.roll(a, 1)
        for x, y in [(a, b), (np.abs(a[:100]) + 1, b[:100] * 0 + 1), (np.zeros(8, dtype), a[:8]),
                     (np.asarray([0, np.inf, np.nan, -0.0], dtype), np.asarray([0, 1, 1, 0], dtype))]:
            with np.errstate(all="ignore"):
                got, want = hyp(x, y), np.hypot(x, y)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=2 * float(info.eps), atol=0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_atan2_gradient_tiny_huge_and_at_the_origin(dtype, target):
    # x/(x**2 + y**2) underflowed/overflowed: inf at x = y = 1e-200 (5e199), 0 at 1e200 (5e-201);
    # at (0, 0) torch's gradient is 0 (it was nan)
    s, l = (1e-20, 1e20) if dtype == np.float32 else (1e-200, 1e200)
    y = np.asarray([s, l, 1.0, -s, 3.0, 0.0], dtype)
    x = np.asarray([s, l, -l, -1.0, -4.0, 0.0], dtype)
    _, (gy, gx) = _run(lambda y, x: sg.atan2(y, x), [y, x], target)
    ys, xs = _mp(y[:-1]), _mp(x[:-1])
    _close(gy[:-1], [b / (a * a + b * b) for a, b in zip(ys, xs)], dtype)
    _close(gx[:-1], [-a / (a * a + b * b) for a, b in zip(ys, xs)], dtype)
    assert gy[-1] == 0 and gx[-1] == 0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_inverse_function_gradients_near_their_edges(dtype, target):
    # asin' = 1/sqrt(1 - x**2) and atanh' = 1/(1 - x**2): 1 - x*x has a relative error of
    # eps/(1 - |x|) (5e-11 at 1 - 1e-6, torch's too); (1 - x)(1 + x) keeps a few ulp.
    # asinh' = 1/sqrt(x**2 + 1) was 0 at x = 1e300 (1e-300; 1e30 in float)
    near = np.asarray([1 - 2.0 ** -23, 1 - 1e-6, -(1 - 1e-6), 0.5, 1e-30], dtype) \
        if dtype == np.float32 else np.asarray([1 - 2.0 ** -52, 1 - 1e-10, 1 - 1e-6, -(1 - 1e-6), 0.5], dtype)
    xs = _mp(near)
    for fn, ref in [(lambda x: sg.asin(x), lambda t: 1 / mpmath.sqrt(1 - t * t)),
                    (lambda x: sg.acos(x), lambda t: -1 / mpmath.sqrt(1 - t * t)),
                    (lambda x: sg.atanh(x), lambda t: 1 / (1 - t * t))]:
        _, (g,) = _run(fn, [near], target)
        _close(g, [ref(t) for t in xs], dtype, rtol=8 * np.finfo(dtype).eps)
    big = np.asarray([1e30, -1e38, 1e10] if dtype == np.float32 else [1e300, -1e200, 1e155], dtype)
    _, (g,) = _run(lambda x: sg.asinh(x), [big], target)
    _close(g, [1 / mpmath.sqrt(t * t + 1) for t in _mp(big)], dtype)


def test_runtime_atan2_gradient_matches_torch_at_origin_and_tiny():
    y = sg.tensor([0.0, 1e-200, 1.0], dtype=sg.float64, requires_grad=True)
    x = sg.tensor([0.0, 1e-200, -2.0], dtype=sg.float64, requires_grad=True)
    sg.atan2(y, x).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [0.0, 5e199, -0.4], rtol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), [0.0, -5e199, -0.2], rtol=1e-15)


# ----------------------------------------------------------------------------- log1mexp

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["log(1 - exp(-x))", "log(-expm1(-x))", "log1p(-exp(-x))"])
def test_log1mexp_value_and_gradient_at_both_ends(form, dtype, target):
    # log(-expm1(-x)) was 0 from x ~ 37 (truly -exp(-x)) and 1.7e-4 off at 30; log1p(-exp(-x))
    # was -inf at x = 1e-20
    fn = {"log(1 - exp(-x))": lambda x: sg.log(1 - sg.exp(-x)),
          "log(-expm1(-x))": lambda x: sg.log(-sg.expm1(-x)),
          "log1p(-exp(-x))": lambda x: sg.log1p(-sg.exp(-x))}[form]
    x = np.asarray([1e-300, 1e-40, 1e-20, 1e-8, 0.5, 0.6931, 0.6932, 1.0, 30.0, 80.0, 700.0, 1e3],
                   dtype)
    x = x[x > 0]
    y, (g,) = _run(fn, [x], target)
    xs = _mp(x)
    with mpmath.workdps(1200):
        _close(y, [mpmath.log(1 - mpmath.exp(-t)) for t in xs], dtype, rtol=8 * np.finfo(dtype).eps)
        _close(g, [1 / mpmath.expm1(t) for t in xs], dtype, rtol=8 * np.finfo(dtype).eps)


# ----------------------------------------------------------------------------- torch's conventions

CONVENTIONS = [
    # name, forward (symgrad and torch spell it alike), inputs
    ("norm at 0", lambda x: x.norm(), [[0.0, 0.0, 0.0]]),
    ("norm underflowing", lambda x: x.norm(), [[1e-200, 1e-200]]),
    ("p-norm at 0", lambda x: x.norm(p=3), [[0.0, 0.0]]),
    ("std of a constant", lambda x: x.std(), [[2.0, 2.0, 2.0]]),
    ("std dim of constant rows", lambda x: x.std(-1), [[[1.0, 1.0], [1.0, 3.0]]]),
    ("x**y at x = 0", lambda x, y: x ** y, [[0.0, 0.0, 0.0, 2.0], [2.5, 0.0, 1.0, 0.0]]),
    ("xlogy at x = 0", lambda x, y: x.xlogy(y), [[0.0, 0.0, 0.0, 1.0], [0.0, -1.0, 2.0, 3.0]]),
    ("atan2 at the origin", lambda y, x: y.atan2(x), [[0.0], [0.0]]),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, fn, values", CONVENTIONS, ids=[c[0] for c in CONVENTIONS])
def test_gradient_conventions_match_torch(name, fn, values, dtype, target):
    # where the derivative is undefined torch defines it: 0 for a zero vector's norm, a
    # constant's std, x**y at x = 0 (both gradients), xlogy's x-gradient at (0, y <= 0),
    # atan2 at (0, 0); symgrad gave nan (0 * inf, 0 * log 0) or -inf
    torch = pytest.importorskip("torch")
    xs = [np.asarray(v, dtype) for v in values]
    y, grads = _run(fn, xs, target)
    ts = [torch.tensor(v, requires_grad=True) for v in xs]
    out = fn(*ts)
    out.sum().backward()
    np.testing.assert_allclose(y, out.detach().numpy(), rtol=4 * np.finfo(dtype).eps)
    for g, t in zip(grads, ts):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=4 * np.finfo(dtype).eps, atol=0)


def test_runtime_norm_and_std_gradients_match_torch_at_zero():
    x = sg.tensor([0.0, 0.0], dtype=sg.float64, requires_grad=True)
    x.norm().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    x = sg.tensor([[1.0, 1.0], [1.0, 3.0]], dtype=sg.float64, requires_grad=True)
    x.std(-1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, 0.0], [-0.5 ** 0.5, 0.5 ** 0.5]],
                               rtol=1e-15)
    # x**y with a tensor exponent, in a traced Function (static shapes): torch's zeros at x = 0
    # (the eager built-in pow op, shape-generic, keeps the unmasked form: see differentiate)

    class Pow(sg.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a ** b

    a = sg.tensor([0.0, 0.0], dtype=sg.float64, requires_grad=True)
    b = sg.tensor([2.5, 0.0], dtype=sg.float64, requires_grad=True)
    Pow.apply(a, b).sum().backward()
    assert a.grad.tolist() == [0.0, 0.0] and b.grad.tolist() == [0.0, 0.0]


# ----------------------------------------------------------------------------- softmax written out

LOGITS = [[800.0, 799.0, -5.0], [-800.0, -801.0, -900.0], [1e4, -1e4, 0.0], [100.0, 100.0, 100.0],
          [0.5, -0.25, 2.0]]


def _lse_ref(row):
    xs = [mpmath.mpf(float(v)) for v in row]
    return xs, mpmath.log(mpmath.fsum(mpmath.exp(v) for v in xs))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_and_softmax_written_with_sum(dtype, target):
    # log(sum(exp(x))) and exp(x) / sum(exp(x)) written out overflowed (inf / nan at x = 800,
    # and at 100 in float32) or underflowed (-inf at -800), as torch's; traced with a max shift
    x = np.asarray(LOGITS, dtype)
    ce, (g,) = _run(lambda x: sg.log(sg.sum(sg.exp(x), dim=1)) - x[:, 0], [x], target)
    sm, (gs,) = _run(lambda x: (sg.exp(x) / sg.sum(sg.exp(x), dim=1, keepdim=True))[:, 0],
                     [x], target)
    lme, _ = _run(lambda x: sg.log(sg.mean(sg.exp(x), dim=1)), [x], target)
    for k, row in enumerate(x):
        xs, lse = _lse_ref(row)
        p = [mpmath.exp(v - lse) for v in xs]
        _close(ce[k:k + 1], [lse - xs[0]], dtype, rtol=1e-5 if dtype == np.float32 else 1e-12)
        _close(g[k], [pi - (i == 0) for i, pi in enumerate(p)], dtype, rtol=64 * np.finfo(dtype).eps)
        _close(sm[k:k + 1], [p[0]], dtype, rtol=8 * np.finfo(dtype).eps)
        _close(gs[k], [p[0] * ((i == 0) - pi) for i, pi in enumerate(p)], dtype,
               rtol=64 * np.finfo(dtype).eps)
        _close(lme[k:k + 1], [lse - mpmath.log(3)], dtype, rtol=8 * np.finfo(dtype).eps)


def test_sum_of_exp_alone_and_shifted_sums_are_unchanged():
    # only log(sum(exp(u))) and exp(u) / sum(exp(u)) are shifted: sum(exp(u)) itself keeps its
    # gradient exp(u) exactly, and a hand-written max shift is not shifted twice
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    _, (g,) = _run(lambda x: sg.sum(sg.exp(x)), [x], "numpy")
    np.testing.assert_array_equal(g, np.exp(x))

    def lse(x):
        m = x.amax(dim=1, keepdim=True).detach()
        return m + sg.log(sg.sum(sg.exp(x - m), dim=1, keepdim=True))

    src = sg.compile(lse, x, cache_ok=False).source
    assert "isfinite" not in src   # the guard of symgrad's own shift
    src = sg.compile(lambda x: sg.log(sg.sum(sg.exp(x), dim=1)), x, cache_ok=False).source
    assert "isfinite" in src


def test_reference_value_is_not_fooled_by_alike_cancellation():
    # exp(x) - 1 is 0 at 50 and 120 digits for x = 1e-300: the two escalation steps agreed on
    # 1e300 for the derivative of (exp(x) - 1)/x (0.5); the probe and `symgrad check` use it
    from symgrad.numerics_reference import reference_value

    x = sympy.Symbol("x", real=True)
    d = sympy.diff((sympy.exp(x) - 1) / x, x)
    for v in (1e-300, -1e-200, 1e-40):
        assert reference_value(d, {x: v}) == 0.5


@pytest.mark.parametrize("target", TARGETS)
def test_log_of_exp_times_factor_is_split(target):
    # log(exp(-x*x) / (1 - erf(x))) (a Gaussian tail ratio): exp(-x*x) and erfc(x) both
    # underflow from x ~ 27, 0/0; log(exp(a) * b) -> a + log(b) and the log_ndtr rewrite keep
    # it finite (the `symgrad check` overflow-probe example until now)
    x = np.asarray([-30.0, -3.0, 0.0, 0.5, 5.0, 27.0, 30.0, 1e3])
    y, (g,) = _run(lambda x: ((-x * x).exp() / (1 - x.erf())).log(), [x], target)
    xs = _mp(x)
    with mpmath.workdps(60):
        ref = [-t * t - mpmath.log(mpmath.erfc(t)) for t in xs]
        _close(y[:-1], ref[:-1], np.float64, rtol=1e-13)
        _close(y[-1:], ref[-1:], np.float64, rtol=1e-9)   # -x*x + log(1/erfc(x)) cancels: eps*x*x
        gref = [-2 * t + 2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-t * t) / mpmath.erfc(t)
                for t in xs]
        _close(g[:-1], gref[:-1], np.float64, rtol=1e-12)
        _close(g[-1:], gref[-1:], np.float64, rtol=1e-9)     # -2x + 2x(1 + ...): eps*2x


@pytest.mark.parametrize("target", TARGETS)
def test_relu_gradient_at_nan_is_torchs(target):
    """torch's relu backward zeroes the gradient where relu(x) <= 0; NaN is not, so relu'(NaN)
    = 1 (was 0 here, from an x > 0 test), and relu'(0) = 0, in compiled modules and on
    runtime tensors (the built-in module)."""
    x = np.array([np.nan, -1.0, -0.0, 0.0, 1e-300, 2.0])
    want = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    mod = sg.compile(lambda v: sg.relu(v) * 3.0, x, target=target, cache_ok=False)
    np.testing.assert_array_equal(mod.backward(np.ones_like(x), x)[0], 3.0 * want)
    t = sg.tensor(x, requires_grad=True)
    sg.relu(t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), want)
