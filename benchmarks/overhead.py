"""Per-op overhead on tiny tensors, torch eager vs the symgrad runtime, and import time.

    python -m benchmarks.overhead [--size 16] [--threads 1] [--repeat 7] [--clock wall|cpu]
                                  [--markdown]

Each row is the median over ``--repeat`` rounds of the mean time per call in a
loop auto-sized to ~``--target`` seconds; torch and symgrad alternate round by
round.  Inputs require grad, so forward rows include graph recording.
``--clock cpu`` times rounds with the thread's CPU time (``time.thread_time``) instead of
the wall clock: on a machine shared with other jobs it leaves out the time this process
waits for a core, which otherwise dominates the spread (both libraries run one thread).

The "Function" rows are the issue's user Functions: torch's ``torch.autograd.Function``
subclass has a handwritten forward and backward; symgrad's ``symgrad.Function`` subclass
has only the forward (symgrad compiles the backward).

symgrad runtime calls used (torch spelling): ``symgrad.tensor(arr,
requires_grad=True)`` (or ``symgrad.Tensor``), ``a + b``, ``a * b``, ``a - b``,
``-a``, ``symgrad.exp/tanh`` (or the method), ``t.sum()``, ``a @ b``,
``t.backward()``, ``t.grad``, ``symgrad.no_grad()`` for the SGD update when it
exists (else the update is done on the NumPy arrays).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile

from benchmarks._env import fresh_python

class Lib:
    """Torch-spelled façade over torch or symgrad."""

    def __init__(self, name, mod):
        self.name, self.m = name, mod

    def tensor(self, arr, rg=True):
        if self.name == "torch":
            return self.m.tensor(arr, requires_grad=rg)
        ctor = getattr(self.m, "tensor", None) or getattr(self.m, "Tensor")
        return ctor(arr, requires_grad=rg)

    def fn(self, op, t):
        f = getattr(self.m, op, None)
        return f(t) if callable(f) else getattr(t, op)()

    def grad_np(self, t):
        g = t.grad
        if g is None:
            return None
        return g.numpy() if hasattr(g, "numpy") else __import__("numpy").asarray(g)

    def zero_grad(self, ts):
        for t in ts:
            t.grad = None

    def sgd(self, ts, lr):
        no_grad = getattr(self.m, "no_grad", None)
        if no_grad is not None:
            with no_grad():
                for t in ts:
                    t -= lr * t.grad
        else:
            for t in ts:
                arr = t.numpy() if hasattr(t, "numpy") else t.data
                arr -= lr * self.grad_np(t)


def cases(lib, np, size):
    rng = np.random.default_rng(0)
    a = lib.tensor(rng.standard_normal(size))
    b = lib.tensor(rng.standard_normal(size))

    def add():
        return a + b

    def mul():
        return a * b

    def exp():
        return lib.fn("exp", a)

    def sum_():
        return a.sum()

    def fb(f):
        def run():
            lib.zero_grad((a, b))
            f().sum().backward()
        return run

    def chain10():  # 10 ops forward, then backward
        lib.zero_grad((a, b))
        y = a * b
        y = y + a
        y = lib.fn("tanh", y)
        y = y * y
        y = y - b
        y = lib.fn("exp", y)
        y = y * a
        y = y + b
        y = -y
        y.sum().backward()

    x = lib.tensor(rng.standard_normal((32, 64)), rg=False)
    yt = lib.tensor(rng.standard_normal((32, 1)), rg=False)
    W1 = lib.tensor(rng.standard_normal((64, 64)) / 8.0)
    W2 = lib.tensor(rng.standard_normal((64, 1)) / 8.0)

    def mlp_step():
        lib.zero_grad((W1, W2))
        d = lib.fn("tanh", x @ W1) @ W2 - yt
        loss = (d * d).sum() * (1.0 / 32)
        loss.backward()
        lib.sgd((W1, W2), 1e-3)

    swish, xexp = user_functions(lib)

    def swish_fwd():
        return swish.apply(a)

    def xexp_fwd():
        return xexp.apply(a, b)

    return [
        ("add fwd", add), ("mul fwd", mul), ("exp fwd", exp), ("sum fwd", sum_),
        ("add fwd+bwd", fb(add)), ("mul fwd+bwd", fb(mul)), ("exp fwd+bwd", fb(exp)),
        ("sum fwd+bwd", fb(lambda: a.sum())),
        ("chain of 10 ops fwd+bwd", chain10),
        ("MLP step 32x64-64-1 (fwd+bwd+SGD)", mlp_step),
        ("Function x*sigmoid(x) .apply fwd", swish_fwd),
        ("Function x*sigmoid(x) .apply+backward", fb(swish_fwd)),
        ("Function x*exp(y) .apply fwd", xexp_fwd),
        ("Function x*exp(y) .apply+backward", fb(xexp_fwd)),
    ]


def user_functions(lib):
    """The issue's user Functions: torch with handwritten forward and backward (saving what
    its backward needs), symgrad with the forward only (generated backward)."""
    if lib.name == "torch":
        torch = lib.m

        class Swish(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                s = torch.sigmoid(x)
                ctx.save_for_backward(x, s)
                return x * s

            @staticmethod
            def backward(ctx, g):
                x, s = ctx.saved_tensors
                return g * (s * (1 + x * (1 - s)))

        class XExp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                e = torch.exp(y)
                ctx.save_for_backward(x, e)
                return x * e

            @staticmethod
            def backward(ctx, g):
                x, e = ctx.saved_tensors
                ge = g * e
                return ge, ge * x

        return Swish, XExp
    sg = lib.m

    class Swish(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * sg.sigmoid(x)

    class XExp(sg.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * sg.exp(y)

    return Swish, XExp


def _per_call(f, target, time):
    n = 1
    while True:  # size the loop
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        dt = time.perf_counter() - t0
        if dt >= target / 4 or n >= 1 << 20:
            break
        n *= 4
    return max(1, int(n * target / max(dt, 1e-9)))


def import_time(module, repeat=5, extra=""):
    """Median wall time of ``import module`` in a fresh interpreter."""
    code = ("import time, sys; t = time.perf_counter(); import " + module +
            "; dt = time.perf_counter() - t; "
            "print(dt, int('sympy' in sys.modules), int('numpy' in sys.modules))" + extra)
    vals, info = [], None
    for _ in range(repeat):
        r = subprocess.run(fresh_python(code), capture_output=True, text=True,
                           cwd=tempfile.gettempdir())
        if r.returncode != 0:
            return None, (r.stderr.strip().splitlines() or ["?"])[-1]
        f = r.stdout.split()
        vals.append(float(f[0]))
        info = f"sympy loaded: {'yes' if f[1] == '1' else 'no'}, numpy loaded: " \
               f"{'yes' if f[2] == '1' else 'no'}"
    return statistics.median(vals), info


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.overhead")
    p.add_argument("--size", type=int, default=16, help="elements of the tiny tensors")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--target", type=float, default=0.05, help="seconds per round per op")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: time.perf_counter; cpu: time.thread_time (robust to other "
                        "jobs on the machine)")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)

    from benchmarks import _env
    _env.configure_threads(args.threads)
    import time

    import numpy as np

    from benchmarks import peers
    from benchmarks._table import render

    torch = peers._torch()
    libs = [Lib("torch", torch)]
    hdr = _env.base_header() + [f"threads : {args.threads} — {_env.thread_summary()}",
                                f"torch   : {torch.__version__}"]
    if args.clock == "cpu":
        hdr.append("clock   : thread CPU time (time.thread_time), --clock cpu")
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    try:
        peers._runtime_probe()
        import symgrad
        libs.append(Lib("symgrad", symgrad))
        hdr.append(f"symgrad : {peers._symgrad_version(symgrad)}")
    except peers.Skip as e:
        hdr.append(f"symgrad : skipped — {e}")
    print(("```text\n" if args.markdown else "") + "\n".join(hdr) +
          ("\n```" if args.markdown else "") + "\n")

    built = {}
    for lib in list(libs):
        try:
            built[lib.name] = cases(lib, np, args.size)
        except Exception as e:  # noqa: BLE001
            print(f"{lib.name}: could not build the cases — {type(e).__name__}: {e}")
            libs.remove(lib)
    names = [lib.name for lib in libs]
    labels = [c[0] for c in built["torch"]]
    res = {n: {} for n in names}
    for i, label in enumerate(labels):
        fs, loops = {}, {}
        for n in names:
            f = built[n][i][1]
            try:
                f(); f()  # warm-up (symgrad: compile + cache)
                if n == "symgrad":   # the tiered CPU target: its C modules built, then used
                    libs[-1].m.wait_for_builds(300)
                    f()
                fs[n] = f
                loops[n] = _per_call(f, args.target, time)
            except Exception as e:  # noqa: BLE001
                res[n][label] = f"err: {type(e).__name__}: {e}"
        samples = {n: [] for n in fs}
        for _ in range(args.repeat):
            for n, f in fs.items():
                k = loops[n]
                t0 = clock()
                for _ in range(k):
                    f()
                samples[n].append((clock() - t0) / k)
        for n, s in samples.items():
            res[n][label] = statistics.median(s)

    rows = []
    for label in labels:
        t = res["torch"].get(label)
        row = [label, _us(t)]
        for n in names[1:]:
            v = res[n].get(label)
            row += [_us(v), f"{v / t:.2f}" if isinstance(v, float) and isinstance(t, float)
                    else "—"]
        rows.append(row)
    headers = ["op (tiny tensors, %d elements)" % args.size, "torch µs/call"]
    for n in names[1:]:
        headers += [f"{n} µs/call", f"{n}/torch"]
    print(render(headers, rows, markdown=args.markdown,
                 title="per-call overhead (median of rounds)"))
    errs = [(n, lbl, v) for n in names for lbl, v in res[n].items() if isinstance(v, str)]
    for n, lbl, v in errs:
        print(f"  {n} {lbl}: {v}")

    print()
    rows = []
    for mod in ("numpy", "torch", "jax", "symgrad"):
        t, info = import_time(mod)
        rows.append([f"import {mod}", "failed" if t is None else f"{t * 1e3:.1f} ms",
                     info or ""])
    print(render(["fresh interpreter", "median of 5", "notes"], rows, markdown=args.markdown,
                 align="lrl", title="import time"))
    return 0


def _us(v):
    if isinstance(v, float):
        return f"{v * 1e6:.1f}"
    return "err" if isinstance(v, str) else "—"


if __name__ == "__main__":
    sys.exit(main())
