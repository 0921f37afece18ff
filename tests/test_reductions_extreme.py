"""Reductions and normalizations at extreme inputs (±inf, NaN, zeros, ties, a single element):
values and gradients as torch gives them, hard-coded (torch is no test dependency) or computed
in closed form with NumPy, through every user path: the runtime (`sg.logsumexp(t, 1)` and
`.backward()`), a forward-only `sg.Function` (the compiled NumPy module), the C target and the
CUDA target's host check (its device code compiled with gcc)."""
import math
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

import symgrad as sg

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
inf, nan = math.inf, math.nan


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Each test compiles into its own cache directory (a cache hit would hide a bug)."""
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))


# ------------------------------------------------------------------ the three user paths
def _runtime(fn, x):
    t = sg.tensor(x, requires_grad=True)
    y = fn(t)
    y.backward(sg.ones_like(y))
    return y.detach().numpy(), t.grad.numpy()


def _function(fn, x):
    class F(sg.Function):
        @staticmethod
        def forward(ctx, a):
            return fn(a)

    t = sg.tensor(x, requires_grad=True)
    y = F.apply(t)
    y.backward(sg.ones_like(y))
    return y.detach().numpy(), t.grad.numpy()


def _c(fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # a silent NumPy fallback fails here
        mod = sg.compile(fn, x, target="c", cache_ok=False)
    assert "fallback" not in mod.stats
    y = np.asarray(mod.forward(x))
    (g,) = mod.backward(np.ones_like(y), x)
    return y, np.asarray(g)


PATHS = [pytest.param(_runtime, id="runtime"), pytest.param(_function, id="function"),
         pytest.param(_c, id="c", marks=needs_cc)]


def _same(got, want, what, rtol=1e-12, atol=0.0):
    """Equal, with nan where nan is wanted and infinities of the same sign."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def _softmax(row):
    e = np.exp(np.asarray(row) - np.max(row))
    return e / e.sum()


# ------------------------------------------------------------------ logsumexp over a dim
LSE_ROWS = np.array([[-inf, -inf, -inf],    # torch: -inf (was nan)
                     [1.0, inf, 2.0],       # torch: inf (was nan)
                     [inf, -inf, 0.0],
                     [-inf, 0.0, 1.0],
                     [0.0, 1.0, 2.0]])
LSE_VALUE = np.array([-inf, inf, inf, math.log(1 + math.e), math.log(1 + math.e + math.e ** 2)])
# torch's exp(x - result): nan for the -inf row, 0 at the finite entries beside a +inf
LSE_GRAD = np.array([[nan, nan, nan], [0.0, nan, 0.0], [nan, 0.0, 0.0],
                     _softmax([-inf, 0.0, 1.0]), _softmax([0.0, 1.0, 2.0])])


@pytest.mark.parametrize("path", PATHS)
def test_logsumexp_of_infinite_rows(path):
    y, g = path(lambda t: sg.logsumexp(t, 1), LSE_ROWS)
    _same(y, LSE_VALUE, "logsumexp value")
    _same(g, LSE_GRAD, "logsumexp gradient")


@pytest.mark.parametrize("path", PATHS)
def test_logsumexp_keepdim_and_leading_dim(path):
    y, g = path(lambda t: t.logsumexp(1, keepdim=True), LSE_ROWS)
    _same(y, LSE_VALUE[:, None], "keepdim value")
    _same(g, LSE_GRAD, "keepdim gradient")
    y, g = path(lambda t: t.logsumexp(0), LSE_ROWS.T.copy())
    _same(y, LSE_VALUE, "dim 0 value")
    _same(g, LSE_GRAD.T, "dim 0 gradient")


@pytest.mark.parametrize("path", PATHS)
def test_log_sum_exp_written_out_of_infinite_rows(path):
    # log(sum(exp(x))) written out is computed max-shifted (the same shift as logsumexp)
    y, g = path(lambda t: t.exp().sum(1).log(), LSE_ROWS)
    _same(y, LSE_VALUE, "log(sum(exp)) value")
    _same(g, LSE_GRAD, "log(sum(exp)) gradient")


@pytest.mark.parametrize("path", PATHS)
def test_log_softmax_and_softmax_of_infinite_rows_are_torchs(path):
    # torch shifts these by the max itself: a row of -inf or with a +inf is nan throughout
    rows = LSE_ROWS[[0, 1, 3]]
    y, g = path(lambda t: t.log_softmax(1), rows)
    sm = _softmax([-inf, 0.0, 1.0])
    _same(y, [[nan] * 3, [nan] * 3, [-inf, *np.log(sm[1:])]], "log_softmax value")
    _same(g, [[nan] * 3, [nan] * 3, 1 - 3 * sm], "log_softmax gradient")
    y, g = path(lambda t: t.softmax(1), rows)
    _same(y, [[nan] * 3, [nan] * 3, sm], "softmax value")
    _same(g[:2], [[nan] * 3] * 2, "softmax gradient")
    _same(g[2], [0.0, 0.0, 0.0], "softmax gradient", atol=1e-15)


