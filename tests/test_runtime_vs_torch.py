"""Runtime Tensor ops against torch, values and gradients (a differential check: it caught
keyword arguments being dropped on the way to composite ops)."""
import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4))
B = rng.standard_normal((4,))
C = rng.uniform(0.5, 2, (3, 4))

CASES = {
 "broadcast_mul_sum": lambda m, a, b, c: (a * b).sum(1),
 "div_pow": lambda m, a, b, c: (a / c) ** 2 + c ** a,
 "max_dim": lambda m, a, b, c: a.max(dim=1).values + a.min(0)[0].sum(),
 "amax_keep": lambda m, a, b, c: a.amax(dim=1, keepdim=True) * a,
 "mean_dims": lambda m, a, b, c: a.mean((0, 1)) + a.mean(-1).sum(),
 "std_var": lambda m, a, b, c: a.std(1) + a.var(0, unbiased=False).sum(),
 "norm": lambda m, a, b, c: a.norm() + a.norm(dim=1).sum(),
 "prod": lambda m, a, b, c: c.prod(1) + c.prod(),
 "matmul_T": lambda m, a, b, c: (a @ b) + (a.T @ a).sum(),
 "index": lambda m, a, b, c: a[1:, ::2].sum() + a[0, -1] * a[:, 1].sum() + a[None, 1].sum(),
 "where_clamp": lambda m, a, b, c: m.where(a > 0, a, a * 0.1).clamp(-0.2, 1.0) + m.clamp(a, min=0.0),
 "softmax_lse": lambda m, a, b, c: m.softmax(a, dim=1) * a.logsumexp(1, keepdim=True),
 "log_softmax": lambda m, a, b, c: m.log_softmax(a, dim=0),
 "reshape_perm": lambda m, a, b, c: a.reshape(2, 6).permute(1, 0).sin() + 0,
 "expand_squeeze": lambda m, a, b, c: b.unsqueeze(0).expand(3, 4) * a + a.unsqueeze(2).squeeze(2),
 "cat_stack": lambda m, a, b, c: m.cat([a, c], 0).tanh().sum(0) + m.stack([a, c], 2).sum(2).sum(0),
 "sigmoid_relu_erf": lambda m, a, b, c: a.sigmoid() * a.relu() + a.erf() + m.abs(a),
 "transcend": lambda m, a, b, c: c.log() + c.sqrt() + c.rsqrt() + a.exp() + a.expm1() + c.log1p() + a.cos() * a.tan(),
 "int_float": lambda m, a, b, c: a * 2 + 3 - a / 4,
 "minimum_maximum": lambda m, a, b, c: m.maximum(a, c) + m.minimum(a, b),
 "cumsum_flip": lambda m, a, b, c: a.cumsum(1) * a.flip(0),
 "square_recip": lambda m, a, b, c: a.square() + c.reciprocal(),
 "sub_neg": lambda m, a, b, c: -(a - b) - c,
 "inplace_leafless": lambda m, a, b, c: (lambda t: (t.mul_(2), t)[1])(a * 1.0),

 "max_two": lambda m, a, b, c: m.max(a, c),
 "max_scalar": lambda m, a, b, c: a.max() + a.min(),
 "pow_tensor_exp": lambda m, a, b, c: c ** b + m.pow(c, 2.5),
 "clamp_tensor_bounds": lambda m, a, b, c: a.clamp(min=-c, max=c),
 "where_scalar": lambda m, a, b, c: m.where(a > 0, a, 0.0),
 "mask_index": lambda m, a, b, c: a[a > 0].sum() + a[:, b > 0].sum(),
 "int_index": lambda m, a, b, c: a[m.tensor([0, 2])].sum() + a[:, [1, 3]].sum(),
 "mT": lambda m, a, b, c: a.mT @ c,
 "flatten": lambda m, a, b, c: a.flatten() * c.reshape(-1),
 "view_inplace": lambda m, a, b, c: (lambda t: (t[0].mul_(3), t.sin())[1])(a * 1.0),
 "addinplace_broadcast": lambda m, a, b, c: (lambda t: (t.add_(b), t)[1])(a * c),
 "div_rounding": lambda m, a, b, c: m.div(a, c) + a / 2,
 "mean_keepdim": lambda m, a, b, c: a.mean(dim=1, keepdim=True) - a,
 "sum_dims_neg": lambda m, a, b, c: a.sum(dim=(-1, -2)) + a.sum(-1).sum(),
 "prod_dim": lambda m, a, b, c: c.prod(dim=0, keepdim=True) * a,
 "sigmoid_tanh_chain": lambda m, a, b, c: m.tanh(m.sigmoid(a) * b),
 "unsqueeze_neg": lambda m, a, b, c: a.unsqueeze(-1).expand(3, 4, 2).sum(-1),
 "transpose_contig": lambda m, a, b, c: a.transpose(0, 1).contiguous() * c.t(),
 "matmul_batched": lambda m, a, b, c: (a.reshape(3, 2, 2) @ c.reshape(3, 2, 2)).sum(0),
 "square_sqrt": lambda m, a, b, c: (a.square() + 1).sqrt(),
 "relu_leaky": lambda m, a, b, c: m.relu(a) + m.maximum(a, 0.01 * a),
 "sub_alpha": lambda m, a, b, c: m.sub(a, c, alpha=2) + m.add(a, b, alpha=0.5),
 "float32_mix": lambda m, a, b, c: a.float() * 2 + c.double(),
 "abs_sign": lambda m, a, b, c: a.abs() * a.sign(),
 "logical": lambda m, a, b, c: m.where((a > 0) & (c > 1), a, c) + m.where(~(a > 0) | (c < 1), c, a),
 "argmax_gather": lambda m, a, b, c: a.amax(1) * a.argmax(1).to(a.dtype),
 "exp_log_chain": lambda m, a, b, c: m.log(m.exp(a) + m.exp(b)),
 "item_scalar": lambda m, a, b, c: a * float(c.sum().item()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_torch(name):
    f = CASES[name]
    ts = [torch.tensor(x, requires_grad=True) for x in (A, B, C)]
    ss = [sg.tensor(x, requires_grad=True, dtype=sg.float64) for x in (A, B, C)]
    to, so = f(torch, *ts), f(sg, *ss)
    np.testing.assert_allclose(so.detach().numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert so.detach().numpy().dtype == to.detach().numpy().dtype
    seed = np.linspace(-1, 1, to.numel()).reshape(tuple(to.shape))
    tg = torch.autograd.grad(to, ts, torch.tensor(seed, dtype=to.dtype), allow_unused=True)
    sgr = sg.autograd.grad(so, ss, sg.tensor(seed, dtype=so.dtype), allow_unused=True)
    for want, got in zip(tg, sgr):
        want = 0.0 if want is None else want.numpy()
        got = 0.0 if got is None else got.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6 if so.dtype == sg.float32 else 1e-9,
                                   atol=1e-9 if so.dtype == sg.float32 else 1e-12)
