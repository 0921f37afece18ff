"""Forward+backward benchmark: every peer as a ratio to torch eager CPU.

    python -m benchmarks.run [--sizes 1e3,1e5,1e6] [--dtypes float32,float64]
                             [--threads 1] [--reps N] [--only NAME[,NAME]]
                             [--peers torch,jax,...] [--budget S] [--markdown]
                             [--json PATH]

For each function × size × dtype:

1. inputs are generated once (seeded); each peer gets private copies;
2. each peer is prepared and run once (setup: JIT/compile, reported apart);
   its gradients are checked against torch's (rtol 1e-3 float32, 1e-8 float64,
   atol = rtol·max|torch grad|); a mismatch prints ✗ next to the ratio — wrong
   code is still timed but never silently;
3. one more warm-up call per peer, which also sizes the repetition count
   (``--budget`` seconds of timed work per case, at least 5 and at most 500 reps,
   unless ``--reps`` is given);
4. timed repetitions, interleaved: rep 1 runs every peer once in registry order,
   then rep 2 …; GC is off during the timed loop; the median is reported.
"""
from __future__ import annotations

import argparse
import sys


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1e3,1e5,1e6",
                   help="total element counts (2-D inputs: rows = size/cols)")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=None,
                   help="fixed number of timed repetitions (default: adaptive)")
    p.add_argument("--budget", type=float, default=1.0,
                   help="seconds of timed work per case when --reps is not given")
    p.add_argument("--min-reps", type=int, default=5)
    p.add_argument("--max-reps", type=int, default=500)
    p.add_argument("--only", default=None, help="function names or substrings, comma-separated")
    p.add_argument("--peers", default=None,
                   help="comma-separated peers (torch always included); default all available")
    p.add_argument("--markdown", action="store_true", help="Markdown tables (for the README)")
    p.add_argument("--json", default=None, help="also write raw results to this file")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    # thread settings BEFORE numpy / torch / jax are imported
    from benchmarks import _env
    warnings = _env.configure_threads(args.threads)

    import gc
    import json
    import math
    import statistics
    import time

    import numpy as np

    from benchmarks import functions, peers
    from benchmarks._table import render

    sizes = [int(float(s)) for s in args.sizes.split(",") if s.strip()]
    dtypes = [np.dtype(d.strip()) for d in args.dtypes.split(",") if d.strip()]
    funcs = functions.select(args.only)
    wanted = None if args.peers is None else [s.strip() for s in args.peers.split(",")]
    ok, skipped = peers.available(wanted)
    if not ok or ok[0][0].name != "torch":
        print("torch (the baseline) is not available: " +
              "; ".join(r for n, r in skipped if n == "torch"), file=sys.stderr)
        return 2
    active = [p for p, _ in ok]
    md = args.markdown

    # ----------------------------------------------------------------- header
    out = print
    hdr = _env.base_header()
    hdr.append(f"threads : {args.threads} — {_env.thread_summary()}")
    hdr.append(f"malloc  : {_env.malloc_summary()}")
    for p, v in ok:
        hdr.append(f"peer    : {p.name:<16} {v}  — {p.note}")
    for n, r in skipped:
        hdr.append(f"skipped : {n:<16} {r}")
    for w in warnings:
        hdr.append(f"WARNING : {w}")
    reps_desc = (f"{args.reps} fixed" if args.reps else
                 f"adaptive, ~{args.budget:g}s per case, {args.min_reps}..{args.max_reps}")
    load_start = _load()
    hdr.append(f"load    : {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} "
               f"(1/5/15-min load average at start"
               + ("; WARNING: other work is running" if load_start[0] > args.threads + 0.5
                  else "") + ")")
    hdr.append(f"method  : median of interleaved reps ({reps_desc}); fwd+bwd of sum(output) "
               f"w.r.t. every input; ratio = peer / torch (< 1: faster than torch)")
    if md:
        out("```text\n" + "\n".join(hdr) + "\n```\n")
    else:
        out("\n".join(hdr) + "\n")
    sys.stdout.flush()

    tol = {np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-8}

    def check(ref, got, inputs, rtol):
        """(ok, detail, upcast)"""
        if len(got) != len(ref):
            return False, f"{len(got)} gradients, expected {len(ref)}", False
        worst, upcast = 0.0, False
        for i, (r, g, a) in enumerate(zip(ref, got, inputs)):
            g = np.asarray(g)
            if g.shape != r.shape:
                return False, f"grad {i}: shape {g.shape}, expected {r.shape}", False
            upcast |= g.dtype != a.dtype
            r64, g64 = r.astype(np.float64), g.astype(np.float64)
            if not np.all(np.isfinite(g64) == np.isfinite(r64)):
                return False, f"grad {i}: non-finite values differ", upcast
            fin = np.isfinite(r64)
            scale = float(np.max(np.abs(r64[fin]))) if fin.any() else 0.0
            err = np.abs(g64[fin] - r64[fin])
            lim = rtol * np.abs(r64[fin]) + rtol * scale
            if err.size and np.any(err > lim):
                j = int(np.argmax(err - lim))
                rel = float(err[j] / max(abs(r64[fin][j]), 1e-300))
                return False, (f"grad {i}: max |diff| {float(err.max()):.3g}, "
                               f"rel {rel:.3g} at an element (rtol {rtol:g})"), upcast
            if err.size:
                worst = max(worst, float(np.max(err / (np.abs(r64[fin]) + scale + 1e-300))))
        return True, f"max err/(|ref|+max|ref|) {worst:.2g}", upcast

    results = []  # dicts, one per case
    notes = []    # footnotes (mismatches)
    errors = {}   # (peer, message) -> cases where prepare/first call raised
    t_start = time.perf_counter()

    for dtype in dtypes:
        for func in funcs:
            for size in sizes:
                rng = np.random.default_rng(args.seed)
                inputs = func.make_inputs(size, dtype, rng)
                case = {"function": func.name, "size": size, "dtype": dtype.name,
                        "shapes": [list(a.shape) for a in inputs], "peers": {}}
                runs, ref = {}, None
                for peer in active:
                    rec = case["peers"][peer.name] = {}
                    try:
                        t0 = time.perf_counter()
                        run = peer.prepare(func, [a.copy() for a in inputs])
                        grads = run()
                        rec["setup_s"] = time.perf_counter() - t0
                    except peers.Skip as e:
                        rec["status"], rec["reason"] = "n/a", str(e)
                        continue
                    except Exception as e:  # noqa: BLE001
                        rec["status"], rec["reason"] = "error", f"{type(e).__name__}: {e}"
                        errors.setdefault((peer.name, rec["reason"]), []).append(
                            f"{func.name}/{_fmt_size(size)}/{dtype.name}")
                        continue
                    if peer.name == "torch":
                        ref = [np.array(g) for g in grads]
                        rec["check"] = "reference"
                        rec["ok"] = True
                    else:
                        good, detail, upcast = check(ref, grads, inputs, tol[dtype])
                        rec["ok"], rec["check"], rec["upcast"] = good, detail, upcast
                        if not good:
                            notes.append(f"✗ {func.name} {_fmt_size(size)} {dtype.name} {peer.name}: "
                                         f"gradients disagree with torch — {detail}")
                    rec["status"] = "ok"
                    runs[peer.name] = run
                    del grads
                if "torch" not in runs:
                    results.append(case)
                    continue
                # second warm-up, also sizes the repetition count
                est = 0.0
                for name, run in runs.items():
                    t0 = time.perf_counter()
                    run()
                    est += time.perf_counter() - t0
                if args.reps:
                    reps = args.reps
                else:
                    reps = int(min(args.max_reps,
                                   max(args.min_reps, math.ceil(args.budget / max(est, 1e-9)))))
                times = {name: [] for name in runs}
                order = list(runs.items())
                gc.collect()
                gc.disable()
                try:
                    for _ in range(reps):
                        for name, run in order:
                            t0 = time.perf_counter()
                            run()
                            dt = time.perf_counter() - t0
                            if getattr(run, "timed_inside", False):
                                dt = run.last   # timed in its own process (runtime_defaults)
                            times[name].append(dt)
                finally:
                    gc.enable()
                base = statistics.median(times["torch"])
                for name, ts in times.items():
                    rec = case["peers"][name]
                    rec["median_s"] = statistics.median(ts)
                    if len(ts) >= 4:
                        q1, _, q3 = statistics.quantiles(ts, n=4)
                        rec["rel_iqr"] = (q3 - q1) / rec["median_s"]
                    rec["min_s"] = min(ts)
                    rec["ratio"] = rec["median_s"] / base
                case["reps"] = reps
                results.append(case)
                line = (f"  {dtype.name:<7} {func.name:<18} {size:>9.0e}  reps {reps:>3}  "
                        f"torch {base * 1e3:9.3f} ms  " +
                        "  ".join(f"{n} {case['peers'][n]['ratio']:.2f}"
                                  + ("" if case["peers"][n].get("ok", True) else "✗")
                                  for n in runs if n != "torch"))
                print(line, file=sys.stderr, flush=True)

    elapsed = time.perf_counter() - t_start

    # ----------------------------------------------------------------- tables
    names = [p.name for p in active]

    def cell(rec, name):
        st = rec.get("status")
        if st == "n/a":
            return "—"
        if st == "error":
            return "err"
        if "ratio" not in rec:
            return "?"
        noisy = "~" if rec.get("rel_iqr", 0.0) > NOISY else ""
        if name == "torch":
            return noisy + _fmt_time(rec["median_s"])
        s = noisy + f"{rec['ratio']:.2f}"
        if rec.get("upcast"):
            s += "↑"
        if not rec.get("ok", True):
            s += " ✗"
        return s

    for dtype in dtypes:
        rows = []
        for case in results:
            if case["dtype"] != dtype.name:
                continue
            rows.append([case["function"], _fmt_size(case["size"])] +
                        [cell(case["peers"].get(n, {}), n) for n in names] +
                        [str(case.get("reps", ""))])
        headers = ["function", "size"] + [("torch (time)" if n == "torch" else n)
                                          for n in names] + ["reps"]
        out("")
        out(render(headers, rows, markdown=md, align="lr" + "r" * (len(names) + 1),
                   title=f"fwd+bwd time, {dtype.name}: torch = median time; "
                         f"others = ratio to torch (< 1 faster)"))

    setup_peers = [p.name for p in active if p.has_setup]
    if setup_peers:
        rows = []
        for case in results:
            rows.append([case["function"], _fmt_size(case["size"]), case["dtype"]] +
                        [(_fmt_time(case["peers"][n]["setup_s"])
                          if "setup_s" in case["peers"].get(n, {}) else "—")
                         for n in setup_peers])
        out("")
        out(render(["function", "size", "dtype"] + setup_peers, rows, markdown=md,
                   align="lrl" + "r" * len(setup_peers),
                   title="setup, excluded from the timings above: prepare + first call "
                         "(jax: trace + jit compile; symgrad: compile)"))

    out("")
    legend = ("legend: — peer has no implementation / not applicable; err: it raised "
              "(see notes); ✗ gradients disagree with torch (rtol 1e-3 float32, 1e-8 "
              "float64); ↑ a gradient came back in a wider dtype than its input; "
              f"~ noisy: that peer's interquartile range > {NOISY:.0%} of its median")
    out(legend if not md else f"_{legend}_")
    for (name, msg), where in errors.items():
        notes.append(f"{name}: ERROR in {len(where)} case(s) ({', '.join(where[:3])}"
                     f"{', …' if len(where) > 3 else ''}): {msg}")
    for n in notes:
        out(("- " if md else "  ") + n)
    load_end = _load()
    busy = max(load_start[0], load_end[0]) > args.threads + 0.5
    out(f"{'' if not md else '_'}total wall time {elapsed:.1f} s; load average "
        f"{load_start[0]:.2f} at start, {load_end[0]:.2f} at end"
        + (f" — WARNING: the machine was busy (load > {args.threads} thread(s)); "
           "timings are unreliable" if busy else "") + f"{'' if not md else '_'}")

    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"header": hdr, "args": vars(args), "results": results,
                       "notes": notes, "elapsed_s": elapsed,
                       "load_start": load_start, "load_end": load_end}, fh, indent=1)
    return 0


NOISY = 0.25


def _load():
    try:
        return __import__("os").getloadavg()
    except OSError:
        return (float("nan"),) * 3


def _fmt_size(n):
    e = int(round(__import__("math").log10(n))) if n > 0 else 0
    return f"1e{e}" if 10 ** e == n else str(n)


def _fmt_time(s):
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


if __name__ == "__main__":
    sys.exit(main())
