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

import warnings

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
    ("topk", "sort",
     lambda m, x: x.topk(2, dim=1).values.sin() + m.topk(x, 1, 0, largest=False)[0].sum(),
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
    ("cummax_cummin", "cumprod",
     lambda m, x: m.cummax(x, 1).values.sin() * x.cummin(0)[0] + m.cummin(x[0], 0).values.sum(),
     (X34,)),
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


# --------------------------------------------------------------------------- sorting details
def test_sort_with_ties_matches_torch_stable_order_and_gradient():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 1.0], [0.5, 0.5, 0.5, -1.0, 2.0]])
    for kw in ({}, {"descending": True}):
        mod = sg.compile(lambda a: a.sort(dim=1, stable=True, **kw), x, cache_ok=False)
        values, indices = mod.raw.forward(x)
        tx = torch.tensor(x, requires_grad=True)
        tv, ti = torch.sort(tx, dim=1, stable=True, **kw)
        np.testing.assert_array_equal(indices, ti.numpy())
        assert indices.dtype == np.int64
        np.testing.assert_allclose(values, tv.detach().numpy())
        seed = seed_like(tv)
        (g,) = mod.backward(seed, None, x)
        (tg,) = torch.autograd.grad(tv, tx, torch.tensor(seed))
        np.testing.assert_allclose(g, tg.numpy())


def test_sort_puts_nan_where_torch_does():
    x = np.array([1.0, np.nan, -2.0, 3.0])
    for descending in (False, True):
        values, indices = sg.compile(lambda a: a.sort(descending=descending), x,
                                     cache_ok=False).raw.forward(x)
        tv, ti = torch.tensor(x).sort(descending=descending, stable=True)
        np.testing.assert_array_equal(values, tv.numpy())
        np.testing.assert_array_equal(indices, ti.numpy())


def test_cummax_cummin_indices_and_gradient_go_to_torchs_position_on_ties():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [3.0, 1.0, 1.0, 2.0, 1.0]])
    for kind in ("cummax", "cummin"):
        mod = sg.compile(lambda a: getattr(a, kind)(1), x, cache_ok=False)
        values, indices = mod.raw.forward(x)
        tx = torch.tensor(x, requires_grad=True)
        tv, ti = getattr(tx, kind)(1)
        np.testing.assert_array_equal(indices, ti.numpy())
        np.testing.assert_array_equal(values, tv.detach().numpy())
        seed = seed_like(tv)
        (g,) = mod.backward(seed, None, x)
        np.testing.assert_allclose(g, torch.autograd.grad(tv, tx, torch.tensor(seed))[0])


def test_logcumsumexp_with_infinite_entries_matches_torch():
    x = np.array([[-np.inf, -np.inf, 0.5, 800.0], [np.inf, 1.0, -np.inf, -800.0]])
    mod = sg.compile(lambda a: a.logcumsumexp(1), x, cache_ok=False)
    want = torch.tensor(x).logcumsumexp(1).numpy()
    np.testing.assert_array_equal(mod.raw.forward(x)[0], want)


def test_argsort_and_indices_are_integers_without_gradient():
    x = sg.tensor(X34, requires_grad=True)
    order = x.argsort(dim=0, descending=True)
    assert order.dtype == sg.int64 and not order.requires_grad
    np.testing.assert_array_equal(order.numpy(),
                                  torch.tensor(X34).argsort(dim=0, descending=True).numpy())
    values, indices = sg.topk(x, 3, largest=True, sorted=True)
    assert values.requires_grad and not indices.requires_grad
    assert type(values).__name__ == "Tensor" and indices.dtype == sg.int64
    tv, ti = torch.tensor(X34).topk(3)
    np.testing.assert_array_equal(indices.numpy(), ti.numpy())


