"""The torch target writes into a matmul's result where the next step reads it last (the
MLP's `tanh(x @ W1)` -> `v.tanh_()`, its backward's `tanh_backward` into the dying
`g @ W2.T`): one (n, hidden) array fewer per pass than torch's eager autograd allocates.
Values equal the plain twins, torch's autograd (first and second order), inputs and saved
values are never written, and the saved tuple holds no value read only for its shape."""
import re

import numpy
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")
F64 = torch.float64


class MLP(sg.Function):
    @staticmethod
    def forward(ctx, x, W1, W2, y):
        d = sg.matmul(sg.tanh(sg.matmul(x, W1)), W2) - y
        return (d * d).mean()


def _torch_mlp(x, W1, W2, y):
    d = torch.tanh(x @ W1) @ W2 - y
    return (d * d).mean()


def _inputs(dtype=F64, n=40, k=8, h=6, requires_grad=False):
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, k, generator=g, dtype=dtype), torch.randn(k, h, generator=g, dtype=dtype),
          torch.randn(h, 1, generator=g, dtype=dtype), torch.randn(n, 1, generator=g, dtype=dtype)]
    return [x.requires_grad_(requires_grad) for x in xs]


def test_in_place_pass_writes_tanh_backward_into_a_dying_gradient():
    from symgrad.emit.frameworks import torch_in_place

    shapes = {"a": (4, 3), "b": (4, 3), "s": (1, 3)}
    floats = {"a", "b", "s"}
    assert torch_in_place("a*(1 - b*b)", shapes, floats, {"a"})[0] == \
        "torch.ops.aten.tanh_backward.grad_input(a, b, grad_input=a)"
    # not dying, or of a broadcast shape: a new tensor
    assert torch_in_place("a*(1 - b*b)", shapes, floats)[0] == \
        "torch.ops.aten.tanh_backward(a, b)"
    assert torch_in_place("s*(1 - b*b)", shapes, floats, {"s"})[0] == \
        "torch.ops.aten.tanh_backward(s, b)"


