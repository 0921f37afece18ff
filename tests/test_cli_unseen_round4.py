"""A fourth round of forwards a PyTorch user writes, compiled and compared with torch autograd.

Forty-four forwards (losses, activations, normalizations, attention, distances, series, physics
potentials, log-likelihoods, piecewise functions, flows, reductions, two-output Functions with
ctx.mark_non_differentiable, keyword-only defaults, module constants, helpers in the same file)
live in one file, FORWARDS. The same text, with `import symgrad as sg` read as `import torch as
sg`, is the torch oracle, so both sides run the user's exact code. Each forward is compared at
ordinary and at extreme inputs (+-1e3, 1e-30, 0, +-inf where defined): values, the backward
(sg.compile, NumPy and C), second order through the runtime (create_graph), the command line
(`compile --target numpy|c` then a fresh interpreter with NumPy only, `check`, `show`).

Where torch's own number is wrong symgrad is checked against a closed form instead (the tests
say where): torch differentiates through the untaken branch of torch.where (nan * 0), its
sinc' near 0 cancels, and its second derivative of i0 is wrong for large arguments.
"""
from __future__ import annotations

import importlib.util
import sys
import types

import numpy as np
import pytest
from test_cli_unseen import cli, run_module, write

import symgrad as sg

FORWARDS = '''\
import math

import numpy as np
import symgrad as sg

EPS = 1e-8
LN2 = math.log(2.0)
COEFFS = (1.0, -0.5, 0.25, -0.125, 0.0625)


def _softplus(x):
    return sg.log1p(sg.exp(-x.abs())) + sg.clamp(x, min=0)


def focal_loss(logits, target, gamma=2.0, alpha=0.25):
    p = sg.sigmoid(logits)
    ce = _softplus(logits) - logits * target
    p_t = p * target + (1 - p) * (1 - target)
    a_t = alpha * target + (1 - alpha) * (1 - target)
    return (a_t * (1 - p_t) ** gamma * ce).mean()


def huber_beta(x, y, beta=0.5):
    d = (x - y).abs()
    return sg.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta).sum()


def log_cosh(x, y):
    d = y - x
    return (d + _softplus(-2.0 * d) - LN2).mean()


def kl_gauss(mu1, logvar1, mu2, logvar2):
    v1 = logvar1.exp()
    v2 = logvar2.exp()
    return 0.5 * (logvar2 - logvar1 + (v1 + (mu1 - mu2) ** 2) / v2 - 1).sum()


def ce_smooth(logits, onehot, *, smoothing=0.1):
    k = logits.shape[-1]
    target = onehot * (1 - smoothing) + smoothing / k
    logp = logits - sg.logsumexp(logits, dim=-1, keepdim=True)
    return -(target * logp).sum(dim=-1).mean()


def gelu_tanh(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1 + sg.tanh(c * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return x * 0.5 * (1.0 + sg.erf(x / math.sqrt(2.0)))


def gelu_sigmoid(x):
    return x * sg.sigmoid(1.702 * x)


def swish_beta(x, beta):
    return x * sg.sigmoid(beta * x)


def mish(x):
    return x * sg.tanh(_softplus(x))


def silu_temp(x, t=0.5):
    return x * sg.sigmoid(x / t)


def rms_norm(x, w, eps=1e-6):
    return x * sg.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def group_norm(x, groups=2, eps=1e-5):
    n, c, l = x.shape
    g = x.reshape(n, groups, -1)
    mu = g.mean(-1, keepdim=True)
    var = g.var(-1, unbiased=False, keepdim=True)
    return ((g - mu) / sg.sqrt(var + eps)).reshape(n, c, l)


def attention(q, k, v):
    d = q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    return sg.softmax(s, dim=-1) @ v


def cosine_eps(a, b, eps=1e-8):
    num = (a * b).sum(-1)
    den = sg.clamp(a.norm(dim=-1) * b.norm(dim=-1), min=eps)
    return num / den


def cdist2(a, b):
    diff = a.unsqueeze(1) - b.unsqueeze(0)
    return sg.sqrt((diff * diff).sum(-1) + 1e-12)


def horner(x):
    acc = x * 0 + COEFFS[-1]
    for c in reversed(COEFFS[:-1]):
        acc = acc * x + c
    return acc


def bessel_j0(x, terms=8):
    total = x * 0
    term = x * 0 + 1.0
    for k in range(terms):
        if k > 0:
            term = term * (-(x * x) / 4.0) / (k * k)
        total = total + term
    return total


def logistic_map(r, x0, steps=6):
    x = x0
    for _ in range(steps):
        x = r * x * (1 - x)
    return x


def morse(r, d=1.5, a=1.2, r0=1.0):
    e = sg.exp(-a * (r - r0))
    return (d * (1 - e) ** 2).sum()


def buckingham(r, A=1000.0, B=3.0, C=10.0):
    return A * sg.exp(-B * r) - C / r ** 6


def yukawa(r, k=0.7):
    return -sg.exp(-k * r) / r


def bs_put(s, k, t, sigma, r=0.01):
    sq = sigma * sg.sqrt(t)
    d1 = (sg.log(s / k) + (r + 0.5 * sigma ** 2) * t) / sq
    d2 = d1 - sq
    ndtr = lambda z: 0.5 * sg.erfc(-z / math.sqrt(2.0))
    return k * math.exp(-r * 1.0) ** t * ndtr(-d2) - s * ndtr(-d1)


def student_t_ll(x, nu, mu, log_s):
    s = log_s.exp()
    z = (x - mu) / s
    return (sg.lgamma((nu + 1) / 2) - sg.lgamma(nu / 2) - 0.5 * sg.log(nu * math.pi)
            - log_s - (nu + 1) / 2 * sg.log1p(z * z / nu)).sum()


def von_mises_ll(x, mu, log_kappa):
    kappa = log_kappa.exp()
    return (kappa * sg.cos(x - mu) - sg.log(2 * math.pi * sg.special.i0(kappa))).sum()


def negbin_ll(k, r, logit_p):
    return (sg.lgamma(k + r) - sg.lgamma(k + 1) - sg.lgamma(r)
            + r * sg.nn.functional.logsigmoid(-logit_p)
            + k * sg.nn.functional.logsigmoid(logit_p)).sum()


def gumbel(u, tau=0.5):
    g = -sg.log(-sg.log(u))
    return sg.softmax(g / tau, dim=-1)


def logit_tf(p, eps=1e-6):
    p = p.clamp(eps, 1 - eps)
    return sg.log(p) - sg.log1p(-p)


def piecewise(x):
    y = sg.where(x < -1, -x - 0.5, sg.where(x > 1, x.sqrt(), 0.5 * x * x))
    return y.clamp(max=2.0)


def planar_flow(z, w, u, b):
    a = z @ w + b
    h = sg.tanh(a)
    out = z + u * h.unsqueeze(-1)
    logdet = sg.log((1 + (1 - h ** 2) * (u @ w)).abs() + 1e-12)
    return out, logdet


def near_zero(x):
    return sg.sinc(x) + sg.expm1(x) / 2 + sg.log1p(x * x)


def maxpool_reshape(x):
    n, l = x.shape
    return x.reshape(n, l // 2, 2).amax(-1)


def cum_ops(x):
    return sg.cumsum(x, dim=-1) * sg.cumprod(x, dim=-1)


def var_std(x):
    return x.var(-1, correction=0) + x.std(-1) + sg.var(x, dim=-1, correction=2)


def norms(x):
    return x.norm(p=1, dim=-1) + x.norm(p=2, dim=-1) + x.norm(p=float("inf"), dim=-1)


def einsum_like(a, b):
    # bij,bjk->bik via matmul, then transpose
    return (a @ b).transpose(-1, -2).sum(0)


def kw_only(x, *, scale=3.0, power=2):
    return (scale * x) ** power - x


def softsign_mix(x):
    return x / (1 + x.abs()) + sg.nn.functional.softplus(x, beta=2.0)


def logsumexp_temp(x, t=0.1):
    return t * sg.logsumexp(x / t, dim=-1)


def hardswish_like(x):
    return x * sg.clamp(x + 3, 0, 6) / 6


def elu_alpha(x, alpha=1.5):
    return sg.where(x > 0, x, alpha * sg.expm1(x))


class TwoOut(sg.Function):
    @staticmethod
    def forward(ctx, x):
        m = x.amax(-1)
        idx = x.argmax(-1)
        ctx.mark_non_differentiable(idx)
        return m, idx


class PolarPair(sg.Function):
    @staticmethod
    def forward(ctx, x, y):
        r = sg.sqrt(x * x + y * y)
        th = sg.atan2(y, x)
        return r, th
'''

