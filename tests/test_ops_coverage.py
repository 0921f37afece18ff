"""Op coverage for unseen forwards: roll, repeat/tile, repeat_interleave, tril/triu, einsum,
tensordot, sort/argsort/topk/kthvalue/msort, gather/take_along_dim/index_select,
diagonal/diag/diag_embed/trace, outer/dot/inner/cross/kron, cumprod/logcumsumexp, narrow,
unflatten, movedim, diff, normalize, cosine_similarity, var_mean.

Each op is written once with torch's spelling (`m` is `symgrad` or `torch`) and checked
- traced and compiled (`sg.compile(..., target="numpy")`): forward against torch, backward
  (VJP) against torch autograd and against central finite differences;
- through the runtime: a `sg.Function` with only a forward, to second order (create_graph)
  against torch;
- as eager Tensor ops, first and second order against torch;
and a few through the command line, the C target and a shape-generic compile. Error cases
name the op, the argument and the user's line.
"""
from __future__ import annotations

import numpy as np
import pytest

import symgrad as sg
from symgrad.errors import ShapeError, TraceError

from test_cli_unseen import cli, one_line_error, run_module, write

torch = pytest.importorskip("torch")

R = np.random.default_rng(7)
X34 = R.standard_normal((3, 4))
X234 = R.standard_normal((2, 3, 4))
V3 = R.standard_normal(3)
W3 = R.standard_normal(3)
X33 = R.standard_normal((3, 3))
Y45 = R.standard_normal((4, 5))
Z = np.array([[0.5, 0.0, 2.0, -1.5], [1.5, -1.0, 0.0, 3.0], [0.7, 2.0, 2.5, -0.3]])
I34 = np.array([[0, 2, 1, 0], [2, 1, 0, 0], [1, 1, 2, 2]], dtype=np.int64)   # along dim 0
I32 = np.array([[3, 0], [3, 1], [1, 2]], dtype=np.int64)                     # along dim 1
I_SEL = np.array([3, 0, 3, 1], dtype=np.int64)

# name, family, forward written once for both libraries, inputs
CASES = [
    ("roll", "roll", lambda m, x: m.roll(x, 1, 0) * x.roll((2, -1), dims=(1, 0)) ** 2, (X34,)),
    ("roll_flat", "roll", lambda m, x: m.roll(x, shifts=5).sin(), (X34,)),
    ("repeat", "tile", lambda m, x: x.repeat(2, 1, 3).sin(), (X34,)),
    ("tile", "tile", lambda m, x: m.tile(x, (2,)) ** 2, (X34,)),
    ("repeat_interleave", "tile",
     lambda m, x: x.repeat_interleave(2, dim=1).exp() + m.repeat_interleave(x, 3).sum(), (X34,)),
    ("tril_triu", "tril", lambda m, x: m.tril(x).exp() * x.triu(diagonal=1) + x.tril(-1) ** 2,
     (X34,)),
    ("einsum_bilinear", "einsum", lambda m, x, y: m.einsum("ij,jk->ik", x, y).tanh(), (X34, Y45)),
    ("einsum_rowdot", "einsum", lambda m, x: m.einsum("ij,ij->i", x, x.sin()), (X34,)),
    ("einsum_trace_diag", "einsum",
     lambda m, x: m.einsum("ii", x) * m.einsum("ii->i", x.exp()), (X33,)),
    ("einsum_ellipsis", "einsum",
     lambda m, x, y: m.einsum("...j,jk", x, y).sin(), (X234, Y45)),
    ("einsum_implicit_outer", "einsum",
     lambda m, v, w: m.einsum("i,j", v, w) ** 2 + m.einsum("i->", v) * m.einsum(
         "bij->bj", w.unsqueeze(0).unsqueeze(0).expand(2, 3, 3)).sum(), (V3, W3)),
    ("einsum_broadcast_1", "einsum",
     lambda m, x, y: m.einsum("ij,jk->ik", x[:, :1], y[:1]).sin(), (X34, Y45)),
    ("tensordot", "einsum", lambda m, x, y: m.tensordot(x, y, dims=([2], [0])).sin(),
     (X234, Y45)),
    ("sort", "sort", lambda m, x: m.sort(x, dim=1)[0] * x.sort(0, descending=True).values.exp(),
     (X34,)),
    ("topk", "sort", lambda m, x: x.topk(2, dim=1).values.sin() + m.topk(x, 1, 0, largest=False)[0].sum(),
     (X34,)),
    ("kthvalue_msort", "sort",
     lambda m, x: x.kthvalue(2, 1)[0].exp().sum() + m.msort(x).sin(), (X34,)),
    ("gather", "gather", lambda m, x, i: m.gather(x, 0, i) ** 2 + x.gather(1, i[:, :2]).sin().sum(),
     (X34, I34)),
    ("take_along_dim", "gather",
     lambda m, x, i: m.take_along_dim(x, i, dim=1).exp() + m.take_along_dim(x, i[:1]).sum()
     + m.take_along_dim(x[:1], i[:, :1] - 4, dim=1), (X34, I32)),
    ("index_select", "gather", lambda m, x, i: x.index_select(1, i).sin() * 2, (X34, I_SEL)),
    ("diagonal", "diagonal",
     lambda m, x: x.diagonal().exp().sum() + m.diagonal(x, 1, 0, 1) ** 2, (X34,)),
    ("diag_trace", "diagonal",
     lambda m, v, x: m.diag(v).sin() * m.trace(x) + m.diag(x, -1).sum(), (V3, X33)),
    ("diag_embed", "diagonal", lambda m, x: m.diag_embed(x, offset=1).sin(), (X34,)),
    ("outer_dot", "products",
     lambda m, v, w: m.outer(v, w).sin() * m.dot(v, w) + v.inner(w.exp()), (V3, W3)),
    ("cross_kron", "products",
     lambda m, x, w: m.cross(x, w.expand(4, 3), dim=1).sin().sum() + m.kron(x[:2], w[:2]),
     (X34.T.copy(), W3)),
    ("cumprod", "cumprod", lambda m, x: m.cumprod(x, 1) + x.cumprod(0).sin(), (Z,)),
    ("logcumsumexp", "cumprod", lambda m, x: m.logcumsumexp(x, 1) * 2, (X34 * 3,)),
    ("narrow_unflatten_movedim", "movement",
     lambda m, x: x.narrow(1, 1, 2).sin() * 2 + m.movedim(x.unflatten(2, (2, 2)), 0, -1).sum(),
     (X234,)),
    ("diff_moveaxis", "movement", lambda m, x: m.diff(x, dim=1).exp() + x.moveaxis(0, 1).sum(),
     (X34,)),
]
F = torch.nn.functional
NN = [   # torch.nn.functional spellings: sg.<name> against F.<name>
    ("normalize", lambda m, x: m.normalize(x, dim=1).sin(), (X34,)),
    ("cosine_similarity", lambda m, x, y: m.cosine_similarity(x, y.exp(), dim=0), (X34, X34)),
    ("var_mean", lambda m, x: m.var_mean(x, 1, correction=0)[0] * m.var_mean(x, 1)[1], (X34,)),
]
ALL = [(n, f, xs) for n, _, f, xs in CASES] + NN


