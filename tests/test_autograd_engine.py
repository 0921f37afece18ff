"""Engine semantics vs torch: accumulation, retain_graph, create_graph, inputs=, hooks, errors."""

import numpy as np
import pytest

import symgrad.autograd as ag
import symgrad.tensor as sgt
from symgrad.tensor import tensor

torch = pytest.importorskip("torch")


def T(data, rg=True, dtype=None):
    return tensor(data, dtype=dtype, requires_grad=rg)


def TT(data, rg=True, dtype=torch.float32):
    return torch.tensor(data, dtype=dtype, requires_grad=rg)


def close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_accumulates_into_leaf_grad_in_place():
    x = T([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    g = x.grad
    (x * x).sum().backward()
    assert x.grad is g
    np.testing.assert_allclose(x.grad.numpy(), [4, 8, 12])


def test_implicit_grad_only_for_scalars():
    x = T([1.0, 2.0])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()


def test_output_without_grad_errors():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        tensor([1.0]).sum().backward()


def test_shape_mismatch_message():
    x = T([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of"):
        (x * 1).backward(tensor([1.0, 1.0]))


def test_grad_tensors_length_mismatch():
    x = T([1.0])
    with pytest.raises(RuntimeError, match="got 2 tensors and 1 gradients"):
        ag.backward([(x * 1).sum(), (x * 2).sum()], [tensor(1.0)])


def test_second_backward_raises_and_retain_graph_allows():
    x = T([1.0, 2.0])
    y = (x.exp()).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]), rtol=1e-6)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_second_backward_through_nodes_without_saved_tensors_is_fine():
    # torch: x + 2 saves nothing, so a second backward works
    x = T([1.0, 2.0])
    z = (x + 2).sum()
    z.backward()
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2])
    z = (x * 2).sum()
    z.backward()
    with pytest.raises(RuntimeError, match="second time"):
        z.backward()


def test_grad_returns_tuple_and_does_not_accumulate():
    x = T([1.0, 2.0])
    (g,) = ag.grad((x ** 3).sum(), x)
    np.testing.assert_allclose(g.numpy(), [3, 12])
    assert x.grad is None
    assert isinstance(ag.grad((x ** 3).sum(), [x]), tuple)


def test_allow_unused_and_materialize():
    x, y = T([1.0]), T([2.0])
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph. Set allow_unused=True"):
        ag.grad((x * 1).sum(), [x, y])
    gx, gy = ag.grad((x * 1).sum(), [x, y], allow_unused=True)
    assert gy is None
    gx, gy = ag.grad((x * 1).sum(), [x, y], materialize_grads=True)
    np.testing.assert_allclose(gy.numpy(), [0.0])
    with pytest.raises(ValueError, match="allow_unused"):
        ag.grad((x * 1).sum(), [x, y], allow_unused=False, materialize_grads=True)


def test_grad_input_not_requiring_grad():
    x = T([1.0])
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require grad"):
        ag.grad((x * 1).sum(), tensor([1.0]))


def _derivatives(lib, a, order):
    y = (a.sin() * a.exp()).sum()
    out = []
    for k in range(order):
        (y,) = lib.grad(y.sum(), a, create_graph=k < order - 1)
        out.append(y)
    return out


def test_create_graph_second_order():
    x = T([0.5, 1.5], dtype=sgt.float64)
    xt = TT([0.5, 1.5], dtype=torch.float64)
    for o, t in zip(_derivatives(ag, x, 2), _derivatives(torch.autograd, xt, 2)):
        close(o, t)


def test_create_graph_third_order():
    x = T([0.5, 1.5], dtype=sgt.float64)
    xt = TT([0.5, 1.5], dtype=torch.float64)
    for o, t in zip(_derivatives(ag, x, 3), _derivatives(torch.autograd, xt, 3)):
        close(o, t)


def test_create_graph_backward_gives_differentiable_grad():
    x = T([1.0, 2.0])
    with pytest.warns(UserWarning, match="reference cycle"):
        (x ** 3).sum().backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.grad_fn is not None
    x.grad = None
    (gg,) = ag.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [6, 12])