R = np.random.default_rng(0)


def rn(*s):
    return R.standard_normal(s)


def pos(*s):
    return R.uniform(0.5, 2.0, s)


def u01(*s):
    return R.uniform(0.05, 0.95, s)


oh = np.eye(4)[[0, 2, 3]]
CASES = {
 'focal_loss': [(rn(5), (rn(5) > 0).astype(float)), (np.array([1e3, -1e3, 0., 30, -30]), np.array([1., 0, 1, 0, 1]))],
 'huber_beta': [(rn(6), rn(6)), (np.array([1e3, -1e3, 0., 1e-30, 0.25, 0.5]), np.zeros(6))],
 'log_cosh': [(rn(6), rn(6)), (np.array([1e3, -1e3, 0., 1e-30, 400., -800.]), np.zeros(6))],
 'kl_gauss': [(rn(4), rn(4), rn(4), rn(4)), (np.array([1e3, 0., -1e3, 1e-30]), np.zeros(4), np.zeros(4), np.array([-30., 30, 0, 0]))],
 'ce_smooth': [(rn(3, 4), oh), (np.array([[1e3, -1e3, 0, 0], [0, 0, 0, 0], [-1e3, -1e3, 1e3, 1e3]]), oh)],
 'gelu_tanh': [(rn(7),), (np.array([1e3, -1e3, 0., 1e-30, -1e-30, 20., -20.]),)],
 'gelu_erf': [(rn(7),), (np.array([1e3, -1e3, 0., 1e-30, -40., 40., -8.]),)],
 'gelu_sigmoid': [(rn(7),), (np.array([1e3, -1e3, 0., 1e-30, -800., 800., -8.]),)],
 'swish_beta': [(rn(5), rn(5)), (np.array([1e3, -1e3, 0., 1e-30, -1e3]), np.array([1., 1, 0, 1e3, -1]))],
 'mish': [(rn(7),), (np.array([1e3, -1e3, 0., 1e-30, -40., 40., -800.]),)],
 'silu_temp': [(rn(7),), (np.array([1e3, -1e3, 0., 1e-30, -400., 400., -8.]),)],
 'rms_norm': [(rn(3, 4), rn(4)), (np.array([[1e3, -1e3, 0, 1], [0, 0, 0, 0], [1e-30, 0, 0, 0]]), rn(4))],
 'group_norm': [(rn(2, 4, 3),), (np.concatenate([np.full((1, 4, 3), 1e3), np.ones((1, 4, 3))]),)],
 'attention': [(rn(2, 3, 4), rn(2, 5, 4), rn(2, 5, 2)), (rn(2, 3, 4) * 1e3, rn(2, 5, 4), rn(2, 5, 2))],
 'cosine_eps': [(rn(3, 4), rn(3, 4)), (np.array([[1e3, 0, 0, 0], [0, 0, 0, 0], [1e-30, 0, 0, 0]]), rn(3, 4))],
 'cdist2': [(rn(3, 2), rn(4, 2)), (np.array([[0., 0], [1e3, -1e3], [1e-30, 0]]), np.array([[0., 0], [1, 1], [-1e3, 0], [0, 1e-30]]))],
 'horner': [(rn(6),), (np.array([1e3, -1e3, 0., 1e-30, 2., -2.]),)],
 'bessel_j0': [(rn(6),), (np.array([0., 1e-30, 3., -3., 1e-5, 5.]),)],
 'logistic_map': [(np.full(4, 3.7), u01(4)), (np.array([0., 4., 1e-30, 3.]), np.array([0.5, 0., 1., 1e-30]))],
 'morse': [(pos(5),), (np.array([1e3, 1e-3, 1.0, 50., 1e-30]),)],
 'buckingham': [(pos(5),), (np.array([1e3, 0.1, 1.0, 20., 300.]),)],
 'yukawa': [(pos(5),), (np.array([1e3, 1e-3, 1.0, 50., 1e-30]),)],
 'bs_put': [(pos(4) * 100, pos(4) * 100, pos(4), u01(4)), (np.array([1e3, 1e-3, 100., 100.]), np.array([100., 100, 1e3, 100]), np.array([1., 1, 1, 1e-6]), np.array([0.2, 0.2, 0.2, 0.2]))],
 'student_t_ll': [(rn(5), pos(5) * 3, rn(5), rn(5) * 0.1), (np.array([1e3, -1e3, 0., 1e-30, 5.]), np.array([1., 1e3, 1e-3, 3, 30]), np.zeros(5), np.zeros(5))],
 'von_mises_ll': [(rn(5), rn(5), rn(5) * 0.5), (np.array([1e3, 0., 3., 1e-30, 0.]), np.zeros(5), np.array([0., 5., -30., 0., 6.]))],
 'negbin_ll': [(np.array([0., 1, 3, 7]), pos(4) * 2, rn(4)), (np.array([0., 1e3, 5, 0]), np.array([1e-3, 1e3, 1, 1e3]), np.array([1e3, -1e3, 0, 30]))],
 'gumbel': [(u01(3, 4),), (np.array([[1e-30, 0.5, 1 - 1e-12, 0.3], [0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.5, 0.5]]),)],
 'logit_tf': [(u01(5),), (np.array([0., 1., 1e-30, 0.5, 1 - 1e-9]),)],
 'piecewise': [(rn(7) * 2,), (np.array([1e3, -1e3, 0., 1e-30, 1.0, -1.0, 4.0]),)],
 'planar_flow': [(rn(3, 2), rn(2), rn(2), np.array(0.3)), (np.array([[1e3, 0], [0, 0], [-1e3, 1]]), rn(2), rn(2), np.array(0.0))],
 'near_zero': [(rn(6) * 0.5,), (np.array([0., 1e-30, -1e-30, 1e-8, 3.0, -0.5]),)],
 'maxpool_reshape': [(rn(2, 6),), (np.array([[1e3, 1e3, -1e3, 0, 1e-30, 0], [0, 0, 1, 1, -np.inf, 2]]),)],
 'cum_ops': [(rn(2, 4),), (np.array([[1e3, 0, 1e-30, 2], [0, 0, 1, 1]]),)],
 'var_std': [(rn(4, 3),), (np.array([[1e3, 1e3, 1e3], [0, 0, 0], [1e-30, 0, 0], [1, 2, 3]]),)],
 'norms': [(rn(3, 4),), (np.array([[1e3, -1e3, 0, 1], [0., 0, 0, 0], [1e-30, 0, 0, 0]]),)],
 'einsum_like': [(rn(2, 3, 4), rn(2, 4, 5)), (rn(2, 3, 4) * 1e3, rn(2, 4, 5))],
 'kw_only': [(rn(5),), (np.array([1e3, -1e3, 0., 1e-30, 1.]),)],
 'softsign_mix': [(rn(5),), (np.array([1e3, -1e3, 0., 1e-30, -400.]),)],
 'logsumexp_temp': [(rn(3, 4),), (np.array([[1e3, 1e3, 0, 0], [-1e3, -1e3, -1e3, -1e3], [0, 0, 0, 1e-30]]),)],
 'hardswish_like': [(rn(7) * 3,), (np.array([1e3, -1e3, 0., 1e-30, -3., 3., 2.]),)],
 'elu_alpha': [(rn(7),), (np.array([1e3, -1e3, 0., 1e-30, -800., 40., -1e-30]),)],
 'TwoOut': [(rn(3, 4),), (np.array([[1e3, 1e3, 0, 0], [-1e3, 0, 1e-30, 0], [0, 0, 0, 0.]]),)],
 'PolarPair': [(rn(5), rn(5)), (np.array([1e3, 0., 1e-30, -1e3, -1.]), np.array([1e3, 1e-30, 0., 0., 0.]))],
}
I = np.inf
INF = {   # the forwards defined at +-inf, with inputs that reach it
    'focal_loss': (np.array([I, -I, I, -I]), np.array([1., 0, 0, 1])),
    'log_cosh': (np.array([I, -I, 1.]), np.zeros(3)),
    'gelu_tanh': (np.array([I, -I, 1.]),), 'gelu_erf': (np.array([I, -I, 1.]),),
    'gelu_sigmoid': (np.array([I, -I, 1.]),), 'mish': (np.array([I, -I, 1.]),),
    'silu_temp': (np.array([I, -I, 1.]),), 'softsign_mix': (np.array([I, -I, 1.]),),
    'hardswish_like': (np.array([I, -I, 1.]),), 'maxpool_reshape': (np.array([[I, 1., -I, -I]]),),
    'logsumexp_temp': (np.array([[I, 0., 1.], [-I, -I, 0.]]),),
    'yukawa': (np.array([I, 1.]),), 'morse': (np.array([I, 1.]),),
    'swish_beta': (np.array([I, -I, 1.]), np.array([1., 1., 1.])),
    'ce_smooth': (np.array([[-I, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1.]]), oh),
    'logit_tf': (np.array([I, -I, .3]),),
}
# torch differentiates through the branch torch.where did not take (its nan times the 0 the
# mask gives): where torch's gradient is nan these must be finite (the values: closed forms below)
WHERE_NAN = {'piecewise', 'elu_alpha', 'huber_beta', 'buckingham', 'horner'}
INF_EXTRA = {'huber_beta': (np.array([I, -I]), np.zeros(2)), 'elu_alpha': (np.array([I, -I, 1.]),),
             'piecewise': (np.array([I, -I, 1.]),), 'buckingham': (np.array([I, 1.]),)}


