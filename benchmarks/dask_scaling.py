"""Throughput of one generated gradient on Dask: 1 and 2 workers vs single-process NumPy.

The same generated module (forward + backward of sum(softplus(x))) runs on a NumPy array in
this process and on a Dask array persisted on a dask.distributed LocalCluster. The Dask rows
time forward + backward with the results persisted on the workers (nothing gathered), after a
warm-up pass; the NumPy row times the same two calls in this process.

    python -m benchmarks.dask_scaling                 # 1e8 elements, chunks of 1e7
    python -m benchmarks.dask_scaling --n 1e6 --chunk 1e5 --repeat 2    # a quick look
"""
from __future__ import annotations

import argparse
import uuid
import os
import time
import warnings


def softplus_loss(x):
    return x.softplus().sum()


def _best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), sorted(times)[len(times) // 2]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e8, help="elements")
    parser.add_argument("--chunk", type=float, default=1e7, help="elements per chunk")
    parser.add_argument("--workers", default="1,2", help="worker counts to try")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    n, chunk = int(args.n), int(args.chunk)

    from benchmarks import _env
    _env.configure_threads(1)               # one BLAS/OpenMP thread per process, as workers
    import numpy as np
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    import symgrad as sg
    from benchmarks._table import render

    warnings.filterwarnings("ignore", category=RuntimeWarning)
    mod = sg.compile(softplus_loss, np.zeros(n))      # shapes only; computes nothing
    one = np.float64(1.0)
    rows = []

    x = np.random.default_rng(0).standard_normal(n)
    best, med = _best(lambda: (mod.forward(x), mod.backward(one, x)), args.repeat)
    ref = float(mod.forward(x))
    rows.append(["NumPy, 1 process", "-", f"{best:.2f}", f"{med:.2f}", f"{n / best / 1e6:.0f}",
                 "1.00"])
    numpy_best = best
    del x

    for workers in (int(w) for w in args.workers.split(",")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0", host="127.0.0.1")
        client = Client(cluster)
        try:
            client.run(lambda: warnings.filterwarnings("ignore", category=RuntimeWarning))
            if n <= 2e7:    # small: NumPy's values, so the energy can be compared
                dx = da.from_array(np.random.default_rng(0).standard_normal(n), chunks=chunk)
            else:           # large: generated on the workers chunk by chunk, nothing shipped
                dx = da.random.default_rng(0).standard_normal(n, chunks=chunk)
            dx = client.persist(dx)
            wait(dx)
            d_one = da.asarray(one)

            def run():
                # a fresh key per run: identical graphs would be served from results the
                # cluster still holds, and time nothing (an identity per chunk, no copy)
                fresh = dx.map_blocks(lambda b: b, name=f"fresh-{uuid.uuid4().hex}",
                                      dtype=dx.dtype)
                out = client.persist([mod.forward(fresh), *mod.backward(d_one, fresh)])
                wait(out)
                return out

            run()                                               # warm-up
            best, med = _best(run, args.repeat)
            energy = float(run()[0].compute())
            note = "" if n > 2e7 else (" (= NumPy)" if np.isclose(energy, ref, rtol=1e-12)
                                       else " (DIFFERS)")
            rows.append([f"Dask, {workers} worker(s){note}", f"{-(-n // chunk)}",
                         f"{best:.2f}", f"{med:.2f}", f"{n / best / 1e6:.0f}",
                         f"{numpy_best / best:.2f}"])
        finally:
            client.close()
            cluster.close()

    print(f"sum(softplus(x)) forward + backward, n = {n:.3g} float64, chunks of {chunk:.3g}; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(render(["", "chunks", "best s", "median s", "M elem/s", "vs NumPy"], rows,
                 markdown=args.markdown))


if __name__ == "__main__":
    main()
