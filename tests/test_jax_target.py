"""target="jax" and sg.to_jax: symgrad's generated forward and backward as a jax.custom_vjp,
checked against jax.grad, the NumPy target (itself checked against mpmath by
test_numerics_corpus) and finite differences; under jax.jit, jax.vmap and grad of grad."""
from __future__ import annotations

import ast
import math
import os
import re
import sys

import numpy
import pytest

import symgrad as sg
from corpus import CORPUS

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))


@pytest.fixture(autouse=True)
def x64():
    """float64 in JAX for these tests (JAX computes float32 by default)."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def _forward_of(record):
    from test_numerics_corpus import symgrad_namespace

    ns = symgrad_namespace()
    names = [f"x{i}" for i in range(record.n_inputs)]
    return eval(f"lambda {', '.join(names)}: fn(ns, {', '.join(names)})",
                {"fn": record.fn, "ns": ns})


def _jax_namespace():
    from types import SimpleNamespace

    # ns.sqrt(2) of a Python number is float32 in symgrad (as in torch): the same here
    return SimpleNamespace(exp=jnp.exp, log=jnp.log,
                           sqrt=lambda x: jnp.sqrt(x if hasattr(x, "dtype") else
                                                   numpy.float32(x)),
                           tanh=jnp.tanh, cosh=jnp.cosh, erf=jax.scipy.special.erf,
                           abs=jnp.abs, pi=math.pi, where=jnp.where)


def test_module_imports_only_jax():
    from layer_norm import LayerNorm

    mod = sg.compile(LayerNorm, *LayerNorm.example_inputs(), target="jax")
    names = set()
    for node in ast.walk(ast.parse(mod.source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    assert names == {"jax"}
    assert "numpy." not in mod.source
    assert "_mean(x, (1,), True)" in mod.source and "jnp.sqrt(" in mod.source
    inputs = LayerNorm.example_inputs()
    ref = sg.compile(LayerNorm, *inputs)
    numpy.testing.assert_allclose(numpy.asarray(mod.forward(*map(jnp.asarray, inputs))),
                                  ref.forward(*inputs), rtol=1e-13)
    g = numpy.ones((3, 4))
    for a, b in zip(mod.backward(jnp.asarray(g), *map(jnp.asarray, inputs)),
                    ref.backward(g, *inputs)):
        numpy.testing.assert_allclose(numpy.asarray(a), b, rtol=1e-12, atol=1e-15)


def test_generating_needs_no_jax(monkeypatch):
    from symgrad import compiler

    monkeypatch.setattr(compiler, "_importable", lambda name: False)
    mod = sg.compile(lambda x: x.sin() * x, numpy.ones(3), target="jax", cache_ok=False)
    assert "jnp.sin(x)" in mod.source
    with pytest.raises(ModuleNotFoundError, match=r"symgrad\[jax\]"):
        mod.forward(numpy.ones(3))


def test_naive_softplus_gradient_is_one_at_1000():
    f = sg.to_jax(lambda x: (1 + x.exp()).log())
    assert float(jax.grad(f)(1000.0)) == 1.0
    assert math.isnan(float(jax.grad(lambda x: jnp.log(1 + jnp.exp(x)))(1000.0)))
    assert float(jax.grad(jax.grad(f))(1000.0)) == 0.0
    s = 1 / (1 + math.exp(-0.3))
    assert float(jax.grad(jax.grad(f))(0.3)) == pytest.approx(s * (1 - s), rel=1e-14)


# jit compiles dominate these tests' time: a few formulas run by default, the rest as slow
FAST = ("softplus_naive", "gelu_erf", "logsumexp3", "lennard_jones", "probit_loglik", "elu_where")


def _floor(w):
    finite = numpy.abs(w[numpy.isfinite(w)])
    return 1e-13 * float(finite.max()) if finite.size else 0.0


def _check_against_numpy_target(record):
    fn = _forward_of(record)
    f = sg.to_jax(fn)
    cols = [numpy.array(c) for c in zip(*record.points)]
    n = len(record.points)
    total = jax.jit(lambda *xs: jnp.sum(f(*xs)))
    grads = jax.grad(total, argnums=tuple(range(len(cols))))(*cols)
    ref = sg.compile(fn, *[numpy.zeros(n) for _ in cols])
    want = ref.backward(numpy.ones(n), *cols)
    for got, w in zip(grads, want):
        numpy.testing.assert_allclose(numpy.asarray(got), w, rtol=1e-10, atol=_floor(w))
    if record.second_order:
        def grad_sum(*xs):
            # weights 1.5, 2.5, ...: the plain sum of logsumexp's gradients is constant
            return sum((i + 1.5) * jnp.sum(g) for i, g in
                       enumerate(jax.grad(total, argnums=tuple(range(len(xs))))(*xs)))
        hess = jax.grad(grad_sum, argnums=tuple(range(len(cols))))(*cols)
        second = ref.grad_module()
        want2 = second.backward(*[(i + 1.5) * numpy.ones(n) for i in range(len(cols))],
                                numpy.ones(n), *cols)
        for got, w in zip(hess, want2[len(want2) - len(cols):]):
            numpy.testing.assert_allclose(numpy.asarray(got), w, rtol=1e-9, atol=_floor(w))


@pytest.mark.parametrize("record", [r for r in CORPUS if r.name in FAST], ids=lambda r: r.name)
def test_corpus_fast_subset_matches_numpy_target(record):
    _check_against_numpy_target(record)


@pytest.mark.slow
@pytest.mark.parametrize("record", [r for r in CORPUS if r.name not in FAST],
                         ids=lambda r: r.name)
def test_corpus_matches_numpy_target(record):
    _check_against_numpy_target(record)


def _moderate(record):
    return [p for p in record.points if all(1e-3 < abs(v) <= 1.0 for v in p)]


@pytest.mark.parametrize("record", [r for r in CORPUS if r.name in FAST and _moderate(r)],
                         ids=lambda r: r.name)
def test_corpus_matches_jax_grad_first_and_second_order(record):
    ns = _jax_namespace()
    cols = [numpy.array(c) for c in zip(*_moderate(record))]
    f = sg.to_jax(_forward_of(record))
    argnums = tuple(range(len(cols)))

    def ours(*xs):
        return jnp.sum(f(*xs))

    def theirs(*xs):
        return jnp.sum(record.fn(ns, *xs))

    numpy.testing.assert_allclose(ours(*cols), theirs(*cols), rtol=1e-10, atol=1e-12)
    for a, b in zip(jax.grad(ours, argnums)(*cols), jax.grad(theirs, argnums)(*cols)):
        numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    # reverse over reverse: a custom_vjp function has no forward mode (jax.hessian is
    # jacfwd(jacrev))
    ha = jax.jacrev(jax.grad(ours, argnums), argnums)(*cols)
    hb = jax.jacrev(jax.grad(theirs, argnums), argnums)(*cols)
    for row_a, row_b in zip(ha, hb):
        for a, b in zip(row_a, row_b):
            numpy.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_float32_matches_numpy_target():
    jax.config.update("jax_enable_x64", False)
    x = numpy.linspace(-30, 30, 13).astype(numpy.float32)

    def fn(x):
        return x * (1 + x.exp()).log().tanh()

    f = sg.to_jax(fn)
    g = jax.jit(jax.grad(lambda x: jnp.sum(f(x))))(x)
    assert g.dtype == jnp.float32
    ref = sg.compile(fn, numpy.zeros(13, numpy.float32))
    numpy.testing.assert_allclose(numpy.asarray(g), ref.backward(numpy.ones_like(x), x)[0],
                                  rtol=2e-6, atol=1e-30)


# --------------------------------------------------------------------------- shapes
def _broadcast(x, w, b):
    return (x * w + b).tanh()


def _two_outputs(x, y):
    return (x * y).sin(), (x - y).exp().sum(-1)


def _reductions(x):
    return x.logsumexp(1).sum() + x.amax(0).mean() + (x * x).mean(1).sqrt().sum() + \
        x.max(1).values.sum()


def _matmul(a, b, c):
    return (a @ b).tanh() @ c


def _batched_matmul(a, b, v):
    return ((a @ b) @ v).sum(0)


def _movement(x):
    return (x.permute(1, 0).reshape(-1)[1:9] * x[0].repeat(2)).cumsum(0).flip(0)


def _j_reductions(x):
    return (jax.scipy.special.logsumexp(x, 1).sum() + x.max(0).mean()
            + jnp.sqrt((x * x).mean(1)).sum() + x.max(1).sum())


JAX_CASES = [
    ("broadcasting", _broadcast, lambda x, w, b: jnp.tanh(x * w + b), [(3, 4), (4,), (3, 1)]),
    ("two_outputs", _two_outputs, lambda x, y: (jnp.sin(x * y), jnp.exp(x - y).sum(-1)),
     [(2, 3), (3,)]),
    ("reductions", _reductions, _j_reductions, [(3, 5)]),
    ("matmul", _matmul, lambda a, b, c: jnp.tanh(a @ b) @ c, [(3, 4), (4, 5), (5,)]),
    ("batched_matmul", _batched_matmul, lambda a, b, v: ((a @ b) @ v).sum(0),
     [(2, 3, 4), (4, 2), (2,)]),
    ("movement", _movement,
     lambda x: jnp.flip(jnp.cumsum(x.T.reshape(-1)[1:9] * jnp.tile(x[0], 2), 0), 0), [(3, 4)]),
]


@pytest.mark.parametrize("name,fn,ref,shapes", [
    pytest.param(*c, marks=() if c[0] == "broadcasting" else pytest.mark.slow)
    for c in JAX_CASES], ids=[c[0] for c in JAX_CASES])
def test_shapes_match_jax_grad_first_and_second_order(name, fn, ref, shapes):
    rng = numpy.random.default_rng(0)
    args = [rng.standard_normal(s) for s in shapes]
    f = sg.to_jax(fn)
    argnums = tuple(range(len(args)))

    def scalar(g):
        def s(*xs):
            out = g(*xs)
            out = out if isinstance(out, tuple) else (out,)
            return sum(jnp.sum(o * (i + 1.5)) for i, o in enumerate(out))
        return s

    ours, theirs = scalar(f), scalar(ref)
    numpy.testing.assert_allclose(jax.jit(ours)(*args), theirs(*args), rtol=1e-12)
    ga = jax.jit(jax.grad(ours, argnums))(*args)
    gb = jax.grad(theirs, argnums)(*args)
    for a, b in zip(ga, gb):
        numpy.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)

    def second(g):
        return lambda *xs: sum(jnp.sum(v * v) for v in jax.grad(g, argnums)(*xs))

    for a, b in zip(jax.grad(second(ours), argnums)(*args),
                    jax.grad(second(theirs), argnums)(*args)):
        numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    from jax.test_util import check_grads

    check_grads(ours, args, order=2, modes=["rev"], atol=1e-5, rtol=1e-5)


def test_jit_and_vmap():
    def fn(x, w):
        return ((x * w).sum(-1) + (1 + x.exp()).log().mean(-1)).tanh()

    f = sg.to_jax(fn)

    def per_example(x, w):
        return f(x, w)

    batch = numpy.random.default_rng(1).standard_normal((6, 4, 3))
    w = numpy.random.default_rng(2).standard_normal(3)
    out = jax.jit(jax.vmap(per_example, in_axes=(0, None)))(batch, w)
    assert out.shape == (6, 4)
    ref = sg.compile(fn, numpy.zeros((4, 3)), numpy.zeros(3))
    for i in range(6):
        numpy.testing.assert_allclose(out[i], ref.forward(batch[i], w), rtol=1e-13)
    grads = jax.jit(jax.vmap(jax.grad(lambda x, w: f(x, w).sum(), argnums=(0, 1)),
                             in_axes=(0, None)))(batch, w)
    for i in range(6):
        gx, gw = ref.backward(numpy.ones(4), batch[i], w)
        numpy.testing.assert_allclose(grads[0][i], gx, rtol=1e-12)
        numpy.testing.assert_allclose(grads[1][i], gw, rtol=1e-12)


def test_integer_inputs_get_float0_cotangents():
    def pick(x, idx):
        return x.gather(1, idx).exp()

    f = sg.to_jax(pick)
    x = numpy.random.default_rng(3).standard_normal((3, 4))
    idx = numpy.array([[0, 3], [1, 1], [2, 0]])
    g = jax.grad(lambda x: f(x, idx).sum())(x)
    want = numpy.zeros((3, 4))
    for r, row in enumerate(idx):
        for c in row:
            want[r, c] += math.exp(x[r, c])
    numpy.testing.assert_allclose(g, want, rtol=1e-13)


# --------------------------------------------------------------------------- training
def _mlp_loss(x, W1, b1, W2, b2, y):
    h = (x @ W1 + b1).tanh()
    return ((h @ W2 + b2 - y) ** 2).mean()


def _jax_mlp_loss(x, W1, b1, W2, b2, y):
    h = jnp.tanh(x @ W1 + b1)
    return jnp.mean((h @ W2 + b2 - y) ** 2)


def test_training_loop_losses_match_jax_grad():
    rng = numpy.random.default_rng(0)
    x, y = rng.standard_normal((32, 3)), rng.standard_normal((32, 1))
    init = [rng.standard_normal((3, 8)) * 0.5, numpy.zeros(8),
            rng.standard_normal((8, 1)) * 0.5, numpy.zeros(1)]
    loss_sg = sg.to_jax(_mlp_loss)
    runs = []
    for loss in (loss_sg, _jax_mlp_loss):
        @jax.jit
        def step(params):
            value, grads = jax.value_and_grad(
                lambda p: loss(x, p[0], p[1], p[2], p[3], y))(params)
            return value, [p - 0.1 * g for p, g in zip(params, grads)]

        params, losses = list(init), []
        for _ in range(25):
            value, params = step(params)
            losses.append(float(value))
        runs.append(losses)
    numpy.testing.assert_allclose(runs[0], runs[1], rtol=1e-11)
    assert runs[0][-1] < 0.7 * runs[0][0]


def _more_ops(x, y):
    a = x.diagonal(0, 0, 1).diag_embed() + x.tril(-1) + x.roll(1, 0)
    b = x.tile((1, 2))[:, 1:5] + x.repeat_interleave(2, dim=1)[:, ::2]
    c = (x.flip(1).cumsum(1) * a).unsqueeze(0).squeeze(0)
    d = (x + 2.0).prod(1, keepdim=True) * y.unsqueeze(0)
    e = x.take_along_dim(x.argsort(dim=1), dim=1)
    return (a * b + c * d).sum() + (e * e.sin()).sum() + (x @ y).logsumexp(0)


def test_more_structural_ops_match_numpy_target():
    """diagonal / diag_embed / tril / roll / tile / repeat_interleave / negative-step slices /
    cumsum / flip / prod / argsort + take_along_dim / logsumexp through jit(grad)."""
    rng = numpy.random.default_rng(2)
    x, y = rng.standard_normal((4, 4)), rng.standard_normal(4)
    f = sg.to_jax(_more_ops)
    ref = sg.compile(_more_ops, x, y)
    numpy.testing.assert_allclose(f(x, y), ref.forward(x, y), rtol=1e-12)
    gx, gy = jax.jit(jax.grad(f, argnums=(0, 1)))(x, y)
    wx, wy = ref.backward(numpy.ones(()), x, y)
    numpy.testing.assert_allclose(gx, wx, rtol=1e-10, atol=1e-12)
    numpy.testing.assert_allclose(gy, wy, rtol=1e-10, atol=1e-12)


EXAMPLES = ["black_scholes:BlackScholesCall", "cross_entropy:CrossEntropy",
            "damped_oscillator:DampedOscillator", "gelu:GELU", "layer_norm:LayerNorm",
            "lennard_jones:LennardJones", "mish:Mish", "mlp:MLPLoss"]


@pytest.mark.slow
@pytest.mark.parametrize("spec", EXAMPLES)
def test_example_functions_match_numpy_target(spec):
    """The example Functions through sg.to_jax under jit(grad): forward and gradients equal
    the NumPy target's; second order by finite differences (check_grads)."""
    import importlib.util

    from jax.test_util import check_grads

    mod_name, cls = spec.split(":")
    spec_ = importlib.util.spec_from_file_location(mod_name, os.path.join(ROOT, "examples",
                                                                         f"{mod_name}.py"))
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    F = getattr(mod, cls)
    args = [numpy.asarray(a) for a in F.example_inputs()]
    floats = tuple(i for i, a in enumerate(args) if a.dtype.kind == "f")
    f = sg.to_jax(F)
    ref = sg.compile(F, *F.example_inputs())
    out = f(*args)
    numpy.testing.assert_allclose(out, ref.forward(*args), rtol=1e-12)
    grads = jax.jit(jax.grad(lambda *a: jnp.sum(f(*a)), argnums=floats))(*args)
    want = ref.backward(numpy.ones(numpy.shape(out)), *args)
    for g, i in zip(grads, floats):
        numpy.testing.assert_allclose(g, want[i], rtol=1e-10, atol=1e-12)

    def partial(*fl):
        full = list(args)
        for i, v in zip(floats, fl):
            full[i] = v
        return jnp.sum(f(*full))
    # (finite differences of r**-12's derivatives at r ~ 1 are good to ~3e-5 relative)
    check_grads(partial, [args[i] for i in floats], order=2, modes=["rev"], atol=1e-5,
                rtol=1e-4)