class _Ctx:
    def mark_non_differentiable(self, *args):
        pass


@pytest.fixture(autouse=True)
def _torch_default_float64():
    """torch's side reads the forwards' constants as float64, for this module's tests only
    (a module-wide set_default_dtype leaked float64 into other files' torch references under
    xdist: 61 failures in the full run)."""
    torch = pytest.importorskip("torch")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(scope="module")
def mods(tmp_path_factory):
    """(the forwards as symgrad reads them, the same text run by torch)."""
    torch = pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("round4") / "r4.py"
    path.write_text(FORWARDS)
    spec = importlib.util.spec_from_file_location("r4", path)
    ours = importlib.util.module_from_spec(spec)
    sys.modules["r4"] = ours       # inspect.getsource needs the module registered
    spec.loader.exec_module(ours)
    theirs = types.ModuleType("r4_torch")
    exec(compile(FORWARDS.replace("import symgrad as sg", "import torch as sg\nsg.Function = object"),  # noqa: S102 (the test's own text)
                 "r4_torch", "exec"), theirs.__dict__)
    yield ours, theirs, torch, path
    sys.modules.pop("r4", None)


def _torch_fn(theirs, name):
    f = getattr(theirs, name)
    return (lambda *a: f.forward(_Ctx(), *a)) if isinstance(f, type) else f