def torch_lib(name):
    return F if name in ("normalize", "cosine_similarity") else torch


def torch_forward(name, f, xs, requires_grad=True):
    ts = [torch.tensor(x, requires_grad=requires_grad and x.dtype.kind == "f") for x in xs]
    return ts, f(torch_lib(name), *ts)


def float_inputs(xs):
    return [i for i, x in enumerate(xs) if x.dtype.kind == "f"]


def finite_differences(forward, xs, k, seed, eps=1e-6):
    """d<seed, forward(*xs)>/d xs[k] by central differences."""
    grad = np.zeros_like(xs[k])
    for idx in np.ndindex(xs[k].shape):
        up, down = list(xs), list(xs)
        up[k], down[k] = xs[k].copy(), xs[k].copy()
        up[k][idx] += eps
        down[k][idx] -= eps
        grad[idx] = np.sum(seed * (forward(*up) - forward(*down))) / (2 * eps)
    return grad


def seed_like(out):
    return np.random.default_rng(3).standard_normal(tuple(out.shape))


@pytest.mark.parametrize("name, f, xs", ALL, ids=[c[0] for c in ALL])
def test_compiled_numpy_forward_and_vjp_match_torch_and_finite_differences(name, f, xs):
    mod = sg.compile(lambda *a: f(sg, *a), *xs, cache_ok=False)
    ts, want = torch_forward(name, f, xs)
    (got,) = mod.raw.forward(*xs)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    seed = seed_like(want)
    grads = mod.backward(seed, *xs)
    floats = float_inputs(xs)
    wgrads = torch.autograd.grad(want, [ts[i] for i in floats], torch.tensor(seed))
    for i, w in zip(floats, wgrads):
        np.testing.assert_allclose(grads[i], w.numpy(), rtol=1e-10, atol=1e-12)
        fd = finite_differences(lambda *a: mod.raw.forward(*a)[0], xs, i, seed)
        np.testing.assert_allclose(grads[i], fd, rtol=1e-5, atol=1e-6)
    for i in set(range(len(xs))) - set(floats):
        assert grads[i] is None or not np.any(grads[i])


def _second_order(name, f, xs, apply):
    """d/dx of <g, g> (g the gradient) through apply(*tensors), against torch."""
    floats = float_inputs(xs)
    sx = [sg.tensor(x, dtype=sg.float64 if x.dtype.kind == "f" else sg.int64,
                    requires_grad=x.dtype.kind == "f") for x in xs]
    ts, want = torch_forward(name, f, xs)
    got = apply(*sx)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    seed = seed_like(want)
    gs = sg.autograd.grad(got, [sx[i] for i in floats], sg.tensor(seed), create_graph=True)
    tgs = torch.autograd.grad(want, [ts[i] for i in floats], torch.tensor(seed),
                              create_graph=True)
    for g, tg in zip(gs, tgs):
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    # the gradient as a function of the inputs, differentiated again (gradients that do not
    # depend on the inputs, of a linear op, have no second derivative: both give None)
    h = sum((g * g.sin()).sum() for g in gs if g.requires_grad)
    th = sum((tg * tg.sin()).sum() for tg in tgs if tg.requires_grad)
    if isinstance(h, int):
        assert isinstance(th, int), name
        return
    hs = sg.autograd.grad(h, [sx[i] for i in floats], allow_unused=True)
    ths = torch.autograd.grad(th, [ts[i] for i in floats], allow_unused=True)
    for a, b in zip(hs, ths):
        a = np.zeros(1) if a is None else a.numpy()
        b = np.zeros(1) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name, f, xs", ALL, ids=[c[0] for c in ALL])
def test_forward_only_function_second_order_matches_torch(name, f, xs):
    class Fn(sg.Function):
        @staticmethod
        def forward(ctx, *a):
            return f(sg, *a)

    _second_order(name, f, xs, Fn.apply)


@pytest.mark.parametrize("name, f, xs", ALL, ids=[c[0] for c in ALL])
def test_eager_tensor_ops_second_order_match_torch(name, f, xs):
    _second_order(name, f, xs, lambda *a: f(sg, *a))
