"""isnan / isfinite / isinf / isposinf / isneginf and the logical_* ops as conditions in a
traced forward (sg.where masks), on the NumPy and C targets, checked against torch eager."""
import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")

X = [1.5, float("nan"), float("inf"), -float("inf"), -2.0, 0.0, 3.0]


def _both(forward, x=X):
    """forward(m, x) on symgrad (traced into a Function) and on torch: values and dx."""
    F = type("F", (sg.Function,), {"forward": staticmethod(lambda ctx, x: forward(sg, x))})
    xs = sg.tensor(x, dtype=sg.float64, requires_grad=True)
    ys = F.apply(xs)
    (gs,) = sg.autograd.grad(ys.sum(), xs)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    yt = forward(torch, xt)
    (gt,) = torch.autograd.grad(yt.sum(), xt)
    np.testing.assert_array_equal(ys.detach().numpy(), yt.detach().numpy())
    gs, gt = gs.numpy(), gt.numpy()
    # where torch's gradient is NaN through an untaken branch (0 * inf: the "double where"
    # trap), symgrad's is the taken branch's, finite (docs/runtime.md's differences table);
    # elsewhere equal
    trap = np.isnan(gt) & ~np.isnan(gs)
    assert np.all(np.isfinite(gs[trap]))
    assert trap.sum() <= 3          # only at the non-finite points of X
    np.testing.assert_array_equal(gs[~trap], gt[~trap])
    return F


def test_runtime_predicates_match_torch():
    for name in ("isnan", "isfinite", "isinf", "isposinf", "isneginf"):
        got = getattr(sg, name)(sg.tensor(X))
        assert got.dtype == sg.bool
        np.testing.assert_array_equal(got.numpy(), getattr(torch, name)(torch.tensor(X)).numpy())
        np.testing.assert_array_equal(getattr(sg.tensor(X), name)().numpy(), got.numpy())


@pytest.mark.parametrize("name", ["isinf", "isposinf", "isneginf"])
def test_isinf_family_as_a_where_mask(name):
    # before: "unsupported op 'isinf' on a traced value" (and sg.isinf did not exist)
    _both(lambda m, x: m.where(getattr(x, name)(), 2.0, x * x))
    _both(lambda m, x: m.where(getattr(m, name)(x) | x.isnan(), 0.0, x.sin()))


@pytest.mark.parametrize("wrap", ["relu", "clamp", "maximum", "abs"])
def test_where_on_isnan_under_relu_clamp_maximum(wrap):
    # before: CompileError "'isnan' object has no attribute '_eval_as_set'" (relu, clamp,
    # maximum: their derivative's conditions fold the where's isnan)
    def clean(m, x):
        return m.where(x.isnan() | x.isinf(), 0.0, x)

    ops = {"relu": lambda m, v: v.relu(), "clamp": lambda m, v: v.clamp(-1.0, 1.0),
           "maximum": lambda m, v: m.maximum(v, 0.5 * v), "abs": lambda m, v: v.abs()}
    _both(lambda m, x: ops[wrap](m, clean(m, x)) * 3.0)
    _both(lambda m, x: ops[wrap](m, m.where(~x.isnan() & ~x.isinf(), x, 0.0)))


def test_negated_isnan_inside_folded_conditions_keeps_the_right_branches():
    # a negated isnan in a derivative's folded condition: SymPy raised "Illegal operator isnan"
    # putting it in negation normal form, and as a BooleanFunction it let simplify_logic fold
    # isnan(x) | (x <= 0) to True (a zero gradient everywhere)
    def f(m, x):
        a = m.where(~x.isnan() & ~x.isinf(), x, 0.0).relu()
        b = m.where(~(2 * x).isnan() & x.isfinite(), x, 1.0)
        return a * b + (a * x.isfinite()).clamp(max=2.0)
    _both(f)


