"""Special functions (symgrad.ops.specfun): lgamma, digamma, polygamma, erfinv, i0, i0e, i1, i1e,
mvlgamma. Values against mpmath on wide grids (extremes included) in the NumPy target, the C
target and the CUDA per-element code run on the host; special values (poles, +-inf, nan) as
torch gives them; derivatives against closed forms and finite differences, second derivatives
through create_graph on runtime tensors. No torch here (CI has none)."""
import os
import shutil
import subprocess

import mpmath
import numpy as np
import pytest

import symgrad as sg
from symgrad.ops import specfun

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
mpmath.mp.dps = 40

_RNG = np.random.default_rng(7)
POS = np.unique(np.concatenate([
    [1e-300, 1e-100, 1e-20, 1e-8, 1e-3, 0.5, 1.0, 1.0 + 1e-9, 1.5, 2.0, 2.0 - 1e-9, 2.5, 3.0, 10.0,
     12.9, 13.0, 13.1, 100.0, 1e5, 1e8, 1e15, 1e100, 1e300],
    10 ** _RNG.uniform(-10, 3, 120), _RNG.uniform(0, 20, 120)]))
NEG = -np.concatenate([[1e-300, 1e-8, 0.5, 1.5, 2.25, 10.5, 100.3, 1e5 + 0.5],
                       10 ** _RNG.uniform(-6, 1.5, 80), _RNG.uniform(0, 8, 80)])
NEG = NEG[NEG != np.rint(NEG)]
UNIT = np.concatenate([[0.0, 1e-300, 1e-8, 0.25, 0.5, 0.7, 0.9, 0.999, 1 - 1e-10, 1 - 2.0 ** -53],
                       _RNG.uniform(-1, 1, 160), 1 - 10 ** _RNG.uniform(-15, 0, 60)])
UNIT = np.concatenate([UNIT, -UNIT[:40]])
BES = np.concatenate([[0.0, 1e-300, 1e-8, 1.0, 8.0, 8.0 + 1e-9, 30.0, 700.0, 710.0, 713.0],
                      _RNG.uniform(-30, 30, 160), -10 ** _RNG.uniform(-5, 2.8, 60),
                      10 ** _RNG.uniform(-5, 2.8, 60)])

# op: (traced forward, input grid, max relative error vs mpmath in float64, error floor: the
# magnitude below which the error is taken as absolute (lgamma's zeros at 1, 2 and between the
# negative poles, the other functions' zeros))
OPS = {
    "lgamma": (lambda x: x.lgamma(), POS, 1e-14, 1e-300),
    # absolute near lgamma's zeros between the negative poles (the reflection cancels there)
    "lgamma_neg": (lambda x: x.lgamma(), NEG, 1e-14, 1.0),
    "digamma": (lambda x: x.digamma(), POS, 2e-14, 1e-300),
    # the reflection's two terms cancel at digamma's zeros between the negative poles
    "digamma_neg": (lambda x: x.digamma(), NEG, 2e-14, 1.0),
    "trigamma": (lambda x: x.polygamma(1), np.concatenate([POS[POS < 1e150], NEG[NEG > -40]]),
                 2e-14, 1e-300),
    "polygamma2": (lambda x: x.polygamma(2), np.concatenate([POS[POS < 1e100], NEG[NEG > -40]]),
                   2e-14, 1e-2),
    "polygamma3": (lambda x: x.polygamma(3), np.concatenate([POS[POS < 1e75], NEG[NEG > -40]]),
                   2e-14, 1e-300),
    "erfinv": (lambda x: x.erfinv(), UNIT, 4e-15, 1e-300),
    "i0": (lambda x: x.i0(), BES, 4e-15, 1e-300),
    "i0e": (lambda x: sg.i0e(x), BES, 4e-15, 1e-300),
    "i1": (lambda x: sg.i1(x), BES, 4e-15, 1e-300),
    "i1e": (lambda x: sg.i1e(x), BES, 4e-15, 1e-300),
}

