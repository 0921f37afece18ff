"""The CUDA target on a GPU (marker `cuda`; skipped without CuPy and a visible GPU).

End to end: fused kernels vs the NumPy target and finite differences, dtypes, broadcasting,
non-contiguous operands, a 1e8-element float32 tensor, several outputs, runtime tensors.
"""
import os
import sys

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
try:
    if cupy.cuda.runtime.getDeviceCount() < 1:
        raise RuntimeError
except Exception:  # no driver / no GPU
    pytest.skip("no CUDA GPU visible", allow_module_level=True)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import symgrad as sg  # noqa: E402
from test_target_cuda import CASES, _close, _extreme, _inputs, bcast, multi  # noqa: E402

pytestmark = pytest.mark.cuda


def _pair(fn, xs):
    return (sg.compile(fn, *xs, target="cuda", cache_ok=False),
            sg.compile(fn, *xs, target="numpy", cache_ok=False))


def _host(a):
    return cupy.asnumpy(a) if isinstance(a, cupy.ndarray) else a


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_target(name, fn, shapes, dtype):
    rng = np.random.default_rng(0)
    gpu, ref = _pair(fn, _inputs(shapes, dtype, rng))
    for xs in (_inputs(shapes, dtype, rng), _extreme(shapes, dtype, rng)):
        want = ref.raw.forward(*xs)
        got = gpu.raw.forward(*[cupy.asarray(x) for x in xs])
        for g, w in zip(got, want):
            assert isinstance(g, cupy.ndarray) and g.dtype == np.dtype(dtype)
            _close(_host(g), w, dtype) if dtype == "float64" else \
                np.testing.assert_allclose(_host(g), w, rtol=1e-5, atol=1e-5 * np.nanmax(np.abs(w)))
        seeds = [rng.standard_normal(np.shape(w)).astype(dtype) for w in want]
        want_g = ref.raw.backward(*seeds, *xs)
        got_g = gpu.raw.backward(*[cupy.asarray(a) for a in seeds + xs])
        for g, w in zip(got_g, want_g):
            w = np.asarray(w)
            fin = np.isfinite(w)
            assert np.array_equal(np.isfinite(_host(g)), fin)
            tol = 1e-4 if dtype == "float32" else 1e-10
            np.testing.assert_allclose(_host(g)[fin], w[fin], rtol=tol,
                                       atol=tol * np.max(np.abs(w[fin]), initial=0.0))


def test_finite_differences_float64():
    rng = np.random.default_rng(3)
    xs = [cupy.asarray(a) for a in _inputs([(5, 7), (7,)], "float64", rng)]
    mod = sg.compile(bcast, *xs, target="cuda", cache_ok=False)
    seed = cupy.ones((5, 7))
    grads = mod.raw.backward(seed, *xs)
    eps = 1e-6
    for k, (x, g) in enumerate(zip(xs, grads)):
        d = cupy.asarray(rng.standard_normal(x.shape))
        plus = [a + eps * d if j == k else a for j, a in enumerate(xs)]
        minus = [a - eps * d if j == k else a for j, a in enumerate(xs)]
        fd = float((mod.raw.forward(*plus)[0].sum() - mod.raw.forward(*minus)[0].sum())) / (2 * eps)
        assert abs(fd - float((g * d).sum())) <= 1e-6 * max(1.0, abs(fd))


def test_non_contiguous_and_broadcast_operands():
    rng = np.random.default_rng(4)
    base = cupy.asarray(rng.standard_normal((7, 10)).astype(np.float32))
    x = base.T[::2]                      # (5, 7), strided
    b = cupy.asarray(rng.standard_normal((14,)).astype(np.float32))[::2]   # (7,), stride 2
    assert not x.flags.c_contiguous and not b.flags.c_contiguous
    mod = sg.compile(bcast, cupy.ascontiguousarray(x), cupy.ascontiguousarray(b),
                     target="cuda", cache_ok=False)
    assert "_strided" in mod.files["bcast_grad.cu"]
    want = mod.raw.backward(cupy.ones((5, 7), np.float32), cupy.ascontiguousarray(x),
                            cupy.ascontiguousarray(b))
    got = mod.raw.backward(cupy.ones((1, 7), np.float32), x, b)   # seed broadcast too
    for g, w in zip(got, want):
        cupy.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_float16_storage_float32_math():
    rng = np.random.default_rng(5)
    xs = _inputs([(64, 33), (33,)], "float32", rng)
    m16 = sg.compile(bcast, *[x.astype(np.float16) for x in xs], target="cuda", cache_ok=False)
    m32 = sg.compile(bcast, *xs, target="cuda", cache_ok=False)
    out16 = m16.raw.forward(*[cupy.asarray(x, dtype=np.float16) for x in xs])[0]
    out32 = m32.raw.forward(*[cupy.asarray(x.astype(np.float16).astype(np.float32)) for x in xs])[0]
    assert out16.dtype == np.float16
    cupy.testing.assert_allclose(out16.astype(np.float32), out32, rtol=2e-3, atol=2e-3)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + (0.7978845608028654 * (x + 0.044715 * (x * x * x))).tanh())


