"""Check the symgrad forwards (``func.sym(ns, ...)``) without symgrad.

Runs every ``func.sym`` through a torch-backed namespace that exposes ONLY the
documented names (so a forward that reaches for something symgrad may not
have fails here), with and without ``ns.mean``, and compares value and
gradients with ``func.torch``.

    python -m benchmarks.check_ns          # exit status 1 on any mismatch
"""
from __future__ import annotations

import sys

NS_NAMES = ("exp", "log", "tanh", "sin", "cos", "erf", "sqrt", "sum", "max", "mean", "matmul")


class StrictNS:
    """Torch functions under the names the symgrad namespace is promised to have."""

    def __init__(self, torch, with_mean=True):
        for n in NS_NAMES:
            if n == "mean" and not with_mean:
                continue
            setattr(self, n, getattr(torch, n))


def main(argv=None):
    from benchmarks import _env
    _env.configure_threads(1)
    import numpy as np
    import torch

    from benchmarks import functions
    from benchmarks.peers import symgrad_forward

    bad = 0
    for func in functions.ALL:
        for dtype in (np.float64,):
            inputs = func.make_inputs(1000, dtype, np.random.default_rng(1))
            ref_ts = [torch.from_numpy(a.copy()).requires_grad_(True) for a in inputs]
            ref_out = func.torch(*ref_ts)
            ref = torch.autograd.grad(ref_out.sum(), ref_ts)
            for label, ns in (("ns", StrictNS(torch)), ("ns-no-mean", StrictNS(torch, False))):
                fwd = symgrad_forward(func, ns)
                ts = [torch.from_numpy(a.copy()).requires_grad_(True) for a in inputs]
                try:
                    out = fwd(*ts)
                    gs = torch.autograd.grad(out.sum(), ts)
                except Exception as e:  # noqa: BLE001
                    print(f"✗ {func.name:<18} {label:<10} raised {type(e).__name__}: {e}")
                    bad += 1
                    continue
                vok = np.allclose(out.detach().numpy().reshape(-1),
                                  ref_out.detach().numpy().reshape(-1), rtol=1e-10, atol=1e-12)
                gok = all(np.allclose(g.numpy(), r.numpy(), rtol=1e-9, atol=1e-12)
                          for g, r in zip(gs, ref))
                ok = vok and gok
                bad += not ok
                print(f"{'✓' if ok else '✗'} {func.name:<18} {label:<10} value "
                      f"{'ok' if vok else 'DIFFERS'}, grads {'ok' if gok else 'DIFFER'}")
    print(f"{len(functions.ALL) * 2 - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