_MP = {
    "lgamma": specfun._mp_lgamma,
    "lgamma_neg": specfun._mp_lgamma,
    "digamma": specfun._mp_digamma,
    "digamma_neg": specfun._mp_digamma,
    "trigamma": lambda x: mpmath.psi(1, x),
    "polygamma2": lambda x: mpmath.psi(2, x),
    "polygamma3": lambda x: mpmath.psi(3, x),
    "erfinv": mpmath.erfinv,
    "i0": lambda x: mpmath.besseli(0, x),
    "i0e": lambda x: mpmath.exp(-abs(x)) * mpmath.besseli(0, x),
    "i1": lambda x: mpmath.besseli(1, x),
    "i1e": lambda x: mpmath.exp(-abs(x)) * mpmath.besseli(1, x),
}

# special values: torch's (torch 2.13), except i0 / i1 at +-inf (torch: nan; here +-inf, the
# limit) and polygamma(1, x) at negative integers (torch: a large finite number from
# pi**2 / sin(pi x)**2; here +inf, the pole)
INF, NAN = np.inf, np.nan
SPECIAL = {
    "lgamma": ([0.0, -0.0, -1.0, -2.0, -1e30, INF, -INF, NAN], [INF, INF, INF, INF, INF, INF, INF, NAN]),
    "digamma": ([0.0, -0.0, -1.0, -3.0, INF, -INF, NAN], [-INF, INF, NAN, NAN, INF, NAN, NAN]),
    "trigamma": ([0.0, -1.0, INF, -INF, NAN], [INF, INF, 0.0, NAN, NAN]),
    "polygamma2": ([0.0, -2.0, INF, NAN], [-INF, -INF, 0.0, NAN]),
    "erfinv": ([1.0, -1.0, 1.5, -2.0, 0.0, INF, NAN], [INF, -INF, NAN, NAN, 0.0, NAN, NAN]),
    "i0": ([INF, -INF, NAN, 0.0], [INF, INF, NAN, 1.0]),
    "i0e": ([INF, -INF, NAN, 0.0], [0.0, 0.0, NAN, 1.0]),
    "i1": ([INF, -INF, NAN, 0.0], [INF, -INF, NAN, 0.0]),
    "i1e": ([INF, -INF, NAN, 0.0], [0.0, -0.0, NAN, 0.0]),
}


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    os.environ.setdefault("SYMGRAD_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def reference():
    """mpmath's values of every op on its grid (float64, inf where it overflows)."""
    out = {}
    for name, (_, grid, _, _) in OPS.items():
        vals = []
        for x in grid:
            v = _MP[name](mpmath.mpf(float(x)))
            vals.append(float(v) if mpmath.isfinite(v) and abs(v) < 1e309 else
                        (np.inf if v > 0 else -np.inf))
        out[name] = np.array(vals)
    return out


def _rel_err(got, want, floor):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin], want[~fin])
    return np.abs(got[fin] - want[fin]) / np.maximum(np.abs(want[fin]), floor)


def _ulp32_err(got, want):
    """Error in float32 ulps of the correctly rounded value (where it is a normal float)."""
    with np.errstate(over="ignore"):
        w32 = want.astype(np.float32)   # inf where float32 overflows
    ok = np.isfinite(w32) & (np.abs(w32) > np.finfo(np.float32).tiny)
    assert np.array_equal(got[~np.isfinite(w32)], w32[~np.isfinite(w32)])
    ulp = np.spacing(np.abs(w32[ok])).astype(np.float64)
    return np.abs(got[ok].astype(np.float64) - want[ok]) / ulp


_MODULES = {}


def _module(name, target, dtype):
    key = (name, target, dtype)
    if key not in _MODULES:
        _MODULES[key] = sg.compile(OPS[name][0], target=target, dtype=dtype)
    return _MODULES[key]


def _forward(name, target, dtype, x):
    out = _module(name, target, dtype).forward(np.asarray(x, dtype=dtype))
    return np.asarray(out[0] if isinstance(out, tuple) else out)