def test_large_tensor_float32():
    n = 100_000_000
    x = cupy.random.default_rng(6).standard_normal(n, dtype=cupy.float32)
    mod = sg.compile(gelu_tanh, x, target="cuda", cache_ok=False)
    ref = sg.compile(gelu_tanh, np.zeros(4096, np.float32), target="numpy", cache_ok=False)
    grad, = mod.raw.backward(cupy.ones(n, cupy.float32), x)
    out, = mod.raw.forward(x)
    idx = np.concatenate([np.arange(2048), np.arange(n - 2048, n)])
    xh = cupy.asnumpy(x[cupy.asarray(idx)])
    want_g, = ref.raw.backward(np.ones(4096, np.float32), xh)
    want, = ref.raw.forward(xh)
    np.testing.assert_allclose(cupy.asnumpy(grad[cupy.asarray(idx)]), want_g, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cupy.asnumpy(out[cupy.asarray(idx)]), want, rtol=1e-5, atol=1e-6)
    assert bool(cupy.isfinite(grad).all())


def test_multiple_outputs():
    rng = np.random.default_rng(7)
    xs = _inputs([(4, 6), (4, 6)], "float32", rng)
    gpu, ref = _pair(multi, xs)
    outs = gpu.forward(*[cupy.asarray(x) for x in xs])
    assert isinstance(outs, tuple) and len(outs) == 2
    seeds = [np.ones((4, 6), np.float32), np.full((4, 6), 0.5, np.float32)]
    got = gpu.raw.backward(*[cupy.asarray(a) for a in seeds + xs])
    want = ref.raw.backward(*seeds, *xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(cupy.asnumpy(g), w, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- runtime tensors
def _runtime():
    import importlib

    try:
        tm = importlib.import_module("symgrad.tensor")
        from symgrad.autograd.function import Function
    except ImportError as err:
        pytest.skip(f"runtime not available: {err}")
    return tm, Function


def test_tensor_moves_between_devices():
    tm, _ = _runtime()
    t = tm.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    c = t.cuda()
    assert c.is_cuda and isinstance(c._data, cupy.ndarray)
    assert t.to("cuda").device == c.device
    back = c.cpu()
    assert isinstance(back._data, np.ndarray)
    np.testing.assert_array_equal(back._data, t._data)
    z = tm.zeros(3, 4, device="cuda")
    assert isinstance(z._data, cupy.ndarray) and z.shape == (3, 4)


def test_builtin_ops_on_cuda_tensors():
    tm, _ = _runtime()
    x = tm.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4), device="cuda",
                  requires_grad=True)
    y = (x.tanh() * x).sum()
    y.backward()
    assert isinstance(x.grad._data, cupy.ndarray)
    xh = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    want = np.tanh(xh) + xh * (1 - np.tanh(xh) ** 2)
    np.testing.assert_allclose(cupy.asnumpy(x.grad._data), want, rtol=1e-5, atol=1e-6)