def _tuple(v):
    return v if isinstance(v, tuple) else (v,)


def torch_values(mods, name, xs):
    """torch's outputs and the gradient of sum(outputs) (float outputs only), float64."""
    _, theirs, torch, _ = mods
    txs = [torch.tensor(np.asarray(x, np.float64), requires_grad=True) for x in xs]
    want = _tuple(_torch_fn(theirs, name)(*txs))
    diff = [w for w in want if w.dtype.is_floating_point]
    grads = torch.autograd.grad(diff, txs, [torch.ones_like(w) for w in diff], allow_unused=True)
    return ([w.detach().numpy() for w in want],
            [np.zeros(np.shape(x)) if g is None else g.numpy() for x, g in zip(xs, grads)])


def assert_like_torch(name, got, want, dtype, where_nan_ok=False):
    rtol, atol = (1e-9, 1e-11) if dtype == np.float64 else (2e-4, 1e-5)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g, float)
        if where_nan_ok:
            bad = np.isnan(w) & ~np.isnan(g)
            assert np.isfinite(g[bad]).all(), (name, i, g)
            g, w = np.where(bad, 0.0, g), np.where(bad, 0.0, w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"{name} #{i}")


def check_compiled(mods, name, xs, target="numpy", dtype=np.float64):
    ours = mods[0]
    xs = [np.asarray(x, dtype) for x in xs]
    mod = sg.compile(getattr(ours, name), *xs, target=target)
    got = _tuple(mod.forward(*xs))
    want, wgrads = torch_values(mods, name, xs)
    grads = mod.backward(*[np.ones(np.shape(w), dtype) for w in want], *xs)
    assert_like_torch(name, got, want, dtype)
    assert_like_torch(name, grads, wgrads, dtype, where_nan_ok=name in WHERE_NAN)
    return got, grads