TARGETS = ["numpy", pytest.param("c", marks=pytest.mark.skipif(not HAVE_CC, reason="no cc"))]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(OPS))
def test_float64_against_mpmath(name, target, reference):
    _, grid, tol, floor = OPS[name]
    got = _forward(name, target, "float64", grid)
    err = _rel_err(got, reference[name], floor)
    assert err.max() <= tol, (name, grid[np.isfinite(reference[name])][err.argmax()], err.max())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(OPS))
def test_float32_is_float64_rounded_once(name, target, reference):
    _, grid, _, floor = OPS[name]
    with np.errstate(over="ignore"):
        keep = np.abs(grid.astype(np.float32).astype(np.float64) - grid) <= 0   # exact in f32
    keep &= np.abs(grid) < 1e30
    x = grid[keep]
    want = np.array([float(_MP[name](mpmath.mpf(float(v)))) if np.isfinite(r) else r
                     for v, r in zip(x, reference[name][keep])])
    got = _forward(name, target, "float32", x)
    assert got.dtype == np.float32
    if floor >= 1.0:   # absolute error near the zeros between negative poles
        assert np.max(np.abs(got - want) / np.maximum(np.abs(want), floor)) < 1.2e-7
    else:
        assert _ulp32_err(got, want).max() <= 1.0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(SPECIAL))
def test_special_values(name, target):
    xs, want = SPECIAL[name]
    for dtype in ("float64", "float32"):
        got = _forward(name, target, dtype, np.array(xs))
        np.testing.assert_array_equal(got, np.array(want, dtype=dtype), err_msg=f"{name} {dtype}")
        # the sign of zeros and infinities too
        assert np.array_equal(np.signbit(got), np.signbit(np.array(want))), (name, got)


def test_numpy_module_imports_only_numpy():
    m = sg.compile(lambda x: x.lgamma() + x.digamma() + x.polygamma(3) + x.erfinv() + x.i0()
                   + sg.i1e(x), np.linspace(0.1, 0.9, 5), target="numpy")
    src = m.source
    imports = {line.split()[1].split(".")[0] for line in src.splitlines()
               if line.startswith(("import ", "from "))}
    assert imports <= {"numpy", "__future__"}, imports
    for helper in ("def _lgamma(", "def _digamma(", "def _polygamma(", "def _erfinv(",
                   "def _bessel_i(", "def _erf("):
        assert helper in src
    ns = {}
    exec(compile(src, "<module>", "exec"), ns)
    x = np.linspace(0.1, 0.9, 5)
    out = ns["forward"](x)
    assert np.all(np.isfinite(out[0] if isinstance(out, tuple) else out))


# ---------------------------------------------------------------- derivatives
DERIVATIVES = {
    # forward, closed-form derivative (mpmath), points
    "lgamma": (sg.lgamma, lambda x: mpmath.digamma(x), [0.3, 1.0, 2.7, 40.0, -0.4, -2.6]),
    "digamma": (sg.digamma, lambda x: mpmath.psi(1, x), [0.3, 1.46, 5.0, -0.4, -2.6]),
    "polygamma2": (lambda t: sg.polygamma(2, t), lambda x: mpmath.psi(3, x), [0.3, 2.0, -1.5]),
    "erfinv": (sg.erfinv, lambda y: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(mpmath.erfinv(y) ** 2),
               [-0.999, -0.3, 0.0, 0.5, 0.9999]),
    "i0": (sg.i0, lambda x: mpmath.besseli(1, x), [-3.0, 0.0, 0.5, 9.0]),
    "i0e": (sg.i0e, lambda x: mpmath.diff(lambda t: mpmath.exp(-abs(t)) * mpmath.besseli(0, t), x),
            [-3.0, 0.5, 9.0]),
    "i1": (sg.i1, lambda x: mpmath.besseli(0, x) - (mpmath.besseli(1, x) / x if x else 0.5),
           [-3.0, 0.0, 0.5, 9.0]),
    "i1e": (sg.i1e, lambda x: (mpmath.diff(lambda t: mpmath.exp(-abs(t)) * mpmath.besseli(1, t), x)
                               if x else mpmath.mpf(0.5)), [-3.0, 0.0, 0.5, 9.0]),
    "mvlgamma": (lambda t: sg.mvlgamma(t, p=3),
                 lambda x: mpmath.digamma(x) + mpmath.digamma(x - 0.5) + mpmath.digamma(x - 1),
                 [1.2, 3.0, 10.0]),
}


