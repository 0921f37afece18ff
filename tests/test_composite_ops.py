"""Runtime Tensor ops without a checked-in module (symgrad/_composite_ops.py): values,
gradients and second derivatives against torch."""
import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")

X = [0.3, -0.2, 0.5, 0.05]

# name, op on a tensor t (same spelling for torch and symgrad), lib-dependent where needed
CASES = [
    ("sinh_cosh", lambda t, m: t.sinh() * t.cosh()),
    ("inverse_trig", lambda t, m: t.asin() + t.acos() * t.atan() + t.arcsin() + t.atanh()),
    ("inverse_hyperbolic", lambda t, m: (t + 2).acosh() + t.asinh()),
    ("atan2_hypot", lambda t, m: t.atan2(t * 2 + 1) + t.hypot(t + 1)),
    ("logs", lambda t, m: (t + 1).log2() + (t + 1).log10() + t.exp2() + t.erfc()),
    ("logit_xlogy", lambda t, m: (t.abs() + 0.1).logit() + (t + 0.5).xlogy(t + 1)),
    ("fmod_remainder", lambda t, m: t.fmod(0.15) * t + t.remainder(0.15) + t % 0.25),
    ("rounding", lambda t, m: (t * 3).floor() * t + (t * 3).ceil() * t + (t * 3).round() * t
     + (t * 3).trunc() * t + (t * 3).frac()),
    ("lerp_clamp", lambda t, m: t.lerp(t * t, 0.3) + t.clamp_min(0.0) * t.clamp_max(0.1)),
    ("cumsum_flip", lambda t, m: t.cumsum(0) * t.flip(0)),
    ("reductions", lambda t, m: t.amax(0) + t.amin(0) * t.var() + t.std() + t.norm()),
    ("normalizers", lambda t, m: t.logsumexp(0) + t.softmax(-1)[1] + t.log_softmax(0)[2]),
    ("reciprocal", lambda t, m: (t + 1).reciprocal()),
    ("function_spellings", lambda t, m: m.sinh(t) + m.atan2(t, 2.0 * t + 1.5) + m.cumsum(t, 0)
     + m.logsumexp(t, 0)),
]