NAMES = sorted(CASES)
NEAR_ZERO_SKIP = {'near_zero'}     # torch's sinc' near 0 cancels: checked in a closed form below


@pytest.mark.parametrize("name", NAMES)
def test_numpy_target_matches_torch(mods, name):
    ordinary, extreme = CASES[name]
    check_compiled(mods, name, ordinary)
    check_compiled(mods, name, ordinary, dtype=np.float32)
    if name not in NEAR_ZERO_SKIP:
        check_compiled(mods, name, extreme)
    if name in INF or name in INF_EXTRA:
        check_compiled(mods, name, INF.get(name) or INF_EXTRA[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_c_target_matches_torch(mods, name):
    ordinary, extreme = CASES[name]
    check_compiled(mods, name, ordinary, target="c")
    check_compiled(mods, name, ordinary, target="c", dtype=np.float32)
    if name not in NEAR_ZERO_SKIP:
        check_compiled(mods, name, extreme, target="c")
    if name in INF or name in INF_EXTRA:
        check_compiled(mods, name, INF.get(name) or INF_EXTRA[name], target="c")


@pytest.mark.parametrize("name", ["gelu_erf", "mish", "focal_loss", "attention", "TwoOut",
                                  "student_t_ll", "cum_ops", "norms"])
def test_c_target_representatives(mods, name):
    ordinary, extreme = CASES[name]
    check_compiled(mods, name, ordinary, target="c")
    check_compiled(mods, name, extreme, target="c")


def test_where_branches_and_series_in_closed_form(mods):
    """Where torch's gradient is nan (the untaken branch's nan times 0) or imprecise."""
    ours = mods[0]
    x = np.array([1e3, -1e3, -1.0, np.inf, -np.inf, 4.0])
    g = sg.compile(ours.piecewise, x).backward(np.ones(6), x)[0]
    # -x - 0.5 > 2 is clamped (0); at 4, sqrt(4) sits on clamp's bound, which passes (as torch)
    np.testing.assert_array_equal(g, [0.0, 0.0, -1.0, 0.0, 0.0, 0.25])
    x = np.array([1e3, np.inf, -1e3, -np.inf, -1.0])
    g = sg.compile(ours.elu_alpha, x).backward(np.ones(5), x)[0]
    np.testing.assert_allclose(g, [1.0, 1.0, 0.0, 0.0, 1.5 * np.exp(-1.0)], rtol=1e-15)
    x = np.array([np.inf, -np.inf, 0.1])
    g = sg.compile(ours.huber_beta, x, np.zeros(3)).backward(np.ones(()), x, np.zeros(3))
    np.testing.assert_allclose(g[0], [1.0, -1.0, 0.2], rtol=1e-15)
    np.testing.assert_allclose(g[1], [-1.0, 1.0, -0.2], rtol=1e-15)
    x = np.array([np.inf, -np.inf, 2.0])        # 1 - x/2 + x^2/4 - x^3/8 + x^4/16 -> +inf both sides
    mod = sg.compile(ours.horner, x)
    np.testing.assert_allclose(mod.forward(x), [np.inf, np.inf, 1.0 - 1 + 1 - 1 + 1])
    np.testing.assert_allclose(mod.backward(np.ones(3), x)[0], [np.inf, -np.inf, -0.5 + 2 * 2 / 4
                                                                 - 3 * 4 / 8 + 4 * 8 / 16])
    x = np.array([np.inf, 1.0])                 # d/dr (A e^{-Br} - C r^-6) -> 0 at inf
    g = sg.compile(ours.buckingham, x).backward(np.ones(2), x)[0]
    np.testing.assert_allclose(g, [0.0, -3000.0 * np.exp(-3.0) + 60.0], rtol=1e-14)
    # sinc'(x) + e^x/2 + 2x/(1+x^2) near 0 (sinc'(x) = -pi^2 x/3 + O(x^3)); torch's sinc'
    # cancels there (it gives 0.5 at 1e-8, 10 digits off)
    x = np.array([0.0, 1e-30, -1e-30, 1e-8, -1e-5])
    g = sg.compile(ours.near_zero, x).backward(np.ones(5), x)[0]
    want = -np.pi ** 2 * x / 3 + np.exp(x) / 2 + 2 * x / (1 + x * x)
    np.testing.assert_allclose(g, want, rtol=1e-12)


def _second_order(mods, name, xs):
    """d/dxs of sum(grad(sum(out^2))^2), ours through the runtime with create_graph=True."""
    ours, theirs, torch, _ = mods
    fn = getattr(ours, name)
    F = fn if isinstance(fn, type) else type(name, (sg.Function,), {
        "forward": staticmethod(lambda ctx, *a: fn(*a))})
    sx = [sg.tensor(np.asarray(x, np.float64), requires_grad=True) for x in xs]
    outs = [o for o in _tuple(F.apply(*sx)) if o.dtype == sg.float64]
    g = sg.autograd.grad(sum((o * o).sum() for o in outs), sx, create_graph=True,
                         allow_unused=True)
    gg = sg.autograd.grad(sum((v * v).sum() for v in g if v is not None), sx, allow_unused=True)
    tx = [torch.tensor(np.asarray(x, np.float64), requires_grad=True) for x in xs]
    to = [o for o in _tuple(_torch_fn(theirs, name)(*tx)) if o.dtype.is_floating_point]
    tg = torch.autograd.grad(sum((o * o).sum() for o in to), tx, create_graph=True,
                             allow_unused=True)
    tgg = torch.autograd.grad(sum((v * v).sum() for v in tg if v is not None), tx,
                              allow_unused=True)
    for i, (a, b) in enumerate(zip(gg, tgg)):
        a = np.zeros(np.shape(xs[i])) if a is None else a.detach().numpy()
        b = np.zeros(np.shape(xs[i])) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9, err_msg=f"{name} #{i}")


SECOND_EXT = {'focal_loss', 'log_cosh', 'ce_smooth', 'gelu_tanh', 'gelu_erf', 'mish', 'silu_temp',
              'rms_norm', 'attention', 'morse', 'yukawa', 'bs_put', 'student_t_ll', 'negbin_ll',
              'logsumexp_temp', 'TwoOut', 'softsign_mix', 'cum_ops'}


SLOW_SECOND = {'logistic_map', 'focal_loss', 'bs_put'}   # 5-35 s each on the loaded machine


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_SECOND
                                  else n for n in NAMES])
