"""The native CPU target (target="c"): same numbers as the NumPy target, IEEE semantics,
compiler fallback, the library cache, and C that compiles cleanly under -Wall -Werror."""
import os
import re
import shutil
import subprocess
import warnings

import numpy as np
import pytest

import symgrad as sg
from gradcheck_util import assert_close, numeric_vjp
from test_compiler_grads import CASES, sg_where

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler")

rng = np.random.default_rng(1)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Each test compiles into its own cache directory (a cache hit would hide a bug)."""
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))


def _compile(fn, inputs, dtype=None, target="c"):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # a silent NumPy fallback fails here
        return sg.compile(fn, *inputs, target=target, dtype=dtype, cache_ok=False)


def _outs(x):
    return x if isinstance(x, tuple) else (x,)


def _check_against_numpy(name, fn, inputs, dtype, rtol, atol):
    cmod = _compile(fn, inputs, dtype)
    assert "fallback" not in cmod.stats
    nmod = sg.compile(fn, *inputs, cache_ok=False)
    cast = [np.asarray(a, dtype=dtype) for a in inputs]
    couts = _outs(cmod.forward(*cast))
    nouts = _outs(nmod.forward(*cast))
    for c, n in zip(couts, nouts):
        assert_close(c, n, rtol=rtol, atol=atol, what=f"{name}: forward")
    gouts = [rng.standard_normal(np.shape(o)).astype(dtype) for o in nouts]
    cgrads = cmod.backward(*gouts, *cast)
    ngrads = nmod.backward(*gouts, *cast)
    assert len(cgrads) == len(ngrads) == len(inputs)
    for i, (c, n) in enumerate(zip(cgrads, ngrads)):
        if n is None:
            assert c is None
            continue
        assert np.asarray(c).dtype == np.dtype(dtype), f"{name}: grad {i} dtype"
        assert_close(c, n, rtol=rtol, atol=atol, what=f"{name}: grad of input {i}")
    return cmod, gouts, cast


@needs_cc
@pytest.mark.parametrize("name, fn, make", CASES, ids=[c[0] for c in CASES])
def test_float64_matches_numpy_target_and_finite_differences(name, fn, make):
    inputs = make()
    cmod, gouts, cast = _check_against_numpy(name, fn, inputs, "float64", 1e-12, 1e-12)
    expected = numeric_vjp(cmod.forward, cast, gouts)
    for i, (g, e) in enumerate(zip(cmod.backward(*gouts, *cast), expected)):
        assert_close(g, e, rtol=1e-5, atol=1e-6, what=f"{name}: grad of input {i} vs FD")


@needs_cc
@pytest.mark.parametrize("name, fn, make", CASES[::2], ids=[c[0] for c in CASES[::2]])
def test_float32_matches_numpy_target(name, fn, make):
    _check_against_numpy(name, fn, make(), "float32", 2e-5, 2e-5)


@needs_cc
def test_float64_inputs_are_refused_by_a_float32_module_and_grad_outputs_cast():
    x = rng.standard_normal(10)
    mod = _compile(lambda x: x.tanh() * 2, [x.astype(np.float32)])
    # computing float64 values in float32 would lose precision unseen: refused, by name
    with pytest.raises(TypeError, match=r"x is float64, but this module computes in float32"):
        mod.forward(x)
    with pytest.raises(TypeError, match=r"--dtype float64"):
        mod.backward(np.ones(10, np.float32), x)
    # a grad output is cast to the module's dtype, as torch casts a gradient to its tensor's
    x32 = x.astype(np.float32)
    (g,) = mod.backward(np.ones(10), x32)
    assert g.dtype == np.float32
    assert_close(g, 2 * (1 - np.tanh(x32.astype(np.float64)) ** 2), rtol=1e-6, atol=1e-6)
    # Python scalars and integer arrays are values of any dtype: converted
    assert mod.forward(np.arange(10)).dtype == np.float32


@needs_cc
def test_non_contiguous_and_broadcast_view_inputs():
    fn = lambda x, b: (x * b).exp() + x.sin()              # noqa: E731
    x = rng.standard_normal((6, 8))
    b = rng.standard_normal(8)
    mod = _compile(fn, [x[:3, :4], b[:4]])
    ref = sg.compile(fn, x[:3, :4], b[:4], cache_ok=False)
    xs = x[::2, ::2][:3, :4]                                # strided in both dims
    bs = b[::2]
    gout = np.broadcast_to(rng.standard_normal(4), (3, 4))  # a stride-0 view
    assert_close(mod.forward(xs, bs), ref.forward(xs, bs), rtol=1e-13, atol=1e-13)
    for c, n in zip(mod.backward(gout, xs, bs), ref.backward(gout, xs, bs)):
        assert_close(c, n, rtol=1e-13, atol=1e-13)
    xt = np.asfortranarray(rng.standard_normal((3, 4)))   # column-major
    assert_close(mod.forward(xt, bs), ref.forward(xt, bs), rtol=1e-13, atol=1e-13)


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zero_dim_and_size_zero_inputs(dtype):
    fn = lambda x, y: (x * y).tanh() + y                    # noqa: E731
    s = np.asarray(0.7, dtype)
    v = rng.standard_normal(5).astype(dtype)
    _check_against_numpy("0-d", fn, [s, s], dtype, 1e-6, 1e-6)
    _check_against_numpy("0-d x 1-d", fn, [s, v], dtype, 1e-6, 1e-6)
    empty = np.zeros((0, 3), dtype)
    mod = _compile(fn, [empty, empty])
    assert mod.forward(empty, empty).shape == (0, 3)
    gx, gy = mod.backward(empty, empty, empty)
    assert gx.shape == gy.shape == (0, 3)


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ieee_semantics_survive(dtype):
    big = np.asarray([1000.0, -1000.0, 0.0, 88.0, -88.0, 20.0], dtype)
    mod = _compile(lambda x: (1 + x.exp()).log(), [big])    # rewritten to softplus
    out = mod.forward(big)
    assert np.all(np.isfinite(out))
    assert_close(out, np.logaddexp(0, big.astype(np.float64)), rtol=1e-6, atol=1e-6)
    (g,) = mod.backward(np.ones_like(big), big)
    assert np.all(np.isfinite(g))
    assert g[0] == 1 and g[1] == 0

    x = np.asarray([-1.0, 4.0, np.inf, np.nan, 0.0], dtype)
    mod = _compile(lambda x: x.sqrt(), [x])
    out = mod.forward(x)
    assert np.isnan(out[0]) and out[1] == 2 and out[2] == np.inf and np.isnan(out[3])
    (g,) = mod.backward(np.ones_like(x), x)
    assert np.isnan(g[0]) and g[2] == 0 and np.isnan(g[3]) and g[4] == np.inf

    mod = _compile(lambda x: x.exp() * 2, [x[:3]])
    out = mod.forward(np.asarray([1e4, -1e4, np.nan], dtype))
    assert out[0] == np.inf and out[1] == 0 and np.isnan(out[2])

    # relu / maximum propagate NaN as NumPy (and torch) do; C's fmax would drop it
    y = np.asarray([np.nan, -1.0, 2.0], dtype)
    mod = _compile(lambda x: x.relu() + x.clamp(-0.5, 0.5), [y])
    out = mod.forward(y)
    assert np.isnan(out[0]) and out[1] == -0.5 and out[2] == 2.5


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_pair_shares_one_exp_and_keeps_limits(dtype):
    """swish's derivative holds sigmoid(x) and sigmoid(-x): one exp in C, same values."""
    fi = np.finfo(dtype)
    x = np.asarray([-1e4, -800.0, -746.0, -710.0, -104.0, -89.0, -88.0, -20.0, -1.0, -0.0, 0.0,
                    1e-30, 1.0, 20.0, 88.0, 89.0, 104.0, 710.0, 1e4, fi.max, -fi.max,
                    np.inf, -np.inf, np.nan], dtype)
    mod = _compile(lambda x: x / (1 + (-x).exp()), [x])
    kernels = next(t for n, t in mod.files.items() if n.endswith(".c"))
    backward = re.sub(r"/\*.*?\*/", "", kernels[kernels.index("---- backward"):], flags=re.S)
    exp = r"(?<![\w.])expf\(" if dtype == "float32" else r"(?<![\w.])exp\("
    assert len(re.findall(exp, backward)) == 1, backward
    (g,) = mod.backward(np.ones_like(x), x)
    (n,) = sg.compile(lambda x: x / (1 + (-x).exp()), x, cache_ok=False).backward(
        np.ones_like(x), x)
    assert np.array_equal(np.isnan(g), np.isnan(n)), (x, g, n)   # x*s(x)*s(-x) at +-inf: NaN
    w = x.astype(np.longdouble)
    with np.errstate(all="ignore"):
        s = 1 / (1 + np.exp(-w))
        ref = s + w * s * (1 / (1 + np.exp(w)))
    ok = ~np.isnan(g)
    # where exp(-x) overflows, s(x) = 0 and x*s(x) flushes to 0 (as without sharing): the
    # exact value there is below 1e-300 (float64) / 1e-36 (float32)
    assert_close(g[ok], ref[ok].astype(dtype), rtol=8 * fi.eps, atol=1e4 * float(fi.tiny),
                 what="swish gradient")


