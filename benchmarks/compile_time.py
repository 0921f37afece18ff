"""symgrad compile-time benchmark (skeleton until symgrad lands).

    python -m benchmarks.compile_time [--only NAME] [--targets numpy,c]
                                      [--dtype float32] [--size 1e3] [--markdown]

For each benchmark function and target:

* ``trace``        — ``symgrad.trace(fn, *example_arrays)`` in this process, median of 3;
* ``cold compile`` — ``symgrad.compile(fn, *examples, target=T)`` in a fresh
  interpreter with an empty ``SYMGRAD_CACHE_DIR`` (import time excluded);
* ``disk hit``     — the same compile in a second fresh interpreter with the same
  ``SYMGRAD_CACHE_DIR`` (cache hit from disk);
* ``memory hit``   — a second ``compile`` inside that interpreter;
* ``stages``       — trace + differentiate + optimize (rewrites, CSE) + emit of the cold
  compile, from ``mod.stats`` (the ≤ 1 s target); ``cold compile`` adds loading the module
  and, for C, the C compiler; ``import sympy`` (paid once per process, by the first
  compile) is timed separately and is *not* in ``cold compile``;
* ``mlp3_elementwise`` — compile-only case: the gradient of a 4-6-4-1 tanh MLP written
  elementwise, every one of its 52 weights a scalar input.
* ``mod.stats``    — whatever keys the compiled module reports (from the cold run),
  printed as a second table.

A stage that raises prints ``err`` and the reason below the table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np


def _jsonable(v):
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    try:
        return float(v)
    except Exception:  # noqa: BLE001
        return repr(v)


# ------------------------------------------------------------- compile-only cases
MLP_LAYERS = (4, 6, 4, 1)   # 24 + 24 + 4 = 52 scalar weights


def mlp_elementwise_forward(*args):
    """A 4 -> 6 -> 4 -> 1 tanh MLP written elementwise: every weight is a scalar input, so the
    gradient is 52 separate formulas (a stress test for CSE and emit, not for the runtime)."""
    import symgrad as sg

    n_in = MLP_LAYERS[0]
    h = list(args[:n_in])
    k = n_in
    for li, (a, b) in enumerate(zip(MLP_LAYERS[:-1], MLP_LAYERS[1:])):
        out = []
        for j in range(b):
            acc = h[0] * args[k + j]
            for i in range(1, a):
                acc = acc + h[i] * args[k + i * b + j]
            out.append(acc if li == len(MLP_LAYERS) - 2 else sg.tanh(acc))
        k += a * b
        h = out
    return h[0]


def mlp_elementwise_inputs(size, dtype, rng):
    n_w = sum(a * b for a, b in zip(MLP_LAYERS[:-1], MLP_LAYERS[1:]))
    xs = [rng.uniform(-1, 1, size).astype(dtype) for _ in range(MLP_LAYERS[0])]
    ws = [np.asarray(rng.uniform(-0.5, 0.5), dtype=dtype) for _ in range(n_w)]
    return xs + ws


EXTRA = {"mlp3_elementwise": (mlp_elementwise_forward, mlp_elementwise_inputs)}


def _case(fname, size, dtype, ns):
    """(forward, inputs) of a benchmark function or of an EXTRA compile-only case."""
    if fname in EXTRA:
        fwd, make = EXTRA[fname]
        return fwd, make(size, np.dtype(dtype), np.random.default_rng(0))
    from benchmarks import functions
    from benchmarks.peers import symgrad_forward
    func = functions.BY_NAME[fname]
    inputs = func.make_inputs(size, np.dtype(dtype), np.random.default_rng(0))
    return symgrad_forward(func, ns), inputs


def _file_forward(fname, folder):
    """The benchmark forward as a function of a real module file in `folder`, as a user's
    forward is: the disk cache keys a forward by its file (an exec'd wrapper has none, so it
    would only ever be cached in memory and every "disk hit" would be a recompile)."""
    import importlib.util

    from benchmarks import functions
    func = functions.BY_NAME[fname]
    args = ", ".join(f"x{i}" for i in range(func.n_inputs))
    path = os.path.join(folder, f"bench_{fname}.py")
    text = (f"import symgrad\nfrom benchmarks.functions import BY_NAME\n\n"
            f"_sym = BY_NAME[{fname!r}].sym\n\n\n"
            f"def {fname}_forward({args}):\n    return _sym(symgrad, {args})\n")
    if not os.path.exists(path) or open(path).read() != text:
        with open(path, "w") as f:
            f.write(text)
    spec = importlib.util.spec_from_file_location(f"bench_{fname}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"{fname}_forward")


def worker(fname, target, dtype, size):
    """Runs in a fresh interpreter; prints one JSON line."""
    import time
    t0 = time.perf_counter()
    import numpy as np  # noqa: F401
    import symgrad
    import_s = time.perf_counter() - t0
    from benchmarks.peers import symgrad_namespace
    fwd, inputs = _case(fname, size, dtype, symgrad_namespace(symgrad))
    if fname not in EXTRA:
        fwd = _file_forward(fname, os.getcwd())
    t0 = time.perf_counter()
    import sympy  # noqa: F401  (loaded by the first compile; timed apart from it)
    res = {"import_s": import_s, "sympy_import_s": time.perf_counter() - t0}
    try:
        t0 = time.perf_counter()
        mod = symgrad.compile(fwd, *inputs, target=target)
        res["compile_s"] = time.perf_counter() - t0
        res["stats"] = _jsonable(getattr(mod, "stats", None) or {})
        t0 = time.perf_counter()
        symgrad.compile(fwd, *inputs, target=target)
        res["mem_hit_s"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001
        res["error"] = f"{type(e).__name__}: {e}"
    print("@@RESULT " + json.dumps(res))


def _spawn(args, cache_dir):
    from benchmarks._env import fresh_python
    env = dict(os.environ, SYMGRAD_CACHE_DIR=cache_dir)
    argv = fresh_python("from benchmarks.compile_time import main; "
                        f"main(['--worker', *{list(args)!r}])")
    r = subprocess.run(argv, capture_output=True, text=True, cwd=cache_dir, env=env)
    for line in r.stdout.splitlines():
        if line.startswith("@@RESULT "):
            return json.loads(line[len("@@RESULT "):])
    tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"worker exited {r.returncode}: {tail}"}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.compile_time")
    p.add_argument("--only", default=None)
    p.add_argument("--targets", default="numpy,c")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--size", default="1e3")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--worker", nargs=4, metavar=("FUNC", "TARGET", "DTYPE", "SIZE"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    from benchmarks import _env
    _env.configure_threads(args.threads)
    if args.worker:
        f, t, d, s = args.worker
        worker(f, t, d, int(float(s)))
        return 0

    import time

    import numpy as np

    from benchmarks import functions, peers
    from benchmarks._table import render

    size = int(float(args.size))
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    print("\n".join(_env.base_header()))
    try:
        sg = peers._symgrad()
        print(f"symgrad : {peers._symgrad_version(sg)}")
    except peers.Skip as e:
        print(f"symgrad : skipped — {e}")
        return 0
    trace_fn = _resolve_trace(sg)
    missing = [n for n, f in (("trace", trace_fn), ("compile", getattr(sg, "compile", None)))
               if not callable(f)]
    if missing:
        print(f"symgrad : skipped — no {' / '.join(missing)} yet")
        return 0
    print(f"inputs  : size {size:g}, {args.dtype}; cold = fresh interpreter + empty "
          f"SYMGRAD_CACHE_DIR, disk hit = second fresh interpreter, same cache dir\n")

    ns = peers.symgrad_namespace(sg)
    rows, stats_rows, errors = [], [], []
    stat_keys: list[str] = []
    nested: list[str] = []
    wanted = None if args.only is None else [t.strip() for t in args.only.split(",")]
    rest = None if wanted is None else ",".join(t for t in wanted if t not in EXTRA)
    names = [f.name for f in functions.select(rest)] if rest is None or rest else []
    names += [n for n in EXTRA if wanted is None or n in wanted]
    for name in names:
        fwd, inputs = _case(name, size, args.dtype, ns)
        func = type("Case", (), {"name": name})
        try:
            ts = []
            for _ in range(3):
                t0 = time.perf_counter()
                trace_fn(fwd, *inputs)
                ts.append(time.perf_counter() - t0)
            trace = _ms(statistics.median(ts))
        except Exception as e:  # noqa: BLE001
            trace = "err"
            errors.append(f"{func.name} trace: {type(e).__name__}: {e}")
        for target in targets:
            with tempfile.TemporaryDirectory(prefix="symgrad-cache-") as cache:
                wargs = [func.name, target, args.dtype, str(size)]
                cold = _spawn(wargs, cache)
                warm = _spawn(wargs, cache) if "error" not in cold else {}
            for label, r in (("cold", cold), ("disk hit", warm)):
                if "error" in r:
                    errors.append(f"{func.name} {target} {label}: {r['error']}")
            st = cold.get("stats") or {}
            stages = sum(st.get(k) or 0.0 for k in ("trace_s", "differentiate_s", "optimize_s",
                                                     "emit_s")) if st else None
            rows.append([func.name, target, trace, _ms(stages), _ms(cold.get("compile_s")),
                         _ms(warm.get("compile_s")), _ms(warm.get("mem_hit_s")),
                         _ms(cold.get("import_s")), _ms(cold.get("sympy_import_s"))])
            for label, r in (("cold", cold), ("disk hit", warm)):
                st = r.get("stats")
                if not isinstance(st, dict):
                    continue
                scalars = {k: v for k, v in st.items() if not isinstance(v, (dict, list))}
                for k in scalars:
                    if k not in stat_keys:
                        stat_keys.append(k)
                stats_rows.append((func.name, target, label, scalars))
                for k, v in st.items():
                    if isinstance(v, (dict, list)):
                        nested.append(f"{func.name} {target} {label}: {k} = {json.dumps(v)}")

    print(render(["function", "target", "trace", "stages", "cold compile", "disk hit",
                  "memory hit", "import symgrad", "import sympy"], rows,
                 markdown=args.markdown, align="llrrrrrrr",
                 title="compile time (ms)"))
    if stat_keys:
        print()
        print(render(["function", "target", "run"] + stat_keys,
                     [[f, t, lb] + [_fmt(st.get(k)) for k in stat_keys]
                      for f, t, lb, st in stats_rows],
                     markdown=args.markdown, align="lll" + "r" * len(stat_keys),
                     title="mod.stats (scalar keys; cold compile and disk-cache hit)"))
    for line in nested:
        print("  " + line)
    for e in errors:
        print("  " + e)
    return 0


def _resolve_trace(sg):
    """``symgrad.trace``; if a submodule ``symgrad/trace.py`` shadows the function
    (importing the submodule rebinds the package attribute), use its ``trace``."""
    t = getattr(sg, "trace", None)
    if t is not None and not callable(t):
        t = getattr(t, "trace", None)
    return t


def _ms(v):
    return "—" if v is None else f"{v * 1e3:.1f}"


def _fmt(v):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list)):
        s = json.dumps(v)
        return s if len(s) <= 40 else s[:37] + "..."
    return str(v)


if __name__ == "__main__":
    sys.exit(main())