def test_second_order_matches_torch(mods, name):
    ordinary, extreme = CASES[name]
    if name not in WHERE_NAN:
        _second_order(mods, name, ordinary)
    if name in SECOND_EXT:
        _second_order(mods, name, extreme)


def test_second_order_where_torch_is_wrong(mods):
    """d2/dk2 log i0(k) at k = 403.4: torch's i1 backward gives 0.9975 (the true 3.0764e-6,
    mpmath); sinc'' near 0: torch gives 11 at 1e-30 (the true -pi^2/3 + 1/2 + 2)."""
    ours = mods[0]

    class LogI0(sg.Function):
        @staticmethod
        def forward(ctx, k):
            return sg.log(sg.special.i0(k))

    k = sg.tensor([5.0, 100.0, 403.4, 700.0], dtype=sg.float64, requires_grad=True)
    g, = sg.autograd.grad(LogI0.apply(k).sum(), k, create_graph=True)
    gg, = sg.autograd.grad(g.sum(), k)
    np.testing.assert_allclose(g.detach().numpy(), [0.893383137044, 0.994987373005,
                                                    0.998759765401, 0.999285458818], rtol=1e-11)
    np.testing.assert_allclose(gg.numpy(), [0.0231899430365, 5.02538302215e-5, 3.07636729263e-6,
                                            1.02113859275e-6], rtol=1e-9)

    class NearZero(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return ours.near_zero(x)

    x = sg.tensor([0.0, 1e-30, -1e-30], dtype=sg.float64, requires_grad=True)
    g, = sg.autograd.grad(NearZero.apply(x).sum(), x, create_graph=True)
    gg, = sg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), -np.pi ** 2 / 3 + 0.5 + 2.0, rtol=1e-12)


