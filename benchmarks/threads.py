"""Thread scaling of the C target against torch: where two threads start to pay.

    python -m benchmarks.threads [--sizes 1e3,...] [--funcs gelu_erf,logsumexp] [--rounds 2]

One process per thread count t (1, then the physical cores), alternating, `--rounds` times:
SYMGRAD_NUM_THREADS=t with SYMGRAD_PARALLEL_MIN=1 (every loop split, to find the crossover)
and torch.set_num_threads(t). In each, per size, the symgrad runtime (cpu_target "c",
Function.apply + backward) and torch eager (the same formula) are timed interleaved; the
median of each is kept, and the best over the rounds reported. The C template's
SYMGRAD_PARALLEL_MIN (elements below which a loop stays on one thread) is set from the
crossover this measures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def child(sizes, funcs, reps):
    import statistics
    import time

    import numpy as np
    import torch

    import symgrad as sg
    from benchmarks import functions, peers

    t = int(os.environ["SYMGRAD_NUM_THREADS"])
    torch.set_num_threads(t)
    out = {}
    for name in funcs:
        func = functions.BY_NAME[name]
        fwd = staticmethod(peers.symgrad_forward(func, peers.symgrad_namespace(sg), True))
        F = type(f"{name}_F", (sg.Function,), {"forward": fwd, "cpu_target": "c"})
        for size in sizes:
            inputs = func.make_inputs(size, np.dtype(np.float64), np.random.default_rng(0))
            ts = [sg.tensor(a.copy(), requires_grad=True) for a in inputs]
            tt = [torch.from_numpy(a.copy()).requires_grad_(True) for a in inputs]

            def sym():
                y = F.apply(*ts)
                y.backward(sg.ones(y.shape, dtype=y.dtype))

            def tor():
                y = func.torch(*tt)
                torch.autograd.grad(y, tt, torch.ones_like(y))

            sym(), tor(), sym(), tor()
            a, b = [], []
            n = max(5, min(reps, int(0.3 / max(1e-6, size * 2e-8))))
            for _ in range(n):
                t0 = time.perf_counter()
                sym()
                a.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                tor()
                b.append(time.perf_counter() - t0)
            out[f"{name}/{size}"] = (statistics.median(a), statistics.median(b))
    print(json.dumps(out))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.threads", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1e3,1e4,3e4,1e5,3e5,1e6")
    p.add_argument("--funcs", default="gelu_erf,softplus_b2,logsumexp")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--threads", default=None,
                   help="thread counts to compare, e.g. 1,2 (default: 1 and the physical cores)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    funcs = args.funcs.split(",")
    if args.child:
        return child(sizes, funcs, args.reps)
    from symgrad.native import physical_cores

    counts = (sorted({int(t) for t in args.threads.split(",")}) if args.threads
              else sorted({1, physical_cores()}))
    best = {}
    for _ in range(args.rounds):
        for t in counts:
            env = dict(os.environ, SYMGRAD_NUM_THREADS=str(t), SYMGRAD_PARALLEL_MIN="1",
                       OMP_NUM_THREADS=str(t))
            run = subprocess.run([sys.executable, "-m", "benchmarks.threads", "--child",
                                  "--sizes", args.sizes, "--funcs", args.funcs,
                                  "--reps", str(args.reps)], env=env, capture_output=True,
                                 text=True)
            if run.returncode:
                print(run.stderr, file=sys.stderr)
                return 1
            for k, (s, tt) in json.loads(run.stdout.strip().splitlines()[-1]).items():
                old = best.get((k, t), (s, tt))
                best[(k, t)] = (min(old[0], s), min(old[1], tt))
    load = os.getloadavg()
    print(f"float64 fwd+bwd, median per process, best of {args.rounds} rounds; machine: "
          f"{os.cpu_count()} logical CPUs, load average {load[0]:.1f} (other engineers' work: "
          "timings are noisy)")
    hdr = "function      size   " + "  ".join(f"sym {t}t     torch {t}t" for t in counts)
    hdr += (f"   sym {counts[-1]}t/1t  torch {counts[-1]}t/1t" if len(counts) > 1 else "")
    print(hdr)
    for name in funcs:
        for size in sizes:
            k = f"{name}/{size}"
            row = f"{name:<12} {size:>7.0e}  "
            for t in counts:
                s, tt = best[(k, t)]
                row += f"{s * 1e3:8.3f}ms {tt * 1e3:8.3f}ms  "
            if len(counts) > 1:
                s1, t1 = best[(k, 1)]
                s2, t2 = best[(k, counts[-1])]
                row += f"   {s2 / s1:6.2f}     {t2 / t1:6.2f}"
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
