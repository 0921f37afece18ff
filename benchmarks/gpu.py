"""GPU benchmark: symgrad's fused CUDA forward+backward vs torch eager and torch.compile.

    python -m benchmarks.gpu [--sizes 1e6,1e7,1e8] [--reps 20] [--out benchmarks/results/gpu.txt]
                             [--no-compile] [--only a,b] [--unroll-baseline]

For each elementwise benchmark function of `benchmarks.functions` (float32): the gradient of
sum(output) w.r.t. every input, given the all-ones seed. symgrad times `mod.raw.backward`
(its generated backward recomputes the forward inside the same fused kernel: one launch);
torch eager and torch.compile time `out = f(*xs); out.backward(seed)`. Median of CUDA-event
timings after warm-up. Bandwidth = the minimum traffic of a fused fwd+bwd (read every input
and the seed, write every gradient) / time, against the device's peak memory bandwidth.
By default the backward runs the `_vec` kernels (16-byte loads and stores) where its operands
allow; `--unroll-baseline` adds, in the same run, the scalar kernels (`_VEC` emptied) with
SG_UNROLL=4 ("scalar4") and with SG_UNROLL=1 ("scalar1": one element a thread per grid stride,
the kernels before this round).

A second table is the runtime as a user meets it: a forward-only `sg.Function` applied to
`sg.Tensor`s on the GPU (`y = F.apply(*xs); y.backward(seed)`, gradients accumulated into
`.grad`), timed the same way, with the kernel launches its forward and its backward made
(counted at the generated module's kernel lookup), against torch eager and torch.compile.
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

NAMES = ("gelu_tanh", "gelu_erf", "mish", "softplus_b2", "swish", "lennard_jones", "rational6")


class _NS:
    """The torch-spelled namespace the `sym` forwards are written against (methods of the
    traced tensors)."""

    @staticmethod
    def tanh(x): return x.tanh()

    @staticmethod
    def exp(x): return x.exp()

    @staticmethod
    def log(x): return x.log()

    @staticmethod
    def erf(x): return x.erf()

    @staticmethod
    def sqrt(x): return x.sqrt()

    @staticmethod
    def sin(x): return x.sin()

    @staticmethod
    def cos(x): return x.cos()


def cupy_seconds(cupy, fn, reps):
    """Median seconds of `fn()` over `reps` CUDA-event timings, after two warm-up calls."""
    fn()
    fn()
    times = []
    for _ in range(reps):
        s, e = cupy.cuda.Event(), cupy.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(cupy.cuda.get_elapsed_time(s, e))
    return statistics.median(times) / 1e3


def peak_bandwidth(cupy):
    """Peak DRAM bandwidth in bytes/s, from the device's memory clock and bus width."""
    try:
        rt = cupy.cuda.runtime
        clock_khz = rt.deviceGetAttribute(rt.cudaDevAttrMemoryClockRate, 0)
        bus_bits = rt.deviceGetAttribute(rt.cudaDevAttrGlobalMemoryBusWidth, 0)
        return 2.0 * clock_khz * 1e3 * bus_bits / 8, "device attributes"
    except Exception:
        pass
    try:
        clock_khz = cupy.cuda.runtime.deviceGetAttribute(36, 0)
        bus_bits = cupy.cuda.runtime.deviceGetAttribute(37, 0)
        return 2.0 * clock_khz * 1e3 * bus_bits / 8, "device attributes"
    except Exception:
        return 3.35e12, "assumed (H100 SXM)"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1e6,1e7,1e8")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--only", default=None)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--out", default=None)
    p.add_argument("--unroll-baseline", action="store_true",
                   help="also time the kernels built with SG_UNROLL=1")
    args = p.parse_args(argv)

    import cupy
    import torch

    import symgrad as sg
    from benchmarks import functions
    from benchmarks.peers import symgrad_forward

    funcs = [functions.BY_NAME[n] for n in NAMES if not args.only or n in args.only.split(",")]
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    peak, peak_src = peak_bandwidth(cupy)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    lines = [f"device : {name}; peak memory bandwidth {peak / 1e12:.2f} TB/s ({peak_src})",
             f"torch {torch.__version__}, cupy {cupy.__version__}, symgrad {sg.__version__}",
             "fwd+bwd of sum(f(inputs)) w.r.t. every input, float32; median of "
             f"{args.reps} CUDA-event timings; GB/s = (inputs + seed + grads) bytes / time",
             ""]
    head = (f"{'function':<14} {'n':>6} | {'symgrad ms':>10} {'GB/s':>6} {'%peak':>5} {'launch':>6} | "
            f"{'eager ms':>9} {'compile ms':>10} | {'x eager':>7} {'x compile':>9}")
    if args.unroll_baseline:
        head += f" | {'scalar4 ms':>10} {'%peak':>5} {'scalar1 ms':>10} {'%peak':>5}"
    lines += [head, "-" * len(head)]
    print("\n".join(lines), flush=True)
    rt_head = (f"{'function':<14} {'n':>6} | {'runtime ms':>10} {'launch f/b':>10} | "
               f"{'eager ms':>9} {'compile ms':>10} | {'x eager':>7} {'x compile':>9}")
    rt_lines = ["", "runtime on CUDA tensors: y = F.apply(*xs); y.backward(seed) (sg.Function, "
                "forward only; Python included)", "", rt_head, "-" * len(rt_head)]

    def torch_time(fn, reps):
        fn()
        fn()
        times = []
        for _ in range(reps):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        return statistics.median(times) / 1e3

    def cupy_time(fn, reps):
        return cupy_seconds(cupy, fn, reps)

    for func in funcs:
        compiled_torch = None if args.no_compile else torch.compile(func.torch, dynamic=True)
        fwd = symgrad_forward(func, _NS)
        for n in sizes:
            rng = np.random.default_rng(0)
            host = func.make_inputs(n, np.float32, rng)
            xs = [cupy.asarray(h) for h in host]
            mod = sg.compile(fwd, *xs, target="cuda")
            out = mod.raw.forward(*xs)
            seed = cupy.ones(out[0].shape, cupy.float32)
            body = mod.source[mod.source.index("def backward("):]
            body = body[:body.index("\ndef ", 1)] if "\ndef " in body[1:] else body
            launches = body.count("    _launch")
            t_sg = cupy_time(lambda: mod.raw.backward(seed, *xs), args.reps)
            grads_sg = mod.raw.backward(seed, *xs)

            ts = [torch.as_tensor(h, device="cuda").requires_grad_(True) for h in host]
            tseed = torch.ones(tuple(out[0].shape), device="cuda")

            def eager():
                for t in ts:
                    t.grad = None
                func.torch(*ts).backward(tseed)

            t_eager = torch_time(eager, args.reps)
            g0 = ts[0].grad.detach()
            err = float(torch.max(torch.abs(torch.as_tensor(grads_sg[0], device="cuda") - g0))
                        / (torch.max(torch.abs(g0)) + 1e-30))
            t_comp = float("nan")
            if compiled_torch is not None:
                def comp():
                    for t in ts:
                        t.grad = None
                    compiled_torch(*ts).backward(tseed)
                try:
                    t_comp = torch_time(comp, args.reps)
                except Exception as exc:  # report, keep going
                    print(f"  torch.compile failed for {func.name}: {type(exc).__name__}: {exc}",
                          file=sys.stderr)
            nbytes = (2 * len(xs) + 1) * n * 4
            gbs = nbytes / t_sg / 1e9
            row = (f"{func.name:<14} {n:>6.0e} | {t_sg * 1e3:>10.3f} {gbs:>6.0f} "
                   f"{100 * nbytes / t_sg / peak:>4.0f}% {launches:>6} | {t_eager * 1e3:>9.3f} "
                   f"{t_comp * 1e3:>10.3f} | {t_eager / t_sg:>6.2f}x {t_comp / t_sg:>8.2f}x")
            if args.unroll_baseline:
                t_u4 = _scalar_time(cupy, sg, fwd, xs, seed, cupy_time, args.reps, 4)
                t_u1 = _scalar_time(cupy, sg, fwd, xs, seed, cupy_time, args.reps, 1)
                row += (f" | {t_u4 * 1e3:>10.3f} {100 * nbytes / t_u4 / peak:>4.0f}%"
                        f" {t_u1 * 1e3:>10.3f} {100 * nbytes / t_u1 / peak:>4.0f}%")
            row += "" if err < 1e-3 else f"  (grad rel.err {err:.1e}!)"
            lines.append(row)
            print(row, flush=True)

            t_rt, nf, nb, rt_err = _runtime_time(cupy, sg, func, xs, seed, grads_sg, cupy_time,
                                                 args.reps)
            rt_row = (f"{func.name:<14} {n:>6.0e} | {t_rt * 1e3:>10.3f} {f'{nf}/{nb}':>10} | "
                      f"{t_eager * 1e3:>9.3f} {t_comp * 1e3:>10.3f} | {t_eager / t_rt:>6.2f}x "
                      f"{t_comp / t_rt:>8.2f}x" + ("" if rt_err < 1e-5 else
                                                   f"  (grad differs from the module's: {rt_err:.1e}!)"))
            rt_lines.append(rt_row)
            print(rt_row, flush=True)
            del xs, ts, grads_sg, out, seed, tseed
            cupy.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()
    lines.append("")
    lines.append("x eager / x compile: torch time / symgrad time (> 1: symgrad faster). "
                 "launch: kernels per symgrad backward call.")
    lines += rt_lines
    lines.append("")
    lines.append("launch f/b: kernels launched by the Function's forward / by its backward.")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def _scalar_time(cupy, sg, fwd, xs, seed, cupy_time, reps, unroll):
    """The same module's backward on its scalar kernels (no `_vec` variant) built with
    SG_UNROLL=`unroll` (a fresh compile whose CuPy module gets the define)."""
    real = cupy.RawModule

    def raw_module(code, options=()):
        return real(code=code, options=(*tuple(options), f"-DSG_UNROLL={unroll}"))

    cupy.RawModule = raw_module
    try:
        mod = sg.compile(fwd, *xs, target="cuda", cache_ok=False)
        mod.raw.backward(seed, *xs)   # loads the module with the define
    finally:
        cupy.RawModule = real
    mod.raw._VEC.clear()
    return cupy_time(lambda: mod.raw.backward(seed, *xs), reps)