@needs_cc
def test_where_with_bool_mask_and_comparisons():
    x = rng.standard_normal(16)
    y = rng.standard_normal(16)
    fn = lambda x, y: sg_where(x > y, x * y, (y - x).exp()) + x.abs()   # noqa: E731
    _check_against_numpy("where", fn, [x, y], "float64", 1e-13, 1e-13)
    _check_against_numpy("where", fn, [x, y], "float32", 1e-6, 1e-6)


def test_fallback_without_compiler_warns_once(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    from symgrad import native
    from symgrad.emit import c as cmod

    monkeypatch.setattr(native, "_WARNED", set())
    x = rng.standard_normal(5)
    with pytest.warns(RuntimeWarning, match="nonexistent") as record:
        mod = sg.compile(lambda x: x.exp() * x, x, target="c", cache_ok=False)
        mod2 = sg.compile(lambda x: x.sin() * x, x, target="c", cache_ok=False)
    assert len([w for w in record if "target 'c'" in str(w.message)]) == 1
    assert "nonexistent" in mod.stats["fallback"] and "fallback" in mod2.stats
    assert_close(mod.forward(x), np.exp(x) * x)
    (g,) = mod.backward(np.ones(5), x)
    assert_close(g, np.exp(x) * (1 + x))


@needs_cc
def test_fallback_when_compilation_fails(monkeypatch, tmp_path):
    fake = tmp_path / "badcc"
    fake.write_text("#!/bin/sh\necho 'error: broken compiler' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    from symgrad import native
    from symgrad.emit import c as cmod

    monkeypatch.setattr(native, "_WARNED", set())
    x = rng.standard_normal(5)
    with pytest.warns(RuntimeWarning, match="broken compiler"):
        mod = sg.compile(lambda x: x.exp() * x, x, target="c", cache_ok=False)
    assert_close(mod.forward(x), np.exp(x) * x)


@needs_cc
def test_library_cache_hit_does_not_run_the_compiler(monkeypatch):
    from symgrad import native
    from symgrad.emit import c as cmod

    x = rng.standard_normal(5)
    fn = lambda x: x.tanh() * x                               # noqa: E731
    first = _compile(fn, [x])
    lib = first.stats["library"]
    assert os.path.exists(lib) and lib.startswith(os.environ["SYMGRAD_CACHE_DIR"])
    calls = []
    real_run = subprocess.run
    monkeypatch.setattr(native.subprocess, "run",
                        lambda *a, **k: calls.append(a) or real_run(*a, **k))
    second = _compile(fn, [x])
    assert calls == []
    assert second.stats["library"] == lib
    assert_close(second.forward(x), np.tanh(x) * x)


def test_flags_are_portable():
    _, _, flags = __import__("symgrad.emit.c", fromlist=["x"]).compiler_and_flags()
    assert "-march=native" not in flags and "-ffast-math" not in flags
    assert "-fno-math-errno" in flags


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_generated_c_is_warning_free_and_float32_never_promotes(dtype, tmp_path):
    fns = [
        (lambda x, y: (x * y).exp().sum(1), [rng.standard_normal((3, 4)), rng.standard_normal(4)]),
        (lambda x: x * x.softplus().tanh(), [rng.standard_normal(7)]),
        (lambda x: 0.5 * x * (1 + (x / 2 ** 0.5).erf()), [rng.standard_normal(7)]),
        (lambda x, y: sg_where(x > y, x ** 3, y.sqrt()) + x.clamp(-1.0, 1.0),
         [rng.standard_normal(7), rng.random(7)]),
        (lambda r: (4 * ((1 / r) ** 12 - (1 / r) ** 6)).sum(), [rng.random(6) + 0.5]),
    ]
    for fn, inputs in fns:
        _assert_warning_free(_compile(fn, [np.asarray(a, dtype) for a in inputs]), tmp_path)


def _assert_warning_free(mod, tmp_path):
    """The module's C compiles under -Wall -Wextra -Werror -Wdouble-promotion, with and
    without OpenMP SIMD."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    (name,) = [n for n in mod.files if n.endswith(".c")]
    path = tmp_path / name
    path.write_text(mod.files[name])
    for extra in ([], ["-fopenmp-simd", "-DSYMGRAD_OPENMP_SIMD"]):
        run = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Wno-unused-parameter",
                              "-Werror", "-Wdouble-promotion", "-fsyntax-only", *extra,
                              str(path)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr


@needs_cc
def test_math_is_inline_or_libmvec_vector_variants():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm")
    x = rng.standard_normal(64).astype(np.float32)

    def symbols(fn):
        mod = _compile(fn, [x])
        return subprocess.run([nm, "-D", mod.stats["library"]], capture_output=True,
                              text=True).stdout

    # mish's gate tanh(softplus(x)) is one inline function around a vector exp: no tanh, log
    inline = symbols(lambda x: x * x.softplus().tanh())
    assert "_ZGV" in inline and "expf" in inline, inline
    for fn in ("tanhf", "logf", "log1pf"):
        assert fn not in inline, inline
    # libm functions call glibc's vector variants
    vector = symbols(lambda x: x.sin() * x + x.tanh())
    assert "_ZGV" in vector and "sinf" in vector and "tanhf" in vector, vector


@needs_cc
def test_generated_files_are_deterministic():
    x = rng.standard_normal((3, 4))
    fn = lambda x: (x.exp() + 1).log().sum(0)                # noqa: E731
    a = _compile(fn, [x]).files
    b = _compile(fn, [x]).files
    assert a == b


def _deep_chain(x, y):
    """A chain of 12 dependent math calls (latency-bound): the C target interleaves it."""
    z = x
    for i in range(6):
        z = (z * y).tanh().sin()
    return z


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shapes", [((100,), (100,)),        # 100 = 3*33 + 1: one left over
                                    ((5, 53), (53,)),        # 2-D, y broadcast along rows
                                    ((53, 1), (1, 50)),      # outer product of the two
                                    ((4, 7), (7,))],         # too short to interleave
                         ids=["1d", "rows", "outer", "short"])
def test_interleaved_chains_match_the_plain_loop(dtype, shapes, tmp_path):
    x = rng.uniform(-2, 2, shapes[0]).astype(dtype)
    y = rng.uniform(0.5, 1.5, shapes[1]).astype(dtype)
    x.flat[0], x.flat[-1] = np.nan, np.inf      # IEEE values pass through every lane
    tol = dict(rtol=2e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    cmod, gouts, cast = _check_against_numpy("deep chain", _deep_chain, [x, y], dtype, **tol)
    src = next(v for k, v in cmod.files.items() if k.endswith(".c"))
    interleaved = "backward_k0_x3(" in src
    assert interleaved == (shapes[0] != (4, 7)), src
    if interleaved:
        # one math call per statement, each statement for lanes 0, 1, 2 in turn
        body = src[src.index("void backward_k0_x3("):]
        body = body[:body.index("\n}\n")]
        stmts = re.findall(r"const \w+ (\w+)_l(\d) = (.*);", body)
        assert [int(k) for _, k, _ in stmts] == [0, 1, 2] * (len(stmts) // 3)
        call = re.compile(r"(?:\bsymgrad_|\b)(?:tanh|sin|cos)f?\(")
        calls = [len(call.findall(code)) for _, _, code in stmts]
        assert max(calls) == 1 and sum(calls) == 3 * 17   # 6 tanh, 5 sin, 6 cos
        _assert_warning_free(cmod, tmp_path)
    # against central differences, away from the non-finite entries
    if dtype == "float64":
        xs = [np.nan_to_num(a, nan=0.3, posinf=0.7) for a in cast]
        grads = cmod.backward(*gouts, *xs)
        num = numeric_vjp(lambda a, b: cmod.forward(a, b), xs, gouts)
        for g, n in zip(grads, num):
            assert_close(g, n, rtol=1e-5, atol=1e-7, what="deep chain vs finite differences")


def _normalize(x, w):
    """Reductions and broadcasts: the C functions keep temporaries in scratch memory."""
    mu = x.mean(1, keepdim=True)
    d = x - mu
    return (d * (d * d).mean(1, keepdim=True).rsqrt() * w).tanh()


@needs_cc
def test_scratch_memory_is_kept_per_thread_and_threads_do_not_share_it():
    import threading

    x = rng.standard_normal((64, 40))
    w = rng.standard_normal(40)
    cmod = _compile(_normalize, [x, w])
    src = next(v for k, v in cmod.files.items() if k.endswith(".c"))
    assert "char *restrict scratch" in src and "malloc" not in src
    raw = cmod.raw
    first = raw._scratch(64)
    assert raw._scratch(64) == first          # kept between calls
    nmod = sg.compile(_normalize, x, w, cache_ok=False)
    inputs = [(rng.standard_normal((64, 40)), rng.standard_normal(40)) for _ in range(6)]
    seeds = [rng.standard_normal((64, 40)) for _ in range(6)]
    want = [nmod.backward(g, a, b) for g, (a, b) in zip(seeds, inputs)]
    got, addresses = [None] * 6, [None] * 6
    start, end = threading.Barrier(6), threading.Barrier(6)

    def work(k):
        start.wait()
        for _ in range(30):    # the C calls run without the GIL, side by side
            got[k] = cmod.backward(seeds[k], *inputs[k])
        addresses[k] = raw._scratch(64)
        end.wait()                            # every block is alive when compared

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(addresses)) == 6           # one block per thread
    for g, n in zip(got, want):
        for a, b in zip(g, n):
            assert_close(a, b, rtol=1e-12, atol=1e-12, what="threaded backward")


def _row_sums(x, b, acc0, r_x):
    """Row sums and means of computed values (fused into their loops), over one and two
    trailing dims, a sum_to (b broadcast along the last dim), and inputs named like the C
    accumulators and loop locals."""
    y = (x * b).tanh() + acc0 * r_x
    m = y.mean(-1, keepdim=True)
    s2 = (y * y).sum((1, 2), keepdim=True)
    return (y - m) * s2.sqrt() + (y.exp()).sum()


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_sums_fuse_into_the_loop_that_computes_their_values(dtype, tmp_path):
    x = rng.standard_normal((5, 6, 7))
    b = rng.standard_normal((5, 6, 1))
    acc0, r_x = rng.standard_normal(7), rng.standard_normal((6, 7))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-11, atol=1e-12)
    cmod, gouts, cast = _check_against_numpy("row sums", _row_sums, [x, b, acc0, r_x], dtype,
                                             **tol)
    src = next(v for k, v in cmod.files.items() if k.endswith(".c"))
    assert src.count("summed along each row as computed") >= 3, src
    assert "reduction(+:acc0" in src
    _assert_warning_free(cmod, tmp_path)
    if dtype == "float64":
        num = numeric_vjp(lambda *a: cmod.forward(*a), cast, gouts)
        for g, n in zip(cmod.backward(*gouts, *cast), num):
            # central differences of an output of size ~400: absolute error ~1e-6
            assert_close(g, n, rtol=1e-5, atol=1e-5, what="row sums vs finite differences")


class _Swishy(sg.Function):
    @staticmethod
    def forward(ctx, x, w):
        return (x * w).sigmoid() * x + (x * x).sum(-1, keepdim=True).sqrt()


@pytest.fixture
def _cpu_target_c():
    previous = sg.set_cpu_target("c")
    yield
    sg.set_cpu_target(previous)


@needs_cc
def test_functions_compile_for_the_c_target_when_chosen(_cpu_target_c):
    from symgrad.autograd import function as fmod

    x0, w0 = rng.standard_normal((4, 9)), rng.standard_normal(9)

    def run():
        x = sg.tensor(x0, requires_grad=True)
        w = sg.tensor(w0, requires_grad=True)
        y = _Swishy.apply(x, w)
        gx, gw = sg.autograd.grad(y.sum(), (x, w), create_graph=True)
        (ggx,) = sg.autograd.grad((gx * gx).sum() + gw.sum(), x)   # through the grad module
        return [t.detach().numpy().copy() for t in (y, gx, gw, ggx)]

    got = run()
    targets = {e.mod.compiled.target for k, e in fmod._COMPILED.items() if k[0] is _Swishy}
    assert targets == {"c"}
    assert sg.get_cpu_target() == "c"
    sg.set_cpu_target("numpy")                      # the same Function, compiled for NumPy
    want = run()
    for g, n in zip(got, want):
        assert_close(g, n, rtol=1e-11, atol=1e-12, what="C vs NumPy runtime")
    def forward(a, b):
        return a / (1 + np.exp(-a * b)) + np.sqrt((a * a).sum(-1, keepdims=True))

    num = numeric_vjp(forward, [x0, w0], [np.ones((4, 9))])
    assert_close(want[1], num[0], rtol=1e-6, atol=1e-8, what="grad x vs finite differences")


@needs_cc
def test_composite_ops_stay_on_numpy_under_the_c_target(_cpu_target_c):
    from symgrad.autograd import function as fmod

    x = sg.tensor(rng.standard_normal(5), requires_grad=True)
    x.cosh().sum().backward()
    assert_close(x.grad.numpy(), np.sinh(x.detach().numpy()), rtol=1e-12, atol=0,
                 what="cosh'")
    targets = {e.mod.compiled.target for k, e in fmod._COMPILED.items()
               if k[0].__module__ == "symgrad._composite_ops"}
    assert targets == {"numpy"}


def test_cpu_target_rejects_unknown_names_and_reads_the_environment():
    with pytest.raises(ValueError, match="unknown target 'cuda'.*'numpy', 'c'"):
        sg.set_cpu_target("cuda")
    assert sg.get_cpu_target() == "numpy"
    code = "import symgrad; print(symgrad.get_cpu_target())"
    env = dict(os.environ, SYMGRAD_CPU_TARGET="c")
    run = subprocess.run([__import__("sys").executable, "-c", code], env=env,
                         capture_output=True, text=True)
    assert run.stdout.strip() == "c", run.stderr
    env["SYMGRAD_CPU_TARGET"] = "fortran"
    run = subprocess.run([__import__("sys").executable, "-c", code], env=env,
                         capture_output=True, text=True)
    assert run.returncode != 0 and "unknown target 'fortran'" in run.stderr


@needs_cc
def test_a_function_chooses_its_own_cpu_target():
    from symgrad.autograd import function as fmod

    class Fused(_Swishy):
        cpu_target = "c"

    class Typo(_Swishy):
        cpu_target = "C"

    x, w = sg.tensor(rng.standard_normal((2, 3))), sg.tensor(rng.standard_normal(3))
    assert_close(Fused.apply(x, w).numpy(), _Swishy.apply(x, w).numpy(), rtol=1e-12, atol=0,
                 what="Fused vs default")
    assert {e.mod.compiled.target for k, e in fmod._COMPILED.items() if k[0] is Fused} == {"c"}
    assert sg.get_cpu_target() == "numpy"
    with pytest.raises(ValueError, match=r"Typo.cpu_target: unknown target 'C'"):
        Typo.apply(x, w)