def test_create_graph_accumulation_makes_new_tensor():
    x = T([1.0, 2.0])
    (x * x).sum().backward(create_graph=True)
    g = x.grad
    (x * x).sum().backward(create_graph=True)
    assert x.grad is not g
    np.testing.assert_allclose(x.grad.detach().numpy(), [4, 8])


def test_inputs_restricts_accumulation_leaf_and_nonleaf():
    a, b = T([1.0]), T([2.0])
    h = a * b
    y = (h * h).sum()
    y.backward(inputs=[a, h])
    assert b.grad is None
    np.testing.assert_allclose(a.grad.numpy(), [2 * 2 * 2])
    np.testing.assert_allclose(h.grad.numpy(), [4.0])
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (a * 1).sum().backward(inputs=[])


def test_grad_wrt_nonleaf():
    x = T([1.0, 2.0])
    h = x * 3
    y = (h ** 2).sum()
    (gh,) = ag.grad(y, h)
    np.testing.assert_allclose(gh.numpy(), [6, 12])


def test_hooks_leaf_and_nonleaf_replace_and_remove():
    x = T([1.0, 2.0])
    seen = []
    h1 = x.register_hook(lambda g: g * 10)
    y = x * 2
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [20, 20])
    np.testing.assert_allclose(seen[0], [1, 1])
    h1.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2])


def test_hook_affects_grad_result_like_torch():
    for lib, mk in ((ag, T), (torch.autograd, TT)):
        a = mk([1.0, 1.0])
        a.register_hook(lambda g: g * 10)
        (g,) = lib.grad((a * 1).sum(), a)
        np.testing.assert_allclose(g.detach().numpy(), [10, 10])


def test_retain_grad():
    x = T([1.0, 2.0, 3.0])
    y = x * 1
    y.retain_grad()
    z = y * 2
    z.retain_grad()
    z.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [2, 2, 2])
    np.testing.assert_allclose(z.grad.numpy(), [1, 1, 1])
    assert y.retains_grad and not x.retains_grad


def test_nonleaf_grad_access_warns():
    x = T([1.0])
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert (x * 1).grad is None


def test_each_node_runs_once_with_summed_grads():
    calls = []
    x = T([1.0, 2.0])
    h = x * 2
    h.grad_fn.register_prehook(lambda gs: calls.append(gs[0].numpy().copy()))
    y = (h * 3 + h.exp()).sum()
    y.backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], 3 + np.exp([2.0, 4.0]), rtol=1e-6)


def test_diamond_matches_torch():
    def f(x):
        a = x.sin()
        b = a * x
        c = a.exp() + b.tanh()
        return (c * b).sum()

    x = T([0.1, -0.7, 1.3])
    xt = TT([0.1, -0.7, 1.3])
    f(x).backward()
    f(xt).backward()
    close(x.grad, xt.grad)


def test_grad_mode_context_decorator_threadlocal():
    import threading

    x = T([1.0])
    with ag.no_grad():
        assert not ag.is_grad_enabled()
        y = x * 2
        assert not y.requires_grad
        with ag.enable_grad():
            assert (x * 2).requires_grad
        z = tensor([1.0], requires_grad=True)  # factories honour requires_grad under no_grad
        assert z.requires_grad

    @ag.no_grad
    def f():
        return ag.is_grad_enabled()

    @ag.no_grad()
    def g():
        return ag.is_grad_enabled()

    assert f() is False and g() is False and ag.is_grad_enabled()
    ag.set_grad_enabled(False)
    assert not ag.is_grad_enabled()
    ag.set_grad_enabled(True)
    with ag.set_grad_enabled(False):
        result = []
        t = threading.Thread(target=lambda: result.append(ag.is_grad_enabled()))
        t.start()
        t.join()
        assert result == [True]
    assert ag.is_grad_enabled()
    with ag.inference_mode():
        assert not ag.is_grad_enabled()


def test_backward_order_by_sequence_number():
    order = []
    x = T([1.0])
    a = x * 2
    b = a * 3
    c = a * 4
    for name, t in (("a", a), ("b", b), ("c", c)):
        t.grad_fn.register_prehook(lambda gs, n=name: order.append(n))
    (b + c).sum().backward()
    assert order == ["c", "b", "a"]