def _runtime_time(cupy, sg, func, xs, seed, want, cupy_time, reps):
    """(seconds of one F.apply + backward on sg.Tensors on the GPU, forward launches, backward
    launches, max relative difference of the gradients from the module's)."""
    from benchmarks import peers
    from symgrad.autograd import function as fmod

    fwd = staticmethod(peers.symgrad_forward(func, peers.symgrad_namespace(sg), with_ctx=True))
    F = type(f"{func.name}_Function", (sg.Function,), {"forward": fwd})
    ts = [sg.tensor(x, requires_grad=True) for x in xs]
    tseed = sg.tensor(seed)
    box = {}

    def step():
        for t in ts:
            t.grad = None
        box["y"] = F.apply(*ts)
        box["y"].backward(tseed)

    step()
    raws = [e.mod.compiled.raw for k, e in fmod._COMPILED.items() if k[0] is F]
    counts = [0]
    reals = [raw._kernel for raw in raws]
    for raw, real in zip(raws, reals):

        def counting(name, _real=real):
            counts[0] += 1
            return _real(name)
        raw._kernel = counting
    for t in ts:
        t.grad = None
    y = F.apply(*ts)
    cupy.cuda.Device().synchronize()
    n_fwd = counts[0]
    y.backward(tseed)
    n_bwd = counts[0] - n_fwd
    for raw, real in zip(raws, reals):
        raw._kernel = real
    err = max(float(cupy.max(cupy.abs(t.grad._data - w)) / (cupy.max(cupy.abs(w)) + 1e-30))
              for t, w in zip(ts, want))
    return cupy_time(step, reps), n_fwd, n_bwd, err


if __name__ == "__main__":
    sys.exit(main())
