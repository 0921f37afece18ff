"""Ops a traced forward may use beyond the core set, against torch (forward values and
gradients) where torch is installed, and against closed forms everywhere."""
import numpy as np
import pytest

import symgrad as sg
from symgrad.errors import ShapeError, TraceError

X = np.array([-2.5, -1.5, -0.7, -0.5, 0.0, 0.3, 0.5, 1.5, 2.5, 3.7])
Y = np.array([1.3, -0.9, 2.0, 0.4, 1.1, -1.7, 0.6, 2.2, -0.8, 1.9])
P = np.array([0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95, 0.1, 0.45, 0.9])

# name, symgrad forward, torch forward, inputs
UNARY_OR_BINARY = [
    ("floor", lambda x: x.floor() * x, lambda x: x.floor() * x, (X,)),
    ("ceil", lambda x: x.ceil() * x, lambda x: x.ceil() * x, (X,)),
    ("round_half_even", lambda x: x.round() * x, lambda x: x.round() * x, (X,)),
    ("round_decimals", lambda x: x.round(decimals=1) * x, lambda x: x.round(decimals=1) * x, (X * 1.37,)),
    ("trunc", lambda x: x.trunc() * x, lambda x: x.trunc() * x, (X,)),
    ("frac", lambda x: x.frac() * x, lambda x: x.frac() * x, (X,)),
    ("log2", lambda x: x.log2(), lambda x: x.log2(), (np.abs(X) + 0.1,)),
    ("log10", lambda x: x.log10(), lambda x: x.log10(), (np.abs(X) + 0.1,)),
    ("exp2", lambda x: x.exp2(), lambda x: x.exp2(), (X,)),
    ("erfc", lambda x: x.erfc(), lambda x: x.erfc(), (X * 3,)),
    ("logit", lambda x: x.logit(), lambda x: x.logit(), (P,)),
    ("logit_eps", lambda x: x.logit(eps=0.1), lambda x: x.logit(eps=0.1), (P,)),
    ("hypot", lambda x, y: x.hypot(y), lambda x, y: x.hypot(y), (X, Y)),
    ("fmod", lambda x, y: x.fmod(y), lambda x, y: x.fmod(y), (X * 1.7, Y)),
    ("remainder", lambda x, y: x.remainder(y), lambda x, y: x.remainder(y), (X * 1.7, Y)),
    ("mod_operator", lambda x, y: x % y, lambda x, y: x % y, (X * 1.7, Y)),
    ("floor_divide", lambda x, y: (x // y) * y,   # torch has no derivative for //: floor' = 0
     lambda x, y: __import__("torch").div(x, y, rounding_mode="floor").detach() * y, (X * 1.7, Y)),
    ("xlogy", lambda x, y: x.xlogy(y), lambda x, y: x.xlogy(y), (np.where(X > 0, X, 0.0), np.abs(Y))),
    ("lerp", lambda x, y: x.lerp(y, 0.3), lambda x, y: x.lerp(y, 0.3), (X, Y)),
    ("clamp_min_max", lambda x: x.clamp_min(-0.6) * x.clamp_max(0.4),
     lambda x: x.clamp_min(-0.6) * x.clamp_max(0.4), (X,)),
    ("cumsum", lambda x: (x.reshape(2, 5).cumsum(1) ** 2).sum(0),
     lambda x: (x.reshape(2, 5).cumsum(1) ** 2).sum(0), (X,)),
    ("flip", lambda x, y: x.reshape(2, 5).flip(1, 0) * y.reshape(2, 5),
     lambda x, y: x.reshape(2, 5).flip(1, 0) * y.reshape(2, 5), (X, Y)),
    ("cat", lambda x, y: sg.cat([x.reshape(2, 5), y.reshape(2, 5) ** 2], -1).sin(),
     lambda x, y: __import__("torch").cat([x.reshape(2, 5), y.reshape(2, 5) ** 2], -1).sin(), (X, Y)),
    ("stack", lambda x, y: sg.stack([x, y * y], 1).cos(),
     lambda x, y: __import__("torch").stack([x, y * y], 1).cos(), (X, Y)),
]


@pytest.mark.parametrize("name, f, tf, inputs", UNARY_OR_BINARY, ids=[c[0] for c in UNARY_OR_BINARY])
@pytest.mark.parametrize("target", ["numpy", "c"])
def test_forward_and_gradient_match_torch(name, f, tf, inputs, target):
    torch = pytest.importorskip("torch")
    mod = sg.compile(f, *inputs, target=target)
    out = mod.forward(*inputs)
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    ref = tf(*ts)
    np.testing.assert_allclose(out, ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    seed = np.linspace(-1.0, 1.0, ref.numel()).reshape(tuple(ref.shape))
    ref.backward(torch.tensor(seed))
    grads = mod.backward(seed, *inputs)
    for g, t in zip(grads, ts):
        want = np.zeros_like(g) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12, err_msg=name)


def test_closed_forms_without_torch():
    x = np.array([-2.5, -0.5, 0.5, 1.5, 2.5])
    out = sg.compile(lambda x: x.round(), x).forward(x)
    assert out.tolist() == [-2.0, -0.0, 0.0, 2.0, 2.0]          # halves to even
    a, b = np.array([5.5, -5.5, 5.5, -5.5]), np.array([2.0, 2.0, -2.0, -2.0])
    assert sg.compile(lambda a, b: a.fmod(b), a, b).forward(a, b).tolist() == [1.5, -1.5, 1.5, -1.5]
    mod = sg.compile(lambda a, b: a % b, a, b)
    assert mod.forward(a, b).tolist() == [1.5, 0.5, -0.5, -1.5]
    assert mod.backward(np.ones(4), a, b)[1].tolist() == [-2.0, 3.0, 3.0, -2.0]  # -floor(a/b)
    big = np.array([1e300, 3e-300])
    h = sg.compile(lambda a, b: a.hypot(b), big, big)
    assert h.forward(big, big) == pytest.approx(big * np.sqrt(2), rel=1e-15)   # no overflow
    x, y = np.array([0.0, 2.0, 0.0]), np.array([0.0, 2.0, np.nan])
    xl = sg.compile(lambda x, y: x.xlogy(y), x, y)
    assert np.array_equal(xl.forward(x, y), [0.0, 2.0 * np.log(2.0), np.nan], equal_nan=True)
    # d/dx = log(y), but 0 where x == 0 and y <= 0 (torch: log(0) is masked there), d/dy = x / y
    gx, gy = xl.backward(np.ones(3), x, y)
    assert gx[:2].tolist() == [0.0, np.log(2.0)] and gy[1] == 1.0
    x = np.arange(6.0).reshape(2, 3)
    cs = sg.compile(lambda x: x.cumsum(1), x)
    assert cs.forward(x).tolist() == [[0.0, 1.0, 3.0], [3.0, 7.0, 12.0]]
    seed = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert cs.backward(seed, x)[0].tolist() == [[6.0, 5.0, 3.0], [15.0, 11.0, 6.0]]


def test_join_errors_name_the_shapes_and_line():
    with pytest.raises(ShapeError, match=r"cat: sizes of tensors must match.*\(2, 3\).*\(3, 3\).*test_trace_ops.py"):
        sg.compile(lambda x, y: sg.cat([x, y], 1), np.zeros((2, 3)), np.zeros((3, 3)))
    with pytest.raises(ShapeError, match=r"stack expects each tensor to be equal size"):
        sg.compile(lambda x, y: sg.stack([x, y]), np.zeros(2), np.zeros(3))
    with pytest.raises(ShapeError, match="dimension out of range"):
        sg.compile(lambda x: x.cumsum(2), np.zeros((2, 3)))
    with pytest.raises(TraceError, match="example inputs"):
        sg.compile(lambda x, y: sg.cat([x, y]))          # shape-generic: sizes unknown
    from symgrad.trace import cat
    with pytest.raises(TraceError, match="non-empty list"):
        cat([])


def test_constant_like_values_take_the_traced_shape():
    f = lambda x: (sg.where(x > 0, x, sg.zeros_like(x)) + sg.ones_like(x) * x  # noqa: E731
                   + sg.full_like(x, 2.5))
    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    for mod in (sg.compile(f, x), sg.compile(f)):     # specialised and shape-generic
        np.testing.assert_allclose(mod.forward(x), np.where(x > 0, x, 0) + x + 2.5)
        np.testing.assert_allclose(mod.backward(np.ones((2, 3)), x)[0], np.where(x > 0, 2.0, 1.0))
    const = sg.compile(lambda x: sg.full_like(x, 3.0))
    assert const.forward(x).tolist() == [[3.0] * 3] * 2
    assert not const.backward(np.ones((2, 3)), x)[0].any()


def test_function_spellings_trace_like_the_methods():
    # torch spells these as functions too: sg.cosh(x) in a forward is x.cosh()
    x = np.linspace(0.2, 0.9, 4)
    f = lambda x: (sg.cosh(x) + sg.sinh(x) + sg.atanh(x) + sg.asin(x) + sg.acos(x) + sg.atan(x)  # noqa: E731
                   + sg.log2(x) + sg.log10(x) + sg.exp2(x) + sg.erfc(x) + sg.logit(x)
                   + sg.floor(x * 3) + sg.cumsum(x, 0) + sg.flip(x, 0) + sg.clamp_min(x, 0.5))
    want = (np.cosh(x) + np.sinh(x) + np.arctanh(x) + np.arcsin(x) + np.arccos(x) + np.arctan(x)
            + np.log2(x) + np.log10(x) + np.exp2(x) + _erfc(x) + np.log(x / (1 - x))
            + np.floor(x * 3) + np.cumsum(x) + x[::-1] + np.maximum(x, 0.5))
    np.testing.assert_allclose(sg.compile(f, x).forward(x), want, rtol=1e-12)
    # a number first and a traced value second: where torch takes a number (pow, remainder)
    g = lambda y, x: sg.pow(2.0, x) + sg.remainder(3.0, x) + sg.xlogy(2.0, y)  # noqa: E731
    y = np.ones(4)
    np.testing.assert_allclose(sg.compile(g, y, x).forward(y, x),
                               2.0 ** x + np.mod(3.0, x) + 2.0 * np.log(1.0))
    # where torch takes only tensors (atan2, hypot, fmod's input), torch's TypeError
    for h in (lambda y, x: sg.atan2(1.0, x), lambda y, x: sg.hypot(y, 2.0),
              lambda y, x: sg.fmod(3.0, x)):
        with pytest.raises(TypeError, match=r"\(\): argument '(input|other)'"):
            sg.compile(h, y, x)


def _erfc(x):
    import math
    return np.array([math.erfc(v) for v in x])


@pytest.mark.parametrize("target", ["numpy", "c"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_log_ndtr_is_finite_where_erfc_underflows(target, dtype):
    # log Phi(x) (probit): erfc underflows below x = -37.5 (float64) / -13 (float32)
    x = np.array([-200.0, -40.0, -30.0, -5.0, -1.0, 0.0, 0.3, 5.0, 30.0]).astype(dtype)
    mod = sg.compile(lambda x: (0.5 * (1 + sg.erf(x / 2 ** 0.5))).log(), x, target=target)
    assert "log_ndtr" in mod.stats["rewrites"]
    import mpmath

    def ref(v):
        with mpmath.workdps(60):
            p = mpmath.ncdf(mpmath.mpf(float(v)))
            return float(mpmath.log(p)), float(mpmath.npdf(mpmath.mpf(float(v))) / p)

    want = np.array([ref(v) for v in x])
    rtol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(mod.forward(x), want[:, 0], rtol=rtol, atol=rtol * 1e-6)
    np.testing.assert_allclose(mod.backward(np.ones_like(x), x)[0], want[:, 1], rtol=rtol * 10,
                               atol=1e-30)


def test_sign_function_spelling_traces():
    x = np.array([-2.0, 0.0, 3.0])
    mod = sg.compile(lambda x: sg.sign(x) * x * x, x)
    np.testing.assert_allclose(mod.forward(x), np.sign(x) * x * x)
    np.testing.assert_allclose(mod.backward(np.ones(3), x)[0], 2 * np.abs(x))  # sign' = 0


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_all_and_any_are_bool_reductions(target):
    """x.all / x.any / sg.all / sg.any (dim, keepdim, NaN counts as nonzero) give bool masks for
    sg.where, with numpy's values; the gradient flows through the branches they select."""
    x = np.array([[1.5, 0.0, 2.0], [3.0, 0.5, 1.0], [-1.0, -2.0, 0.25]])

    def f(x):
        rows = (x > 0).all(dim=1, keepdim=True)
        cols = sg.any(x < 0, 0)
        some = (x * 0.0).any()                       # every element zero: False
        return (sg.where(rows, x * x, -x) * sg.where(cols, 2.0, 3.0)).sum() + sg.where(some, 5.0, 0.0)

    rows = (x > 0).all(axis=1, keepdims=True)
    cols = (x < 0).any(axis=0)
    want = (np.where(rows, x * x, -x) * np.where(cols, 2.0, 3.0)).sum()
    mod = sg.compile(f, x, target=target)
    np.testing.assert_allclose(mod.forward(x), want, rtol=1e-14)
    grad = np.where(rows, 2 * x, -1.0) * np.where(cols, 2.0, 3.0)
    np.testing.assert_allclose(mod.backward(np.float64(1.0), x)[0], grad, rtol=1e-14)
    nan = np.array([np.nan, 0.0])
    check = sg.compile(lambda v: sg.where(v.all(), 1.0, 0.0) + sg.where(v.any(), 10.0, 0.0), nan,
                       target=target)
    assert float(check.forward(nan)) == 10.0   # nan != 0: any is True, all is False (a 0)


def test_branching_on_all_is_a_control_flow_error():
    class F(sg.Function):
        @staticmethod
        def forward(ctx, x):
            if (x > 0).all():
                return x
            return -x

    with pytest.raises(TraceError, match=r"bool\(\) of a traced value .*control flow"):
        F.apply(sg.tensor([1.0, 2.0], requires_grad=True))
