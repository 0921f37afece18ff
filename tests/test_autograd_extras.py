"""view(dtype) and grad(..., is_grads_batched=True), against torch."""
import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")


def test_view_dtype_reinterprets_memory_like_torch():
    data = [1.0, 2.0, -3.0, 0.5]
    ours, theirs = sg.tensor(data), torch.tensor(data)
    for sg_dt, t_dt in ((sg.int32, torch.int32), (sg.float16, torch.float16),
                        (sg.float64, torch.float64), (sg.uint8, torch.uint8)):
        a, b = ours.view(sg_dt), theirs.view(t_dt)
        assert a.shape == tuple(b.shape) and a.dtype == sg_dt
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_view_dtype_shares_memory_and_versions_and_leaves_the_graph():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    v = x.view(sg.int32)
    assert not v.requires_grad and v.grad_fn is None
    y = sg.tensor([1.0, 2.0])
    w = y.view(sg.int32)
    y.add_(1.0)
    assert w.tolist() == torch.tensor([2.0, 3.0]).view(torch.int32).tolist()
    assert w._version == y._version == 1


def test_view_dtype_errors_match_torch():
    with pytest.raises(RuntimeError, match="must be divisible by 2 to view Float as Double"):
        sg.ones(3).view(sg.float64)
    with pytest.raises(RuntimeError, match="must be divisible by 2 to view Float as Double"):
        torch.ones(3).view(torch.float64)
    with pytest.raises(RuntimeError, match="stride\\(-1\\) must be 1"):
        sg.ones(4, 4).T.view(sg.float64)


def test_is_grads_batched_matches_torch():
    a = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    ta = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (g,) = sg.autograd.grad((a * a).exp().sum(0, keepdim=True) * a, a, sg.tensor(np.eye(3)),
                            is_grads_batched=True)
    (tg,) = torch.autograd.grad((ta * ta).exp().sum(0, keepdim=True) * ta, ta,
                                torch.eye(3), is_grads_batched=True)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-6)
    assert g.shape == (3, 3)


def test_is_grads_batched_frees_the_graph_after_the_batch():
    a = sg.tensor([1.0, 2.0], requires_grad=True)
    out = a * a
    sg.autograd.grad(out, a, sg.ones(4, 2), is_grads_batched=True)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        sg.autograd.grad(out, a, sg.ones(2))


def test_is_grads_batched_needs_a_common_batch_dimension():
    a = sg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="same leading"):
        sg.autograd.grad((a * 2, a * 3), a, (sg.ones(3, 2), sg.ones(4, 2)),
                         is_grads_batched=True)


def test_post_accumulate_grad_hook_like_torch():
    torch = pytest.importorskip("torch")
    seen, tseen = [], []
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    tx.register_post_accumulate_grad_hook(lambda t: tseen.append(t.grad.numpy().copy()))
    for _ in range(2):                   # accumulates: the hook sees the running sum
        (x * x).sum().backward()
        (tx * tx).sum().backward()
    assert [a.tolist() for a in seen] == [a.tolist() for a in tseen] == [[2, 4], [4, 8]]
    h.remove()
    (x * 3).sum().backward()
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        sg.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
