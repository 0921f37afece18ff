"""Function (hand-written and forward-only), ctx API, anomaly mode, gradcheck, functional, Variable."""

import warnings

import numpy as np
import pytest

import symgrad.autograd as ag
from symgrad import _runtime_ops as ops
from symgrad.autograd import functional as F
from symgrad.tensor import float64, tensor

torch = pytest.importorskip("torch")


class Cube(ag.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x ** 3 * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 * ctx.k, None


def test_custom_function_backward_and_ctx():
    x = tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    assert y.grad_fn.needs_input_grad == (True, False)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6, 24])
    with pytest.raises(RuntimeError, match="second time"):
        y.grad_fn.saved_tensors
    assert Cube()(x, 1.0).grad_fn.name() == "CubeBackward"  # legacy call form


def test_custom_backward_is_differentiable_with_create_graph():
    x = tensor([1.0, 2.0], dtype=float64, requires_grad=True)
    (g,) = ag.grad(Cube.apply(x, 1.0).sum(), x, create_graph=True)
    (gg,) = ag.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [6, 12])


def test_custom_function_errors_match_torch():
    class Few(ag.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match=r"function FewBackward returned an incorrect number of gradients \(expected 2, got 1\)"):
        Few.apply(tensor([1.0], requires_grad=True), tensor([1.0])).sum().backward()

    class BadShape(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return ops.mul(tensor(np.ones(5, np.float32)), 1)

    with pytest.raises(RuntimeError, match=r"returned an invalid gradient at index 0 - got \[5\] but expected shape compatible with \[2\]"):
        BadShape.apply(tensor([1.0, 2.0], requires_grad=True)).sum().backward()


def test_mark_dirty_non_differentiable_materialize():
    class Inc(ag.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 1

    x = tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = Inc.apply(y)
    assert z is y and y.grad_fn.name() == "IncBackward"
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1, 1])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place operation."):
        Inc.apply(tensor([1.0], requires_grad=True))

    class Two(ag.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x * 0
            ctx.mark_non_differentiable(idx)
            ctx.set_materialize_grads(False)
            return x * 2, idx

        @staticmethod
        def backward(ctx, g, gidx):
            assert gidx is None
            return g * 2

    a, b = Two.apply(tensor([1.0], requires_grad=True))
    assert a.requires_grad and not b.requires_grad


class Softplus(ag.Function):
    @staticmethod
    def forward(ctx, x, beta=1.0):
        return ops.log1p(ops.exp(beta * x)) / beta


def test_forward_only_function_is_compiled_and_differentiable():
    x = tensor([-1.0, 0.5, 2.0], dtype=float64, requires_grad=True)
    y = Softplus.apply(x, 2.0)
    assert y.grad_fn.name() == "SoftplusBackward"
    y.sum().backward()
    xt = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    torch.nn.functional.softplus(xt, beta=2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10)
    assert ag.gradcheck(lambda t: Softplus.apply(t, 2.0), (x,))
    assert ag.gradgradcheck(lambda t: Softplus.apply(t, 2.0), (x,))
    assert Softplus()(x).shape == (3,)


def test_anomaly_mode_names_nan_op_and_shows_forward_trace():
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        ctx = ag.detect_anomaly()
    with ctx:
        assert ag.is_anomaly_enabled()
        x = tensor([-1.0], requires_grad=True)
        y = x.sqrt()
        with pytest.warns(UserWarning, match="Traceback of forward call that caused the error"):
            with pytest.raises(RuntimeError, match="Function 'SqrtBackward0' returned nan values in its 0th output."):
                y.sum().backward()
    assert not ag.is_anomaly_enabled()
    ag.set_detect_anomaly(True)
    assert ag.is_anomaly_enabled()
    ag.set_detect_anomaly(False)


def test_gradcheck_failure_message_and_warning():
    class Wrong(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = tensor([1.0, 2.0], dtype=float64, requires_grad=True)
    with pytest.raises(ag.gradcheck.GradcheckError, match=r"Jacobian mismatch for output 0 with respect to input 0,\nnumerical:"):
        ag.gradcheck(Wrong.apply, (x,))
    assert issubclass(ag.GradcheckError, RuntimeError)
    assert ag.gradcheck(Wrong.apply, (x,), raise_exception=False) is False
    with pytest.warns(UserWarning, match="not a double precision"):
        ag.gradcheck(lambda t: t * 2, (tensor([1.0], requires_grad=True),), atol=1e-2, rtol=1e-2, eps=1e-3)


def _pair(fn_sg, fn_t, *arrays):
    a = tuple(tensor(x, dtype=float64) for x in arrays)
    b = tuple(torch.tensor(x, dtype=torch.float64) for x in arrays)
    return fn_sg(a), fn_t(b)


def _cmp(ours, theirs):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _cmp(o, t)
    else:
        assert not isinstance(ours, tuple)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-8)


@pytest.mark.parametrize("name", ["jacobian", "hessian", "vjp", "jvp",
                                  "hvp", "vhp"])
def test_functional_matches_torch_structures(name):
    f1 = lambda x: (x.exp() * x).sum()  # noqa: E731
    f2 = lambda x, y: (x * y.sin()).sum()  # noqa: E731
    fv = lambda x: x.exp() * 2  # noqa: E731
    x, y, v = [0.1, 0.5, 0.9], [1.0, 2.0, 3.0], [1.0, -1.0, 0.5]
    ours_mod, th = getattr(F, name), getattr(torch.autograd.functional, name)
    if name == "jacobian":
        _cmp(*_pair(lambda a: ours_mod(fv, a[0]), lambda a: th(fv, a[0]), x))
        _cmp(*_pair(lambda a: ours_mod(lambda p, q: (p * q, p.exp()), a), lambda a: th(lambda p, q: (p * q, p.exp()), a), x, y))
    elif name == "hessian":
        _cmp(*_pair(lambda a: ours_mod(f1, a[0]), lambda a: th(f1, a[0]), x))
        _cmp(*_pair(lambda a: ours_mod(f2, a), lambda a: th(f2, a), x, y))
    elif name in ("vjp",):
        _cmp(*_pair(lambda a: ours_mod(fv, a[0], a[1]), lambda a: th(fv, a[0], a[1]), x, v))
        _cmp(*_pair(lambda a: ours_mod(f2, a[:2]), lambda a: th(f2, a[:2]), x, y))
    elif name == "jvp":
        _cmp(*_pair(lambda a: ours_mod(fv, a[0], a[1]), lambda a: th(fv, a[0], a[1]), x, v))
    else:
        _cmp(*_pair(lambda a: ours_mod(f1, a[0], a[1]), lambda a: th(f1, a[0], a[1]), x, v))


def test_functional_strict_errors():
    x = tensor([1.0, 2.0], dtype=float64)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent of input 1"):
        F.jacobian(lambda t, u: t * 2, (x, x.clone()), strict=True)
    xt = torch.tensor([1.0, 2.0], dtype=torch.float64)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent of input 1"):
        torch.autograd.functional.jacobian(lambda t, u: t * 2, (xt, xt.clone()), strict=True)
    with pytest.raises(RuntimeError, match="The vector v can only be None"):
        F.vjp(lambda t: t * 2, x)


def test_variable_is_deprecated_and_returns_tensor():
    with pytest.warns(DeprecationWarning):
        v = ag.Variable(tensor([1.0]), requires_grad=True)
    assert isinstance(v, ag.Variable.__mro__[0]) and v.requires_grad
    from symgrad.tensor import Tensor

    assert type(v) is Tensor