# --------------------------------------------------------------------------- the command line
CLI_SET = {   # name: --shape options
    'focal_loss': ["logits=5", "target=5"], 'ce_smooth': ["logits=3,4", "onehot=3,4"],
    'attention': ["q=2,3,4", "k=2,5,4", "v=2,5,2"], 'planar_flow': ["z=3,2", "w=2", "u=2", "b="],
    'TwoOut': ["x=3,4"], 'PolarPair': ["x=5", "y=5"], 'kw_only': ["x=5"],
    'student_t_ll': ["x=5", "nu=5", "mu=5", "log_s=5"], 'bs_put': ["s=4", "k=4", "t=4", "sigma=4"],
    'group_norm': ["x=2,4,3"],
}


@pytest.mark.slow
@pytest.mark.parametrize("target", ["numpy", "c"])
def test_cli_compile_then_numpy_only_module(mods, tmp_path, target):
    """`symgrad compile --target numpy|c -o out/`, then the written module in a fresh
    interpreter importing NumPy only, against torch at ordinary and extreme inputs."""
    write(tmp_path, "r4.py", FORWARDS)
    for name, shapes in CLI_SET.items():
        proc = cli("compile", f"r4.py:{name}", "--target", target, "--dtype", "float64",
                   "--shape", *shapes, "-o", "out/", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        stem = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
        path = tmp_path / "out" / (f"{stem}_grad_c.py" if target == "c" else f"{stem}_grad.py")
        for xs in CASES[name]:
            want, wgrads = torch_values(mods, name, xs)
            res = run_module(path, xs)
            assert_like_torch(name, [np.asarray(o) for o in res["out"]], want, np.float64)
            assert_like_torch(name, [np.asarray(g) for g in res["grad"]], wgrads, np.float64)
    if target == "numpy":
        proc = cli("show", "r4.py:kw_only", "--shape", "x=3", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "out = 9*x**2 - x" in proc.stdout and "grad_x = 18*grad_out*x - grad_out" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("target", ["numpy", "c"])
@pytest.mark.parametrize("name", ["mish", "log_cosh", "rms_norm", "cdist2", "logistic_map",
                                  "PolarPair", "TwoOut", "negbin_ll"])
def test_cli_check_passes(tmp_path, target, name):
    """`symgrad check` (gradcheck and gradgradcheck at random points) on the written module."""
    write(tmp_path, "r4.py", FORWARDS)
    shapes = {"mish": ["x=7"], "log_cosh": ["x=6", "y=6"], "rms_norm": ["x=3,4", "w=4"],
              "cdist2": ["a=3,2", "b=4,2"], "logistic_map": ["r=4", "x0=4"],
              "PolarPair": ["x=5", "y=5"], "TwoOut": ["x=3,4"],
              "negbin_ll": ["k=4", "r=4", "logit_p=4"]}[name]
    proc = cli("check", f"r4.py:{name}", "--target", target, "--shape", *shapes, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_overflow_probe_does_not_blame_another_outputs_undefined_term():
    """`symgrad check r4.py:PolarPair` (r = sqrt(x^2 + y^2), th = atan2(y, x)) failed: 'dout1/dx
    at (0, 0): generated nan, true value 0.0'. The nan is d r/dx = x/r at the origin (0/0) times
    r's 0 seed, which the backward sums into grad_x, as torch's does; th's own term is 0."""
    from symgrad.numerics import probe_finite

    def polar(x, y):
        return sg.sqrt(x * x + y * y), sg.atan2(y, x)

    mod = sg.compile(polar, np.zeros(1), np.zeros(1), cache_ok=False)
    assert probe_finite(mod, points=[(0.0, 0.0)]).findings == []
    th = sg.compile(lambda x, y: sg.atan2(y, x), np.zeros(1), np.zeros(1), cache_ok=False)
    np.testing.assert_array_equal(th.backward(np.ones(1), np.zeros(1), np.zeros(1)), [[0.0], [0.0]])
