"""In-place ops, version counters, views (CopySlices) and gradient layouts, vs torch."""

import numpy as np
import pytest

import symgrad.autograd as ag
from symgrad.tensor import tensor

torch = pytest.importorskip("torch")


def both(fn, data):
    """Run ``fn(lib_tensor_factory)`` for symgrad and torch; return both results."""
    x = tensor(data, requires_grad=True)
    xt = torch.tensor(data, requires_grad=True)
    return fn(x), fn(xt), x, xt


def assert_same(a, b):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), b.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_version_counter_shared_with_views_and_detach():
    x = tensor([1.0, 2.0, 3.0])
    v = x[1:]
    d = x.detach()
    assert x._version == 0
    v.mul_(2)
    assert x._version == v._version == d._version == 1
    d.add_(1)
    assert x._version == 2
    np.testing.assert_allclose(x.numpy(), [2, 5, 7])


def test_modified_saved_output_raises_torch_message():
    x = tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"one of the variables needed for gradient computation "
                       r"has been modified by an inplace operation: \[symgrad.FloatTensor \[3\]\], "
                       r"which is output 0 of Exp, is at version 1; expected version 0 "
                       r"instead. Hint:"):
        y.sum().backward()


def test_modified_saved_input_raises():
    x = tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = h * h
    h.mul_(2)
    with pytest.raises(RuntimeError, match="output 0 of Mul, is at version 1"):
        y.sum().backward()


def test_input_not_saved_by_torch_may_be_modified():
    # torch's exp saves its result, not its input: modifying the input is allowed
    def f(x):
        h = x * 1
        y = h.exp()
        h.mul_(5)
        y.sum().backward()
        return y

    y, yt, x, xt = both(f, [0.5, 1.0])
    assert_same(x.grad, xt.grad)


def test_leaf_inplace_errors():
    x = tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation."):
        x.add_(1)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an in-place operation."):
        tensor([1.0, 2.0], requires_grad=True)[1:].mul_(2)
    with ag.no_grad():
        x.add_(1)  # allowed under no_grad (optimizer step)
    np.testing.assert_allclose(x.detach().numpy(), [2.0])


def test_inplace_on_nonleaf_is_differentiable():
    def f(x):
        y = x * 2
        y.mul_(3)
        y.add_(x)
        y.exp_()
        y.sum().backward()
        return y

    y, yt, x, xt = both(f, [0.1, 0.2])
    assert_same(x.grad, xt.grad)
    assert y.grad_fn.name() == yt.grad_fn.name()


def test_setitem_on_clone():
    def f(x):
        y = x.clone()
        y[0] = 5.0
        (y * y).sum().backward()
        return y

    y, yt, x, xt = both(f, [1.0, 2.0, 3.0])
    assert_same(x.grad, xt.grad)
    assert_same(y, yt)


def test_setitem_with_tensor_value():
    for lib in (torch, None):
        pass
    a = tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    w = tensor([10.0, 20.0], requires_grad=True)
    at = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    wt = torch.tensor([10.0, 20.0], requires_grad=True)
    for x, v in ((a, w), (at, wt)):
        y = x * 1
        y[1:3] = v * 2
        (y ** 2).sum().backward()
    assert_same(a.grad, at.grad)
    assert_same(w.grad, wt.grad)


def test_inplace_on_view_of_nonleaf():
    def f(x):
        y = x.clone()
        y[1:].mul_(2)
        v = y[:2]
        v.add_(y[2:].sum())
        (y * y.exp()).sum().backward()
        return y

    y, yt, x, xt = both(f, [0.3, 0.2, 0.1])
    assert_same(y, yt)
    assert_same(x.grad, xt.grad)


def test_view_of_view_inplace_2d():
    def f(x):
        y = x * 1
        y[0][1:].mul_(3)
        y.sum().backward()
        return y

    y, yt, x, xt = both(f, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert_same(y, yt)
    assert_same(x.grad, xt.grad)


def test_view_sees_base_history_after_inplace():
    def f(x):
        y = x * 1
        v = y[:1]
        y.mul_(4)
        (v * 1).sum().backward()
        return v

    v, vt, x, xt = both(f, [1.0, 2.0])
    assert_same(x.grad, xt.grad)


def test_zero_fill_copy_clamp_inplace():
    def f(x):
        y = x * 1
        y.clamp_(0.0, 1.5)
        z = x * 1
        z.zero_()
        w = x * 1
        w.fill_(2.0)
        u = x * 0
        u.copy_(x * 3)
        (y + z + w + u).sum().backward()
        return y

    y, yt, x, xt = both(f, [-1.0, 1.0, 2.0])
    assert_same(x.grad, xt.grad)


def test_inplace_on_nonleaf_plain_tensor_with_grad_value():
    w = tensor([1.0, 2.0], requires_grad=True)
    y = tensor([0.0, 0.0])
    y.add_(w * 3)
    assert y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [3, 3])


def test_grad_layout_follows_transposed_param():
    p = tensor(np.ones((2, 3), np.float32)).T.contiguous().T.detach().requires_grad_()
    pt = torch.ones(2, 3).t().contiguous().t().requires_grad_()
    assert p.stride() == pt.stride()
    (p * 2).sum().backward()
    (pt * 2).sum().backward()
    assert p.grad.stride() == pt.grad.stride()
    g = p.grad
    (p * 2).sum().backward()
    assert p.grad is g


def test_user_gradient_is_not_stolen():
    x = tensor([1.0, 2.0], requires_grad=True)
    g = tensor([1.0, 1.0])
    x.backward(g)
    assert x.grad is not g
    x.backward(g)
    np.testing.assert_allclose(g.numpy(), [1, 1])
    np.testing.assert_allclose(x.grad.numpy(), [2, 2])


def test_shared_grad_buffer_not_aliased_between_leaves():
    a = tensor([1.0], requires_grad=True)
    b = tensor([1.0], requires_grad=True)
    (a + b).sum().backward()
    (a * 1).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [2.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0])


def test_grad_assignment_validates():
    x = tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="attempting to assign a gradient of size"):
        x.grad = tensor([1.0, 2.0])
    from symgrad.tensor import float64

    with pytest.raises(RuntimeError, match="dtype"):
        x.grad = tensor([1.0, 2.0, 3.0], dtype=float64)
    x.grad = tensor([1.0, 1.0, 1.0])
    (x * 1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2, 2])
    x.grad = None
    (x * 1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1, 1, 1])


def test_requires_grad_setter_rules():
    x = tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        (x * 1).requires_grad = False
    from symgrad.tensor import int64

    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        tensor([1, 2], dtype=int64).requires_grad_()


def test_detach_shares_storage_and_version():
    x = tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d[0] = 7.0
    assert x._version == 1
    np.testing.assert_allclose(x.detach().numpy(), [7, 2])
