"""Random-program differential fuzzing of `sg.to_torch(F)` and `sg.to_jax(F)` against torch.

The programs are tests/fuzz_programs.py's (a DAG over 1-3 inputs, float32 or float64, some
mixed); the oracle, the tolerances and the extreme-input rule ("never worse than torch": where
torch is finite we match it) are tests/test_fuzz_differential.py's `check_seed`, reused here.
Each program, written in torch's names through `m`, becomes a forward-only `sg.Function` and

- "to_torch": `G = sg.to_torch(F)`; `G.apply` on torch tensors that require grad: forward
  values, `torch.autograd.grad` of loss = sum(out_i * w_i), and for every third seed the
  second order (`create_graph=True`, then the gradient of grad . v);
- "to_jax": `f = sg.to_jax(F)` on jax arrays (jax_enable_x64, so float64 stays float64):
  values, `jax.grad` (and `jax.vjp`, which must agree with it), the second order as the
  gradient of a `jax.grad`, and the same gradients under `jax.jit`.

Run more seeds: `SG_FUZZ_SEEDS=1500 python -m pytest -q -m slow tests/test_fuzz_frameworks.py`.
"""
import os
import shutil

import numpy as np
import pytest

import symgrad as sg
from fuzz_programs import generate

torch = pytest.importorskip("torch")
from test_fuzz_differential import _close, _repro, _torch_run  # noqa: E402  (needs torch)

FAST = 6
FAST_EXTREME = 3
# the slow ranges CI runs (a JAX seed compiles three XLA programs and a second-order module:
# seconds each on 2 cores, so JAX takes every 4th); SG_FUZZ_SEEDS=1500 for a long local run
SLOW = int(os.environ.get("SG_FUZZ_SEEDS", "60"))


def _modes(seed):
    return ("to_torch", "to_jax") if seed % 4 == 0 else ("to_torch",)


def _jax():
    jax = pytest.importorskip("jax")
    return jax, pytest.importorskip("jax.numpy")


try:
    import jax as _jax_module
except ImportError:          # the to_jax mode skips; the to_torch mode runs
    _jax_module = None


@pytest.fixture
def x64():
    """float64 in JAX while a test runs (JAX computes float32 by default)."""
    if _jax_module is None:
        yield
        return
    before = _jax_module.config.jax_enable_x64
    _jax_module.config.update("jax_enable_x64", True)
    yield
    _jax_module.config.update("jax_enable_x64", before)


def _function(prog):
    fn = prog.function()

    class Program(sg.Function):
        @staticmethod
        def forward(ctx, *args):
            return fn(sg, *args)

    return Program


def _to_torch_run(prog, ws, vs, second, target=None):
    G = sg.to_torch(_function(prog), target=target)
    xs = [torch.tensor(x, requires_grad=True) for x in prog.inputs]
    outs = G.apply(*xs)
    if not isinstance(outs, tuple):
        outs = (outs,)
    loss = sum((o * torch.tensor(w, dtype=o.dtype)).sum() for o, w in zip(outs, ws))
    gs = torch.autograd.grad(loss, xs, allow_unused=True, create_graph=second)
    res = {"out": [o.detach().numpy() for o in outs],
           "grad": [np.zeros(x.shape) if g is None else g.detach().numpy()
                    for g, x in zip(gs, prog.inputs)]}
    if second:
        terms = [(g * torch.tensor(v, dtype=g.dtype)).sum() for g, v in zip(gs, vs)
                 if g is not None and g.requires_grad]
        hv = torch.autograd.grad(sum(terms), xs, allow_unused=True) if terms else [None] * len(xs)
        res["hvp"] = [np.zeros(x.shape) if h is None else h.detach().numpy()
                      for h, x in zip(hv, prog.inputs)]
    return res