@pytest.mark.parametrize("name, f", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torch(name, f):
    x = sg.tensor(X, dtype=sg.float64, requires_grad=True)
    tx = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    y, ty = f(x, sg), f(tx, torch)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    (g,) = sg.autograd.grad(y.sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad(ty.sum(), tx, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-10, atol=1e-12)
    # second order through the generated gradient module
    (gg,) = sg.autograd.grad((g * g).sum(), x)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-8, atol=1e-10)


def test_grad_fn_names_the_op_and_constants_do_not_require_grad():
    x = sg.tensor(X, requires_grad=True)
    assert "SinhBackward" in repr(x.sinh().grad_fn)
    assert not sg.tensor(X).sinh().requires_grad
    with sg.no_grad():
        assert x.cumsum(0).grad_fn is None


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_second_derivative_of_prod_with_zeros_matches_torch(dim):
    x = np.array([[0.5, 0.0, 2.0], [1.5, -1.0, 3.0], [0.0, 0.0, 2.5]])
    f = (lambda t: t.prod()) if dim is None else (lambda t: t.prod(dim))
    sx = sg.tensor(x, dtype=sg.float64, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    (g,) = sg.autograd.grad(f(sx).sum(), sx, create_graph=True)
    (tg,) = torch.autograd.grad(f(tx).sum(), tx, create_graph=True)
    (gg,) = sg.autograd.grad((g * g.sin()).sum(), sx)
    (tgg,) = torch.autograd.grad((tg * tg.sin()).sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-12, atol=1e-14)


def _prod_of_others_tensor(row, order):
    """T[i1..i_order] = product of row over indices not among them (0 unless distinct)."""
    import itertools

    n = len(row)
    t = np.zeros((n,) * order)
    for idx in itertools.product(range(n), repeat=order):
        if len(set(idx)) == order:
            t[idx] = np.prod([row[l] for l in range(n) if l not in idx])
    return t


@pytest.mark.parametrize("dim", [None, 1])
def test_third_and_fourth_derivatives_of_prod_are_exact_with_zeros(dim):
    """Against the closed form d^k prod / dx_i1..dx_ik = product of the other entries."""
    x = np.array([[0.5, 0.0, 2.0, -1.5], [1.5, -1.0, 3.0, 0.7], [0.0, 0.0, 2.5, 0.0]])
    rng = np.random.default_rng(3)
    w, u, v = (rng.standard_normal(x.shape) for _ in range(3))
    sx = sg.tensor(x, dtype=sg.float64, requires_grad=True)
    f = (lambda t: t.prod()) if dim is None else (lambda t: t.prod(dim))
    (g,) = sg.autograd.grad(f(sx).sum(), sx, create_graph=True)
    (h,) = sg.autograd.grad((g * sg.tensor(w)).sum(), sx, create_graph=True)
    (t,) = sg.autograd.grad((h * sg.tensor(u)).sum(), sx, create_graph=True)
    (q,) = sg.autograd.grad((t * sg.tensor(v)).sum(), sx)
    rows = [x.ravel()] if dim is None else list(x)
    ws, us, vs = ([a.ravel()] if dim is None else list(a) for a in (w, u, v))
    want_t = [np.einsum("i,j,ijk->k", a, b, _prod_of_others_tensor(r, 3))
              for r, a, b in zip(rows, ws, us)]
    want_q = [np.einsum("i,j,k,ijkl->l", a, b, c, _prod_of_others_tensor(r, 4))
              for r, a, b, c in zip(rows, ws, us, vs)]
    np.testing.assert_allclose(t.detach().numpy().reshape(-1), np.concatenate(want_t), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(q.numpy().reshape(-1), np.concatenate(want_q), rtol=1e-12,
                               atol=1e-12)


def test_keyword_arguments_reach_the_op():
    # keywords were once dropped on the way to the traced forward (amax over everything)
    a = np.random.default_rng(0).standard_normal((3, 4))
    s, t = sg.tensor(a, dtype=sg.float64), torch.tensor(a)
    pairs = [
        (s.amax(dim=1, keepdim=True), t.amax(dim=1, keepdim=True)),
        (s.var(0, unbiased=False), t.var(0, unbiased=False)),
        (s.norm(dim=1), t.norm(dim=1)),
        (sg.softmax(s, dim=1), torch.softmax(t, dim=1)),
        (sg.log_softmax(s, dim=0), torch.log_softmax(t, dim=0)),
        (s.logsumexp(dim=1, keepdim=True), t.logsumexp(dim=1, keepdim=True)),
        (s.softplus(beta=2.0), torch.nn.functional.softplus(t, beta=2.0)),
    ]
    for got, want in pairs:
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


class _Scaled(sg.Function):
    @staticmethod
    def forward(ctx, x, *, scale=1.0, **opts):
        return (x * scale).sin() * opts.get("gain", 1.0)


def test_function_apply_keeps_keyword_only_and_var_keyword_arguments():
    x = sg.tensor([0.1, 0.2], dtype=sg.float64, requires_grad=True)
    y = _Scaled.apply(x, scale=3.0, gain=2.0)
    np.testing.assert_allclose(y.detach().numpy(), 2.0 * np.sin(3.0 * np.array([0.1, 0.2])))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6.0 * np.cos(3.0 * np.array([0.1, 0.2])))
    z = _Scaled.apply(x, scale=1.0)            # another signature, another module
    np.testing.assert_allclose(z.detach().numpy(), np.sin([0.1, 0.2]))


def test_bad_arguments_say_what_torch_says():
    with pytest.raises(RuntimeError, match="non-empty list"):
        sg.cat([])
    with pytest.raises(RuntimeError, match="non-empty"):
        sg.stack([])
    with pytest.raises(TypeError, match=r"Tensor\.cumsum\(\) missing 1 required positional"):
        sg.tensor([1.0]).cumsum()
