"""Minimum-of-N timing of forward+backward for benchmark functions (a before/after check on a
shared machine, where medians are noisy): python tools/quick_timing.py NAME[,NAME] [SIZE]"""
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("SYMGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="sg-time-"))

import symgrad as sg  # noqa: E402
from benchmarks import functions  # noqa: E402
from benchmarks.peers import symgrad_namespace  # noqa: E402


def main(names, size):
    ns = symgrad_namespace(sg)
    for f in functions.select(names):
        for dtype in (np.float32, np.float64):
            xs = f.make_inputs(size, dtype, np.random.default_rng(0))
            row = []
            for target in ("numpy", "c"):
                mod = sg.compile(lambda *a, f=f: f.sym(ns, *a), *xs, target=target,
                                 cache_ok=False)
                y = mod.forward(*xs)
                y = y[0] if isinstance(y, tuple) else y
                g = np.ones_like(np.asarray(y))
                best = float("inf")
                for _ in range(7):
                    t0 = time.perf_counter()
                    n = 0
                    while time.perf_counter() - t0 < 0.15:
                        mod.forward(*xs)
                        mod.backward(g, *xs)
                        n += 1
                    best = min(best, (time.perf_counter() - t0) / n)
                row.append(f"{target} {best * 1e6:9.1f} us")
            print(f"{f.name:18s} {dtype.__name__}  " + "  ".join(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(float(sys.argv[2])) if len(sys.argv) > 2 else 100_000)
