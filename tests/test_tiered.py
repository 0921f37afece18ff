"""The tiered CPU target (the default, "auto"): NumPy first, the C module built in the
background and switched to between calls; pinning; no compiler; failed builds; threads.

(The rest of the suite runs pinned to NumPy: tests/conftest.py.)
"""
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import symgrad as sg
from symgrad import _tiers, native
from symgrad.autograd import function as fmod

needs_cc = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                              reason="no C compiler")
rng = np.random.default_rng(25)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# C vs NumPy: libmvec's math is within a few ulp of NumPy's (docs/fast-by-default.md)
RTOL = {np.float64: 1e-11, np.float32: 2e-5}


def _gelu_class():
    # a class per test: no module of another test is reused from memory
    class Gelu(sg.Function):
        @staticmethod
        def forward(ctx, x, w):
            z = x * w
            return (z * (1 + (z * 0.7071067811865476).erf()) * 0.5).tanh()
    return Gelu


def _entry(cls):
    (entry,) = [e for k, e in fmod._COMPILED.items() if k[0] is cls]
    return entry


def _run(cls, x0, w0):
    x = sg.tensor(x0, requires_grad=True)
    w = sg.tensor(w0, requires_grad=True)
    y = cls.apply(x, w)
    y.backward(sg.tensor(np.cos(x0)))
    return y, x.grad.numpy().copy(), w.grad.numpy().copy()


def _reference(x0, w0):
    import torch

    x = torch.tensor(x0, requires_grad=True)
    w = torch.tensor(w0, requires_grad=True)
    z = x * w
    y = (z * (1 + torch.erf(z * 0.7071067811865476)) * 0.5).tanh()
    y.backward(torch.cos(torch.tensor(x0)))
    return y.detach().numpy(), x.grad.numpy(), w.grad.numpy()


@needs_cc
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_first_calls_run_numpy_then_the_c_module(auto, dtype):
    G = _gelu_class()
    x0 = rng.standard_normal((64, 33)).astype(dtype)
    w0 = rng.standard_normal(33).astype(dtype)
    y1, gx1, gw1 = _run(G, x0, w0)
    entry = _entry(G)
    assert y1.grad_fn._mod.compiled.target == "numpy"
    assert sg.wait_for_builds(120)
    y2, gx2, gw2 = _run(G, x0, w0)
    assert entry.job is None and entry.mod.compiled.target == "c"
    assert y2.grad_fn._mod.compiled.target == "c"
    assert "fallback" not in entry.mod.compiled.stats
    tol = RTOL[dtype]
    for a, b in ((y1.detach().numpy(), y2.detach().numpy()), (gx1, gx2), (gw1, gw2)):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    # and both against torch
    ry, rgx, rgw = _reference(x0.astype(np.float64), w0.astype(np.float64))
    t = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(y2.detach().numpy(), ry, rtol=t, atol=t)
    np.testing.assert_allclose(gx2, rgx, rtol=t, atol=t)
    np.testing.assert_allclose(gw2, rgw, rtol=10 * t, atol=10 * t)


@needs_cc
def test_c_module_uses_the_saving_plan(auto):
    """The C module has forward_saving / backward_saved (one pass where one suffices), and
    the runtime's node keeps what the forward saved."""
    G = _gelu_class()
    x0, w0 = rng.standard_normal((8, 5)), rng.standard_normal(5)
    _run(G, x0, w0)
    sg.wait_for_builds(120)
    x, w = sg.tensor(x0, requires_grad=True), sg.tensor(w0, requires_grad=True)
    y = G.apply(x, w)
    mod = y.grad_fn._mod
    assert mod.compiled.target == "c"
    assert callable(mod.forward_saving) and callable(mod.backward_saved)
    assert y.grad_fn._extra is not None        # the C forward's intermediates, kept
    out, saved = mod.forward_saving(x0, w0)
    grads = mod.backward_saved(np.ones_like(x0), *saved, x0, w0)
    want = mod.backward(np.ones_like(x0), x0, w0)
    for a, b in zip(grads, want):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)