@pytest.mark.parametrize("name", list(DERIVATIVES))
def test_runtime_first_derivative_closed_form(name):
    fn, deriv, points = DERIVATIVES[name]
    x = sg.tensor(np.array(points), requires_grad=True)
    y = fn(x)
    y.sum().backward()
    want = np.array([float(deriv(mpmath.mpf(p))) for p in points])
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(DERIVATIVES))
def test_runtime_second_derivative_against_finite_differences(name):
    fn, deriv, points = DERIVATIVES[name]
    points = [p for p in points if p != 0.0 and abs(p) < 0.999]   # smooth there
    x = sg.tensor(np.array(points), requires_grad=True)
    (g,) = sg.autograd.grad(fn(x).sum(), (x,), create_graph=True)
    (h,) = sg.autograd.grad(g.sum(), (x,))
    want = []
    for p in points:
        step = 1e-6 * max(1.0, abs(p))
        want.append(float((deriv(mpmath.mpf(p) + step) - deriv(mpmath.mpf(p) - step)) / (2 * step)))
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-6, atol=1e-8)


def test_compiled_gradient_matches_finite_differences():
    def f(x):
        return (x.lgamma() * x.digamma() + x.polygamma(1) + (x / 10).erfinv() + x.i0()
                + sg.i0e(x) * sg.i1(x) + sg.i1e(x) + x.mvlgamma(2))

    x = np.array([1.3, 2.0, 3.7, 6.5])
    for target in ("numpy", "c") if HAVE_CC else ("numpy",):
        m = sg.compile(f, x, target=target)
        (g,) = m.backward(np.ones_like(x), x)
        h = 1e-6
        fd = (np.asarray(m.forward(x + h)) - np.asarray(m.forward(x - h))) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-7)


def test_spellings_and_grad_fn_names():
    t = sg.tensor([1.5, 2.5], requires_grad=True)
    assert np.allclose(sg.lgamma(t).detach().numpy(), t.lgamma().detach().numpy())
    assert np.allclose(sg.polygamma(2, t).detach().numpy(), t.polygamma(2).detach().numpy())
    assert np.allclose(sg.polygamma(0, t).detach().numpy(), sg.digamma(t).detach().numpy())
    assert np.allclose(sg.mvlgamma(t, p=1).detach().numpy(), sg.lgamma(t).detach().numpy())
    names = {"lgamma": "LgammaBackward0", "digamma": "DigammaBackward0",
             "erfinv": "ErfinvBackward0", "i0": "I0Backward0", "i0e": "SpecialI0EBackward0",
             "i1": "SpecialI1Backward0", "i1e": "SpecialI1EBackward0"}
    for op, node in names.items():
        assert getattr(sg, op)(t).grad_fn.name() == node
    assert t.polygamma(1).grad_fn.name() == "PolygammaBackward0"
    assert t.mvlgamma(2).grad_fn.name() == "MvlgammaBackward0"
    # integer tensors compute in the default float dtype, as torch
    assert sg.lgamma(sg.tensor([1, 2, 3])).dtype == sg.float32
    with pytest.raises(Exception):
        t.polygamma(-1)


def test_float32_runtime_and_traced_function():
    class LogGammaSum(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return (x.lgamma() + x.erfinv().square()).sum()

    x = sg.tensor(np.array([0.2, 0.5, 0.7], np.float32), requires_grad=True)
    y = LogGammaSum.apply(x)
    y.backward()
    assert x.grad.dtype == sg.float32
    want = [float(mpmath.digamma(v) + 2 * mpmath.erfinv(v) * mpmath.sqrt(mpmath.pi) / 2
                  * mpmath.exp(mpmath.erfinv(v) ** 2)) for v in np.array([0.2, 0.5, 0.7], np.float32)]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=2e-6)


