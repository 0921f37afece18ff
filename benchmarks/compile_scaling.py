"""Compile time and generated-code size against program size (the DAG-IR benchmark).

    python -m benchmarks.compile_scaling [--quick] [--no-jax] [--out FILE]
    python -m benchmarks.compile_scaling --scan [--out FILE]   # the sg.scan rows only

For each deep, value-reusing program of `tests/deep_programs.py` (an unrolled RK4 integrator,
an LSTM over T steps, a coupled map, a residual MLP) at growing sizes: symgrad's cold compile
(trace -> differentiate -> optimize -> emit -> load, NumPy target, float64, no cache), the
generated module's size, and JAX's `jit(grad(f))` compile of the same program beside it
(`.lower().compile()`, when JAX is installed). "x4 ratio" is time(4n) / time(n): the target
is <= 5 (linear). Each cell runs in a fresh interpreter so that no memo of one size helps the
next; `import sympy` is paid before the clock starts, as a long-running process pays it once.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

SIZES = {
    "rk4": [1, 4, 16, 64, 100],
    "lstm": [1, 4, 16, 50, 100],
    "coupled": [1, 4, 16, 64, 100],
    "resmlp": [50],
}
QUICK = {"rk4": [1, 4, 16], "lstm": [1, 4, 16], "coupled": [4, 16, 64], "resmlp": [50]}
# the same integrator through sg.scan (jax.lax.scan beside it): compiled once, any step count
SCAN = {"rk4_scan": [1, 10, 1000, 10000]}
RUNTIME_STEPS = (4, 16, 64)   # the generated loop against the unrolled module, run time

_CELL = r"""
import json, os, sys, time
sys.path[:0] = [{repo!r}, os.path.join({repo!r}, "tests")]
os.environ["SYMGRAD_CACHE"] = "0"
import numpy as np
import deep_programs as P
which, n, peer = {which!r}, {n}, {peer!r}
out = {{}}
if peer == "symgrad":
    import sympy  # noqa: F401  (paid once per process, outside the clock)
    import symgrad as sg
    fwd, ex = P.PROGRAMS[which](n, sg)
    t0 = time.perf_counter(); c0 = time.process_time()
    m = sg.compile(fwd, *ex, dtype="float64", cache_ok=False)
    out["wall"] = time.perf_counter() - t0
    out["cpu"] = time.process_time() - c0
    out["bytes"] = len(m.source.encode())
    out["lines"] = m.source.count("\n")
else:
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    class M:  # torch's names over jax.numpy
        sin, cos, tanh = jnp.sin, jnp.cos, jnp.tanh
        sigmoid = staticmethod(jax.nn.sigmoid)
        scan = staticmethod(jax.lax.scan)
    fwd, ex = P.PROGRAMS[which](n, M)
    args = [jnp.asarray(e) for e in ex]
    t0 = time.perf_counter(); c0 = time.process_time()
    jax.jit(jax.grad(fwd, argnums=tuple(range(len(args))))).lower(*args).compile()
    out["wall"] = time.perf_counter() - t0
    out["cpu"] = time.process_time() - c0
print("RESULT " + json.dumps(out))
"""


def cell(which, n, peer, timeout):
    code = _CELL.format(repo=REPO, which=which, n=n, peer=peer)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": f"> {timeout} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:60]}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.compile_scaling")
    p.add_argument("--quick", action="store_true", help="small sizes only")
    p.add_argument("--no-jax", action="store_true")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--out", default=None, help="also write the table to this file")
    p.add_argument("--scan", action="store_true",
                   help="only the sg.scan rows, and the loop's run time against the unrolled")
    args = p.parse_args(argv)
    sys.path.insert(0, REPO)
    from benchmarks._env import base_header
    from benchmarks._table import render

    try:
        import jax  # noqa: F401
        have_jax = not args.no_jax
    except ImportError:
        have_jax = False
    sizes = SCAN if args.scan else QUICK if args.quick else SIZES
    rows = []
    for which, ns in sizes.items():
        prev = {}
        for n in ns:
            r = cell(which, n, "symgrad", args.timeout)
            j = cell(which, n, "jax", args.timeout) if have_jax else {}
            ratio = ""
            if n % 4 == 0 and n // 4 in prev and "wall" in r:
                ratio = f"{r['wall'] / prev[n // 4]:.2f}"
            if "wall" in r:
                prev[n] = r["wall"]
            rows.append([which, n,
                         f"{r['wall']:.2f}" if "wall" in r else r.get("error"),
                         f"{r['cpu']:.2f}" if "cpu" in r else "",
                         ratio,
                         r.get("lines", ""), f"{r['bytes'] / 1024:.0f}" if "bytes" in r else "",
                         (f"{j['wall']:.2f}" if "wall" in j else j.get("error", "")) if have_jax
                         else "—"])
            print("  ".join(str(c) for c in rows[-1]), file=sys.stderr, flush=True)
    table = render(["program", "size", "compile s", "cpu s", "x4 ratio", "lines", "KiB",
                    "JAX jit(grad) s"], rows,
                   title="symgrad cold compile (NumPy, float64) vs program size")
    text = "\n".join(base_header()) + "\n\n" + table + "\n"
    if args.scan:
        text += "\n" + runtime_table(render) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)


def runtime_table(render, repeats=200, rounds=7):
    """Run time of the generated sg.scan module against the unrolled one (forward + backward,
    NumPy and C targets, float64), interleaved, best of `rounds` rounds of `repeats` calls."""
    import numpy as np

    sys.path.insert(0, os.path.join(REPO, "tests"))
    import deep_programs as P
    import symgrad as sg

    rows = []
    for n, target in [(n, t) for t in ("numpy", "c") for n in RUNTIME_STEPS]:
        mods = {}
        for name in ("rk4", "rk4_scan"):
            fwd, ex = P.PROGRAMS[name](n, sg)
            mods[name] = sg.compile(fwd, *ex, target=target, dtype="float64", cache_ok=False)
        best = {k: float("inf") for k in mods}
        one = np.ones(())
        for _ in range(rounds):
            for name, m in mods.items():
                t0 = time.perf_counter()
                for _ in range(repeats):
                    m.forward(*ex)
                    m.backward(one, *ex)
                best[name] = min(best[name], (time.perf_counter() - t0) / repeats)
        rows.append([target, n, f"{best['rk4'] * 1e6:.0f}", f"{best['rk4_scan'] * 1e6:.0f}",
                     f"{best['rk4_scan'] / best['rk4']:.2f}"])
    return render(["target", "RK4 steps", "unrolled us", "sg.scan us", "scan / unrolled"], rows,
                  title="run time, forward + backward (float64, state vectors of 7)")


if __name__ == "__main__":
    main()