def test_predicates_compile_to_c():
    F = _both(lambda m, x: m.where(x.isposinf(), 10.0, 0.0) + m.where(x.isneginf(), -10.0, 0.0)
              + m.where(x.isinf() | x.isnan(), 0.0, x))
    mod = sg.compile(F, np.zeros(len(X)), target="c")
    xs = np.array(X)
    want = (np.where(np.isposinf(xs), 10.0, 0.0) + np.where(np.isneginf(xs), -10.0, 0.0)
            + np.where(np.isinf(xs) | np.isnan(xs), 0.0, xs))
    np.testing.assert_array_equal(np.asarray(mod.forward(xs)), want)


def test_logical_ops_runtime_and_traced():
    x = [1.0, 0.0, -2.0, 0.0]
    y = [0, 3, 5, 0]
    for name in ("logical_and", "logical_or", "logical_xor"):
        got = getattr(sg, name)(sg.tensor(x), sg.tensor(y))
        want = getattr(torch, name)(torch.tensor(x), torch.tensor(y))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(getattr(sg.tensor(x), name)(sg.tensor(y)).numpy(),
                                      want.numpy())
    np.testing.assert_array_equal(sg.logical_not(sg.tensor(x)).numpy(),
                                  torch.logical_not(torch.tensor(x)).numpy())
    # before: sg.logical_not did not exist, `^` of two traced masks was a TypeError
    _both(lambda m, x: m.where((x > 0) ^ x.isnan(), x, -x))
    _both(lambda m, x: m.where(m.logical_xor(x > 0, x < 2) | m.logical_not(x.isfinite()),
                               0.0, x * 2))


def test_negated_comparisons_are_true_at_nan():
    # before: ~(x > 0) was SymPy's x <= 0, False at NaN (torch's ~mask is True there)
    _both(lambda m, x: m.where(~(x > 0), 1.0, 2.0) * x)
    _both(lambda m, x: m.where(~((x > 0) & (x < 2)), x, 0.0) + m.where(~(x == 0), 1.0, 0.0))
    _both(lambda m, x: m.where(~((x >= 1) | x.isinf()), x.exp(), -x))


# ---------------------------------------------------------------- constant factories
class _Factories(sg.Function):
    @staticmethod
    def forward(ctx, m):
        # constants made in the forward: captured inputs of the module (no gradient)
        return (m @ sg.eye(3) * 2 + sg.arange(3.0) + sg.zeros(3) + sg.ones(1, 3)
                + sg.full((3,), 0.5) + sg.linspace(0.0, 1.0, 3) + sg.tensor([1.0, 2.0, 3.0]))


def _factories_reference(m):
    return (m * 2 + np.arange(3.0) + np.ones((1, 3)) + 0.5 + np.linspace(0.0, 1.0, 3)
            + np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_constant_factories_in_a_shape_generic_compile(target):
    # before: TraceError "the forward captures an array ..., which a shape-generic trace
    # cannot take as an input; give example inputs"
    mod = sg.compile(_Factories, target=target, dtype="float64", cache_ok=False)
    for shape in [(2, 3), (5, 3), (3,)]:
        m = np.random.default_rng(0).standard_normal(shape)
        np.testing.assert_allclose(np.asarray(mod.forward(m)), _factories_reference(m),
                                   rtol=1e-14)
        g = np.asarray(mod.backward(np.ones(np.broadcast_shapes(shape, (1, 3))), m))
        np.testing.assert_allclose(g.reshape(shape), np.full(shape, 2.0), rtol=1e-14)


def test_constant_factories_through_apply_at_several_shapes():
    # the runtime compiles per shape, then one shape-generic module
    for shape in [(2, 3), (4, 3), (6, 3), (1, 3)]:
        m = sg.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)
        y = _Factories.apply(m)
        np.testing.assert_allclose(y.detach().numpy(), _factories_reference(m.detach().numpy()),
                                   rtol=1e-6)
        y.sum().backward()
        np.testing.assert_allclose(m.grad.numpy(), np.full(shape, 2.0))
