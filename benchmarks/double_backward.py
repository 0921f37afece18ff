"""Double backward through sg.to_torch: the generated second-order module against torch's
autograd differentiating the backward's torch operations (sg.to_torch(F, double_backward=...)).

    python -m benchmarks.double_backward [--size 1e5] [--threads 1]

Times `g = grad(F(x).sum(), x, create_graph=True); grad(g.sum(), x)` (median ms) for a few
benchmark functions, and checks both give the same second derivatives where the naive second
derivative is finite. Its table is the measurement behind DOUBLE_BACKWARD's default
(symgrad/frameworks.py, docs/pytorch-and-jax.md).
"""
from __future__ import annotations

import argparse
import sys

from benchmarks import _env
from benchmarks.frameworks import _interleaved

NAMES = ("gelu_tanh", "gelu_erf", "mish", "softplus_b2", "swish", "lennard_jones", "rational6",
         "layernorm_affine", "mlp_loss")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="1e5")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    _env.configure_threads(args.threads)
    import numpy as np
    import torch

    import symgrad as sg
    from benchmarks._table import render
    from benchmarks.functions import ALL
    from benchmarks.peers import symgrad_forward

    torch.set_num_threads(args.threads)
    size = int(float(args.size))
    rows = []
    for func in ALL:
        if func.name not in NAMES:
            continue
        arrays = func.make_inputs(size, np.dtype("float64"), np.random.default_rng(0))
        xs = [torch.from_numpy(a).requires_grad_() for a in arrays]
        fwd = symgrad_forward(func, sg)
        runs, results = {}, {}
        for mode in ("generated", "torch"):
            F = sg.to_torch(fwd, double_backward=mode)

            def run(F=F):
                out = F.apply(*xs)
                g = torch.autograd.grad(out.sum(), xs, create_graph=True)
                return torch.autograd.grad(sum(v.sum() for v in g), xs, allow_unused=True)
            results[mode] = run()
            runs[mode] = run

        def eager():
            out = func.torch(*xs)
            g = torch.autograd.grad(out.sum(), xs, create_graph=True)
            return torch.autograd.grad(sum(v.sum() for v in g), xs, allow_unused=True)
        runs["eager"] = eager
        times = _interleaved(runs)
        # an unused input: None from torch's autograd, zeros from the generated module
        same = all(torch.allclose(torch.zeros_like(x) if a is None else a,
                                  torch.zeros_like(x) if b is None else b, rtol=1e-9, atol=1e-12)
                   for a, b, x in zip(results["generated"], results["torch"], xs))
        rows.append([func.name, f"{times['eager']:.2f}", f"{times['generated']:.2f}",
                     f"{times['torch']:.2f}", f"{times['torch'] / times['generated']:.2f}x",
                     "yes" if same else "NO"])
        print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    print("\n".join(_env.base_header() + [
        f"torch   : {torch.__version__}; float64, size {size:.0e}, {args.threads} thread(s); "
        f"median ms of fwd + grad(create_graph) + grad"]))
    print()
    print(render(["function", "torch eager", "generated 2nd order", "torch ops of backward",
                  "torch ops / generated", "same values"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
