"""Registry of peers (frameworks measured side by side).

A peer is a :class:`Peer`:

* ``name``;
* ``probe() -> str`` — imports the framework, applies thread settings, returns a
  version string; raises :class:`Skip` with a reason if the peer cannot run here;
* ``prepare(func, inputs) -> run`` — ``func`` is a :class:`benchmarks.functions.Func`,
  ``inputs`` a list of NumPy arrays (the peer's private copies).  It returns a
  zero-argument callable ``run()`` that computes forward + backward of
  ``sum(output)`` and returns the list of input gradients as NumPy arrays, in
  input order.  ``prepare`` raises :class:`Skip` if the peer has no
  implementation of ``func``.  Everything in ``prepare`` and the first ``run()``
  (JIT tracing/compilation, symgrad compilation) is reported as *setup* and
  excluded from the timings.

Register new peers with :func:`register`.  The runner measures peers in
registry order; ``torch`` is the baseline and must stay first.

symgrad interface expected by the ``symgrad_*`` peers (see README.md)::

    mod = symgrad.compile(fn, *example_arrays, target="numpy" | "c", dtype=None)
    mod.forward(*arrays)                       -> output array
    mod.backward(*grad_outputs, *arrays)       -> tuple of input gradients
    mod.stats                                  -> dict (compile_time.py)

    class F(symgrad.Function):
        @staticmethod
        def forward(ctx, *xs): ...             # traced with proxies
    t = symgrad.tensor(arr, requires_grad=True)   # or symgrad.Tensor(...)
    out = F.apply(*ts); out.backward(ones); t.grad

The forwards are ``func.sym(ns, *xs)`` with ``ns = symgrad_namespace(symgrad)``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import numpy as np


class Skip(Exception):
    """The peer cannot run (here, or for this function); the message says why."""


@dataclass
class Peer:
    name: str
    probe: Callable[[], str]
    prepare: Callable  # (func, inputs) -> run
    has_setup: bool = False  # show its setup time in the setup table
    note: str = ""


REGISTRY: dict[str, Peer] = {}


def register(peer: Peer) -> Peer:
    REGISTRY[peer.name] = peer
    return peer


def num_threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "1"))


# ----------------------------------------------------------------------- torch

_torch_configured = False


def _torch():
    global _torch_configured
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        raise Skip(f"import torch failed: {e!r}")
    if not _torch_configured:
        torch.set_num_threads(num_threads())
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass  # already set (or parallel work already started)
        _torch_configured = True
    return torch


def _torch_probe():
    t = _torch()
    return t.__version__


def _make_torch_prepare(attr):
    def prepare(func, inputs):
        impl = getattr(func, attr)
        if impl is None:
            raise Skip(f"no {attr} implementation")
        torch = _torch()
        ts = [torch.from_numpy(a).requires_grad_(True) for a in inputs]
        seed = []

        def run():
            out = impl(*ts)
            if not seed:  # the all-ones output gradient is made once, like symgrad's
                seed.append(torch.ones_like(out))
            gs = torch.autograd.grad(out, ts, grad_outputs=seed[0], allow_unused=True)
            return [np.zeros_like(a) if g is None else g.numpy()
                    for a, g in zip(inputs, gs)]
        return run
    return prepare


TORCH = register(Peer("torch", _torch_probe, _make_torch_prepare("torch"),
                      note="torch eager CPU, formula op by op (baseline)"))
register(Peer("torch_native", _torch_probe, _make_torch_prepare("torch_native"),
              note="torch eager with its fused op (F.gelu, F.mish, F.softplus, F.silu, "
                   "torch.logsumexp, F.layer_norm) where one exists"))


# ------------------------------------------------------------------------- jax

def _jax():
    try:
        import jax
        jax.config.update("jax_enable_x64", True)  # float64 stays float64
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy as jnp
    except Exception as e:  # noqa: BLE001
        raise Skip(f"import jax failed: {e!r}")
    return jax, jnp


def _jax_probe():
    jax, _ = _jax()
    import jaxlib
    return f"{jax.__version__} (jaxlib {jaxlib.__version__}, {jax.devices()[0].platform})"


def _jax_prepare(func, inputs):
    if func.jax is None:
        raise Skip("no jax implementation")
    jax, jnp = _jax()
    n = len(inputs)

    def loss(*xs):
        return jnp.sum(func.jax(jnp, *xs))

    g = jax.jit(jax.grad(loss, argnums=tuple(range(n))))
    xs = [jax.device_put(a) for a in inputs]

    def run():
        # first call traces + compiles (reported as setup); np.asarray waits
        # for the result and is zero-copy on CPU
        return [np.asarray(r) for r in g(*xs)]
    return run


register(Peer("jax", _jax_probe, _jax_prepare, has_setup=True,
              note="jax.jit(jax.grad(sum∘f)), CPU; setup = trace + XLA compile"))


# -------------------------------------------------------------------- autograd

def _autograd_probe():
    try:
        import autograd  # noqa: F401
        import autograd.numpy  # noqa: F401
        from importlib.metadata import version
    except Exception as e:  # noqa: BLE001
        raise Skip(f"import autograd failed: {e!r}")
    return version("autograd")


def _autograd_prepare(func, inputs):
    if func.autograd is None:
        raise Skip("no autograd implementation")
    import autograd
    import autograd.numpy as anp
    n = len(inputs)

    def loss(*xs):
        return anp.sum(func.autograd(anp, *xs))

    g = autograd.grad(loss, argnum=tuple(range(n)))

    def run():
        return [np.asarray(r) for r in g(*inputs)]
    return run


register(Peer("autograd", _autograd_probe, _autograd_prepare,
              note="HIPS autograd over NumPy"))


# --------------------------------------------------------------------- symgrad

def _symgrad():
    try:
        import symgrad
    except Exception as e:  # noqa: BLE001
        raise Skip(f"import symgrad failed: {type(e).__name__}: {e}")
    return symgrad


def _symgrad_version(sg) -> str:
    v = getattr(sg, "__version__", None)
    if v is None:
        try:
            from importlib.metadata import version
            v = version("symgrad") + " (installed metadata)"
        except Exception:  # noqa: BLE001
            v = "unknown version"
    return f"{v} from {os.path.dirname(getattr(sg, '__file__', None) or '?')}"


def symgrad_namespace(sg):
    """The namespace ``ns`` the symgrad forwards in functions.py are written against.

    The single place to change if the lead exposes it elsewhere: ``symgrad.ns`` if
    present, else the ``symgrad`` module itself (torch-spelled ``exp``, ``sum(x,
    dim=, keepdim=)``, ``max``, ``matmul`` …).
    """
    return getattr(sg, "ns", None) or sg


def symgrad_forward(func, ns, with_ctx=False):
    """A plain Python function of exactly ``func.n_inputs`` positional arguments
    (``forward(x0, x1, ...)``, or ``forward(ctx, x0, ...)`` for ``Function``)
    that calls ``func.sym(ns, ...)``.  Exact arity, so a tracer that inspects the
    signature sees one parameter per input."""
    args = ", ".join(f"x{i}" for i in range(func.n_inputs))
    params = ("ctx, " if with_ctx else "") + args
    src = f"def {func.name}_forward({params}):\n    return _sym(_ns, {args})\n"
    scope = {"_sym": func.sym, "_ns": ns}
    exec(compile(src, f"<benchmarks:{func.name}>", "exec"), scope)
    fn = scope[f"{func.name}_forward"]
    fn.__doc__ = func.description
    return fn


def _make_symgrad_compile_peer(target):
    def probe():
        sg = _symgrad()
        if not callable(getattr(sg, "compile", None)):
            raise Skip("symgrad has no compile() yet")
        return _symgrad_version(sg)

    def prepare(func, inputs):
        if func.sym is None:
            raise Skip("no symgrad forward")
        sg = _symgrad()
        fwd = symgrad_forward(func, symgrad_namespace(sg))
        mod = sg.compile(fwd, *inputs, target=target)
        out = mod.forward(*inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        seeds = [np.ones_like(np.asarray(o)) for o in outs]

        def run():
            # mod.backward's generated code recomputes the forward itself, so
            # calling backward alone IS the forward+backward measurement.
            gs = mod.backward(*seeds, *inputs)
            return [np.asarray(g) for g in gs]
        return run
    return prepare, probe


for _target in ("numpy", "c"):
    _prep, _probe = _make_symgrad_compile_peer(_target)
    register(Peer(f"symgrad_{_target}", _probe, _prep, has_setup=True,
                  note=f'symgrad.compile(..., target="{_target}"); times mod.backward '
                       f"(which recomputes the forward); setup = compile"))


def _symgrad_tensor(sg, arr):
    for name in ("tensor", "Tensor"):
        ctor = getattr(sg, name, None)
        if callable(ctor):
            return ctor(arr, requires_grad=True)
    raise Skip("symgrad has neither tensor() nor Tensor")


def _to_numpy(t):
    if t is None:
        return None
    if callable(getattr(t, "detach", None)):
        t = t.detach()
    for attr in ("numpy",):
        f = getattr(t, attr, None)
        if callable(f):
            return np.asarray(f())
    for attr in ("data", "array"):
        if hasattr(t, attr):
            return np.asarray(getattr(t, attr))
    return np.asarray(t)


def _runtime_probe():
    sg = _symgrad()
    if getattr(sg, "Function", None) is None:
        raise Skip("symgrad has no Function yet")
    if not (callable(getattr(sg, "tensor", None)) or getattr(sg, "Tensor", None)):
        raise Skip("symgrad has neither tensor() nor Tensor yet")
    return _symgrad_version(sg)


def _runtime_prepare(func, inputs, cpu_target=None):
    if func.sym is None:
        raise Skip("no symgrad forward")
    sg = _symgrad()
    ns = symgrad_namespace(sg)
    fwd = staticmethod(symgrad_forward(func, ns, with_ctx=True))
    attrs = {"forward": fwd}
    if cpu_target:
        attrs["cpu_target"] = cpu_target
    F = type(f"{func.name}_Function", (sg.Function,), attrs)
    ts = [_symgrad_tensor(sg, a) for a in inputs]
    seed = []

    def run():
        for t in ts:
            t.grad = None
        out = F.apply(*ts)
        if not seed:
            seed.append(_symgrad_tensor(sg, np.ones_like(_to_numpy(out))))
        out.backward(seed[0])
        return [np.zeros_like(a) if t.grad is None else _to_numpy(t.grad)
                for a, t in zip(inputs, ts)]
    return run


register(Peer("symgrad_runtime", _runtime_probe,
              lambda func, inputs: _runtime_prepare(func, inputs, cpu_target="numpy"),
              has_setup=True,
              note="symgrad.Function.apply + out.backward(ones) with cpu_target = \"numpy\" "
                   "(the NumPy modules: the runtime's default before tiering); setup = first "
                   "call (compile + cache)"))
register(Peer("symgrad_runtime_c", _runtime_probe,
              lambda func, inputs: _runtime_prepare(func, inputs, cpu_target="c"),
              has_setup=True,
              note='the same with the Function\'s cpu_target = "c" (fused C modules)'))


# ------------------------------------------------- symgrad, defaults (a fresh process)
_DEFAULTS = {}   # the worker process, started on first use


def _clean_env():
    """This environment without symgrad's settings and the thread knobs: what a user who
    set nothing has (SYMGRAD_CACHE_DIR stays: where the cache is does not change speed)."""
    from benchmarks import _env

    drop = set(_env.THREAD_VARS) | {"XLA_FLAGS"}
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not (k.startswith("SYMGRAD_") and k != "SYMGRAD_CACHE_DIR")}
    # BENCH_DEFAULTS_EXTRA="SYMGRAD_NUM_THREADS=1 ...": a deliberate departure from the
    # defaults (e.g. one thread on a machine too loaded for two), named in the peer's header
    for item in os.environ.get("BENCH_DEFAULTS_EXTRA", "").split():
        k, _, v = item.partition("=")
        env[k] = v
    return env


def _defaults_worker():
    import pickle
    import subprocess
    import sys

    proc = _DEFAULTS.get("proc")
    if proc is None or proc.poll() is not None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = _clean_env()
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get(
            "PYTHONPATH", "").split(os.pathsep) if p])
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks._defaults_worker"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                cwd=root)
        _DEFAULTS["proc"] = proc

    def ask(*msg):
        pickle.dump(msg, proc.stdin)
        proc.stdin.flush()
        reply = pickle.load(proc.stdout)
        if reply[0] != "ok":
            raise RuntimeError(reply[1])
        return reply[1:]
    return ask


def _defaults_probe():
    _runtime_probe()
    import subprocess
    import sys

    code = ("import symgrad, symgrad.native as n; print(symgrad.get_cpu_target(), "
            "n.num_threads())")
    run = subprocess.run([sys.executable, "-c", code], env=_clean_env(), capture_output=True,
                         text=True)
    target, threads = (run.stdout.split() + ["?", "?"])[:2]
    extra = os.environ.get("BENCH_DEFAULTS_EXTRA", "")
    return (f"{_symgrad_version(_symgrad())}; target {target}, {threads} thread(s)"
            + (f"; NOT defaults: {extra}" if extra else ""))


def _defaults_prepare(func, inputs):
    if func.sym is None:
        raise Skip("no symgrad forward")
    ask = _defaults_worker()
    grads, info = ask("prepare", func.name, inputs)
    _DEFAULTS["info"] = info

    def run():
        (seconds,) = ask("run")
        run.last = seconds
        return grads
    run.timed_inside = True   # the runner takes run.last: the pipe is not part of the time
    run.last = None
    grads = list(grads)
    return run


register(Peer("runtime_defaults", _defaults_probe, _defaults_prepare, has_setup=True,
              note="runtime, defaults: Function.apply + backward in a fresh process with no "
                   "settings (no SYMGRAD_* or thread variables: tiered CPU target, threads = "
                   "physical cores), timed there after warm-up (first call, "
                   "wait_for_builds, second call)"))


def available(names=None, log=print):
    """Probe the peers (``names`` or all, registry order).

    Returns ``(ok, skipped)``: ``ok`` a list of ``(Peer, version)``, ``skipped`` a
    list of ``(name, reason)``.  torch, the baseline, is always probed first."""
    ok, skipped = [], []
    wanted = list(REGISTRY) if names is None else ["torch"] + [n for n in names if n != "torch"]
    for name in wanted:
        peer = REGISTRY.get(name)
        if peer is None:
            skipped.append((name, f"unknown peer (known: {', '.join(REGISTRY)})"))
            continue
        try:
            ok.append((peer, peer.probe()))
        except Skip as e:
            skipped.append((name, str(e)))
        except Exception as e:  # noqa: BLE001 - a broken peer must not kill the suite
            skipped.append((name, f"probe crashed: {type(e).__name__}: {e}"))
    return ok, skipped
