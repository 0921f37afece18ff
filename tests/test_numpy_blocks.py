"""Elementwise NumPy routines on large arrays run in cache-sized blocks (`_in_blocks`).

Blocked and whole-array evaluation must give bit-identical results (every step is per
element), keep shapes, dtypes and the nested return structure, and fall back to whole-array
evaluation for anything else: broadcasting arguments, small arrays, Dask arrays, routines with
reductions.
"""
import importlib.util
import sys

import numpy as np
import pytest

import symgrad as sg

N_BIG = (1 << 18) + 4099          # float64: 2 MiB and a partial last block


def _load(mod, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(mod.source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _gelu(x):
    return 0.5 * x * (1.0 + sg.erf(x * 0.7071067811865476))


def _pair(a, b):
    s = sg.tanh(a * b) + sg.exp(-a * a)
    return s * sg.sin(b), sg.sqrt(1.0 + s * s) / (1.0 + b * b)


def _whole(fn, *args):
    """fn evaluated on slices below the blocking threshold, concatenated: no blocks anywhere.
    (_sg_blocks: the slices are blocks of a checked call, as the module's own _in_blocks
    marks them, so the module's input-shape check lets them through.)"""
    _sg_blocks = True  # noqa: F841  (read from this frame by the module's _check_shapes)
    n = next(a.size for a in args if isinstance(a, np.ndarray) and a.ndim)
    shape = next(a.shape for a in args if isinstance(a, np.ndarray) and a.ndim)
    flat = [a.reshape(-1) if isinstance(a, np.ndarray) and a.ndim else a for a in args]
    parts = [fn(*[f[i:i + 100_000] if isinstance(f, np.ndarray) and f.ndim else f
                  for f in flat]) for i in range(0, n, 100_000)]
    return tuple(np.concatenate([p[k] for p in parts]).reshape(shape)
                 for k in range(len(parts[0])))


class _Counting:
    def __init__(self, module):
        self.module, self.calls = module, 0
        self.inner = module._in_blocks

    def __call__(self, *a, **k):
        self.calls += 1
        return self.inner(*a, **k)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocked_equals_whole_bitwise(tmp_path, dtype, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.uniform(-6, 6, N_BIG * (2 if dtype == np.float32 else 1)).astype(dtype)
    mod = sg.compile(_gelu, x)   # static shapes: a module checks its inputs' shapes
    m = _load(mod, tmp_path, f"blk_gelu_{np.dtype(dtype).name}")
    counter = _Counting(m)
    monkeypatch.setattr(m, "_in_blocks", counter)
    g = rng.standard_normal(x.size).astype(dtype)
    (out,) = m.forward(x)
    (gx,) = m.backward(g, x)
    assert counter.calls == 2
    assert out.dtype == dtype and gx.dtype == dtype and out.shape == x.shape
    np.testing.assert_array_equal(out, _whole(m.forward, x)[0])
    np.testing.assert_array_equal(gx, _whole(m.backward, g, x)[0])
    # and the values are right: gelu' = Phi(x) + x phi(x)
    from math import erf, exp, pi, sqrt
    for i in (0, 65535, 65536, x.size - 1):
        xi = float(x[i])
        want = 0.5 * (1 + erf(xi / sqrt(2))) + xi * exp(-xi * xi / 2) / sqrt(2 * pi)
        assert gx[i] == pytest.approx(g[i] * want, rel=1e-5 if dtype == np.float32 else 1e-12,
                                      abs=1e-6)


def test_two_inputs_two_outputs_saving_and_layouts(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.uniform(-2, 2, (512, 600))
    b = rng.uniform(-2, 2, (600, 512)).T          # not contiguous: blocks of its C-order copy
    mod = sg.compile(_pair, a, b)
    m = _load(mod, tmp_path, "blk_pair")
    assert "_in_blocks(backward" in mod.source
    counter = _Counting(m)
    monkeypatch.setattr(m, "_in_blocks", counter)
    outs = m.forward(a, b)
    assert counter.calls == 1 and all(o.shape == a.shape for o in outs)
    for got, want in zip(outs, _whole(m.forward, a, b)):
        np.testing.assert_array_equal(got, want)
    g1, g2 = rng.standard_normal(a.shape), rng.standard_normal(a.shape)
    grads = m.backward(g1, g2, a, b)
    for got, want in zip(grads, _whole(m.backward, g1, g2, a, b)):
        np.testing.assert_array_equal(got, want)
    if hasattr(m, "forward_saving"):   # nested (outputs, saved) structure survives the blocks
        outs2, saved = m.forward_saving(a, b)
        for got, want in zip(outs2, outs):
            np.testing.assert_array_equal(got, want)
        for got, want in zip(m.backward_saved(g1, g2, *saved, a, b), grads):
            np.testing.assert_array_equal(got, want)
    # gradient check against finite differences on a few elements
    eps = 1e-6
    for i, j in ((0, 0), (300, 17), (511, 511)):
        da = np.zeros_like(a)
        da[i, j] = eps
        fd = sum(((o1 - o0) * g).sum() for o1, o0, g in
                 zip(m.forward(a + da, b), m.forward(a - da, b), (g1, g2))) / (2 * eps)
        assert grads[0][i, j] == pytest.approx(fd, rel=1e-5, abs=1e-8)


def test_not_blocked_when_broadcasting_small_or_not_numpy(tmp_path, monkeypatch):
    """Static modules for each call's shapes (a module refuses other shapes): small inputs,
    broadcasting shapes and a number as the last input are run whole; numbers and 0-d arrays
    beside a big last input are blocked, each passed whole to each block."""
    rng = np.random.default_rng(2)
    a = rng.uniform(-2, 2, (N_BIG,))
    small = a[:1000]
    cases = [((small, small), False), ((a.reshape(1, -1), a[:1].reshape(1, 1)), False),
             ((a[:1].reshape(1, 1), a.reshape(1, -1)), False), ((a, 0.5), False)]
    for k, (args, blocked) in enumerate(cases):
        mod = sg.compile(_pair, *[np.asarray(v) for v in args])
        m = _load(mod, tmp_path, f"blk_pair_{k}")
        counter = _Counting(m) if hasattr(m, "_in_blocks") else None
        if counter is not None:
            monkeypatch.setattr(m, "_in_blocks", counter)
        m.forward(*args)
        assert counter is None or counter.calls == 0, args
    mod = sg.compile(_pair, np.array(0.25), a)
    m = _load(mod, tmp_path, "blk_pair_scalar")
    counter = _Counting(m)
    monkeypatch.setattr(m, "_in_blocks", counter)
    whole = sg.compile(_pair, np.array(0.25), a[-1000:])
    for scalar in (0.25, np.float64(0.25), np.array(0.25)):
        got = m.forward(scalar, a)
        want = whole.forward(scalar, a[-1000:])
        np.testing.assert_array_equal(got[0][-1000:], want[0])
        np.testing.assert_array_equal(got[1][-1000:], want[1])
    assert counter.calls == 3


def test_routines_with_reductions_are_never_blocked():
    def lse(x):
        return sg.log(sg.sum(sg.exp(x), dim=-1))
    mod = sg.compile(lse, np.ones((4, 5)))
    assert "_in_blocks" not in mod.source


def test_blocked_matches_dask():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(3)
    x = rng.uniform(-4, 4, N_BIG)
    mod = sg.compile(_gelu, x[:8])
    g = np.ones_like(x)
    (want,) = mod.backward(g, x)
    (lazy,) = mod.backward(da.from_array(g, chunks=N_BIG // 3), da.from_array(x, chunks=N_BIG // 3))
    np.testing.assert_allclose(np.asarray(lazy), want, rtol=1e-15, atol=0)