# ---------------------------------------------------------------- CUDA
def _cuda_forward(x):
    return (x.lgamma() + x.digamma() + x.polygamma(1) + x.polygamma(2) + (x / 40).erfinv()
            + x.i0() + sg.i0e(x) + sg.i1(x) + sg.i1e(x))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_element_math_on_host_matches_numpy_target(dtype, tmp_path):
    from test_target_cuda import _host_module

    x = np.concatenate([np.linspace(-7.3, 30.1, 57), [1e-8, 0.5, 1.0, 2.0, -0.5]]).astype(dtype)
    mod = sg.compile(_cuda_forward, x, target="cuda", cache_ok=False)
    cu = next(text for n, text in mod.files.items() if n.endswith(".cu"))
    for helper in ("symgrad_lgamma(", "symgrad_digamma(", "symgrad_polygamma1(",
                   "symgrad_polygamma3(", "symgrad_erfinv(", "symgrad_i1e("):
        assert f"SG_DEVICE double {helper}" in cu
    ref = sg.compile(_cuda_forward, x, target="numpy")
    host = _host_module(mod, tmp_path)
    rtol = 1e-6 if dtype == "float32" else 1e-13
    want = ref.raw.forward(x)
    got = host.forward(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol)
    seed = np.ones_like(x)
    for g, w in zip(host.backward(seed, x), ref.raw.backward(seed, x)):
        np.testing.assert_allclose(g, w, rtol=rtol)


@pytest.mark.slow  # over 10 s: the quick run leaves it to CI
def test_cuda_source_compiles_with_nvcc(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    files = []
    for dtype in ("float32", "float64", "float16"):
        mod = sg.compile(_cuda_forward, np.linspace(1, 2, 8).astype(dtype), target="cuda",
                         cache_ok=False)
        path = tmp_path / f"special_{dtype}.cu"
        path.write_text(next(t for n, t in mod.files.items() if n.endswith(".cu")))
        files.append(str(path))
    proc = subprocess.run([nvcc, "-ptx", "-arch=sm_80", "-Werror", "all-warnings",
                           "--output-directory", str(tmp_path), *files],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.mark.parametrize("target", TARGETS)
def test_polygamma_higher_orders_and_tails(target):
    xs = np.array([1e-3, 0.3, 1.0, 2.5, 7.0, 30.0, 1e3, 1e200, -0.3, -3.7, -12.2])
    for n in (1, 4, 6, 10):
        m = sg.compile(lambda x, n=n: x.polygamma(n), target=target, dtype="float64")
        got = np.asarray(m.forward(xs))
        want = np.array([float(mpmath.psi(n, mpmath.mpf(float(x)))) for x in xs])
        np.testing.assert_allclose(got, want, rtol=4e-15, atol=0, err_msg=f"n={n}")


def test_torch_special_names():
    t = sg.tensor([0.3, 1.5, 2.5], dtype=sg.float64, requires_grad=True)
    pairs = [(sg.special.gammaln(t), sg.lgamma(t)), (sg.special.psi(t), sg.digamma(t)),
             (sg.special.digamma(t), sg.digamma(t)), (sg.special.polygamma(2, t), t.polygamma(2)),
             (sg.special.multigammaln(t + 1, 2), sg.mvlgamma(t + 1, 2)),
             (sg.special.erfinv(t / 3), sg.erfinv(t / 3)), (sg.special.i0(t), sg.i0(t)),
             (sg.special.i0e(t), sg.i0e(t)), (sg.special.i1(t), sg.i1(t)), (sg.special.i1e(t), sg.i1e(t))]
    for a, b in pairs:
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    # in a traced forward too
    m = sg.compile(lambda x: sg.special.gammaln(x) + sg.special.psi(x) + sg.special.i1e(x),
                   np.array([0.5, 2.0]))
    want = [float(mpmath.loggamma(v) + mpmath.digamma(v) + mpmath.exp(-v) * mpmath.besseli(1, v))
            for v in (0.5, 2.0)]
    np.testing.assert_allclose(np.asarray(m.forward(np.array([0.5, 2.0]))).ravel(), want, rtol=1e-14)
