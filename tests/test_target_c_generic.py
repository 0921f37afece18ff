"""The C target as people use it without symgrad's help: compiled without example inputs
(sg.compile(fn, target="c"), the CLI without --shape): shape-generic fused C loops whose shape
the loader works out when it runs; a module that computes in its inputs' dtype when no dtype
was chosen; and the CLI's files imported on their own, which build their C on first use."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import symgrad as sg
from gradcheck_util import assert_close
from test_compiler_grads import CASES as GRAD_CASES
from test_compiler_grads import _grad_outputs
from test_target_cuda import CASES, DTYPES, _close, _extreme, _inputs

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
pytestmark = pytest.mark.skipif(not HAVE_CC, reason="no C compiler")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))


def _generic(fn, dtype):
    mod = sg.compile(fn, target="c", dtype=dtype, cache_ok=False)
    assert "fallback" not in mod.stats
    return mod


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _c_calls(mod, routine):
    """The lines of a loader routine that call C."""
    text = mod.source.split(f"\ndef {routine}(")[1].split("\ndef ")[0]
    return [line for line in text.splitlines() if "# C:" in line]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_generic_c_matches_numpy_target(name, fn, shapes, dtype):
    """Broadcasting, reductions between loops, several outputs, the stable rewrites' branches:
    the numbers equal the NumPy target's, at the shapes and at other ones, and at extremes."""
    mod = _generic(fn, dtype)
    assert _c_calls(mod, "forward") and _c_calls(mod, "backward")
    rng = np.random.default_rng(3)
    other = [tuple(2 * n if n > 1 else n for n in s) for s in shapes]
    for sh in (shapes, other):
        ref = sg.compile(fn, *_inputs(sh, dtype, rng), cache_ok=False)
        for xs in (_inputs(sh, dtype, rng), _extreme(sh, dtype, rng)):
            want = ref.raw.forward(*xs)
            got = mod.raw.forward(*xs)
            for g, w in zip(got, want):
                assert g.dtype == np.dtype(dtype)
                _close(g, w, dtype)
            seeds = [rng.standard_normal(np.shape(w)).astype(dtype) for w in want]
            for g, w in zip(mod.raw.backward(*seeds, *xs), ref.raw.backward(*seeds, *xs)):
                _close(g, w, dtype)


@pytest.mark.parametrize("name, fn, make", GRAD_CASES[1::2], ids=[c[0] for c in GRAD_CASES[1::2]])
def test_generic_c_matches_specialised_numpy(name, fn, make):
    inputs = make()
    try:
        mod = _generic(fn, "float64")
    except sg.errors.SymgradError as err:
        if "example" not in str(err):
            raise
        pytest.skip("needs ranks at trace time")
    fixed = sg.compile(fn, *inputs, cache_ok=False)
    want = fixed.forward(*inputs)
    gouts = _grad_outputs(want)
    for a, b in zip(_tuple(mod.forward(*inputs)), _tuple(want)):
        assert_close(a, b, rtol=1e-12, atol=1e-12, what=name)
    for a, b in zip(mod.backward(*gouts, *inputs), fixed.backward(*gouts, *inputs)):
        assert_close(a, b, rtol=1e-12, atol=1e-12, what=name)


