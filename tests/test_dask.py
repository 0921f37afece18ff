"""The generated NumPy module on Dask arrays: lazy graphs, any chunking, a real cluster.

One generated module serves NumPy and Dask: its code calls `numpy.<fn>`, which NumPy's
dispatch protocols route to Dask for Dask inputs, and its helpers avoid in-place writes for
non-NumPy arrays. Chunk boundaries must not change results beyond the rounding of sums.
"""
from __future__ import annotations

import os
import signal
import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

import symgrad as sg  # noqa: E402

RTOL = 1e-12

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _no_compute(dsk, keys, **kwargs):
    raise AssertionError("the generated module computed a Dask array while building the graph")


def _close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    return got.shape == want.shape and np.allclose(got, want, rtol=RTOL, atol=RTOL * scale)


def _lazy(fn, *args):
    """fn(*args) with every compute forbidden: the result must be (a tuple of) Dask arrays."""
    with dask.config.set(scheduler=_no_compute):
        out = fn(*args)
    for o in out if isinstance(out, tuple) else (out,):
        assert o is None or isinstance(o, da.Array), type(o)
    return out


def _check(mod, np_inputs, dask_inputs, order=2):
    """forward, backward (and the grad module's backward) on Dask equal NumPy's."""
    ref = mod.forward(*np_inputs)
    out = _lazy(mod.forward, *dask_inputs)
    assert _close(out.compute(), ref)
    rng = np.random.default_rng(1)
    g = rng.standard_normal(np.shape(ref))
    g_dask = da.from_array(g, chunks=3) if np.ndim(g) else da.asarray(g)
    ref_grads = mod.backward(g, *np_inputs)
    grads = _lazy(mod.backward, g_dask, *dask_inputs)
    for got, want in zip(dask.compute(*grads), ref_grads):
        assert _close(got, want)
    if order < 2:
        return
    g2mod = mod.grad_module()           # its forward is mod.backward
    gg = [rng.standard_normal(np.shape(w)) for w in ref_grads]
    gg_dask = [da.from_array(a, chunks=4) for a in gg]
    ref2 = g2mod.backward(*gg, g, *np_inputs)
    got2 = _lazy(g2mod.backward, *gg_dask, g_dask, *dask_inputs)
    for got, want in zip(dask.compute(*got2), ref2):
        assert _close(got, want)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((13, 10))
Y = RNG.standard_normal(10)
W = RNG.standard_normal((10, 6))

CHUNKINGS = {
    "one-chunk": ((13, 10), 10),
    "even": ((5, 5), 5),
    "uneven": (((3, 6, 4), (2, 7, 1)), ((4, 4, 2),)),
    "mismatched": ((13, (3, 3, 4)), 2),     # y chunked unlike x's columns
    "tiny": ((1, 1), 1),
}


def softplus_bcast(x, y):
    return (x * y).softplus().sum(1) + (x - y).exp().mean(0).sum()


@pytest.mark.parametrize("chunks", CHUNKINGS.values(), ids=CHUNKINGS.keys())
def test_broadcasting_inputs_any_chunking_first_and_second_order(chunks):
    mod = sg.compile(softplus_bcast, X, Y, cache_ok=False)
    cx, cy = chunks
    _check(mod, (X, Y), (da.from_array(X, chunks=cx), da.from_array(Y, chunks=cy)))


