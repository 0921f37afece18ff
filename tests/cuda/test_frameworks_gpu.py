"""sg.to_torch and sg.to_jax on a GPU (marker `cuda`; skipped without a visible GPU).

The torch target runs on the inputs' device: CUDA tensors stay on the GPU (no copies), the
results are CUDA tensors in the inputs' dtype and match the CPU results; torch.compile
(inductor, fullgraph) of the generated forward and backward runs there too. The JAX target
runs under jax.jit on a GPU device when jax has one.
"""
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import symgrad as sg  # noqa: E402

pytestmark = pytest.mark.cuda


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to torch")
    return torch


def _loss(x, w, b):
    return ((x @ w + b).softplus() * (1 + x.sum(-1, keepdim=True).exp()).log()).mean()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_to_torch_on_cuda_matches_cpu_and_stays_on_device(dtype):
    torch = _torch_cuda()
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(0)
    cpu = [torch.randn(64, 16, generator=gen, dtype=dt), torch.randn(16, 8, generator=gen, dtype=dt),
           torch.randn(8, generator=gen, dtype=dt)]
    F = sg.to_torch(_loss)
    results = []
    for device in ("cpu", "cuda"):
        xs = [a.to(device).requires_grad_() for a in cpu]
        out = F.apply(*xs)
        assert out.device.type == device and out.dtype == dt
        grads = torch.autograd.grad(out, xs, create_graph=True)
        assert all(g.device.type == device and g.dtype == dt for g in grads)
        second = torch.autograd.grad(sum((g * g).sum() for g in grads), xs)
        results.append([out.detach().cpu()] + [g.detach().cpu() for g in grads + second])
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, **tol)


def test_to_torch_naive_softplus_gradient_on_cuda():
    torch = _torch_cuda()
    F = sg.to_torch(lambda x: (1 + x.exp()).log())
    x = torch.tensor([1000.0, -1000.0, 0.0], device="cuda", requires_grad=True)
    g, = torch.autograd.grad(F.apply(x).sum(), x)
    assert g.tolist() == [1.0, 0.0, 0.5]


def test_to_torch_gradcheck_on_cuda():
    torch = _torch_cuda()
    xs = [torch.randn(5, 3, dtype=torch.float64, device="cuda", requires_grad=True),
          torch.randn(3, 2, dtype=torch.float64, device="cuda", requires_grad=True),
          torch.randn(2, dtype=torch.float64, device="cuda", requires_grad=True)]
    F = sg.to_torch(_loss)
    assert torch.autograd.gradcheck(F.apply, tuple(xs))
    assert torch.autograd.gradgradcheck(F.apply, tuple(xs))


def test_torch_compile_fullgraph_on_cuda():
    torch = _torch_cuda()
    x = torch.randn(1 << 20, device="cuda")
    mod = sg.compile(lambda x: x * (1 + x.exp()).log().tanh(), np.zeros(1 << 20, np.float32),
                     target="torch")
    fwd = torch.compile(mod.raw.forward, fullgraph=True)
    bwd = torch.compile(mod.raw.backward, fullgraph=True)
    torch.testing.assert_close(fwd(x)[0], mod.raw.forward(x)[0])
    g = torch.ones_like(x)
    torch.testing.assert_close(bwd(g, x)[0], mod.raw.backward(g, x)[0], rtol=1e-5, atol=1e-6)


def test_to_jax_on_gpu():
    jax = pytest.importorskip("jax")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("jax has no GPU device")
    import jax.numpy as jnp

    f = sg.to_jax(lambda x: (1 + x.exp()).log())
    x = jax.device_put(jnp.asarray([1000.0, 0.0, -3.0]), gpus[0])
    g = jax.jit(jax.grad(lambda x: jnp.sum(f(x))))(x)
    assert float(g[0]) == 1.0 and math.isclose(float(g[1]), 0.5)