def test_elementwise_backward_is_one_c_call_with_recomputed_forward_values_fused():
    """The backward's recomputed forward values (leaves: x) are read only by the gradients
    (leaves: grad_out, x): they are computed in the gradients' loop, not stored first."""
    mod = _generic(lambda x, y: (x.exp() * y).tanh() + x.sin() * y, "float64")
    assert len(_c_calls(mod, "forward")) == 1
    assert len(_c_calls(mod, "backward")) == 1
    kernels = next(t for n, t in mod.files.items() if n.endswith(".c"))
    assert "const int64_t size" in kernels


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 100, 1001])
def test_interleaved_lanes_cover_every_length(n):
    """A deep chain of math calls runs LANES elements per call, the lanes' length known only
    when it runs: every element is computed once, for lengths not divisible by the lanes."""
    def chain(x):
        for _ in range(4):
            x = x.tanh().sin() * 1.3
        return x

    mod = _generic(chain, "float64")
    kernels = next(t for n_, t in mod.files.items() if n_.endswith(".c"))
    assert re.search(r"const int64_t part = size / \d+;", kernels)
    x = np.random.default_rng(n).standard_normal(n)
    ref = sg.compile(chain, cache_ok=False)
    assert_close(mod.forward(x), ref.forward(x), rtol=1e-14, atol=1e-15)
    g = np.random.default_rng(n + 1).standard_normal(n)
    assert_close(mod.backward(g, x)[0], ref.backward(g, x)[0], rtol=1e-13, atol=1e-14)


def test_broadcast_strided_zero_d_and_integer_inputs():
    mod = _generic(lambda x, y: (x * y).exp() + x.sin(), "float64")
    ref = sg.compile(lambda x, y: (x * y).exp() + x.sin(), cache_ok=False)
    rng = np.random.default_rng(0)
    cases = [
        (rng.standard_normal((4, 1)), rng.standard_normal(5)),           # broadcast both
        (rng.standard_normal((6, 8))[::2, ::3], rng.standard_normal(3)),  # strided
        (np.float64(0.5), rng.standard_normal(3)),                       # 0-d
        (np.arange(6).reshape(2, 3), rng.standard_normal(3)),            # int array
        (rng.standard_normal((0, 3)), rng.standard_normal(3)),           # empty
    ]
    for x, y in cases:
        want = ref.forward(x, y)
        got = mod.forward(x, y)
        assert got.shape == want.shape and got.dtype == np.float64
        assert_close(got, want, rtol=1e-14, atol=1e-15)
        g = rng.standard_normal(want.shape)
        for a, b in zip(mod.backward(g, x, y), ref.backward(g, x, y)):
            assert np.shape(a) == np.shape(b)
            assert_close(a, b, rtol=1e-13, atol=1e-14)


def test_a_module_without_a_chosen_dtype_computes_in_its_inputs_dtype():
    """No example inputs and no dtype: float64 inputs run a float64 module (compiled on first
    use), float32 inputs a float32 one, as the NumPy target computes in its inputs' dtype;
    before, float64 inputs were cast to float32 and came back as float32."""
    fn = lambda x: x.tanh() * x.exp()   # noqa: E731
    mod = sg.compile(fn, target="c", cache_ok=False)
    x = np.linspace(-3, 3, 101)
    want = np.tanh(x) * np.exp(x)
    y = mod.forward(x)
    assert y.dtype == np.float64
    assert_close(y, want, rtol=1e-15, atol=1e-15)
    (g,) = mod.backward(np.ones(101, np.float32), x)   # the inputs decide, not grad_out
    assert g.dtype == np.float64
    assert_close(g, (1 - np.tanh(x) ** 2) * np.exp(x) + want, rtol=1e-14, atol=1e-14)
    y32 = mod.forward(x.astype(np.float32))
    assert y32.dtype == np.float32
    assert_close(y32, want, rtol=1e-5, atol=1e-5)
    # a dtype chosen explicitly (or by example inputs) is kept: another one is refused
    mod32 = sg.compile(fn, target="c", dtype="float32", cache_ok=False)
    with pytest.raises(TypeError, match="x is float64, but this module computes in float32"):
        mod32.forward(x)


def _cli_compile_act(tmp_path):
    """`symgrad compile act.py:Act --target c --dtype float64 -o out/` (no --shape): out/."""
    src = tmp_path / "act.py"
    src.write_text("import symgrad as sg\n\n\nclass Act(sg.Function):\n"
                   "    @staticmethod\n    def forward(ctx, x, y):\n"
                   "        return (x * y).sigmoid() * x.tanh()\n")
    out = tmp_path / "out"
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-m", "symgrad", "compile", f"{src}:Act", "--target", "c",
                    "--dtype", "float64", "-o", str(out)], check=True, env=env,
                   capture_output=True)
    return out