REDUCTIONS = {
    "sum-mean": (lambda x: (x.sin().sum(0) * x.mean(1, keepdim=True)).sum(), (X,), 2),
    "amax": (lambda x: x.amax(1).exp(), (X,), 2),
    "max-dim": (lambda x: x.max(0)[0] * 2.0, (X,), 2),
    "logsumexp-softmax": (lambda x: x.logsumexp(1) + x.softmax(0)[:, 3], (X,), 2),
    "std": (lambda x: x.std(0), (X,), 2),
    "prod": (lambda x: x.prod(1), (X,), 1),
    "matmul": (lambda x, w: (x @ w).tanh().sum(0), (X, W), 2),
    "matvec": (lambda x, y: (x @ y).sigmoid(), (X, Y), 2),
    "index": (lambda x: x[2:11:3, 1:].erf(), (X,), 2),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_matmul_indexing_on_uneven_chunks(name):
    fn, inputs, order = REDUCTIONS[name]
    mod = sg.compile(fn, *inputs, cache_ok=False)
    chunked = [da.from_array(a, chunks=((3, 6, 4), (2, 7, 1))[:a.ndim] if a.shape[0] == 13
                             else ((4, 4, 2),) + ((2, 4),) * (a.ndim - 1)) for a in inputs]
    _check(mod, inputs, chunked, order=order)


def test_an_elementwise_region_is_one_task_per_chunk():
    """After Dask's blockwise fusion, a region of many ufuncs computes in one task per chunk."""
    mod = sg.compile(lambda x, y: ((x * y).exp() + (x - y).tanh() * x).softplus(), X, X,
                     cache_ok=False)
    x = da.from_array(X, chunks=(4, 3)).persist()
    y = da.from_array(X + 1, chunks=(4, 3)).persist()
    n_chunks = x.npartitions
    out = _lazy(mod.forward, x, y)
    (opt,) = dask.optimize(out)
    n_inputs = 2 * n_chunks                     # the persisted input chunks
    assert len(dict(opt.__dask_graph__())) == n_inputs + n_chunks
    assert _close(out.compute(), mod.forward(X, X + 1))
    # backward: two gradients, each one fused task per chunk (plus shared terms, per chunk)
    g = da.from_array(np.ones_like(X), chunks=(4, 3)).persist()
    grads = _lazy(mod.backward, g, x, y)
    (ox, oy) = dask.optimize(*grads)
    tasks = {**dict(ox.__dask_graph__()), **dict(oy.__dask_graph__())}
    assert (len(tasks) - 3 * n_chunks) % n_chunks == 0    # whole tasks per chunk, nothing global
    assert len(tasks) - 3 * n_chunks <= 4 * n_chunks


def test_reduction_is_a_dask_tree_reduction_and_result_is_chunking_independent():
    mod = sg.compile(lambda x: (x * x).log1p().sum(), np.zeros(10_000), cache_ok=False)
    v = np.random.default_rng(2).standard_normal(10_000)
    want = mod.forward(v)
    for chunks in (10_000, 1000, 777, 3):
        got = _lazy(mod.forward, da.from_array(v, chunks=chunks)).compute()
        assert _close(got, want)


# ------------------------------------------------------------------ a real distributed cluster
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                               dashboard_address=":0", host="127.0.0.1")
    client = Client(cluster)
    client.run(lambda: warnings.filterwarnings("ignore", category=RuntimeWarning))
    yield client
    client.close()
    cluster.close()


def energy(r, q):
    inv = 1.0 / r
    return (4.0 * (inv * inv * inv * inv * inv * inv) * (inv ** 6 - 1.0) + q * inv).sum()


def test_local_cluster_computes_the_chunked_gradient(client):
    rng = np.random.default_rng(3)
    r = rng.uniform(0.9, 3.0, (400, 300))
    q = rng.uniform(-1, 1, 300)
    mod = sg.compile(energy, r, q, cache_ok=False)
    dr = da.from_array(r, chunks=(130, 70))
    dq = da.from_array(q, chunks=50)
    grads = _lazy(mod.backward, da.asarray(np.float64(1.0)), dr, dq)
    got = client.compute(list(grads), sync=True)
    for a, b in zip(got, mod.backward(np.float64(1.0), r, q)):
        assert _close(a, b)
    assert len(client.scheduler_info()["workers"]) == 2


def test_a_worker_killed_mid_computation_is_recovered(client):
    """SIGKILL one worker process while slowed tasks run: Dask reruns its tasks elsewhere."""
    rng = np.random.default_rng(4)
    r = rng.uniform(0.9, 3.0, (240, 100))
    q = rng.uniform(-1, 1, 100)
    mod = sg.compile(energy, r, q, cache_ok=False)

    def slow(block):                      # defined here, so cloudpickle ships it by value
        import time as _time
        _time.sleep(0.4)
        return block

    dr = da.from_array(r, chunks=(30, 100)).map_blocks(slow, dtype=r.dtype)   # 8 slow chunks
    grads = _lazy(mod.backward, da.asarray(np.float64(1.0)), dr, da.from_array(q, chunks=100))
    futures = client.compute(list(grads))
    pids = client.run(os.getpid)
    deadline = time.time() + 20
    victim = None
    while victim is None and time.time() < deadline:      # a worker that is running a task
        busy = client.processing()
        victim = next((w for w, keys in busy.items() if keys and w in pids), None)
        time.sleep(0.05)
    assert victim is not None, "no task started"
    os.kill(pids[victim], signal.SIGKILL)
    got = client.gather(futures)          # rescheduled on the survivor / the restarted worker
    for a, b in zip(got, mod.backward(np.float64(1.0), r, q)):
        assert _close(a, b)
