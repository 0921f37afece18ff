"""The runtime against the module it runs: fwd+bwd through Function.apply + backward (the C
target, pinned) over the compiled module's own calls, per benchmark function.

    python -m benchmarks.runtime_vs_module [--sizes 1e5,1e6] [--dtypes float32,float64]

Columns: `module f+b` = mod.forward + mod.backward (what a user of symgrad.compile calls),
`module b` = mod.backward alone (the benchmark table's symgrad_c: it recomputes the forward
and returns no output), `f+b kept` = the same two calls with the runtime's memory pattern
(the output alive while the backward runs, the gradients kept until the next call, as a
user's y and .grad are), `runtime` = F.apply(x) + y.backward(ones) with the Function's
cpu_target = "c" (forward_saving + backward_saved where the saving plan has them). Ratios:
runtime / module f+b (the issue's <= 1.15), runtime / f+b kept (the runtime's own cost:
Python per call, with the same memory traffic) and runtime / module b. Interleaved, median of
reps (--best: the fastest rep of each), timed with the thread's CPU time (time.thread_time:
everything runs on this thread, and the time spent waiting for a core on a shared machine is
left out); one thread (SYMGRAD_NUM_THREADS=1, set before import).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.runtime_vs_module",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1e5,1e6")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--only", default=None)
    p.add_argument("--budget", type=float, default=0.6)
    p.add_argument("--best", action="store_true",
                   help="each column the fastest of its reps (best-of-N), not the median: "
                        "the steadier statistic on a loaded machine")
    args = p.parse_args(argv)
    from benchmarks import _env
    _env.configure_threads(1)
    import numpy as np

    import symgrad as sg
    from benchmarks import functions, peers

    ns = peers.symgrad_namespace(sg)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (shared machine: "
          f"noisy); one thread; thread CPU time; {'best' if args.best else 'median'} of reps")
    print(f"{'dtype':<8}{'function':<18}{'size':>6}  {'module f+b':>11} {'module b':>10} "
          f"{'f+b kept':>10} {'runtime':>10}  {'rt/(f+b)':>8} {'rt/kept':>7} {'rt/b':>6} "
          "saving")
    worst = 0.0
    for dname in args.dtypes.split(","):
        dtype = np.dtype(dname)
        for func in functions.select(args.only):
            for size in [int(float(s)) for s in args.sizes.split(",")]:
                inputs = func.make_inputs(size, dtype, np.random.default_rng(0))
                fwd = peers.symgrad_forward(func, ns)
                mod = sg.compile(fwd, *inputs, target="c")
                out = mod.forward(*inputs)
                seeds = [np.ones_like(np.asarray(o)) for o in
                         (out if isinstance(out, tuple) else (out,))]
                F = type(f"{func.name}_F", (sg.Function,), {
                    "forward": staticmethod(peers.symgrad_forward(func, ns, True)),
                    "cpu_target": "c"})
                # the runtime reads the very arrays the module calls read (from_numpy shares
                # them): with copies, the interleaved runs found the runtime's inputs and seed
                # cold in cache (8 MB more from memory per call at 1e6 float32: ~1.3x)
                ts = [sg.from_numpy(a).requires_grad_(True) for a in inputs]
                seed = sg.from_numpy(seeds[0])

                def m_fb():
                    mod.forward(*inputs)
                    mod.backward(*seeds, *inputs)

                def m_b():
                    mod.backward(*seeds, *inputs)

                kept = [None]

                def m_kept():
                    # the module's calls with the runtime's memory pattern: the output alive
                    # while the backward runs (the user's y), the gradients kept until the
                    # next call (.grad) and dropped before it (t.grad = None)
                    kept[0] = None
                    y = mod.forward(*inputs)
                    kept[0] = mod.backward(*seeds, *inputs)
                    del y

                def rt():
                    for t in ts:
                        t.grad = None
                    F.apply(*ts).backward(seed)

                runs = {"fb": m_fb, "b": m_b, "kept": m_kept, "rt": rt}
                est = 0.0
                for f in runs.values():
                    f()
                    t0 = time.perf_counter()
                    f()
                    est += time.perf_counter() - t0
                reps = int(max(5, min(300, args.budget / max(est, 1e-9))))
                times = {k: [] for k in runs}
                clock = time.thread_time
                for _ in range(reps):
                    for k, f in runs.items():
                        t0 = clock()
                        f()
                        times[k].append(clock() - t0)
                stat = min if args.best else statistics.median
                med = {k: stat(v) for k, v in times.items()}
                saving = "yes" if callable(getattr(mod.raw, "forward_saving", None)) else "no"
                r1, r2 = med["rt"] / med["fb"], med["rt"] / med["b"]
                rk = med["rt"] / med["kept"]
                worst = max(worst, r1)
                print(f"{dname:<8}{func.name:<18}{size:>6.0e}  {med['fb'] * 1e3:9.3f}ms "
                      f"{med['b'] * 1e3:8.3f}ms {med['kept'] * 1e3:8.3f}ms "
                      f"{med['rt'] * 1e3:8.3f}ms  {r1:8.2f} {rk:7.2f} {r2:6.2f} "
                      f"{saving}", flush=True)
    print(f"worst runtime / (module forward + backward): {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