def test_cli_target_c_without_shapes_writes_c_loops(tmp_path):
    out = _cli_compile_act(tmp_path)
    loader = (out / "act_grad_c.py").read_text()
    assert "_call(_forward_c0" in loader and "_call(_backward_c0" in loader
    kernels = (out / "act_kernels.c").read_text()
    assert kernels.count("const int64_t size") == 2


def test_mixed_float32_float64_inputs_compute_in_float64():
    """A forward-only Function on the C target given a float32 and a float64 tensor computes
    in float64, as NumPy and torch promote (the examples' widest dtype; float32 is widened)."""
    class Mixed(sg.Function):
        cpu_target = "c"

        @staticmethod
        def forward(ctx, x, y):
            return (x * y).exp()

    x = sg.tensor([1.0, 2.0], dtype=sg.float32, requires_grad=True)
    y = sg.tensor([0.5, 1e-9], dtype=sg.float64, requires_grad=True)
    z = Mixed.apply(x, y)
    assert z.dtype == sg.float64
    z.sum().backward()
    want = np.exp(np.array([1.0, 2.0]) * np.array([0.5, 1e-9]))
    assert_close(z.detach().numpy(), want, rtol=1e-15, atol=0)
    assert_close(y.grad.numpy(), np.array([1.0, 2.0]) * want, rtol=1e-15, atol=0)
    assert x.grad.dtype == sg.float32
    mod64 = sg.compile(lambda a: a.exp(), target="c", dtype="float64", cache_ok=False)
    out = mod64.forward(np.float32([1.5]))
    assert out.dtype == np.float64 and out[0] == np.exp(np.float64(np.float32(1.5)))


_STANDALONE = """
import warnings
import numpy as np
import act_grad_c as m
x = np.linspace(-2, 2, 7)
y = np.full(7, 0.5)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    (out,) = m.forward(x, y)
    gx, gy = m.backward(np.ones(7), x, y)
s = 1 / (1 + np.exp(-x * y))
t = np.tanh(x)
assert np.allclose(out, s * t, rtol=1e-14, atol=1e-15)
assert np.allclose(gx, s * (1 - s) * y * t + s * (1 - t * t), rtol=1e-13, atol=1e-15)
assert np.allclose(gy, s * (1 - s) * x * t, rtol=1e-13, atol=1e-15)
print("bound" if m._lib is not None else "fallback", len(caught), caught and caught[0].message)
"""


def test_cli_c_module_imported_on_its_own_builds_its_library_or_falls_back(tmp_path):
    """`symgrad compile --target c` writes a loader, its C file and the NumPy fallback. In a
    process without symgrad (only numpy), the loader builds the C file on its first call and
    keeps the library beside it; with no compiler it runs the NumPy module and warns once.
    (It raised "'NoneType' object is not callable": the loader needed bind() first.)"""
    out = _cli_compile_act(tmp_path)
    bare = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path))}
    numpy_dir = os.path.dirname(os.path.dirname(np.__file__))
    bare["PYTHONPATH"] = numpy_dir   # numpy only (it may live beside symgrad's own install)
    script = "import sys; assert 'symgrad' not in sys.modules\n" + _STANDALONE
    run = subprocess.run([sys.executable, "-c", script + "assert 'symgrad' not in sys.modules"],
                         cwd=out, env=bare, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[:2] == ["bound", "0"]
    assert [p.name for p in out.glob("act_kernels-*.so")]
    for lib in out.glob("*.so"):
        lib.unlink()
    run = subprocess.run([sys.executable, "-c", _STANDALONE], cwd=out,
                         env=dict(bare, CC="/nonexistent/cc"), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("fallback 1 act_kernels.c is unavailable (no C compiler")
