"""The C target's inline math (templates/c/vector_math.c.jinja): max ulp error against a wider
reference over wide ranges, and the reference's answers at the extremes (0, subnormals,
overflow thresholds, inf, NaN). The functions are compiled with the target's own flags in a
vectorized loop, exactly as generated kernels call them."""
import ctypes
import os
import shutil

import numpy as np
import pytest

from symgrad.emit import c as cmod

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
pytestmark = pytest.mark.skipif(not HAVE_CC, reason="no C compiler")

NAMES = ("tanh_softplus", "tanh")
# the functions defined in only one precision (float tanh stays libmvec's tanhf)
ONLY = {"tanh": "double"}
# max ulp error allowed, per (function, float type)
# (libmvec's exp is within 4 ulp itself; 1e6 samples measured 3.9 ulp float, 4.5 ulp double)
MAX_ULP = {("tanh_softplus", "float"): 6, ("tanh_softplus", "double"): 6,
           ("tanh", "double"): 5}   # measured 3.5 ulp (libmvec expm1 + a division)


def _library(float_type, tmp_path):
    f = "f" if float_type == "float" else ""
    runs = "\n".join(
        f"void run_{n}(const {float_type} *x, {float_type} *y, int64_t n)\n"
        f"{{\n    SYMGRAD_SIMD\n    for (int64_t i = 0; i < n; i++) y[i] = symgrad_{n}{f}(x[i]);\n}}"
        for n in NAMES if ONLY.get(n, float_type) == float_type)
    source = "\n".join([
        "#include <math.h>", "#include <stdint.h>",
        "#define SYMGRAD_INLINE static inline __attribute__((always_inline))",
        "#if defined(SYMGRAD_OPENMP_SIMD)", '#define SYMGRAD_SIMD _Pragma("omp simd")',
        "#else", "#define SYMGRAD_SIMD", "#endif",
        '_Pragma("omp declare simd notinbranch") __attribute__((const)) float expf(float);',
        '_Pragma("omp declare simd notinbranch") __attribute__((const)) double exp(double);',
        '_Pragma("omp declare simd notinbranch") __attribute__((const)) double expm1(double);',
        cmod.inline_math_c(float_type, set(NAMES)), runs, ""])
    lib = ctypes.CDLL(cmod.build(source, f"math_{float_type}.c"))
    np_type = np.float32 if float_type == "float" else np.float64

    def call(name, x):
        x = np.ascontiguousarray(x, dtype=np_type)
        y = np.empty_like(x)
        fn = getattr(lib, f"run_{name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        fn(x.ctypes.data, y.ctypes.data, x.size)
        return y
    return call


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    os.environ.setdefault("SYMGRAD_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    tmp = tmp_path_factory.mktemp("math")
    return {t: _library(t, tmp) for t in ("float", "double")}


def _wide(np_type, lo, hi, n=200_000, seed=0):
    """Values spread over magnitudes (log-uniform) and signs within [lo, hi], plus a uniform
    sample of the same range."""
    rng = np.random.default_rng(seed)
    tiny = np.finfo(np_type).smallest_subnormal
    mags = np.exp(rng.uniform(np.log(tiny), np.log(max(abs(lo), abs(hi))), n))
    signs = rng.choice([-1.0, 1.0], n)
    x = np.concatenate([mags * signs, rng.uniform(lo, hi, n)])
    return x[(x >= lo) & (x <= hi)].astype(np_type)


def _reference(name, x):
    """The exact value, as float64 for float32 inputs and long double for float64 ones."""
    wide = x.astype(np.float64 if x.dtype == np.float32 else np.longdouble)
    return {"tanh_softplus": lambda v: np.tanh(np.logaddexp(0, v)),
            "tanh": np.tanh}[name](wide)


def ulp_error(got, ref, np_type):
    """|got - ref| in units of the last place of ref in np_type (subnormal spacing below)."""
    with np.errstate(over="ignore", invalid="ignore"):
        ref_t = ref.astype(np_type)
        spacing = np.spacing(np.abs(ref_t)).astype(ref.dtype)
        err = np.abs(got.astype(ref.dtype) - ref) / spacing
    same = (got == ref_t) | (np.isnan(got) & np.isnan(ref_t))
    return np.where(same, 0.0, err)


DOMAINS = {   # (lo, hi) of the accuracy sample per function and type
    ("tanh_softplus", "float"): (-104.0, 100.0), ("tanh_softplus", "double"): (-746.0, 800.0),
    ("tanh", "double"): (-800.0, 800.0),
}


@pytest.mark.parametrize("float_type", ["float", "double"])
@pytest.mark.parametrize("name", NAMES)
def test_max_ulp_error_over_wide_ranges(libs, name, float_type):
    if ONLY.get(name, float_type) != float_type:
        pytest.skip(f"{name} is only inline in {ONLY[name]}")
    np_type = np.float32 if float_type == "float" else np.float64
    lo, hi = DOMAINS[(name, float_type)]
    x = _wide(np_type, lo, hi)
    got = libs[float_type](name, x)
    ref = _reference(name, x)
    err = ulp_error(got, ref, np_type)
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP[(name, float_type)], (
        f"{name}{'f' if float_type == 'float' else ''}({x[worst]!r}) = {got[worst]!r}, "
        f"exact {ref[worst]!r}: {err[worst]:.2f} ulp")


@pytest.mark.parametrize("float_type", ["float", "double"])
@pytest.mark.parametrize("name", NAMES)
def test_extremes_match_the_reference(libs, name, float_type):
    if ONLY.get(name, float_type) != float_type:
        pytest.skip(f"{name} is only inline in {ONLY[name]}")
    np_type = np.float32 if float_type == "float" else np.float64
    fi = np.finfo(np_type)
    specials = [0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, -fi.tiny,
                fi.eps, 1.0, -1.0, 0.5, 2.0, fi.max, -fi.max, np.inf, -np.inf, np.nan,
                88.72, 88.73, 89.0, -87.3, -103.0, -104.0, 709.78, 709.79, 710.0, -745.1,
                -746.0, 1e4, -1e4, 0.625, -0.625, 9.0, 20.0, -1.0 + fi.eps, 1e-30, -1e-30]
    with np.errstate(all="ignore"):
        x = np.array(specials, dtype=np.float64).astype(np_type)
        got = libs[float_type](name, x)
        ref = _reference(name, x)
        ref_t = ref.astype(np_type)
    assert np.array_equal(np.isnan(got), np.isnan(ref_t)), (x, got, ref_t)
    finite = np.isfinite(ref_t)
    assert np.array_equal(got[~finite & ~np.isnan(ref_t)], ref_t[~finite & ~np.isnan(ref_t)])
    assert np.all(np.isfinite(got[finite])), (x[finite], got[finite])
    err = ulp_error(got[finite], ref[finite], np_type)
    assert err.max() <= MAX_ULP[(name, float_type)], (x[finite], got[finite], err)
    if name == "tanh_softplus":   # 0 only where exp(x) underflows: never negative
        assert not np.any(got < 0)
    if name == "tanh":            # odd, signed zeros kept, |tanh| <= 1
        num = ~np.isnan(x)
        assert np.array_equal(np.signbit(got[num]), np.signbit(x[num]))
        assert np.all(np.abs(got[num]) <= 1)


if __name__ == "__main__":   # a table of the measured max ulp errors
    import tempfile

    os.environ.setdefault("SYMGRAD_CACHE_DIR", tempfile.mkdtemp())
    for float_type in ("float", "double"):
        call = _library(float_type, None)
        np_type = np.float32 if float_type == "float" else np.float64
        for name in NAMES:
            if ONLY.get(name, float_type) != float_type:
                continue
            lo, hi = DOMAINS[(name, float_type)]
            x = _wide(np_type, lo, hi, n=1_000_000)
            got = call(name, x)
            err = ulp_error(got, _reference(name, x), np_type)
            w = int(np.argmax(err))
            print(f"{name}{'f' if float_type == 'float' else '':1s} {float_type:6s} "
                  f"[{lo:g}, {hi:g}]: max {err[w]:.2f} ulp at {x[w]!r}, "
                  f"mean {err.mean():.3f}")