@needs_cc
def test_a_backward_uses_the_module_of_its_forward(auto):
    """A node recorded on NumPy runs its backward on NumPy after the switch to C (the saved
    intermediates of one are never fed to the other)."""
    G = _gelu_class()
    x0, w0 = rng.standard_normal((16, 7)), rng.standard_normal(7)
    x = sg.tensor(x0, requires_grad=True)
    w = sg.tensor(w0, requires_grad=True)
    y_numpy = G.apply(x, w)                     # recorded before the build finished
    assert sg.wait_for_builds(120)
    y_c = G.apply(x, w)                         # the switch happens here
    assert y_numpy.grad_fn._mod.compiled.target == "numpy"
    assert y_c.grad_fn._mod.compiled.target == "c"
    gx_c, gw_c = sg.autograd.grad(y_c.sum(), (x, w))
    gx_n, gw_n = sg.autograd.grad(y_numpy.sum(), (x, w))
    np.testing.assert_allclose(gx_c.numpy(), gx_n.numpy(), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(gw_c.numpy(), gw_n.numpy(), rtol=1e-11, atol=1e-12)
    # second order through the C module's gradient module
    x2 = sg.tensor(x0, requires_grad=True)
    (g,) = sg.autograd.grad(G.apply(x2, w).sum(), x2, create_graph=True)
    (gg,) = sg.autograd.grad(g.sum(), x2)
    import torch

    xt = torch.tensor(x0, requires_grad=True)
    z = xt * torch.tensor(w0)
    (gt,) = torch.autograd.grad((z * (1 + torch.erf(z * 0.7071067811865476)) * 0.5).tanh()
                                .sum(), xt, create_graph=True)
    (ggt,) = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-9, atol=1e-10)


@needs_cc
def test_the_build_starts_on_the_second_call(auto):
    G = _gelu_class()
    x0, w0 = rng.standard_normal((3, 6)), rng.standard_normal(6)   # a shape of its own
    _run(G, x0, w0)
    job = _entry(G).job
    assert job is not None and not job.queued and _tiers.pending() == 0
    _run(G, x0, w0)
    assert job.queued
    assert sg.wait_for_builds(120)
    _run(G, x0, w0)
    assert _entry(G).mod.compiled.target == "c"


@needs_cc
def test_one_build_per_signature(auto, monkeypatch):
    from symgrad import compiler

    G = _gelu_class()
    calls = []
    real = compiler.compile_function

    def counted(fn, args, target="numpy", kwargs=None):
        if target == "c":
            calls.append(fn)
        return real(fn, args, target=target, kwargs=kwargs)

    monkeypatch.setattr(compiler, "compile_function", counted)
    x0, w0 = rng.standard_normal((5, 2)), rng.standard_normal(2)   # a shape of its own
    for _ in range(5):
        _run(G, x0, w0)
    sg.wait_for_builds(120)
    _run(G, x0, w0)
    assert len(calls) == 1, calls
    assert _tiers.pending() == 0


def test_pinned_numpy_attribute_builds_nothing(auto, monkeypatch):
    submitted = []
    monkeypatch.setattr(_tiers, "submit", lambda *a: submitted.append(a))

    class Pinned(sg.Function):
        cpu_target = "numpy"

        @staticmethod
        def forward(ctx, x):
            return x.sin() * x

    x0 = rng.standard_normal(10)
    x = sg.tensor(x0, requires_grad=True)
    Pinned.apply(x).sum().backward()
    assert _entry(Pinned).mod.compiled.target == "numpy" and _entry(Pinned).job is None
    assert submitted == []
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x0) * x0 + np.sin(x0), rtol=1e-13)


@needs_cc
def test_pinned_c_attribute_blocks_as_before(auto):
    class PinnedC(sg.Function):
        cpu_target = "c"

        @staticmethod
        def forward(ctx, x):
            return x.sin() * x

    x0 = rng.standard_normal(10)
    PinnedC.apply(sg.tensor(x0))
    assert _entry(PinnedC).mod.compiled.target == "c" and _entry(PinnedC).job is None


def test_environment_pins_and_defaults():
    code = "import symgrad; print(symgrad.get_cpu_target())"
    env = {k: v for k, v in os.environ.items() if k != "SYMGRAD_CPU_TARGET"}
    for value, want in ((None, "auto"), ("numpy", "numpy"), ("c", "c"), ("auto", "auto")):
        if value is not None:
            env["SYMGRAD_CPU_TARGET"] = value
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True)
        assert run.stdout.strip() == want, run.stderr