def _to_jax_run(prog, ws, vs, second):
    jax, jnp = _jax()
    f = sg.to_jax(_function(prog))
    xs = [jnp.asarray(x) for x in prog.inputs]
    n = len(xs)

    def outputs(*a):
        o = f(*a)
        return o if isinstance(o, tuple) else (o,)

    def loss(*a):
        return sum(jnp.sum(o * jnp.asarray(w, dtype=o.dtype)) for o, w in zip(outputs(*a), ws))

    argnums = tuple(range(n))
    outs = outputs(*xs)
    grad = jax.grad(loss, argnums=argnums)
    gs = grad(*xs)
    res = {"out": [np.asarray(o) for o in outs], "grad": [np.asarray(g) for g in gs]}
    # jax.vjp with the weights as cotangents: the same gradients
    o_vjp, pullback = jax.vjp(outputs, *xs)
    vjp = pullback(tuple(jnp.asarray(w, dtype=o.dtype) for o, w in zip(o_vjp, ws)))
    res["vjp"] = [np.asarray(g) for g in vjp]
    # under jax.jit: values and gradients
    res["jit out"] = [np.asarray(o) for o in jax.jit(outputs)(*xs)]
    res["jit grad"] = [np.asarray(g) for g in jax.jit(grad)(*xs)]
    if second:
        def dot(*a):
            return sum(jnp.sum(g * jnp.asarray(v, dtype=g.dtype)) for g, v in zip(grad(*a), vs))

        hvp = jax.grad(dot, argnums=argnums)
        res["hvp"] = [np.asarray(h) for h in hvp(*xs)]
        res["jit hvp"] = [np.asarray(h) for h in jax.jit(hvp)(*xs)]
    return res