def test_gelu_erf_gradient_shares_the_exp_and_stays_accurate():
    """The JAX target prints erfc(u) next to exp(-u**2) as _erfc_exp(u, that exp) (one exp for
    XLA, not erfc's own exp and erf); float32 gradients of x*Phi(x) and erfc itself match
    mpmath to a few ulp (relative to the size of the terms) across [-40, 10], as XLA's erfc;
    float64 keeps XLA's erfc (the helper's fit is float32-accurate only): 1.7e-13 at -34, the
    rounding of x*x inside exp."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40

    def gelu(x):
        return 0.5 * x * (1.0 + sg.erf(x * 0.7071067811865476))

    src = sg.compile(gelu, numpy.zeros(4, numpy.float32), target="jax").source
    assert "_erfc_exp(" in src and "def _erfc_exp" in src
    f = sg.to_jax(gelu)
    xs = numpy.concatenate([numpy.linspace(-40, 10, 4001), -numpy.logspace(-4, 1.6, 400)])
    grad = jax.jit(jax.grad(lambda x: jnp.sum(f(x))))
    for dtype, tol in ((numpy.float32, 1e-5), (numpy.float64, 5e-13)):
        if dtype == numpy.float64 and not jax.config.jax_enable_x64:
            continue
        x = xs.astype(dtype)
        got = numpy.asarray(grad(jnp.asarray(x)), numpy.float64)
        ref = numpy.array([float(mpmath.ncdf(mpmath.mpf(float(v))) +
                                 mpmath.mpf(float(v)) * mpmath.npdf(mpmath.mpf(float(v))))
                           for v in x])
        # Phi(x) + x phi(x) cancels for x << 0: the error is relative to the terms' size
        scale = numpy.array([float(mpmath.ncdf(mpmath.mpf(float(v))) +
                                   abs(mpmath.mpf(float(v))) * mpmath.npdf(mpmath.mpf(float(v))))
                             for v in x])
        ok = scale > 1e4 * numpy.finfo(dtype).tiny    # no subnormal intermediates
        err = numpy.abs(got - ref)[ok] / scale[ok]
        assert err.max() < tol, (dtype, x[ok][err.argmax()], err.max())
    # at -10 (Phi + x phi ~ 7.6e-24 in float32): a few ulp
    g10 = numpy.asarray(grad(jnp.full((1,), -10.0, jnp.float32)))[0]
    ref10 = float(mpmath.ncdf(-10) - 10 * mpmath.npdf(-10))
    assert abs(g10 - ref10) <= 1e-5 * abs(ref10) + 1e-30


def test_erfc_exp_helper_matches_mpmath_float32():
    from jax.scipy import special

    mpmath = pytest.importorskip("mpmath")
    module = sg.compile(lambda x: 0.5 * x * (1.0 + sg.erf(x * 0.7071067811865476)),
                        numpy.zeros(4, numpy.float32), target="jax").raw
    z = numpy.concatenate([numpy.linspace(-6, 9.3, 20001), [0.0, 1e-8, -1e-8]]).astype(numpy.float32)
    got = numpy.asarray(module._erfc_exp(jnp.asarray(z), jnp.exp(-jnp.asarray(z) ** 2)), numpy.float64)
    xla = numpy.asarray(special.erfc(jnp.asarray(z)), numpy.float64)
    ref = numpy.array([float(mpmath.erfc(float(v))) for v in z])
    rel, rel_xla = numpy.abs(got / ref - 1), numpy.abs(xla / ref - 1)
    # the float32 rounding of z*z inside exp dominates far out (XLA's erfc has it too)
    assert rel.max() <= max(2 * rel_xla.max(), 1e-6), (rel.max(), rel_xla.max())
    assert rel[numpy.abs(z) < 2].max() < 1e-6


def test_erfc_shares_only_an_exp_of_minus_its_argument_squared():
    from symgrad.emit.frameworks import _share_erfc_exp

    def share(code):
        lines = [("t0", "0.7*x0", None, None), ("g", code, None, None)]
        return _share_erfc_exp(lines)[1][1]

    # 0.7**2 = 0.49: exp(-0.49*x0**2) is exp(-t0**2), through t0's line
    assert share("_erfc(-t0) + numpy.exp(-0.49*(x0*x0))") == \
        "_erfc_exp(-t0, numpy.exp(-0.49*(x0*x0))) + numpy.exp(-0.49*(x0*x0))"
    for other in ("_erfc(-t0) + numpy.exp(-0.5*(x0*x0))",        # another exp
                  "_erfc(-t0) + numpy.exp(_softplus(x0))",         # a helper: not read
                  "_erfc(-t0)*x0"):                               # no exp
        assert share(other) == other


def test_shared_denominators_become_reciprocals(monkeypatch):
    """A name the routine divides by twice or more is multiplied by its reciprocal, computed
    once (XLA never duplicates a division into several fusions, so each shared one ended a
    fusion: oscillator8's backward went from 39 fusions to 21, docs/pytorch-and-jax.md).
    The numbers match jax.grad of the naive forward, and IEEE's special values (x/0, 0/0,
    x/inf) come out as the divisions give them. (It failed before: no `_inv` name.)"""
    def f(a, b, c):
        return (a / c + b / c) * sg.exp(a / b) + a * b / c

    mod = sg.compile(f, numpy.ones(5), numpy.ones(5), numpy.ones(5), target="jax")
    assert re.search(r"^    (c|b)_inv = 1/(c|b)$", mod.source, flags=re.MULTILINE), mod.source
    backward = mod.source[mod.source.index("def backward"):]
    steps = re.findall(r"^    \w+ = (.*)$", backward, flags=re.MULTILINE)      # (not the docstring)
    assert sum(len(re.findall(r"/c\b", c)) for c in steps) <= 1, steps   # c_inv = 1/c only

    def naive(a, b, c):
        return jnp.sum((a / c + b / c) * jnp.exp(a / b) + a * b / c)

    rng = numpy.random.default_rng(0)
    a, b, c = (jnp.asarray(rng.uniform(0.5, 2.0, 5)) for _ in range(3))
    got = mod.backward(jnp.ones(5), a, b, c)
    want = jax.grad(naive, (0, 1, 2))(a, b, c)
    for u, v in zip(got, want):
        numpy.testing.assert_allclose(numpy.asarray(u), numpy.asarray(v), rtol=1e-12,
                                      atol=1e-14)
    # special values (c = +-0: x/0 = inf, 0/0 = nan; c = +-inf: x/inf = 0) come out as the
    # module without reciprocals gives them
    from symgrad.emit import frameworks

    monkeypatch.setattr(frameworks, "RECIPROCAL_MIN", 10 ** 9)
    plain = sg.compile(f, numpy.ones(5), numpy.ones(5), numpy.ones(5), target="jax",
                       cache_ok=False)
    assert "_inv" not in plain.source
    a = jnp.asarray([1.0, 0.0, 1.0, -2.0, 1.0])
    b = jnp.asarray([1.0, 1.0, 1.0, 1.0, 1.0])
    c = jnp.asarray([0.0, 0.0, jnp.inf, -0.0, -jnp.inf])
    pairs = [(mod.forward(a, b, c), plain.forward(a, b, c))]
    pairs += list(zip(mod.backward(jnp.ones(5), a, b, c), plain.backward(jnp.ones(5), a, b, c)))
    for u, v in pairs:
        u, v = numpy.asarray(u), numpy.asarray(v)
        numpy.testing.assert_array_equal(numpy.isnan(u), numpy.isnan(v))
        numpy.testing.assert_array_equal(numpy.isinf(u), numpy.isinf(v))
        numpy.testing.assert_allclose(u, v, rtol=1e-15, atol=0)


def test_shared_reciprocals_leave_lambdas_and_redefined_inputs_alone():
    from symgrad.emit.frameworks import _shared_reciprocals

    lines = [("t0", "x/h + y/h", "", []), ("t1", "(lambda h: 1/h + 2/h)(t0)", "", []),
             ("t2", "t0/x + 1/x", "", [])]
    out = _shared_reciprocals(lines, {"x", "y"})
    assert out[0] == ("x_inv", "1/x", "", [])
    assert [c for _, c, _, _ in out[1:]] == ["x/h + y/h", "(lambda h: 1/h + 2/h)(t0)",
                                             "t0 * x_inv + x_inv"]
    # an input a step redefines: its divisions read different values, left as they are
    lines = [("t0", "a/x + b/x", "", []), ("x", "t0 + 1", "", []), ("t1", "a/x", "", [])]
    assert _shared_reciprocals(lines, {"x", "a", "b"}) == lines
    # an integer name (1/n of an int64 n is float64: x * (1/n) would promote a float32 x)
    lines = [("t0", "a/n + b/n", "", [])]
    assert _shared_reciprocals(lines, {"n", "a", "b"}, skip={"n"}) == lines
    assert _shared_reciprocals(lines, {"n", "a", "b"})[0] == ("n_inv", "1/n", "", [])