def test_forward_only_function_on_cuda_compiles_for_cuda():
    tm, Function = _runtime()

    class Swish(Function):
        @staticmethod
        def forward(ctx, x, b):
            return (x * b).sigmoid() * x

    xh = np.linspace(-3, 3, 20, dtype=np.float32).reshape(4, 5)
    bh = np.linspace(0.5, 1.5, 5, dtype=np.float32)
    x = tm.tensor(xh, device="cuda", requires_grad=True)
    b = tm.tensor(bh, device="cuda", requires_grad=True)
    out = Swish.apply(x, b)
    assert isinstance(out._data, cupy.ndarray)
    out.sum().backward()
    from symgrad.compiler import _FUNCTIONS
    assert any(key[0] is Swish and key[1] == "cuda" for key in _FUNCTIONS)
    s = 1 / (1 + np.exp(-xh * bh))
    np.testing.assert_allclose(cupy.asnumpy(x.grad._data), s + xh * bh * s * (1 - s),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cupy.asnumpy(b.grad._data),
                               (xh * xh * s * (1 - s)).sum(0), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- the unrolled contiguous kernels
@pytest.mark.parametrize("n", [1, 3, 255, 1023, 1024, 1025, 4 * 256 * 7 + 5, 3_000_001])
def test_unrolled_kernel_covers_every_element(n):
    """The contiguous kernels take SG_UNROLL grid strides a pass, then a tail loop, and their
    `_vec` variants 16-byte vectors, then the last n % 4 elements: every size (below one pass,
    exact multiples, one past, grid-capped), aligned or not, writes every element once and
    right, with a broadcast operand read through its compile-time strides."""
    rng = np.random.default_rng(n)
    x = cupy.asarray(rng.standard_normal(n).astype(np.float32))
    mod = sg.compile(lambda a: (a * 0.5).tanh() * a + 1.0, x, target="cuda", cache_ok=False)
    got = cupy.asnumpy(mod.raw.forward(x)[0])
    xh = cupy.asnumpy(x)
    np.testing.assert_allclose(got, np.tanh(xh * 0.5) * xh + 1.0, rtol=1e-6, atol=1e-6)
    seed = cupy.asarray(rng.standard_normal(n).astype(np.float32))
    g = cupy.asnumpy(mod.raw.backward(seed, x)[0])
    t = np.tanh(xh * 0.5)
    want = cupy.asnumpy(seed) * (t + 0.5 * xh * (1 - t * t))
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    # one element into a buffer: contiguous but not 16-byte aligned, so not the `_vec` kernel
    xv = cupy.asarray(rng.standard_normal(n + 1).astype(np.float32))[1:]
    assert xv.flags.c_contiguous and xv.data.ptr % 16 != 0
    np.testing.assert_allclose(cupy.asnumpy(mod.raw.forward(xv)[0]),
                               np.tanh(cupy.asnumpy(xv) * 0.5) * cupy.asnumpy(xv) + 1.0,
                               rtol=1e-6, atol=1e-6)
    b = cupy.asarray(rng.standard_normal((n, 1)).astype(np.float32))
    c = cupy.asarray(rng.standard_normal(3).astype(np.float32))
    mod2 = sg.compile(lambda p, q: p * q.exp(), b, c, target="cuda", cache_ok=False)
    np.testing.assert_allclose(cupy.asnumpy(mod2.raw.forward(b, c)[0]),
                               cupy.asnumpy(b) * np.exp(cupy.asnumpy(c)), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- NVTX ranges
def test_emit_nvtx_pushes_a_range_per_event_on_a_gpu(monkeypatch):
    """emit_nvtx on a machine with CuPy and a GPU: every profiled event opens and closes one
    NVTX range (counted through the CuPy nvtx module it uses), no warning."""
    import warnings

    from cupy.cuda import nvtx

    from symgrad.autograd import profiler

    if not nvtx.available:
        pytest.skip("CuPy built without NVTX")
    pushed, popped = [], []
    monkeypatch.setattr(nvtx, "RangePush", lambda name, *a, **k: pushed.append(name))
    monkeypatch.setattr(nvtx, "RangePop", lambda *a, **k: popped.append(1))
    x = sg.tensor(cupy.asarray(np.linspace(-1, 1, 8, dtype=np.float32)), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with profiler.emit_nvtx(record_shapes=True):
            (x.exp() * x).sum().backward()
    assert pushed and len(pushed) == len(popped)
    assert any("exp" in p.lower() for p in pushed) and any("sizes" in p for p in pushed)
    np.testing.assert_allclose(cupy.asnumpy(x.grad._data),
                               np.exp(np.linspace(-1, 1, 8)) * (1 + np.linspace(-1, 1, 8)),
                               rtol=1e-5)


# ---------------------------------------------------------------- loops and linear algebra
@pytest.mark.parametrize("name", ["lstm", "rk4", "tuple_reverse", "fori"])
def test_scan_runs_on_the_gpu(name):
    """sg.scan / sg.fori_loop in a CUDA module: the loader's loop of kernel launches on the
    device matches the NumPy target's loop, forward and backward (float64)."""
    import test_scan

    fwd, examples = test_scan.PROGRAMS[name](sg)
    examples = [np.asarray(e) for e in examples]
    gpu = sg.compile(fwd, *examples, target="cuda", dtype="float64", cache_ok=False)
    ref = test_scan._compile(fwd, examples)
    dev = [cupy.asarray(e) for e in examples]

    def tup(v):
        return v if isinstance(v, tuple) else (v,)

    # the modules' wrappers: they pass the values the forward closes over (captured arrays)
    want = tup(ref.forward(*examples))
    for g, w in zip(tup(gpu.forward(*dev)), want):
        _close(_host(g), w, "float64")
    rng = np.random.default_rng(5)
    seeds = [rng.standard_normal(np.shape(w)) for w in want]
    got = tup(gpu.backward(*[cupy.asarray(s) for s in seeds], *dev))
    for g, w in zip(got, tup(ref.backward(*seeds, *examples))):
        _close(_host(g), np.asarray(w), "float64")


def test_linear_algebra_runs_on_the_gpu():
    """The cupy.linalg lowerings of the CUDA target on the device (eigh, svd, qr, solve,
    matrix_exp, pinv, det, inv, slogdet, svdvals; the MVN density and a GP likelihood): forward
    and gradients match the NumPy target."""
    import test_linalg as L

    cases = [(L.mvn_log_density, [L._gen(6, 8), L._gen(6, 8), L._spd(6, n=8)]),
             (L.gp_marginal_likelihood, [L._gen(12, 2), L._gen(12), np.array(0.3),
                                         np.array(-1.0)]),
             (L._every_op, [L._spd(2, n=4), L._gen(2, 5, 3)])]
    for fn, xs in cases:
        gpu = sg.compile(fn, *xs, target="cuda", cache_ok=False)
        ref = sg.compile(fn, *xs, cache_ok=False)
        dev = [cupy.asarray(x) for x in xs]
        np.testing.assert_allclose(_host(gpu.raw.forward(*dev)[0]), ref.forward(*xs),
                                   rtol=1e-9)
        seed = np.array(1.0)
        for g, w in zip(gpu.raw.backward(cupy.asarray(seed), *dev), ref.backward(seed, *xs)):
            np.testing.assert_allclose(_host(g), w, rtol=1e-8, atol=1e-11)


def test_runtime_function_launches_one_kernel_forward_and_one_backward():
    """A forward-only Function on CUDA tensors: F.apply runs one fused kernel, backward one
    (counted at the generated module's kernel lookup), and the gradient is torch's formula."""
    from symgrad.autograd import function as fmod

    class Softplus2(sg.Function):
        @staticmethod
        def forward(ctx, x, b):
            return ((x * b).exp() + 1).log() / b

    xh = np.linspace(-30, 30, 1 << 16, dtype=np.float32)
    x = sg.tensor(cupy.asarray(xh), requires_grad=True)
    b = sg.tensor(cupy.asarray(np.float32(2.0)))
    Softplus2.apply(x, b).sum().backward()          # compile, load
    raws = [e.mod.compiled.raw for k, e in fmod._COMPILED.items() if k[0] is Softplus2]
    assert raws
    counts = []
    reals = [raw._kernel for raw in raws]
    try:
        for raw, real in zip(raws, reals):
            raw._kernel = lambda name, _r=real: counts.append(name) or _r(name)
        x.grad = None
        y = Softplus2.apply(x, b)
        n_fwd = len(counts)
        y.backward(sg.tensor(cupy.ones_like(y._data)))
        n_bwd = len(counts) - n_fwd
    finally:
        for raw, real in zip(raws, reals):
            raw._kernel = real
    assert (n_fwd, n_bwd) == (1, 1), counts
    want = 1 / (1 + np.exp(-2.0 * xh.astype(np.float64)))
    np.testing.assert_allclose(cupy.asnumpy(x.grad._data), want, rtol=1e-5, atol=1e-6)