def _to_torch_c_run(prog, ws, vs, second):
    """sg.to_torch pinned to the fused C module (the default on CPU tensors outside the
    tests, which pin the torch target): its create_graph backward is the torch target's."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler")
    return _to_torch_run(prog, ws, vs, second, target="c")


_RUNS = {"to_torch": _to_torch_run, "to_torch_c": _to_torch_c_run, "to_jax": _to_jax_run}
_REF_KEY = {"vjp": "grad", "jit out": "out", "jit grad": "grad", "jit hvp": "hvp"}


def check_seed(seed, modes=("to_torch", "to_jax"), extreme=False):
    """check_seed of test_fuzz_differential for the framework targets: the same program,
    weights, second-order seeds and tolerances, compared with torch eager autograd."""
    prog = generate(seed, torch, extreme)
    rng = np.random.default_rng(10_000 + seed)
    ref0 = prog.function()(torch, *[torch.tensor(x, dtype=torch.float64) for x in prog.inputs])
    ws = [rng.standard_normal(tuple(o.shape)) for o in ref0]
    vs = [rng.standard_normal(x.shape) for x in prog.inputs]
    # extreme inputs hold exact zeros, so a tensor exponent `** m.tanh(y)` can be exactly 0,
    # where torch's second order is not exact: its pow_backward_self masks an exponent of 0,
    # and the mask's derivative is 0 (exp(a) ** b is exp(a*b) in symgrad: exact); seed 606,
    # test_pow_exponent_zero_second_order_is_exact, docs/runtime.md "Differences from torch"
    second = seed % 3 == 0 and not (extreme and prog.dtype == "float32") and \
        not (extreme and "** m.tanh(" in prog.source)
    ref = _torch_run(prog, None, ws, vs, second)
    ref64 = _torch_run(prog, "float64", ws, vs, second)
    if _jax_module is None:
        modes = [m for m in modes if m != "to_jax"] or _jax()   # skips where only jax ran
    for mode in modes:
        try:
            got = _RUNS[mode](prog, ws, vs, second)
        except Exception as e:
            raise AssertionError(f"[{mode}] seed {seed}{' extreme' if extreme else ''} raised "
                                 f"{type(e).__name__}: {e}\n{_repro(prog)}") from e
        for key, values in got.items():
            base = _REF_KEY.get(key, key)
            assert len(values) == len(ref[base]), (mode, seed, key)
            for i, (g, r, r64) in enumerate(zip(values, ref[base], ref64[base])):
                _close(f"[{mode}] seed {seed}{' extreme' if extreme else ''} {key}[{i}]", g, r,
                       r64, prog.dtype, prog, extreme)
        for key in ("out", "grad"):      # dtypes: torch's, output by output, input by input
            for i, (o, r) in enumerate(zip(got[key], ref[key])):
                if key == "grad" and not np.any(r):
                    continue            # an unused input: a float64 zeros placeholder
                assert o.dtype == r.dtype, (f"[{mode}] seed {seed}: {key}[{i}] dtype {o.dtype} "
                                            f"!= torch's {r.dtype}\n{_repro(prog)}")


@pytest.mark.parametrize("seed", range(FAST))
def test_fuzz_to_torch(seed):
    check_seed(seed, modes=("to_torch",))


@pytest.mark.parametrize("seed", range(0, FAST, 2))
def test_fuzz_to_torch_on_c(seed):
    check_seed(seed, modes=("to_torch_c",))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(FAST, FAST + SLOW, 5))
def test_fuzz_to_torch_on_c_many(seed):
    check_seed(seed, modes=("to_torch_c",))


@pytest.mark.parametrize("seed", range(FAST))
def test_fuzz_to_jax(seed, x64):
    check_seed(seed, modes=("to_jax",))


@pytest.mark.parametrize("seed", range(FAST_EXTREME))
def test_fuzz_frameworks_extreme_inputs(seed, x64):
    """Inputs up to 1e3 with exact zeros: never worse than torch."""
    check_seed(seed, modes=("to_torch", "to_jax"), extreme=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(FAST, FAST + SLOW))
def test_fuzz_frameworks_many(seed, x64):
    check_seed(seed, modes=_modes(seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(FAST_EXTREME, FAST_EXTREME + SLOW // 2))
def test_fuzz_frameworks_many_extreme(seed, x64):
    check_seed(seed, modes=_modes(seed), extreme=True)


# ---- regressions the fuzzer found (each failed before its fix) -------------------------------

def test_jax_second_order_of_prod(x64):
    """Fuzz seeds 0 and 9 (to_jax): the second order of `prod` along a dim raised CompileError
    "no JAX version of the helper _prod_others_vjp" (the NumPy helper writes in place, so it
    was not translated); the JAX module has an out-of-place one now. Checked against torch,
    with a zero in the product (no division)."""
    jax, jnp = _jax()

    def F(x):
        return x.tanh().prod(dim=-2, keepdim=True).sum() + (x * x).prod(1).sum()

    x = np.array([[0.3, -1.2, 0.0], [0.7, 0.5, -0.4], [1.1, -0.2, 0.9]])
    v = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0], [2.0, 0.5, 1.5]])
    f = sg.to_jax(F)
    hvp = jax.grad(lambda a: jnp.sum(jax.grad(f)(a) * v))(jnp.asarray(x))
    t = torch.tensor(x, requires_grad=True)
    (g,) = torch.autograd.grad(F(t), t, create_graph=True)
    (ref,) = torch.autograd.grad((g * torch.tensor(v)).sum(), t)
    np.testing.assert_allclose(np.asarray(hvp), ref.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(f))(jnp.asarray(x))),
                               g.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("framework", ["to_torch", "to_jax"])
def test_framework_output_dtype_follows_its_own_inputs(framework, x64):
    """Fuzz seeds 9, 15, 18, 20 (mixed float32 / float64 inputs): an output computed from the
    float32 input alone came back float64 from sg.to_torch and sg.to_jax (the module computes
    in the promotion of all its inputs); torch's is float32, and so is the runtime's
    (test_fuzz_differential.test_function_output_dtype_follows_its_own_inputs)."""
    def F(a, b):
        return (a * 2).exp(), a * b

    a = np.arange(1, 4, dtype=np.float32) / 4
    b = np.arange(2, 5, dtype=np.float64)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ref = F(ta, tb)
    ref_g = torch.autograd.grad(ref[0].sum() + ref[1].sum(), (ta, tb))
    if framework == "to_torch":
        xa, xb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        got = sg.to_torch(F).apply(xa, xb)
        got_g = torch.autograd.grad(got[0].sum() + got[1].sum(), (xa, xb))
        got = [o.detach().numpy() for o in got]
        got_g = [g.numpy() for g in got_g]
    else:
        jax, jnp = _jax()
        f = sg.to_jax(F)
        got = [np.asarray(o) for o in f(jnp.asarray(a), jnp.asarray(b))]
        got_g = [np.asarray(g) for g in jax.grad(
            lambda x, y: sum(jnp.sum(o) for o in f(x, y)), argnums=(0, 1))(jnp.asarray(a),
                                                                            jnp.asarray(b))]
    assert [o.dtype for o in got] == [np.float32, np.float64]
    assert [g.dtype for g in got_g] == [np.float32, np.float64]
    for g, r in zip(got + got_g, list(ref) + list(ref_g)):
        np.testing.assert_allclose(g, r.detach().numpy(), rtol=1e-6)


@pytest.mark.slow
def test_second_order_compile_of_sigmoid_sums_finishes():
    """Fuzz seed 132 (to_torch; the NumPy target's second order too): compiling the
    second-order module never finished (over 7 minutes, killed): the stabilizer's
    sigmoid-difference rule (c*sigmoid(-u) - c*sigmoid(u) -> -c*tanh(u/2)) tested each pair
    of terms with sympy.expand, whose deep pass multiplied out the products of sums inside
    the adjoint's function arguments. It expands only small candidates now (rewrites._cancels);
    the values match torch (and an alarm turns a hang into a failure)."""
    import signal

    def hang(*_):
        raise TimeoutError("seed 132's second order still compiling after 240 s")

    before = signal.signal(signal.SIGALRM, hang)
    signal.alarm(240)
    try:
        check_seed(132, modes=("to_torch",))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def test_sigmoid_difference_rule_still_applies():
    """The guard above keeps the rule: a difference of sigmoids of opposite arguments with a
    common factor (as a product of sums, expanded differently) is still -c*tanh(u/2)."""
    import sympy

    from symgrad.rewrites import _sigmoid_difference, sigmoid

    x, y = sympy.symbols("x y")
    c = (x + 1) * (y + 2)
    node = sympy.Add(c * sigmoid(x), -sympy.expand(c) * sigmoid(-x), evaluate=False)
    out = _sigmoid_difference(node)
    assert out is not None and out.has(sympy.tanh) and not out.has(sigmoid)


def test_torch_target_folded_value_keeps_its_broadcast_shape():
    """Fuzz seed 490 (extreme run, to_torch): `where(v1 > -0.08, x1, c)` with v1 > 0 provably
    folds to x1; the torch target printed that output as `torch.clone(x1)`, shape (1,) where
    torch's (and the NumPy and JAX targets') is the broadcast shape (3,). It broadcasts now,
    as the NumPy printer does for a folded value."""
    def program(m, x0, x1):
        v1 = x0.tanh().exp().sqrt()
        return m.where(v1 > -0.0808, x1, -0.65), m.where(v1 > 0, x1 * 2, x0) + x0

    def F(x0, x1):
        return program(sg, x0, x1)

    x0 = torch.tensor([638.2, 697.6, 0.0], dtype=torch.float64)
    a1 = torch.tensor([1.41], dtype=torch.float64, requires_grad=True)
    b1 = torch.tensor([1.41], dtype=torch.float64, requires_grad=True)
    got = sg.to_torch(F).apply(x0, a1)
    ref = program(torch, x0, b1)
    w = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    for g, r in zip(got, ref):
        assert g.shape == r.shape == (3,)
        torch.testing.assert_close(g, r)
    (ga,) = torch.autograd.grad(sum((o * w).sum() for o in got), a1)
    (gb,) = torch.autograd.grad(sum((o * w).sum() for o in ref), b1)
    torch.testing.assert_close(ga, gb)


def test_pow_exponent_zero_second_order_is_exact(x64):
    """Fuzz seed 606 (extreme run; the NumPy target's too): the mixed second derivative of
    exp(a) ** b at b = 0 is exactly 1 (it is exp(a*b)); torch's is 0, because its
    pow_backward_self returns 0 where the exponent is 0 and the derivative of that mask is 0.
    Not a bug of ours: a documented "exact" difference (docs/runtime.md), and the extreme
    fuzz mode skips the second order of programs with a tensor exponent."""
    jax, jnp = _jax()

    def F(a, b):
        return a.exp() ** b

    def mixed(f):
        a = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
        b = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
        ga, _ = torch.autograd.grad(f(a, b), (a, b), create_graph=True)
        return torch.autograd.grad(ga, b)[0].item()

    assert mixed(F) == 0.0                           # torch's masked pow
    assert mixed(sg.to_torch(F).apply) == pytest.approx(1.0, rel=1e-14)
    f = sg.to_jax(F)
    assert float(jax.grad(jax.grad(f, 0), 1)(0.5, 0.0)) == pytest.approx(1.0, rel=1e-14)
    h = 1e-5                                         # finite differences agree with 1
    d = (np.exp(0.5 * h) * h - np.exp(-0.5 * h) * -h) / (2 * h)
    assert d == pytest.approx(1.0, rel=1e-8)


def test_to_torch_backward_of_a_float32_output_of_mixed_inputs():
    """Fuzz seed 804 (extreme run, to_torch; failed before the per-output dtype fix too):
    with float32 and float64 inputs, forward_saving kept a float32 intermediate that
    backward_saved's matmul adjoint met with a float64 gradient: torch's "expected m1 and m2
    to have the same dtype". sg.to_torch saves the values in the promoted dtype now, and
    hands the backward each gradient in the dtype the module computed its output in."""
    check_seed(804, modes=("to_torch",), extreme=True)
    a = torch.tensor(np.arange(12.0).reshape(4, 3) / 7, dtype=torch.float32, requires_grad=True)
    b = torch.tensor(np.ones((3, 4, 3)), dtype=torch.float64, requires_grad=True)

    def F(x, y):
        return x @ x.reshape(3, 4), (x * y).sum()

    out = sg.to_torch(F).apply(a, b)
    assert out[0].dtype == torch.float32 and out[1].dtype == torch.float64
    ga, gb = torch.autograd.grad(out[0].sum() + out[1], (a, b))
    ra, rb = torch.autograd.grad(sum(o.sum() for o in F(a, b)), (a, b))
    assert ga.dtype == torch.float32 and gb.dtype == torch.float64
    torch.testing.assert_close(ga, ra)
    torch.testing.assert_close(gb, rb)


def test_fuzz_seed_1092_zero_dim_promotion():
    """Fuzz seed 1092 (to_torch): atan2 of a float32 (3, 1) value (a reshape of a 0-d float32
    input) and a 0-d float64 input was float64 in the trace, where torch keeps float32 (a 0-d
    tensor does not promote a dimensioned one), so a later matmul with a float32 vector raised
    DtypeError where torch runs. The tracer's precision_of now promotes op by op."""
    check_seed(1092, modes=("to_torch",))


def test_fuzz_seed_1616_maximum_of_two_multiples_of_a_piecewise():
    """Fuzz seed 1616 (extreme, to_torch): maximum(-1.21 * leaky_relu(x), leaky_relu(x))
    raised CompileError 'maximum has no derivative with respect to argument 1: maximum
    recursion depth exceeded': the derivative's conditions compare two multiples of one
    Piecewise, and SymPy's Piecewise rebuilt itself from their canonical forms without end.
    Such a condition is now a - b against 0 (ops.elementwise.relation), exact in IEEE."""
    check_seed(1616, modes=("to_torch",), extreme=True)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_of_multiples_of_leaky_relu_first_and_second_order(op):
    """The smallest program of seed 1616, on the NumPy target, first and second order
    against torch (x avoids the kink at 0 and the tie)."""
    def program(m, x):
        v0 = m.nn.functional.leaky_relu(x)
        return (getattr(m, op)(-1.21 * v0, v0) * x * x).sum()

    x = np.linspace(-1.05, 0.95, 12).reshape(3, 4)

    class P(sg.Function):
        @staticmethod
        def forward(ctx, a):
            return program(sg, a)

    xs = sg.tensor(x, requires_grad=True)
    g, = sg.autograd.grad(P.apply(xs), xs, create_graph=True)
    h, = sg.autograd.grad(g.sum(), xs)
    xt = torch.tensor(x, requires_grad=True)
    gt, = torch.autograd.grad(program(torch, xt), xt, create_graph=True)
    ht, = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-12, atol=1e-14)


