"""The "runtime, defaults" peer's process: symgrad as a user gets it, with no settings.

Started by benchmarks.peers (``runtime_defaults``) with an environment cleared of every
SYMGRAD_* variable and thread knob (OMP_NUM_THREADS, ...), so the CPU target, the thread
count and the cache are symgrad's defaults (the cache: SYMGRAD_CACHE_DIR is kept when set,
else the user's). Messages are pickles over stdin/stdout, one request -> one reply:

    ("prepare", name, inputs) -> ("ok", gradients, {"first_s", "warm_s", "target"})
    ("run",)                  -> ("ok", seconds of one fwd+bwd, timed here: no pipe in it)
    ("grads",)                -> ("ok", gradients of one more fwd+bwd)

"prepare" runs the first call (the NumPy tier while the C module builds), waits for the
pending builds (``symgrad.wait_for_builds``) and runs a second call (the switch): "after
warm-up", as a long-running program would be.
"""
from __future__ import annotations

import gc
import pickle
import sys
import time


def main():
    out = sys.stdout.buffer
    inp = sys.stdin.buffer
    sys.stdout = sys.stderr   # nothing else may write into the pipe
    import numpy as np

    import symgrad as sg
    from benchmarks import functions, peers

    state = {}

    def fwd_bwd():
        F, ts, seed = state["F"], state["ts"], state["seed"]
        for t in ts:
            t.grad = None
        y = F.apply(*ts)
        if seed[0] is None:
            seed[0] = sg.tensor(np.ones_like(y.detach().numpy()))
        y.backward(seed[0])

    def grads():
        return [np.zeros_like(a) if t.grad is None else t.grad.numpy().copy()
                for a, t in zip(state["inputs"], state["ts"])]

    while True:
        try:
            msg = pickle.load(inp)
        except EOFError:
            return
        try:
            if msg[0] == "prepare":
                _, name, inputs = msg
                func = functions.BY_NAME[name]
                fwd = staticmethod(peers.symgrad_forward(func, peers.symgrad_namespace(sg),
                                                         with_ctx=True))
                F = type(f"{func.name}_Function", (sg.Function,), {"forward": fwd})
                state.update(F=F, inputs=inputs, seed=[None],
                             ts=[sg.tensor(a, requires_grad=True) for a in inputs])
                t0 = time.perf_counter()
                fwd_bwd()
                first = time.perf_counter() - t0
                sg.wait_for_builds(600)
                t0 = time.perf_counter()
                fwd_bwd()
                warm = time.perf_counter() - t0
                from symgrad.autograd import function as fmod

                targets = sorted({e.mod.compiled.target for k, e in fmod._COMPILED.items()
                                  if k[0] is F})
                reply = ("ok", grads(), {"first_s": first, "warm_s": warm,
                                         "target": ",".join(targets)})
            elif msg[0] == "run":
                gc.disable()
                try:
                    t0 = time.perf_counter()
                    fwd_bwd()
                    reply = ("ok", time.perf_counter() - t0)
                finally:
                    gc.enable()
            elif msg[0] == "grads":
                fwd_bwd()
                reply = ("ok", grads())
            else:
                reply = ("error", f"unknown request {msg[0]!r}")
        except Exception as e:  # noqa: BLE001 - reported by the runner as this peer's error
            reply = ("error", f"{type(e).__name__}: {e}")
        pickle.dump(reply, out)
        out.flush()


if __name__ == "__main__":
    main()