def test_no_compiler_means_numpy_and_one_warning(auto, monkeypatch):
    monkeypatch.setenv("CC", "symgrad-no-such-cc")
    submitted = []
    monkeypatch.setattr(_tiers, "submit", lambda *a: submitted.append(a))
    G, H = _gelu_class(), _gelu_class()
    x0, w0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, gx, _ = _run(G, x0, w0)
        _run(G, x0, w0)
        _run(H, x0, w0)
    msgs = [str(w.message) for w in caught if "symgrad" in str(w.message)]
    assert len(msgs) == 1 and "no C compiler" in msgs[0] and "symgrad-no-such-cc" in msgs[0]
    assert submitted == []
    assert _entry(G).mod.compiled.target == "numpy"
    _, rgx, _ = _reference(x0, w0)
    np.testing.assert_allclose(gx, rgx, rtol=1e-12, atol=1e-13)


def test_a_failing_build_never_raises(auto, monkeypatch, tmp_path):
    """A compiler that fails: the calls run on NumPy, one warning names the failure, the
    signature stays on NumPy (no second build)."""
    cc = tmp_path / "badcc"
    cc.write_text("#!/bin/sh\necho 'badcc: internal compiler error' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))

    class G(sg.Function):    # a forward of its own: no C module of another test in memory
        @staticmethod
        def forward(ctx, x, w):
            z = x * w
            return (0.5 * z * (1 + (0.7071067811865476 * z).erf())).tanh()

    x0, w0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, gx1, _ = _run(G, x0, w0)
        assert sg.wait_for_builds(120)
        _, gx2, _ = _run(G, x0, w0)
        _, gx3, _ = _run(G, x0, w0)
    msgs = [str(w.message) for w in caught if "symgrad" in str(w.message)]
    assert len(msgs) == 1, msgs
    assert "could not be built" in msgs[0] and "internal compiler error" in msgs[0]
    entry = _entry(G)
    assert entry.job is None and entry.mod.compiled.target == "numpy"
    _, rgx, _ = _reference(x0, w0)
    for g in (gx1, gx2, gx3):
        np.testing.assert_allclose(g, rgx, rtol=1e-12, atol=1e-13)


def test_a_build_that_raises_anything_is_contained(auto, monkeypatch):
    from symgrad import compiler

    real = compiler.compile_function

    def broken(fn, args, target="numpy", kwargs=None):
        if target == "c":
            raise MemoryError("simulated")
        return real(fn, args, target=target, kwargs=kwargs)

    monkeypatch.setattr(compiler, "compile_function", broken)
    monkeypatch.setattr(compiler, "cached_function", lambda *a, **k: None)
    G = _gelu_class()
    x0, w0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    with pytest.warns(RuntimeWarning, match="could not be built.*MemoryError: simulated"):
        _run(G, x0, w0)
        sg.wait_for_builds(60)
        _run(G, x0, w0)
    assert _entry(G).mod.compiled.target == "numpy"


_SCRIPT = textwrap.dedent("""
    import sys, time, numpy as np, symgrad as sg
    from symgrad.autograd import function as fmod

    class Smooth(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return (x.sin() * x).exp() + (x * x + 1).log()

    x = sg.tensor(np.linspace(-1, 1, 1000), requires_grad=True)
    y = Smooth.apply(x)
    y.sum().backward()
    entry = [e for k, e in fmod._COMPILED.items() if k[0] is Smooth][0]
    print(entry.mod.compiled.target, entry.job is not None)
    mode = sys.argv[1]
    if mode == "wait":
        sg.wait_for_builds(120)
        Smooth.apply(x)
        print(entry.mod.compiled.target)
    elif mode == "exit":
        Smooth.apply(x)          # the second call starts the build; exit while it runs
    elif mode == "fork":
        import os
        Smooth.apply(x)          # the build starts, then the fork
        pid = os.fork()
        if pid == 0:
            ok = sg.wait_for_builds(120)
            Smooth.apply(x)
            os._exit(0 if ok and entry.mod.compiled.target == "c" else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
""")


def _script(tmp_path, mode, cache):
    path = tmp_path / "tiered_script.py"
    path.write_text(_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "SYMGRAD_CPU_TARGET"}
    env.update(SYMGRAD_CACHE_DIR=str(cache), PYTHONPATH=REPO)
    return subprocess.run([sys.executable, str(path), mode], env=env, capture_output=True,
                          text=True, timeout=300)


@needs_cc
@pytest.mark.slow
def test_next_process_runs_the_built_module_from_its_first_call(tmp_path):
    cache = tmp_path / "cache"
    first = _script(tmp_path, "wait", cache)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["numpy", "True", "c"], first.stdout
    second = _script(tmp_path, "none", cache)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["c", "False"], second.stdout


@needs_cc
@pytest.mark.slow
def test_exit_during_a_build_is_clean(tmp_path):
    """The interpreter exits while cc runs: no error, no traceback, nothing half-written left
    in the cache (the next process builds afresh and runs C)."""
    cache = tmp_path / "cache"
    run = _script(tmp_path, "exit", cache)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["numpy", "True"]
    assert run.stderr.strip() == "", run.stderr
    c_dir = cache / "c"
    left = [p.name for p in c_dir.iterdir()] if c_dir.exists() else []
    # a finished library (with its signature) may be there; never a temporary folder
    assert all(n.endswith((".so", ".sig")) for n in left), left
    again = _script(tmp_path, "wait", cache)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[-1] == "c"


@needs_cc
@pytest.mark.slow
def test_a_fork_child_finishes_the_pending_build(tmp_path):
    run = _script(tmp_path, "fork", tmp_path / "cache")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-2:] == ["child", "0"], run.stdout + run.stderr


