"""The C target's trusted twins (`_forward_trusted`, `_backward_trusted`): the routine without
the shape check, casts and copies that arrays of the module's dtype, shapes and layout need
not, which the runtime calls instead of it (autograd/_module_calls.py `_twin`). Equal results
where the guard passes; the routine's own result or error for any other argument."""
import os
import shutil
import warnings

import numpy as np
import pytest

import symgrad as sg
from symgrad.autograd import _compiled_functions as compiled
from symgrad.autograd import _module_calls as calls

needs_cc = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                              reason="no C compiler")
pytestmark = needs_cc

rng = np.random.default_rng(7)
X = rng.uniform(0.5, 2.0, (5, 3)).astype(np.float32)
Y = rng.uniform(-1.0, 1.0, (5, 3)).astype(np.float32)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))


def _f(x, y):
    return x * sg.exp(y) + sg.sin(x * y)


def _raw():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # no silent NumPy fallback
        return sg.compile(_f, X, Y, target="c", cache_ok=False).raw


def _grads(x, y, g):
    """Closed form of the VJP of _f."""
    c = np.cos(x * y)
    return g * (np.exp(y) + y * c), g * (x * np.exp(y) + x * c)


def test_twins_equal_the_routines_and_return_the_c_outputs_as_they_are():
    raw = _raw()
    g = np.cos(X).astype(np.float32)
    (out,) = raw.forward(X, Y)
    (tout,) = raw._forward_trusted(X, Y)
    np.testing.assert_array_equal(tout, out)
    assert tout.dtype == np.float32 and tout.flags.c_contiguous and tout.base is None
    b = raw.backward(g, X, Y)
    tb = raw._backward_trusted(g, X, Y)
    for r, t, want in zip(b, tb, _grads(X, Y, g)):
        np.testing.assert_array_equal(t, r)
        np.testing.assert_allclose(t, want, rtol=2e-5, atol=1e-6)


def test_twins_hand_any_other_argument_to_the_routine():
    raw = _raw()
    (want,) = raw.forward(X, Y)
    xt = np.ascontiguousarray(X.T).T          # same values, Fortran order
    assert not xt.flags.c_contiguous
    np.testing.assert_array_equal(raw._forward_trusted(xt, Y)[0], want)
    np.testing.assert_array_equal(raw._forward_trusted(X.tolist(), Y)[0], want)
    # the routine's own refusals, word for word
    with pytest.raises(TypeError, match="float64, but this module computes in float32"):
        raw._forward_trusted(X.astype(np.float64), Y)
    with pytest.raises(ValueError, match="has shape \\(3, 5\\), but this module was generated"):
        raw._forward_trusted(np.ascontiguousarray(X.T), Y)
    # a grad output given as a broadcastable 1.0, as the routine takes it
    g1 = raw._backward_trusted(np.float32(1.0), X, Y)
    for t, want in zip(g1, _grads(X, Y, np.ones_like(X))):
        np.testing.assert_allclose(t, want, rtol=2e-5, atol=1e-6)


def test_the_runtime_calls_the_twins(monkeypatch, request):
    request.addfinalizer(calls._TWIN.clear)   # it would keep the spies below
    class Fused(sg.Function):
        cpu_target = "c"

        @staticmethod
        def forward(ctx, x, y):
            return _f(x, y)

    def run(x0, y0):
        x = sg.tensor(x0, requires_grad=True)
        y = sg.tensor(y0, requires_grad=True)
        out = Fused.apply(x, y)
        g = np.cos(x0).astype(x0.dtype)
        out.backward(sg.tensor(g))
        return out.detach().numpy(), x.grad.numpy(), y.grad.numpy(), g

    run(X, Y)   # compiled
    (entry,) = [e for k, e in compiled._COMPILED.items() if k[0] is Fused]
    raw = entry.mod.compiled.raw   # the generated module (entry.mod: its RuntimeModule)
    assert calls._twin(raw.forward) is raw._forward_trusted
    assert calls._twin(raw.backward) is raw._backward_trusted
    seen = []

    def spy(name):
        real = getattr(raw, name)

        def call(*args):
            seen.append(name)
            return real(*args)
        return call

    calls._TWIN.clear()   # a cache: the spies are looked up afresh
    monkeypatch.setattr(raw, "_forward_trusted", spy("_forward_trusted"))
    monkeypatch.setattr(raw, "_backward_trusted", spy("_backward_trusted"))
    out, gx, gy, g = run(X, Y)
    assert seen == ["_forward_trusted", "_backward_trusted"]
    np.testing.assert_allclose(out, X * np.exp(Y) + np.sin(X * Y), rtol=2e-6)
    want_x, want_y = _grads(X, Y, g)
    np.testing.assert_allclose(gx, want_x, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(gy, want_y, rtol=2e-5, atol=1e-6)
    # a Fortran-ordered input of the same signature: the twin's guard sends it to the routine
    xf = np.asfortranarray(X)
    out, gx, gy, g = run(xf, Y)
    np.testing.assert_allclose(out, X * np.exp(Y) + np.sin(X * Y), rtol=2e-6)
    np.testing.assert_allclose(gx, _grads(X, Y, g)[0], rtol=2e-5, atol=1e-6)


def test_one_input_function_fast_path_uses_the_twin_and_keeps_version_checks():
    class Lj(sg.Function):
        cpu_target = "c"

        @staticmethod
        def forward(ctx, r):
            s = 0.9 / r
            return 4 * 1.5 * (s ** 12 - s ** 6)

    r0 = np.linspace(0.8, 3.0, 16, dtype=np.float32)
    for _ in range(3):   # the first call compiles, the next ones take the fast path
        r = sg.tensor(r0, requires_grad=True)
        Lj.apply(r).backward(sg.ones(16))
        s = 0.9 / r0.astype(np.float64)
        want = 6.0 * (-12 * s ** 12 + 6 * s ** 6) / r0
        np.testing.assert_allclose(r.grad.numpy(), want, rtol=1e-4)
    (entry,) = [e for k, e in compiled._COMPILED.items() if k[0] is Lj]
    assert entry.call is entry.mod.compiled.raw._forward_trusted
    r = sg.tensor(r0, requires_grad=True)
    y = Lj.apply(r)
    with sg.no_grad():
        r.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward(sg.ones(16))