def test_mlp_writes_into_its_matmul_results_and_equals_its_plain_twins():
    xs = _inputs()
    mod = sg.compile(MLP, *[x.numpy() for x in xs], target="torch")
    raw, src = mod.raw, mod.source
    fs = src[src.index("def forward_saving("):src.index("def _forward_saving_recorded(")]
    bs = src[src.index("def backward_saved("):src.index("def _backward_saved_recorded(")]
    # tanh into the matmul's own result; tanh's derivative into the dying g @ W2.T
    m = re.search(r"^    (\w+) = torch\.matmul\(x, W1\)", fs, flags=re.MULTILINE)
    assert m and f"{m.group(1)}.tanh_()" in fs, fs
    g = re.search(r"tanh_backward\.grad_input\((\w+), \w+, grad_input=(\w+)\)", bs)
    assert g and g.group(1) == g.group(2), bs
    assert re.search(rf"^    {g.group(1)} = torch\.matmul\(", bs, flags=re.MULTILINE), bs
    before = [x.clone() for x in xs]
    (out,), saved = raw.forward_saving(*xs)
    (plain_out,), plain_saved = raw._forward_saving_recorded(*xs)
    torch.testing.assert_close(out, plain_out, rtol=1e-15, atol=0)
    # the saved tuple: no value read only for its shape (the pre-tanh x @ W1, the squared
    # residual): each is read by backward_saved's statements as a value
    names = re.search(r"saved = \(([^)]*)\)", fs).group(1).replace(",", " ").split()
    body = bs.split('"""')[2]
    for name in names:
        assert re.search(rf"\b{name}\b(?!\.shape)", body), (name, bs)
    assert len(saved) == len(names) and all(s.shape != xs[0].shape[:1] + (8,) for s in saved)
    saved0 = [s.clone() for s in saved]
    grad = torch.tensor(1.5, dtype=F64)
    fast = raw.backward_saved(grad, *saved, *xs)
    plain = raw._backward_saved_recorded(grad, *plain_saved, *xs)
    for a, b in zip(fast, plain):
        torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-15)
    assert all(torch.equal(a, b) for a, b in zip(xs, before))
    assert all(torch.equal(a, b) for a, b in zip(saved, saved0))
    xr = [x.clone().requires_grad_() for x in xs]
    expected = torch.autograd.grad(_torch_mlp(*xr), xr, grad)
    for a, b in zip(fast, expected):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_mlp_through_to_torch_equals_torch_autograd_first_and_second_order(dtype):
    F = sg.to_torch(MLP)
    xs = _inputs(dtype, requires_grad=True)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-11, atol=1e-13)
    before = [x.detach().clone() for x in xs]
    ours = torch.autograd.grad(F.apply(*xs), xs, create_graph=True)
    ref = torch.autograd.grad(_torch_mlp(*xs), xs, create_graph=True)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, **tol)
    # second order: the gradient of a weighted sum of the first-order gradients
    w = [torch.randn_like(x) for x in xs]
    s_ours = sum((a * v).sum() for a, v in zip(ours, w))
    s_ref = sum((a * v).sum() for a, v in zip(ref, w))
    for a, b in zip(torch.autograd.grad(s_ours, xs), torch.autograd.grad(s_ref, xs)):
        torch.testing.assert_close(a, b, **tol)
    # a plain backward (the in-place backward_saved) twice on one forward: the same grads
    out = F.apply(*xs)
    g1 = torch.autograd.grad(out, xs, retain_graph=True)
    g2 = torch.autograd.grad(out, xs)
    for a, b, c in zip(g1, g2, ref):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        torch.testing.assert_close(a, c.detach(), **tol)
    assert all(torch.equal(a.detach(), b) for a, b in zip(xs, before))
    if dtype == F64:
        assert torch.autograd.gradcheck(F.apply, xs)
        assert torch.autograd.gradgradcheck(F.apply, xs)


def test_mean_adjoint_is_broadcast_by_its_reader_not_expanded():
    """The adjoint of mlp_loss's mean is `grad_out / N`, 0-d, which the product that reads it
    broadcasts (no `.expand(shape)` view); where the gradient is the unreduce itself (the
    gradient of a sum) or its reader does not fill its shape, it keeps the expand."""
    xs = _inputs()
    mod = sg.compile(MLP, *[x.numpy() for x in xs], target="torch")
    bs = mod.source[mod.source.index("def backward_saved("):]
    assert re.search(r"= grad_out / 40  # unreduce", bs) and ".expand(" not in bs, bs

    def total(x, b):
        return sg.sum(x) * b           # grad_x: unreduce(grad_out * b), returned

    x, b = torch.randn(5, 3, dtype=F64), torch.tensor(2.5, dtype=F64)
    mod2 = sg.compile(total, x.numpy(), b.numpy(), target="torch")
    gx, gb = mod2.raw.backward(torch.tensor(1.5, dtype=F64), x, b)
    assert gx.shape == (5, 3)
    torch.testing.assert_close(gx, torch.full((5, 3), 3.75, dtype=F64))
    torch.testing.assert_close(gb, 1.5 * x.sum())

    def scaled(x, s):
        return sg.mean(x) * s          # the unreduce times s of shape (1, 3): expanded
    s = torch.randn(1, 3, dtype=F64)
    mod3 = sg.compile(scaled, x.numpy(), s.numpy(), target="torch")
    g = torch.randn(1, 3, dtype=F64)
    xr, sr = x.clone().requires_grad_(), s.clone().requires_grad_()
    expected = torch.autograd.grad(xr.mean() * sr, (xr, sr), g)
    for a, e in zip(mod3.raw.backward(g, x, s), expected):
        assert a.shape == e.shape
        torch.testing.assert_close(a, e)