@pytest.mark.parametrize("path", PATHS)
def test_logcumsumexp_of_infinite_prefixes(path):
    x = np.array([[-inf, -inf, -inf], [1.0, inf, 2.0], [-inf, 0.0, 1.0]])
    y, _ = path(lambda t: t.logcumsumexp(1), x)
    _same(y, [[-inf] * 3, [1.0, inf, inf], [-inf, 0.0, math.log(1 + math.e)]],
          "logcumsumexp value")


# ------------------------------------------- the elementwise logsumexp of a rewrite, logaddexp
def _lse3(t):
    return (t[:, 0].exp() + t[:, 1].exp() + t[:, 2].exp()).log()


def _lae(t):
    return (t[:, 0].exp() + t[:, 1].exp()).log()


@pytest.mark.parametrize("path", PATHS[1:])
def test_elementwise_logsumexp_of_infinities(path):
    # log(exp(a) + exp(b) + exp(c)) is rewritten to logsumexp(a, b, c): the NumPy helper and
    # the C code shifted by max(a, b, c), and -inf - -inf (inf - inf) was nan
    y, g = path(_lse3, LSE_ROWS)
    _same(y, LSE_VALUE, "value")
    _same(g, LSE_GRAD, "gradient")


def test_the_three_term_rewrite_is_what_runs():
    mod = sg.compile(_lse3, LSE_ROWS, cache_ok=False)
    assert "_logsumexp(" in mod.source


@needs_cc
def test_c_logaddexp_of_equal_infinities():
    # log(exp(a) + exp(b)) is logaddexp(a, b): max + log1p(exp(-|a - b|)) was nan at a = b = ±inf
    x = np.array([[-inf, -inf], [inf, inf], [inf, -inf], [1.0, 2.0], [3.0, 3.0]])
    mod = sg.compile(_lae, x, target="c", cache_ok=False)
    assert "log1p" in next(t for n, t in mod.files.items() if n.endswith(".c"))
    _same(mod.forward(x), np.logaddexp(x[:, 0], x[:, 1]), "C logaddexp")


# ------------------------------------------------------------------------ cummax / cummin
CUM_ROWS = np.array([[-inf, -inf, 5.0, 1.0],
                     [nan, 1.0, 2.0, 0.0],
                     [1.0, nan, 2.0, nan],
                     [inf, 1.0, inf, 2.0],
                     [2.0, 1.0, 2.0, 3.0]])
# torch: the index of the last running max so far, or of the last NaN (which propagates)
CUMMAX_INDEX = np.array([[0, 1, 2, 2], [0, 0, 0, 0], [0, 1, 1, 3], [0, 0, 2, 2], [0, 0, 2, 3]])
CUMMIN_INDEX = np.array([[0, 1, 1, 1], [0, 0, 0, 0], [0, 1, 1, 3], [0, 1, 1, 1], [0, 1, 1, 1]])


@pytest.mark.parametrize("kind, index", [("cummax", CUMMAX_INDEX), ("cummin", CUMMIN_INDEX)])
def test_cummax_cummin_indices_and_values(kind, index):
    values, indices = getattr(sg.tensor(CUM_ROWS), kind)(1)
    np.testing.assert_array_equal(indices.numpy(), index)
    _same(values.numpy(), np.take_along_axis(CUM_ROWS, index, 1), f"{kind} values", rtol=0)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind, index", [("cummax", CUMMAX_INDEX), ("cummin", CUMMIN_INDEX)])
def test_cummax_cummin_gradient_goes_to_the_index(path, kind, index):
    y, g = path(lambda t: getattr(t, kind)(1)[0], CUM_ROWS)
    _same(y, np.take_along_axis(CUM_ROWS, index, 1), f"{kind} values", rtol=0)
    counts = np.array([np.bincount(row, minlength=4) for row in index], dtype=np.float64)
    _same(g, counts, f"{kind} gradient", rtol=0)


# ------------------------------------------------------------------------------- var / std
@pytest.mark.parametrize("path", PATHS)
def test_var_std_of_one_element_with_correction_is_nan(path):
    # torch: sum / max(0, n - correction) = 0 / 0, a nan value and gradient (was a trace error)
    x = np.array([[2.0], [3.0]])
    for fn in (lambda t: t.var(1), lambda t: t.std(1)):
        y, g = path(fn, x)
        _same(y, [nan, nan], "value")
        _same(g, [[nan], [nan]], "gradient")
    y, g = path(lambda t: t[:1].var(), x)
    _same(y, nan, "var of every element")
    _same(g, [[nan], [0.0]], "its gradient")
    y, g = path(lambda t: t.var(1, correction=0), x)
    _same(y, [0.0, 0.0], "population variance", rtol=0)
    _same(g, [[0.0], [0.0]], "its gradient", rtol=0)