def test_hessian_of_sorted_and_gathered_values():
    """The permutation is constant where there are no ties: the hessian of a function of the
    sorted values is the permuted hessian (torch.autograd.functional.hessian)."""
    x = np.array([0.3, -1.2, 0.8, 2.0])

    def f(m, t):
        s = t.sort(descending=True).values
        return (s * s.roll(1, 0)).sum() + m.einsum("i,i", s.exp(), t)

    got = sg.autograd.functional.hessian(lambda t: f(sg, t), sg.tensor(x))
    want = torch.autograd.functional.hessian(lambda t: f(torch, t), torch.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- other paths
GENERIC = [   # no example inputs: shapes known only when the module runs
    ("roll", lambda m, x: x.roll(1, 0).sin() * m.roll(x, (1, -2), (0, 1))),
    ("tril_triu", lambda m, x: x.tril(1).exp() + m.triu(x, -1)),
    ("repeat_tile", lambda m, x: x.repeat(2, 3).sin().sum() + m.tile(x, (2,)).sum()),
    ("repeat_interleave", lambda m, x: x.repeat_interleave(2, dim=1).sin()),
    ("sort_topk", lambda m, x: x.sort(1, descending=True)[0].exp()
     + x.topk(2, -1)[0].sum(-1, keepdim=True)),
    ("einsum", lambda m, x: m.einsum("ij,kj->ik", x, x.sin())),
    ("diagonal", lambda m, x: x.diagonal(1).exp().sum() + m.diag_embed(x).sum()),
    ("cumprod_logcumsumexp", lambda m, x: x.cumprod(1).sin() + x.logcumsumexp(0)),
    ("cross", lambda m, x: m.cross(x[:3].exp(), x[:3], dim=0)),
]


@pytest.mark.parametrize("name, f", GENERIC, ids=[c[0] for c in GENERIC])
def test_shape_generic_compile(name, f):
    mod = sg.compile(lambda x: f(sg, x), cache_ok=False)
    assert mod.graph.generic
    for x in (X34, R.standard_normal((4, 6))):
        tx = torch.tensor(x, requires_grad=True)
        want = f(torch, tx)
        (got,) = mod.raw.forward(x)
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
        seed = seed_like(want)
        (g,) = mod.backward(seed, x)
        (tg,) = torch.autograd.grad(want, tx, torch.tensor(seed))
        np.testing.assert_allclose(g, tg.numpy(), rtol=1e-10, atol=1e-12)


C_CASES = ["roll", "tile", "tril_triu", "einsum_rowdot", "sort", "gather", "diagonal",
           "cumprod", "outer_dot", "narrow_unflatten_movedim"]


@pytest.mark.parametrize("name", C_CASES)
def test_c_target_runs_the_new_ops_between_its_loops(name):
    """The C target fuses the elementwise work around these ops into C loops; the ops
    themselves are NumPy lines of its loader (as cat and flip are)."""
    _, _, f, xs = next(c for c in CASES if c[0] == name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # a silent NumPy fallback fails here
        mod = sg.compile(lambda *a: f(sg, *a), *xs, target="c", cache_ok=False)
    assert mod.target == "c" and "fallback" not in mod.stats
    ts, want = torch_forward(name, f, xs)
    (got,) = mod.raw.forward(*xs)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    seed = seed_like(want)
    grads = mod.backward(seed, *xs)
    floats = float_inputs(xs)
    for i, w in zip(floats, torch.autograd.grad(want, [ts[i] for i in floats],
                                                torch.tensor(seed))):
        np.testing.assert_allclose(grads[i], w.numpy(), rtol=1e-10, atol=1e-12)


def test_cuda_loader_runs_the_new_ops_with_numpy_standing_in(tmp_path):
    from test_target_cuda import _host_module

    def f(x, i):
        y = sg.einsum("ij,kj->ik", x, x.roll(1, 1)).tril()
        return y.sum() * x.gather(0, i).sort(dim=1).values.cumprod(1)[0]

    x, i = X34, I34
    ref = sg.compile(f, x, i, cache_ok=False)
    host = _host_module(sg.compile(f, x, i, target="cuda", dtype="float64", cache_ok=False),
                        tmp_path)
    np.testing.assert_allclose(host.forward(x, i)[0], ref.raw.forward(x, i)[0], rtol=1e-12)
    seed = np.ones(4)
    np.testing.assert_allclose(host.backward(seed, x, i)[0], ref.raw.backward(seed, x, i)[0],
                               rtol=1e-12)


# --------------------------------------------------------------------------- command line
CLI_FILE = """\
import numpy as np
import symgrad as sg


class Mix(sg.Function):
    @staticmethod
    def forward(ctx, x, w):
        y = sg.einsum("ij,jk->ik", x.roll(1, dims=0), w).tril(diagonal=1)
        return y.sort(dim=1, descending=True).values.cumprod(1) + x.repeat(1, 2)[:, :5]


class Pick(sg.Function):
    @staticmethod
    def example_inputs():
        return np.arange(12.0).reshape(3, 4) / 7, np.array([[2, 0, 1, 1], [0, 0, 2, 1]])

    @staticmethod
    def forward(ctx, x, idx):
        return x.gather(0, idx).exp() * x.take_along_dim(idx[:, :1], dim=0).sum()


def bad_einsum(x):
    return sg.einsum("ij,jk->ik", x)


def bad_roll(x):
    return x.roll((1, 2), dims=0)
"""


def _mix_torch(x, w):
    y = torch.einsum("ij,jk->ik", x.roll(1, dims=0), w).tril(diagonal=1)
    return y.sort(dim=1, descending=True).values.cumprod(1) + x.repeat(1, 2)[:, :5]


@pytest.mark.slow  # over 10 s: the quick run leaves it to CI
def test_cli_compile_and_check_new_ops(tmp_path):
    write(tmp_path, "ops.py", CLI_FILE)
    proc = cli("compile", "ops.py:Mix", "--shape", "x=3,4", "--shape", "w=4,5", "--dtype",
               "float64", "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    x, w = X34, Y45
    res = run_module(tmp_path / "out" / "mix_grad.py", [x, w])
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    want = _mix_torch(tx, tw)
    np.testing.assert_allclose(res["out"][0], want.detach().numpy(), rtol=1e-10)
    gx, gw = torch.autograd.grad(want.sum(), (tx, tw))
    np.testing.assert_allclose(res["grad"][0], gx.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res["grad"][1], gw.numpy(), rtol=1e-9, atol=1e-12)
    proc = cli("check", "ops.py:Mix", "--shape", "x=3,4", "--shape", "w=4,5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gradgradcheck ops.py:Mix: ok" in proc.stdout
    # an integer example input (the index) is kept as it is by check
    proc = cli("check", "ops.py:Pick", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gradcheck ops.py:Pick: ok" in proc.stdout


@pytest.mark.parametrize("name, fragments", [
    ("bad_einsum", ["einsum: fewer operands were provided (1) than the equation 'ij,jk->ik' "
                    "specifies (2)", "ops.py:23"]),
    ("bad_roll", ["roll: shifts and dims must have the same length", "ops.py:27"]),
])
def test_cli_errors_name_the_op_and_line(tmp_path, name, fragments):
    write(tmp_path, "ops.py", CLI_FILE)
    proc = cli("compile", f"ops.py:{name}", "--shape", "x=3,4", cwd=tmp_path)
    one_line_error(proc, *fragments)


# --------------------------------------------------------------------------- errors
def _error(fn, *xs, kind=TraceError):
    with pytest.raises(kind) as info:
        sg.compile(fn, *xs, cache_ok=False)
    text = " ".join(str(info.value).split())
    assert "test_ops_coverage.py:" in text, text
    return text


@pytest.mark.parametrize("fn, xs, kind, fragment", [
    (lambda x: sg.einsum("ij,j1->i", x, x[0]), (X34,), ShapeError,
     "einsum: invalid subscript '1' in the equation 'ij,j1->i'"),
    (lambda x: sg.einsum("ij->i", x, x), (X34,), ShapeError,
     "einsum: more operands were provided (2) than the equation 'ij->i' specifies (1)"),
    (lambda x: sg.einsum("i->i", x), (X34,), ShapeError,
     "the number of subscripts in the equation (1) does not match the number of dimensions "
     "(2) for operand 0"),
    (lambda x: sg.einsum("ij,jk->ik", x, x), (X34,), ShapeError,
     "einsum: subscript 'j' has size 4 in one operand and size 3 in operand 1"),
    (lambda x: sg.einsum("ij->k", x), (X34,), ShapeError,
     "einsum: output subscript 'k' does not appear in the equation 'ij->k'"),
    (lambda x: sg.einsum("ij->ii", x), (X34,), ShapeError,
     "einsum: output subscript 'i' appears more than once"),
    (lambda x: sg.einsum(x, "ij->i"), (X34,), TraceError,
     "einsum: the first argument must be the equation string"),
    (lambda x: x.roll((1, 2), dims=(0,)), (X34,), ShapeError,
     "roll: shifts and dims must have the same length: shifts=(1, 2) has 2, dims=(0,) has 1"),
    (lambda x: x.roll(1, dims=2), (X34,), ShapeError, "roll: dimension out of range"),
    (lambda x: x.roll(1.5), (X34,), TraceError, "roll: shifts must be an int"),
    (lambda x, i: x.gather(0, i), (X34, X34), TraceError,
     "gather: index must be an integer tensor (int64), got a float tensor"),
    (lambda x, i: x.gather(0, i), (X34, I_SEL), ShapeError,
     "gather: index tensor must have the same number of dimensions as input tensor"),
    (lambda x, i: x.gather(0, i), (X34[:, :2], I34), ShapeError,
     "gather: size does not match at a dimension other than 0"),
    (lambda x, i: sg.take_along_dim(x, i, 1), (X34, I_SEL), ShapeError,
     "take_along_dim: input and indices should have the same number of dimensions"),
    (lambda x: x.repeat(2), (X34,), ShapeError,
     "repeat: the number of repeats (1) can not be smaller than the number of dimensions of "
     "the tensor (2)"),
    (lambda x: x.repeat_interleave(x), (X34,), TraceError,
     "repeat_interleave: repeats must be a Python int"),
    (lambda x: x[0].tril(), (X34,), ShapeError,
     "tril: input tensor must have at least 2 dimensions"),
    (lambda x: x.topk(5, dim=1), (X34,), ShapeError,
     "topk: k (5) is out of range for dimension 1 of size 4"),
    (lambda x: x.diagonal(0, 1, -1), (X34,), ShapeError,
     "diagonal: diagonal dimensions cannot be identical 1, -1"),
    (lambda x: sg.cross(x, x), (X34[:2, :2],), ShapeError,
     "cross: no dimension of size 3 in input"),
    (lambda x: sg.dot(x, x), (X34,), ShapeError, "dot: 1D tensors expected, but got 2D and 2D"),
    (lambda x: x.narrow(1, 3, 2), (X34,), ShapeError,
     "narrow: start (3) + length (2) exceeds dimension size (4) of dimension 1"),
    (lambda x: x.unflatten(1, (3, 2)), (X34,), ShapeError,
     "unflatten: provided sizes [3, 2] don't multiply up to the size of dim 1 (4)"),
    (lambda x: x.movedim((0, 1), 1), (X34,), ShapeError, "movedim: Invalid source or destination"),
])
def test_errors_name_the_op_the_argument_and_the_line(fn, xs, kind, fragment):
    assert fragment in _error(fn, *xs, kind=kind)


def test_gather_index_out_of_range_names_the_op_and_line_when_it_runs():
    mod = sg.compile(lambda x, i: x.gather(0, i), X34, I34, cache_ok=False)
    bad = I34.copy()
    bad[1, 2] = 5
    with pytest.raises(IndexError, match=r"gather \(at tests/test_ops_coverage.py:\d+\): index 5 "
                                         r"is out of bounds for dimension 0 with size 3"):
        mod.forward(X34, bad)
    bad[1, 2] = -1
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        mod.forward(X34, bad)
    with pytest.raises(IndexError, match=r"^gather: index 7 is out of bounds for dimension 0 "
                                         r"with size 3"):   # a runtime module: no line
        sg.tensor(X34).gather(0, sg.tensor(np.full((1, 4), 7)))


def test_sg_trace_of_a_tensor_is_the_matrix_trace_and_of_a_function_the_graph():
    assert float(sg.trace(sg.tensor(X33))) == pytest.approx(np.trace(X33))
    assert float(sg.tensor(X33).trace()) == pytest.approx(np.trace(X33))
    graph = sg.trace(lambda x: sg.trace(x) * x, X33)
    assert "diagonal" in str(graph)


# --------------------------------------------------------------------------- keyword spellings
SPELLINGS = [   # torch's keyword spellings: the same on runtime tensors as in a traced forward
    lambda m, x: x.sum(axis=1) + m.sum(x, axis=1, keepdims=True).squeeze(1),
    lambda m, x: x.mean(axis=0, keepdims=True) * m.mean(input=x, dim=0),
    lambda m, x: x.prod(axis=0) + m.prod(x, axis=0),
    lambda m, x: x.max(axis=1)[0] + m.max(x, dim=1, keepdim=True).values.squeeze(1)
    + x.min(axis=1).values + m.min(x, axis=1)[0],
    lambda m, x: (x.argmax(axis=1) + m.argmax(x, axis=1) + x.argmin(dim=1, keepdim=True)[:, 0]
                  + m.argmin(x, dim=1)) * 1.0,
    lambda m, x: x.div(0.3, rounding_mode="floor") * x + m.div(x, 0.3, rounding_mode="trunc"),
    lambda m, x: x.reshape(shape=(4, 3)).T + x.view(size=(4, 3)).T + m.reshape(x, shape=(4, 3)).T,
    lambda m, x: x.permute(dims=(1, 0)) + m.permute(x, dims=(1, 0)),
    lambda m, x: x[:1].expand(size=(3, 4)) + x.flip(dims=(0,)) + m.flip(x, dims=[0, 1]),
    lambda m, x: m.cat([x, x], axis=1) + m.stack([x, x], dim=1).reshape(3, 8),
    lambda m, x: x.pow(exponent=2) + m.pow(x, exponent=3) + x.clamp(min=-0.5, max=0.5)
    + m.square(input=x) + x.add(x, alpha=2) + m.sub(input=x, other=x * x, alpha=3),
    lambda m, x: x.sort(stable=True, dim=0, descending=True).values + x.roll(shifts=1, dims=1)
    + m.tril(x, diagonal=1) + x.triu(diagonal=-1) + m.topk(x, k=3, dim=0, largest=False,
                                                          sorted=True).values.sum(0),
]


@pytest.mark.parametrize("k", range(len(SPELLINGS)))
def test_keyword_spellings_work_on_runtime_tensors_and_when_traced(k):
    f = SPELLINGS[k]
    want = f(torch, torch.tensor(X34)).numpy()
    np.testing.assert_allclose(f(sg, sg.tensor(X34)).numpy(), want, rtol=1e-12)
    (got,) = sg.compile(lambda x: f(sg, x), X34, cache_ok=False).raw.forward(X34)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_alias_and_name_together_is_an_error():
    x = sg.tensor(X34)
    with pytest.raises(TypeError, match="got both 'dim' and its alias 'axis'"):
        x.sum(1, axis=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'size'"):
        x.reshape(size=(4, 3))


@pytest.mark.parametrize("f", [
    lambda m, t: t.roll(1, 0), lambda m, t: t.cumprod(1), lambda m, t: t.trace(),
    lambda m, t: m.outer(t[0], t[1]), lambda m, t: t.tril(), lambda m, t: t.repeat(2, 1),
    lambda m, t: t.diff(dim=1), lambda m, t: t.sort(1).values, lambda m, t: m.kron(t, t),
    lambda m, t: t.gather(1, m.tensor([[0, 0], [1, 0]])), lambda m, t: t.topk(1).indices,
    lambda m, t: t.cummax(0).values,
])
def test_integer_tensors_keep_torch_dtypes(f):
    a, b = f(sg, sg.tensor([[1, 2], [3, 4]])), f(torch, torch.tensor([[1, 2], [3, 4]]))
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    assert a.tolist() == b.tolist()


# --------------------------------------------------------------------------- sg.linalg
LINALG = [
    ("norm_dim", lambda L, x: L.norm(x, dim=-1)),
    ("norm_all", lambda L, x: L.norm(x)),
    ("norm_ord1_vec", lambda L, x: L.norm(x[0], ord=1) * L.norm(x, ord=3, dim=1)),
    ("vector_norm", lambda L, x: L.vector_norm(x, ord=float("inf"), dim=0, keepdim=True)
     + L.vector_norm(x)),
    ("matrix_norm", lambda L, x: L.matrix_norm(x) + L.matrix_norm(x, ord=1)
     * L.matrix_norm(x, ord=float("-inf")) + L.norm(x, ord="fro") + L.norm(x, ord=-1)),
    ("vecdot_cross_multi_dot", lambda L, x: L.vecdot(x, x.exp()).sum() * L.cross(
        x[:, :3], x[:, 1:]).sin() + L.multi_dot([x, x.T, x])[:, :3]
     + L.diagonal(x.reshape(2, 2, 3), dim1=0, dim2=1).sum()),
]


@pytest.mark.parametrize("name, f", LINALG, ids=[c[0] for c in LINALG])
def test_linalg_compositions_match_torch_traced_and_at_runtime(name, f):
    tx = torch.tensor(X34, requires_grad=True)
    want = f(torch.linalg, tx)
    seed = seed_like(want)
    (tg,) = torch.autograd.grad(want, tx, torch.tensor(seed), create_graph=True)
    mod = sg.compile(lambda x: f(sg.linalg, x), X34, cache_ok=False)
    np.testing.assert_allclose(mod.raw.forward(X34)[0], want.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(mod.backward(seed, X34)[0], tg.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    x = sg.tensor(X34, requires_grad=True)
    got = f(sg.linalg, x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
    (g,) = sg.autograd.grad(got, x, sg.tensor(seed), create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-10, atol=1e-12)
    if tg.requires_grad:
        (gg,) = sg.autograd.grad((g * g).sum(), x)
        (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
        np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-8, atol=1e-10)


def test_linalg_unsupported_names_say_so():
    """Decompositions, solves and the spectral norms are supported (tests/test_linalg.py);
    the general eigendecomposition and LU are not, and say so."""
    with pytest.raises(AttributeError, match="symgrad.linalg.eig is not supported"):
        sg.linalg.eig
    with pytest.raises(AttributeError, match="symgrad.linalg.lu_factor is not supported"):
        sg.linalg.lu_factor
    np.testing.assert_allclose(float(sg.linalg.matrix_norm(sg.tensor(X34), ord=2)),
                               np.linalg.norm(X34, 2), rtol=1e-12)
