"""symgrad inside PyTorch and JAX: forward + backward through `sg.to_torch` / `sg.to_jax`
against each framework's own differentiation of the naive forward.

    python -m benchmarks.frameworks [--sizes 1e5,1e6] [--dtype float32] [--threads 1]
                                    [--no-compile] [--min-time 0.5] [--clock wall|cpu]
                                    [--out benchmarks/results/frameworks.txt]

For each of the 12 benchmark functions (`benchmarks.functions.ALL`): the gradient of
sum(output) w.r.t. every input (all-ones seed), forward included, on CPU.

torch columns (times in ms, then the ratio to torch eager):
  eager        `out = f(*xs); torch.autograd.grad(out, xs, seed)` (the baseline)
  compile      the same with `torch.compile(f)` (inductor; compiled per size, excluded)
  sg.to_torch  `out = F.apply(*xs); torch.autograd.grad(out, xs, seed)`, F = sg.to_torch(f):
               the default target, which on CPU tensors is the fused C module (tiered: timed
               after `sg.wait_for_builds()`, and checked to be running C)
  (target="torch")  the same with sg.to_torch(f, target="torch"): the generated torch ops
  (--fused)    the same with sg.to_torch(f, compile=True): the generated code through inductor
JAX columns:
  jit(grad)    `jax.jit(jax.grad(sum of f))` of the naive jax.numpy forward (the baseline)
  sg.to_jax    `jax.jit(jax.grad(sum of sg.to_jax(f)))`
Median of repetitions timed in turn (round robin, so that load on a shared machine slows
every column alike) after warm-up; compilation (symgrad, dynamo/inductor, XLA) is
setup, not timed. The bar (issue 23): sg.to_torch <= 1.0x torch eager, sg.to_jax within 10%
of jax.jit.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from benchmarks import _env


def _median_ms(run, min_time=0.25, min_reps=3, max_reps=200):
    return _interleaved({"run": run}, min_time, min_reps, max_reps)["run"]


CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = [time.perf_counter]


def _interleaved(runs, min_time=0.5, min_reps=5, max_reps=200):
    """Median ms per run, the runs timed in turn (round robin) after two warm-up calls each:
    on a shared machine a burst of load then slows every variant alike, not one column.
    The clock: wall time, or with --clock cpu the process's CPU time (every column runs on
    one thread: the time the work took, not the time other processes held the cores)."""
    for run in runs.values():
        run()
        run()
    times = {name: [] for name in runs}
    start = time.perf_counter()
    clock = _clock[0]
    reps = 0
    while reps < min_reps or (time.perf_counter() - start < min_time * len(runs)
                              and reps < max_reps):
        for name, run in runs.items():
            t0 = clock()
            run()
            times[name].append(clock() - t0)
        reps += 1
    return {name: 1e3 * statistics.median(v) for name, v in times.items()}


def torch_runs(func, arrays, compile_naive, fused=False):
    import torch

    import symgrad as sg
    from benchmarks.peers import symgrad_forward

    xs = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
    seed = torch.ones_like(func.torch(*xs))

    def eager():
        o = func.torch(*xs)
        return torch.autograd.grad(o, xs, seed)

    F = sg.to_torch(symgrad_forward(func, sg))
    seed_sg = torch.ones_like(F.apply(*xs))   # logsumexp's symgrad forward keeps (rows, 1)
    sg.wait_for_builds()                      # the C module: built in the background

    def ours():
        o = F.apply(*xs)
        return torch.autograd.grad(o, xs, seed_sg)

    ours()
    if F.runs["c"] == 0:
        raise AssertionError(f"{func.name}: sg.to_torch did not switch to its C module")
    T = sg.to_torch(symgrad_forward(func, sg), target="torch")

    def ours_torch():
        o = T.apply(*xs)
        return torch.autograd.grad(o, xs, seed_sg)

    runs = {"eager": eager, "sg.to_torch": ours, "torch target": ours_torch}
    if fused:
        G = sg.to_torch(symgrad_forward(func, sg), compile=True)

        def ours_fused():
            o = G.apply(*xs)
            return torch.autograd.grad(o, xs, seed_sg)
        runs["fused"] = ours_fused
    if compile_naive:
        compiled = torch.compile(func.torch, dynamic=False)

        def comp():
            o = compiled(*xs)
            return torch.autograd.grad(o, xs, seed)
        runs["compile"] = comp
    # the same gradients (float32: loose; the naive forms lose digits where symgrad does not)
    ref = eager()
    for name, run in runs.items():
        for a, b in zip(run(), ref):
            if not torch.allclose(a, b, rtol=2e-3, atol=2e-3 * float(b.abs().max()) + 1e-6):
                raise AssertionError(f"{func.name}: {name} gradients differ from eager")
    return runs


def jax_runs(func, arrays):
    import jax
    import jax.numpy as jnp

    import symgrad as sg
    from benchmarks.peers import symgrad_forward

    xs = [jnp.asarray(a) for a in arrays]
    argnums = tuple(range(len(xs)))
    f = sg.to_jax(symgrad_forward(func, sg))
    naive = jax.jit(jax.grad(lambda *a: jnp.sum(func.jax(jnp, *a)), argnums))
    ours = jax.jit(jax.grad(lambda *a: jnp.sum(f(*a)), argnums))

    def block(fn):
        return lambda: jax.block_until_ready(fn(*xs))
    return {"jit(grad)": block(naive), "sg.to_jax": block(ours)}


def _cpu_target():
    import symgrad as sg

    return sg.get_cpu_target()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1e5,1e6")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-compile", dest="compile", action="store_false",
                   help="skip torch.compile (inductor compiles take most of the run)")
    p.add_argument("--fused", action="store_true",
                   help="also sg.to_torch(F, compile=True): the generated code through inductor")
    p.add_argument("--only", default="", help="comma-separated function names")
    p.add_argument("--min-time", type=float, default=0.5,
                   help="seconds of timed calls per column and cell (more: steadier medians "
                        "on a loaded machine)")
    p.add_argument("--clock", choices=sorted(CLOCK), default="wall",
                   help="wall time (default) or the process's CPU time (a loaded machine)")
    p.add_argument("--out", default=None,
                   help="write the table here too (default: benchmarks/results/frameworks.txt "
                        "for a run of every function; a partial --only run writes nowhere "
                        "unless asked, so it never replaces the checked-in table)")
    args = p.parse_args(argv)
    if args.out is None and not args.only:
        args.out = os.path.join(_env.REPO_ROOT, "benchmarks", "results", "frameworks.txt")
    warnings = _env.configure_threads(args.threads)
    _clock[0] = CLOCK[args.clock]

    import numpy as np
    import torch

    import jax

    from benchmarks._table import render
    from benchmarks.functions import ALL

    torch.set_num_threads(args.threads)
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    funcs = [f for f in ALL if not args.only or f.name in args.only.split(",")]
    t_start = time.perf_counter()
    rows = []
    for func in funcs:
        for size in sizes:
            arrays = func.make_inputs(size, np.dtype(args.dtype), np.random.default_rng(0))
            t0 = time.perf_counter()
            runs = torch_runs(func, arrays, args.compile, args.fused)
            runs.update(jax_runs(func, arrays))
            setup = time.perf_counter() - t0
            ms = _interleaved(runs, min_time=args.min_time)
            row = [func.name, f"{size:.0e}", f"{ms['eager']:.3f}"]
            if args.compile:
                row.append(f"{ms['compile']:.3f} ({ms['compile'] / ms['eager']:.2f}x)")
            row.append(f"{ms['sg.to_torch']:.3f} ({ms['sg.to_torch'] / ms['eager']:.2f}x)")
            row.append(f"{ms['torch target']:.3f} ({ms['torch target'] / ms['eager']:.2f}x)")
            if args.fused:
                row.append(f"{ms['fused']:.3f} ({ms['fused'] / ms['eager']:.2f}x)")
            row += [
                    f"{ms['jit(grad)']:.3f}",
                    f"{ms['sg.to_jax']:.3f} ({ms['sg.to_jax'] / ms['jit(grad)']:.2f}x)"]
            rows.append(row)
            print("  ".join(row) + f"   [setup {setup:.1f} s]", file=sys.stderr, flush=True)
    headers = ["function", "size", "torch eager ms"]
    if args.compile:
        headers.append("torch.compile ms (x eager)")
    headers.append("sg.to_torch ms (x eager)")
    headers.append('sg.to_torch(target="torch") ms (x eager)')
    if args.fused:
        headers.append("sg.to_torch(compile=True) ms (x eager)")
    headers += ["jax.jit(grad) ms", "sg.to_jax ms (x jit)"]
    header = _env.base_header() + [
        f"torch   : {torch.__version__}, jax: {jax.__version__} (CPU)",
        f"threads : {_env.thread_summary()}",
        (f"symgrad : CPU target {_cpu_target()!r}: sg.to_torch runs the C module on CPU "
         f"tensors (timed after its background build); load average at the end "
         f"{os.getloadavg()[0]:.1f} (a shared machine)"),
        (f"dtype   : {args.dtype}; fwd+bwd of sum(output) w.r.t. every input; median ms "
         f"({'wall' if args.clock == 'wall' else 'process CPU'} time)"),
        f"run     : {time.perf_counter() - t_start:.0f} s " + " ".join(sys.argv[1:]),
    ] + [f"warning : {w}" for w in warnings]
    text = "\n".join(header) + "\n\n" + render(headers, rows) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
