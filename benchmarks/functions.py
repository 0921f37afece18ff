"""Benchmark functions, each defined once.

A :class:`Func` record holds

* ``name`` and ``n_inputs``;
* ``make_inputs(size, dtype, rng) -> list[np.ndarray]`` — shapes and domains
  (``size`` is the total element count of the main input; for 2-D inputs
  ``rows = size // cols``);
* one implementation per peer, all computing the *same formula*:

  - ``torch(*tensors)``        — torch eager, op by op (the baseline);
  - ``torch_native(*tensors)`` — optional: torch's own fused op where one
    exists (``F.gelu``, ``F.mish``, ``F.layer_norm``, ``torch.logsumexp`` …);
    reported as an extra column, never the baseline;
  - ``jax(jnp, *arrays)``      — written against ``jax.numpy``;
  - ``autograd(anp, *arrays)`` — written against ``autograd.numpy``;
  - ``sym(ns, *xs)``           — the forward for symgrad, written against a
    torch-spelled namespace ``ns`` (``ns.exp, ns.log, ns.tanh, ns.sin,
    ns.cos, ns.erf, ns.sqrt, ns.sum(x, dim=, keepdim=), ns.max(x, dim=,
    keepdim=), ns.mean, ns.matmul``) plus Python operators on the proxies
    (``+ - * / ** unary-``).  ``benchmarks.check_ns`` runs these through a
    torch-backed namespace so they are known correct before symgrad lands.

The output of every function is an array (or a scalar for ``mlp_loss``); the
benchmark differentiates ``sum(output)`` w.r.t. every input.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT2 = 1.0 / math.sqrt(2.0)


@dataclass
class Func:
    name: str
    n_inputs: int
    make_inputs: Callable  # (size, dtype, rng) -> list[np.ndarray]
    torch: Callable
    jax: Callable
    autograd: Callable
    sym: Callable
    torch_native: Optional[Callable] = None
    description: str = ""
    tags: tuple = field(default_factory=tuple)

    def impl(self, peer_kind: str):
        return getattr(self, peer_kind, None)


def _uniform(rng, shape, lo, hi, dtype):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _vals(r):
    """``max(x, dim=...)`` returns (values, indices) in torch; accept either."""
    if hasattr(r, "values"):
        return r.values
    if isinstance(r, tuple):
        return r[0]
    return r


# ---------------------------------------------------------------- elementwise

def _one_input(lo, hi):
    def make(size, dtype, rng):
        return [_uniform(rng, (size,), lo, hi, dtype)]
    return make


def _tnn():
    import torch.nn.functional as F
    return F


# gelu, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
def _gelu_tanh(tanh, x):
    return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))


GELU_TANH = Func(
    "gelu_tanh", 1, _one_input(-4.0, 4.0),
    torch=lambda x: _gelu_tanh(__import__("torch").tanh, x),
    torch_native=lambda x: _tnn().gelu(x, approximate="tanh"),
    jax=lambda jnp, x: _gelu_tanh(jnp.tanh, x),
    autograd=lambda anp, x: _gelu_tanh(anp.tanh, x),
    sym=lambda ns, x: _gelu_tanh(ns.tanh, x),
    description="0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))), x~U(-4,4)",
)


# gelu, exact: 0.5 x (1 + erf(x / sqrt 2))
def _gelu_erf(erf, x):
    return 0.5 * x * (1.0 + erf(x * INV_SQRT2))


def _autograd_erf():
    from autograd.scipy.special import erf
    return erf


def _jax_erf():
    from jax.scipy.special import erf
    return erf


GELU_ERF = Func(
    "gelu_erf", 1, _one_input(-4.0, 4.0),
    torch=lambda x: _gelu_erf(__import__("torch").erf, x),
    torch_native=lambda x: _tnn().gelu(x),
    jax=lambda jnp, x: _gelu_erf(_jax_erf(), x),
    autograd=lambda anp, x: _gelu_erf(_autograd_erf(), x),
    sym=lambda ns, x: _gelu_erf(ns.erf, x),
    description="0.5x(1+erf(x/sqrt2)), x~U(-4,4)",
)


# mish: x tanh(log(1 + exp(x)))   (naive softplus; domain keeps exp finite)
def _mish(m, x):
    return x * m.tanh(m.log(1.0 + m.exp(x)))


MISH = Func(
    "mish", 1, _one_input(-6.0, 6.0),
    torch=lambda x: _mish(__import__("torch"), x),
    torch_native=lambda x: _tnn().mish(x),
    jax=lambda jnp, x: _mish(jnp, x),
    autograd=lambda anp, x: _mish(anp, x),
    sym=lambda ns, x: _mish(ns, x),
    description="x*tanh(log(1+exp(x))), x~U(-6,6)",
)


# softplus with beta = 2, naive: log(1 + exp(beta x)) / beta
BETA = 2.0


def _softplus(m, x):
    return m.log(1.0 + m.exp(BETA * x)) / BETA


SOFTPLUS = Func(
    "softplus_b2", 1, _one_input(-6.0, 6.0),
    torch=lambda x: _softplus(__import__("torch"), x),
    torch_native=lambda x: _tnn().softplus(x, beta=BETA),
    jax=lambda jnp, x: _softplus(jnp, x),
    autograd=lambda anp, x: _softplus(anp, x),
    sym=lambda ns, x: _softplus(ns, x),
    description="log(1+exp(2x))/2 (naive), x~U(-6,6)",
)


# swish / silu: x * sigmoid(x) = x / (1 + exp(-x))
def _swish(m, x):
    return x / (1.0 + m.exp(-x))


SWISH = Func(
    "swish", 1, _one_input(-8.0, 8.0),
    torch=lambda x: _swish(__import__("torch"), x),
    torch_native=lambda x: _tnn().silu(x),
    jax=lambda jnp, x: _swish(jnp, x),
    autograd=lambda anp, x: _swish(anp, x),
    sym=lambda ns, x: _swish(ns, x),
    description="x/(1+exp(-x)), x~U(-8,8)",
)


# 6-input rational function with heavy common subexpressions
def _rational(a, b, c, d, e, f):
    s = a * b + c
    t = c * d - e
    p = s * t + f
    q = s * s + t * t + 1.0
    r = p * p + 1.0
    return p / q + (s - t) * p / r + a * f / q - (s * t) / (q * r)


def _make_rational(size, dtype, rng):
    return [_uniform(rng, (size,), -1.0, 1.0, dtype) for _ in range(6)]


RATIONAL6 = Func(
    "rational6", 6, _make_rational,
    torch=_rational,
    jax=lambda jnp, *xs: _rational(*xs),
    autograd=lambda anp, *xs: _rational(*xs),
    sym=lambda ns, *xs: _rational(*xs),
    description="s=ab+c, t=cd-e, p=st+f, q=s²+t²+1, r=p²+1; "
                "p/q+(s-t)p/r+af/q-st/(qr); inputs~U(-1,1)",
)


# Lennard-Jones pair energy of r: 4 eps ((sigma/r)^12 - (sigma/r)^6)
LJ_SIGMA = 0.9
LJ_EPS = 1.5


def _lj(r):
    sr = LJ_SIGMA / r
    sr6 = sr ** 6
    return 4.0 * LJ_EPS * (sr6 * sr6 - sr6)


LENNARD_JONES = Func(
    "lennard_jones", 1, _one_input(0.8, 3.0),
    torch=_lj,
    jax=lambda jnp, r: _lj(r),
    autograd=lambda anp, r: _lj(r),
    sym=lambda ns, r: _lj(r),
    description="4eps((s/r)^12-(s/r)^6), s=0.9, eps=1.5, r~U(0.8,3)",
)


# 30-deep chain alternating tanh and sin
CHAIN_DEPTH = 30


def _chain(m, x):
    y = x
    for i in range(CHAIN_DEPTH):
        y = m.tanh(y) if i % 2 == 0 else m.sin(y)
    return y


TANH_SIN_CHAIN = Func(
    "tanh_sin_chain30", 1, _one_input(-2.0, 2.0),
    torch=lambda x: _chain(__import__("torch"), x),
    jax=lambda jnp, x: _chain(jnp, x),
    autograd=lambda anp, x: _chain(anp, x),
    sym=lambda ns, x: _chain(ns, x),
    description="sin(tanh(sin(...tanh(x)))) 30 deep, x~U(-2,2)",
)


# 8-input physics: energy of a damped driven oscillator at time t
# (steady-state response + underdamped transient), inputs m,k,c,F0,w,t,x0,v0.
def _oscillator(M, m, k, c, F0, w, t, x0, v0):
    w0sq = k / m
    gamma = c / (2.0 * m)
    dw = w0sq - w * w
    g2w = 2.0 * gamma * w
    D = M.sqrt(dw * dw + g2w * g2w)
    A = F0 / (m * D)
    cphi = dw / D
    sphi = g2w / D
    cwt = M.cos(w * t)
    swt = M.sin(w * t)
    x_ss = A * (cwt * cphi + swt * sphi)
    v_ss = -A * w * (swt * cphi - cwt * sphi)
    wd = M.sqrt(w0sq - gamma * gamma)
    x_tr = M.exp(-gamma * t) * (x0 * M.cos(wd * t) + (v0 + gamma * x0) / wd * M.sin(wd * t))
    x = x_ss + x_tr
    return 0.5 * m * v_ss * v_ss + 0.5 * k * x * x


def _make_oscillator(size, dtype, rng):
    doms = [(0.5, 2.0), (1.0, 4.0), (0.05, 0.5), (0.5, 2.0),
            (0.2, 0.6), (0.0, 5.0), (-1.0, 1.0), (-1.0, 1.0)]
    return [_uniform(rng, (size,), lo, hi, dtype) for lo, hi in doms]


OSCILLATOR8 = Func(
    "oscillator8", 8, _make_oscillator,
    torch=lambda *xs: _oscillator(__import__("torch"), *xs),
    jax=lambda jnp, *xs: _oscillator(jnp, *xs),
    autograd=lambda anp, *xs: _oscillator(anp, *xs),
    sym=lambda ns, *xs: _oscillator(ns, *xs),
    description="damped driven oscillator energy at t (steady state + transient); "
                "m,k,c,F0,w,t,x0,v0",
)


# ------------------------------------------------------------- row-wise (2-D)
COLS = 128


def _rows(size, cols):
    return max(1, int(size) // cols)


def _make_2d(lo, hi, cols=COLS):
    def make(size, dtype, rng):
        return [_uniform(rng, (_rows(size, cols), cols), lo, hi, dtype)]
    return make


# logsumexp over the last dim, stable form: m + log(sum(exp(x - m)))
def _lse_torch(x):
    m = x.amax(dim=-1, keepdim=True)
    return (m + (x - m).exp().sum(dim=-1, keepdim=True).log()).squeeze(-1)


def _lse_np(m_, x):
    m = m_.max(x, axis=-1, keepdims=True)
    return m[..., 0] + m_.log(m_.sum(m_.exp(x - m), axis=-1))


def _lse_sym(ns, x):
    # output kept as (rows, 1): the gradient of its sum is the same
    m = _vals(ns.max(x, dim=-1, keepdim=True))
    return m + ns.log(ns.sum(ns.exp(x - m), dim=-1, keepdim=True))


LOGSUMEXP = Func(
    "logsumexp", 1, _make_2d(-5.0, 5.0),
    torch=_lse_torch,
    torch_native=lambda x: __import__("torch").logsumexp(x, dim=-1),
    jax=_lse_np,
    autograd=_lse_np,
    sym=_lse_sym,
    description="max-shifted logsumexp over last dim, (size/128)x128, x~U(-5,5)",
    tags=("2d",),
)


# layer norm over the last dim (eps 1e-5, biased variance like torch), with affine
# weight/bias.  (Without the affine part the benchmark would be degenerate: each
# normalized row sums to 0, so the gradient of sum(output) is identically 0.)
LN_EPS = 1e-5


def _ln_torch(x, w=None, b=None):
    mu = x.mean(dim=-1, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(dim=-1, keepdim=True)
    y = xc / (var + LN_EPS).sqrt()
    return y if w is None else y * w + b


def _ln_np(m_, x, w=None, b=None):
    mu = m_.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = m_.mean(xc * xc, axis=-1, keepdims=True)
    y = xc / m_.sqrt(var + LN_EPS)
    return y if w is None else y * w + b


def _sym_mean(ns, x, **kw):
    """``ns.mean`` if the namespace has it, else sum / count (needs ``.shape``)."""
    if hasattr(ns, "mean"):
        return ns.mean(x, **kw)
    dim = kw.get("dim")
    n = math.prod(x.shape) if dim is None else x.shape[dim]
    return ns.sum(x, **kw) / n


def _ln_sym(ns, x, w=None, b=None):
    mu = _sym_mean(ns, x, dim=-1, keepdim=True)
    xc = x - mu
    var = _sym_mean(ns, xc * xc, dim=-1, keepdim=True)
    y = xc / ns.sqrt(var + LN_EPS)
    return y if w is None else y * w + b


def _make_ln_affine(size, dtype, rng):
    x = _uniform(rng, (_rows(size, COLS), COLS), -3.0, 3.0, dtype)
    w = _uniform(rng, (COLS,), 0.5, 1.5, dtype)
    b = _uniform(rng, (COLS,), -0.5, 0.5, dtype)
    return [x, w, b]


LAYERNORM_AFFINE = Func(
    "layernorm_affine", 3, _make_ln_affine,
    torch=_ln_torch,
    torch_native=lambda x, w, b: _tnn().layer_norm(x, (x.shape[-1],), w, b, eps=LN_EPS),
    jax=_ln_np,
    autograd=_ln_np,
    sym=_ln_sym,
    description="layer norm with weight/bias (128,), (size/128)x128",
    tags=("2d",),
)


# 2-layer MLP loss: mean((tanh(x @ W1) @ W2 - y)^2); grads w.r.t. x, W1, W2, y
MLP_IN = 64
MLP_HIDDEN = 64


def _make_mlp(size, dtype, rng):
    n = _rows(size, MLP_IN)
    x = rng.standard_normal((n, MLP_IN)).astype(dtype)
    W1 = (rng.standard_normal((MLP_IN, MLP_HIDDEN)) / math.sqrt(MLP_IN)).astype(dtype)
    W2 = (rng.standard_normal((MLP_HIDDEN, 1)) / math.sqrt(MLP_HIDDEN)).astype(dtype)
    y = rng.standard_normal((n, 1)).astype(dtype)
    return [x, W1, W2, y]


def _mlp_torch(x, W1, W2, y):
    d = (x @ W1).tanh() @ W2 - y
    return (d * d).mean()


def _mlp_np(m_, x, W1, W2, y):
    d = m_.dot(m_.tanh(m_.dot(x, W1)), W2) - y
    return m_.mean(d * d)


def _mlp_sym(ns, x, W1, W2, y):
    d = ns.matmul(ns.tanh(ns.matmul(x, W1)), W2) - y
    return _sym_mean(ns, d * d)


MLP_LOSS = Func(
    "mlp_loss", 4, _make_mlp,
    torch=_mlp_torch,
    jax=_mlp_np,
    autograd=_mlp_np,
    sym=_mlp_sym,
    description="mean((tanh(x@W1)@W2 - y)^2), x:(size/64)x64, W1:64x64, W2:64x1, y:(n,1)",
    tags=("2d", "matmul"),
)


ALL = [GELU_TANH, GELU_ERF, MISH, SOFTPLUS, SWISH, RATIONAL6, LENNARD_JONES,
       TANH_SIN_CHAIN, OSCILLATOR8, LOGSUMEXP, LAYERNORM_AFFINE, MLP_LOSS]
BY_NAME = {f.name: f for f in ALL}


def select(only: Optional[str]):
    """``--only`` accepts a comma-separated list of names or substrings."""
    if not only:
        return list(ALL)
    out = []
    for tok in only.split(","):
        tok = tok.strip()
        if tok in BY_NAME:
            hits = [BY_NAME[tok]]
        else:
            hits = [f for f in ALL if tok in f.name]
        if not hits:
            raise SystemExit(f"--only: no benchmark function matches {tok!r}; "
                             f"known: {', '.join(BY_NAME)}")
        for h in hits:
            if h not in out:
                out.append(h)
    return out
