"""torch.autograd.graph.saved_tensors_hooks and friends: pack at save time, unpack at every
backward read, thread-local, nested, and the unpacked values are what the backward uses."""
import threading

import numpy as np
import pytest

import symgrad as sg
from symgrad.autograd.graph import (disable_saved_tensors_hooks, save_on_cpu,
                                    saved_tensors_hooks)

rng = np.random.default_rng(3)


def _log_hooks():
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape)))
        return t

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t

    return log, pack, unpack


def test_the_torch_doc_example_packs_both_factors_and_unpacks_them_in_backward():
    log, pack, unpack = _log_hooks()
    a = sg.ones(5, requires_grad=True)
    b = sg.ones(5, requires_grad=True) * 2
    with saved_tensors_hooks(pack, unpack):
        y = a * b
    assert log == [("pack", (5,)), ("pack", (5,))]
    y.sum().backward()         # after the context: the hooks of the save still apply
    assert log[2:] == [("unpack", (5,)), ("unpack", (5,))]
    np.testing.assert_array_equal(a.grad.numpy(), np.full(5, 2.0))


def test_the_backward_uses_what_unpack_returns():
    """Packing into storage and unpacking from it (torch's tutorial pattern): the gradient is
    computed from the unpacked value, here deliberately a different one."""
    storage = []

    def pack(t):
        storage.append(t.detach().numpy().copy())
        return len(storage) - 1

    def unpack(i):
        return sg.tensor(storage[i] * 3)    # the backward must see 3x the saved input

    x = sg.tensor(rng.standard_normal(4), requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = x.sin()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(3 * x.detach().numpy()), rtol=1e-6)


class _Square(sg.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class _Cube(sg.Function):          # forward only: generated backward
    @staticmethod
    def forward(ctx, x):
        return x ** 3


def test_functions_with_and_without_backward_go_through_the_hooks():
    log, pack, unpack = _log_hooks()
    x = sg.tensor(rng.standard_normal(3), requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = _Square.apply(x) + _Cube.apply(x)
    packs = [e for e in log if e[0] == "pack"]
    assert len(packs) == 2
    y.sum().backward()
    assert len([e for e in log if e[0] == "unpack"]) == 2
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 2 * xv + 3 * xv ** 2, rtol=1e-6)


def test_each_backward_read_unpacks_again_and_higher_order_works():
    log, pack, unpack = _log_hooks()
    x = sg.tensor(rng.standard_normal(3), requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = (x.exp() * x).sum()
    (g,) = sg.autograd.grad(y, x, create_graph=True, retain_graph=True)
    n = len([e for e in log if e[0] == "unpack"])
    assert n > 0
    sg.autograd.grad(y, x, retain_graph=True)      # the retained graph unpacks again
    assert len([e for e in log if e[0] == "unpack"]) == 2 * n
    (g2,) = sg.autograd.grad(g.sum(), x)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(), np.exp(xv) * (1 + xv), rtol=1e-6)
    np.testing.assert_allclose(g2.numpy(), np.exp(xv) * (2 + xv), rtol=1e-6)


def test_hooks_nest_are_thread_local_and_do_not_pack_inside_pack():
    outer, inner = [], []
    x = sg.tensor(rng.standard_normal(3), requires_grad=True)

    def pack_outer(t):
        outer.append(1)
        return t

    def pack_inner(t):
        inner.append(1)
        (t * 2).detach()     # an op inside a pack hook is not itself packed
        return t

    other = []

    def elsewhere():
        other.append(x.exp())          # another thread: no hooks

    with saved_tensors_hooks(pack_outer, lambda t: t):
        with saved_tensors_hooks(pack_inner, lambda t: t):
            x.exp()
            th = threading.Thread(target=elsewhere)
            th.start()
            th.join()
        x.tanh()
    assert (len(outer), len(inner)) == (1, 1)
    x.exp()                                # outside: nothing
    assert (len(outer), len(inner)) == (1, 1)
    assert other[0].grad_fn is not None


def test_unpack_must_return_a_tensor_and_hooks_can_be_disabled():
    x = sg.tensor(rng.standard_normal(3), requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: t.detach().numpy()):
        y = x.exp().sum()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.backward()
    with disable_saved_tensors_hooks("hooks are off here"):
        with pytest.raises(RuntimeError, match="hooks are off here"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: t):   # enabled again afterwards
        pass
    with pytest.raises(TypeError, match="callable"):
        saved_tensors_hooks(1, lambda t: t)


def test_save_on_cpu_on_cpu_tensors_changes_nothing():
    x = sg.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    w = sg.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    with save_on_cpu(pin_memory=True):
        y = (x @ w).tanh().sum()
    y.backward()
    t = np.tanh(x.detach().numpy() @ w.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), (1 - t * t) @ w.detach().numpy().T, rtol=1e-6)


_OPS = {
    "exp": lambda m, x, y: x.exp(), "mul": lambda m, x, y: x * y,
    "add": lambda m, x, y: x + y, "sin": lambda m, x, y: x.sin(),
    "pow2": lambda m, x, y: x ** 2, "tanh": lambda m, x, y: x.tanh(),
    "sigmoid": lambda m, x, y: x.sigmoid(), "sum": lambda m, x, y: x.sum(),
    "matmul": lambda m, x, y: x.reshape(2, 2) @ y.reshape(2, 2),
    "relu": lambda m, x, y: x.relu(), "div": lambda m, x, y: x / y,
    "sqrt": lambda m, x, y: x.abs().sqrt(), "mean": lambda m, x, y: x.mean(),
    "neg": lambda m, x, y: -x, "max": lambda m, x, y: x.max(),
    "clamp": lambda m, x, y: x.clamp(-0.5, 0.5), "pow_tensor": lambda m, x, y: x.abs() ** y,
}


@pytest.mark.parametrize("name", sorted(_OPS))
def test_pack_and_unpack_counts_match_torch(name):
    """What an op saves for backward, as torch saves it: the hooks see the same tensors."""
    torch = pytest.importorskip("torch")
    xv, yv = np.array([0.3, -1.2, 0.7, 2.0]), np.array([1.1, 0.4, -0.6, 0.9])
    counts, grads = [], []
    for m in (torch, sg):
        x, y = m.tensor(xv, requires_grad=True), m.tensor(yv, requires_grad=True)
        n = [0, 0]

        def pack(t):
            n[0] += 1
            return t

        def unpack(t):
            n[1] += 1
            return t

        with m.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = _OPS[name](m, x, y)
        out.sum().backward()
        counts.append(tuple(n))
        grads.append(x.grad.detach().numpy())
    assert counts[0] == counts[1]
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