@pytest.mark.slow  # over 10 s: the quick run leaves it to CI
def test_thread_count_defaults_to_physical_cores_and_env_overrides(monkeypatch):
    monkeypatch.delenv("SYMGRAD_NUM_THREADS", raising=False)
    cores = native.physical_cores()
    assert 1 <= cores <= (os.cpu_count() or 1)
    assert native.num_threads() == cores
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and "OMP_NUM_THREADS" not in os.environ:
        # torch's default: one thread per physical core (its own subprocess: this process'
        # torch may have been set by another test)
        out = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             capture_output=True, text=True, env={
                                 k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"})
        assert int(out.stdout) == cores
    monkeypatch.setenv("SYMGRAD_NUM_THREADS", "1")
    assert native.num_threads() == 1
    flags = native.compiler_and_flags()[2]
    assert "-fopenmp" not in flags and "-fopenmp-simd" in flags
    monkeypatch.setenv("SYMGRAD_NUM_THREADS", "3")
    flags = native.compiler_and_flags()[2]
    assert "-fopenmp" in flags and "-DSYMGRAD_THREADS=3" in flags
    monkeypatch.setenv("SYMGRAD_NUM_THREADS", "many")
    with pytest.warns(RuntimeWarning, match="SYMGRAD_NUM_THREADS='many'"):
        assert native.num_threads() == cores


def test_physical_cores_counts_cores_not_hyperthreads(monkeypatch, tmp_path):
    text = "".join(f"processor\t: {i}\nphysical id\t: 0\ncore id\t\t: {i // 2}\n\n"
                   for i in range(8))
    real_open = open

    def fake_open(path, *a, **k):
        if path == "/proc/cpuinfo":
            import io
            return io.StringIO(text)
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert native.physical_cores() == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert native.physical_cores() == 1


@needs_cc
@pytest.mark.slow
def test_a_forked_child_runs_threaded_loops_single_threaded(tmp_path):
    """libgomp's pool does not survive fork: a child's split loop hung (before the loader set
    the library's thread count to 1 after fork)."""
    code = textwrap.dedent("""
        import os, numpy as np, symgrad as sg
        class G(sg.Function):
            cpu_target = "c"
            @staticmethod
            def forward(ctx, x):
                return (x * 0.5).tanh() * x
        x = sg.tensor(np.linspace(-1, 1, 200000), requires_grad=True)
        G.apply(x).sum().backward()          # the parent's loops ran on 2 threads
        want = x.grad.numpy().copy()
        pid = os.fork()
        if pid == 0:
            x.grad = None
            G.apply(x).sum().backward()
            # (a chunk boundary moves: scalar vs vector math at a few elements, ulps apart)
            os._exit(0 if np.allclose(x.grad.numpy(), want, rtol=1e-12, atol=0) else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    env = dict(os.environ, SYMGRAD_NUM_THREADS="2", SYMGRAD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=REPO)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["child", "0"], run.stdout + run.stderr
