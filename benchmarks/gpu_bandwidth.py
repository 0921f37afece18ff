"""GPU: the fused backward kernels' share of HBM bandwidth at 1e8 elements, by launch setting.

    python -m benchmarks.gpu_bandwidth [--n 1e8] [--reps 15] [--out FILE]

For a few benchmark functions (float32, gradient of sum(f) w.r.t. every input, the `_vec`
kernels), sweeps the 16-byte vectors a thread loads before computing (SG_VEC_UNROLL, built in
with a define) and the grid's cap (blocks per multiprocessor), beside two references measured
in the same run: a device-to-device copy and CuPy's `z = x + y` (two reads, one write: the
traffic of a one-input backward, the practical ceiling of such a kernel). GB/s counts the
bytes every kernel must move (inputs + seed read, gradients written); %peak is of the peak
from the device's memory clock and bus width; %x+y is of the `x + y` reference.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

NAMES = ("gelu_tanh", "gelu_erf", "mish", "softplus_b2")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="1e8")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    import cupy

    import symgrad as sg
    from benchmarks import functions
    from benchmarks.gpu import _NS, cupy_seconds, peak_bandwidth
    from benchmarks.peers import symgrad_forward

    n = int(float(args.n))
    peak, src = peak_bandwidth(cupy)
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]

    def timed(fn):
        return cupy_seconds(cupy, fn, args.reps)

    x = cupy.random.standard_normal(n, dtype=cupy.float32)
    y = cupy.random.standard_normal(n, dtype=cupy.float32)
    z = cupy.empty_like(x)
    t_copy = timed(lambda: cupy.copyto(z, x))
    t_add = timed(lambda: cupy.add(x, y, out=z))
    add_bw = 3 * n * 4 / t_add
    dev = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    dev = dev.decode() if isinstance(dev, bytes) else dev
    lines = [f"{dev}: peak {peak / 1e12:.2f} "
             f"TB/s ({src}), {sms} SMs; n = {n:.0e} float32, median of {args.reps}",
             f"reference copy   : {2 * n * 4 / t_copy / 1e9:7.0f} GB/s "
             f"({100 * 2 * n * 4 / t_copy / peak:.0f}% peak)",
             f"reference x + y  : {add_bw / 1e9:7.0f} GB/s ({100 * add_bw / peak:.0f}% peak)", ""]
    head = f"{'function':<12} {'vec unroll':>10} {'blocks/SM':>9} | {'ms':>7} {'GB/s':>6} {'%peak':>5} {'%x+y':>5}"
    lines += [head, "-" * len(head)]
    print("\n".join(lines), flush=True)
    del z
    real = cupy.RawModule
    for name in NAMES:
        func = functions.BY_NAME[name]
        host = func.make_inputs(n, np.float32, np.random.default_rng(0))
        xs = [cupy.asarray(h) for h in host]
        fwd = symgrad_forward(func, _NS)
        seed = cupy.ones(xs[0].shape, cupy.float32)
        nbytes = (2 * len(xs) + 1) * n * 4
        for unroll in (1, 2, 4):
            def raw_module(code, options=(), _u=unroll):
                return real(code=code, options=(*tuple(options), f"-DSG_VEC_UNROLL={_u}"))
            cupy.RawModule = raw_module
            try:
                mod = sg.compile(fwd, *xs, target="cuda", cache_ok=False)
                mod.raw.backward(seed, *xs)
            finally:
                cupy.RawModule = real
            mod.raw._VEC_UNROLL = unroll
            for per_sm in (8, 16, 32):
                mod.raw._state["max_blocks"] = per_sm * sms
                t = timed(lambda: mod.raw.backward(seed, *xs))
                row = (f"{name:<12} {unroll:>10} {per_sm:>9} | {t * 1e3:>7.3f} {nbytes / t / 1e9:>6.0f} "
                       f"{100 * nbytes / t / peak:>4.0f}% {100 * nbytes / t / add_bw:>4.0f}%")
                lines.append(row)
                print(row, flush=True)
        del xs, seed
        cupy.get_default_memory_pool().free_all_blocks()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