@pytest.mark.parametrize("path", PATHS)
def test_var_with_correction_past_the_count_is_inf(path):
    # torch: max(0, 2 - 3) = 0 divides 0.5: inf (a negative count gave -0.5)
    y, _ = path(lambda t: t.var(1, correction=3), np.array([[1.0, 2.0]]))
    _same(y, [inf], "var, no degrees of freedom")


@pytest.mark.parametrize("target", ["numpy", pytest.param("c", marks=needs_cc)])
def test_shape_generic_var_clamps_the_count(target):
    mod = sg.compile(lambda t: t.var(1, correction=3), target=target, dtype="float64",
                     cache_ok=False)
    _same(mod.forward(np.array([[1.0, 2.0]])), [inf], "generic var")
    _same(mod.forward(np.array([[1.0, 2.0, 4.0, 7.0]])), [np.var([1, 2, 4, 7]) * 4],
          "generic var, one degree of freedom")


# --------------------------------------------------------------------------- p-norms, p < 1
NORM_ROWS = np.array([[0.0, 1.0, -4.0], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("norm", [lambda t: t.norm(0.5, dim=1),
                                  lambda t: sg.linalg.vector_norm(t, 0.5, dim=1)],
                         ids=["norm", "vector_norm"])
def test_half_norm_gradient_is_zero_at_zero_entries(path, norm):
    # (sum sqrt|x|)**2; d/dx_i = (sum sqrt|x|) * sign(x_i) / sqrt|x_i|, and 0 where x_i = 0
    # (torch's subgradient; inf * 0 = nan before)
    y, g = path(norm, NORM_ROWS)
    _same(y, [9.0, 0.0, 2.0], "0.5-norm")
    _same(g, [[0.0, 3.0, -1.5], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], "0.5-norm gradient")


@pytest.mark.parametrize("path", PATHS)
def test_negative_p_norm_gradient_is_zero_at_zero_entries(path):
    # p = -1: (sum 1/|x|)**-1; a zero entry makes the sum inf and the norm 0, its gradient 0
    y, g = path(lambda t: t.norm(-1, dim=1), np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 2.0]]))
    _same(y, [0.0, 0.4], "-1-norm")
    _same(g, [[0.0, 0.0, 0.0], [0.16, 0.16, 0.04]], "-1-norm gradient")


# ------------------------------------------------------ the CUDA target's device code (gcc)
CUDA_CASES = [
    ("logsumexp", lambda t: t.logsumexp(1), LSE_ROWS, LSE_VALUE, LSE_GRAD),
    ("lse3", _lse3, LSE_ROWS, LSE_VALUE, LSE_GRAD),
    ("logaddexp", _lae, np.array([[-inf, -inf], [inf, inf], [1.0, 2.0]]),
     np.array([-inf, inf, np.logaddexp(1.0, 2.0)]),
     np.array([[nan, nan], [nan, nan], [_softmax([1.0, 2.0])[0], _softmax([1.0, 2.0])[1]]])),
]


@pytest.mark.parametrize("name, fn, x, value, grad", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_cuda_device_code_on_the_host(name, fn, x, value, grad, tmp_path):
    from test_target_cuda import _host_module

    mod = sg.compile(fn, x, target="cuda", cache_ok=False)
    host = _host_module(mod, tmp_path)
    (y,) = host.forward(x)
    _same(y, value, f"{name} on the CUDA target")
    (g,) = host.backward(np.ones_like(y), x)
    _same(g, grad, f"{name} gradient on the CUDA target")


def test_cuda_cummax_on_the_host(tmp_path):
    from test_target_cuda import _host_module

    mod = sg.compile(lambda t: t.cummax(1)[0], CUM_ROWS, target="cuda", cache_ok=False)
    host = _host_module(mod, tmp_path)
    (y,) = host.forward(CUM_ROWS)
    _same(y, np.take_along_axis(CUM_ROWS, CUMMAX_INDEX, 1), "cummax on the CUDA target", rtol=0)


@pytest.mark.slow  # over 10 s: the quick run leaves it to CI
def test_cuda_kernels_compile_with_nvcc(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    files = []
    cummax = ("cummax", lambda t: t.cummax(1)[0], CUM_ROWS, None, None)
    for name, fn, x, _, _ in CUDA_CASES + [cummax]:   # cummax: a kernel without inputs
        for dtype in ("float32", "float64"):
            mod = sg.compile(fn, x.astype(dtype), target="cuda", cache_ok=False)
            path = tmp_path / f"{name}_{dtype}.cu"
            path.write_text(next(t for n, t in mod.files.items() if n.endswith(".cu")))
            files.append(str(path))
    proc = subprocess.run([nvcc, "-ptx", "-arch=sm_80", "-Werror", "all-warnings",
                           "--output-directory", str(tmp_path), *files],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