def test_fuzz_seed_59_reversed_view_from_the_c_module():
    """Fuzz seed 59 (to_torch_c): the C module's NumPy glue returned a view running backwards
    (a flip in cumsum's adjoint) and torch.from_numpy refused it: 'At least one stride in the
    given numpy array is negative'. Such an array is copied (_torch_c._reversed)."""
    check_seed(59, modes=("to_torch_c",))


@pytest.mark.parametrize("op", ["atan2", "mul"])
def test_a_vector_made_from_a_zero_dim_input_is_not_promoted_by_another(op):
    """The smallest program of seed 1092 on the runtime, sg.compile and sg.to_torch: a float32
    vector reshaped from a 0-d float32 input, combined with a 0-d float64 input, then a matmul
    with a float32 vector (torch: float32 throughout)."""
    def h(m, x0, x2):
        v0 = x2.reshape(1,)
        v1 = v0.unsqueeze(0).expand(3, -1)
        v5 = getattr(m, op)(-1.23 * v1, m.abs(x0) + 0.5)
        return v5 @ v0

    x0, x2 = np.float64(0.7), np.float32(-0.4)
    want = h(torch, torch.tensor(x0), torch.tensor(x2))
    got = sg.to_torch(lambda a, b: h(sg, a, b)).apply(torch.tensor(x0), torch.tensor(x2))
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got, want)
    module = sg.compile(lambda a, b: h(sg, a, b), np.asarray(x0), np.asarray(x2),
                        cache_ok=False)
    np.testing.assert_allclose(module.forward(np.asarray(x0), np.asarray(x2))[0],
                               want.numpy(), rtol=1e-6)
