"""Gradients through linear algebra: symgrad (NumPy and C targets) against torch eager and
JAX jit, in one run.

- MVN: the gradient (x, mu, S) of sum_b log N(x_b; mu_b, S_b), batch 16, n = 64, 256, 1024
  (Cholesky, a triangular solve, logdet from the factor: torch.distributions' formulation);
  also written naively, x @ inv(S) @ x and log(det(S)), which symgrad traces as a solve and
  a logdet (torch and JAX compute what is written);
- GP: the gradient (X, y, log lengthscale, log noise) of a GP marginal likelihood with a
  squared-exponential kernel, n = 256 and 1024 points in 2-D.

float64, one thread for every framework (the BLAS/LAPACK and XLA thread knobs, set before
import). Each entry: the median of repeated runs of one full gradient (forward included),
after a warm-up call (JIT / compilation / first-use excluded). symgrad runs its module as the
runtime does: forward_saving then backward_saved where the module has them (the factors
are kept, not recomputed), else backward (which recomputes the forward). Usage:

    python benchmarks/linalg.py            # prints the table, writes results/linalg.txt
    python benchmarks/linalg.py --quick    # n = 64 and 256 only
"""
from __future__ import annotations

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._env import configure_threads  # noqa: E402

configure_threads(1)

import numpy as np  # noqa: E402

from benchmarks._table import render  # noqa: E402

BATCH = 16
HERE = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------- forwards
def mvn_sg(x, mu, S):
    import symgrad as sg

    L = sg.linalg.cholesky(S)
    z = sg.linalg.solve_triangular(L, (x - mu).unsqueeze(-1), upper=False).squeeze(-1)
    n = x.shape[-1]
    return (-0.5 * (z * z).sum(-1) - 0.5 * sg.linalg.logdet(S)
            - 0.5 * n * math.log(2 * math.pi)).sum()


def mvn_naive_sg(x, mu, S):
    import symgrad as sg

    d = (x - mu).unsqueeze(-2)
    q = (d @ sg.linalg.inv(S) @ d.mT).squeeze(-1).squeeze(-1)
    return (-0.5 * q - 0.5 * sg.log(sg.linalg.det(S))).sum()


def gp_sg(X, y, log_ls, log_noise):
    import symgrad as sg

    d2 = ((X.unsqueeze(-2) - X.unsqueeze(-3)) ** 2).sum(-1)
    K = sg.exp(-0.5 * d2 * sg.exp(-2 * log_ls))
    K = K + sg.exp(2 * log_noise) * sg.linalg.matrix_power(K, 0)     # + noise * I
    L = sg.linalg.cholesky(K)
    alpha = sg.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
    return (-0.5 * (y * alpha).sum() - 0.5 * sg.linalg.logdet(K)
            - 0.5 * X.shape[-2] * math.log(2 * math.pi))


def _torch_fns(torch):
    def mvn(x, mu, S):
        L = torch.linalg.cholesky(S)
        z = torch.linalg.solve_triangular(L, (x - mu).unsqueeze(-1), upper=False).squeeze(-1)
        logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        return (-0.5 * (z * z).sum(-1) - 0.5 * logdet
                - 0.5 * x.shape[-1] * math.log(2 * math.pi)).sum()

    def mvn_naive(x, mu, S):
        d = (x - mu).unsqueeze(-2)
        q = (d @ torch.linalg.inv(S) @ d.mT).squeeze(-1).squeeze(-1)
        return (-0.5 * q - 0.5 * torch.log(torch.linalg.det(S))).sum()

    def gp(X, y, log_ls, log_noise):
        d2 = ((X.unsqueeze(-2) - X.unsqueeze(-3)) ** 2).sum(-1)
        K = torch.exp(-0.5 * d2 * torch.exp(-2 * log_ls)) \
            + torch.exp(2 * log_noise) * torch.eye(X.shape[-2], dtype=X.dtype)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
        logdet = 2 * torch.log(torch.diagonal(L)).sum()
        return -0.5 * (y * alpha).sum() - 0.5 * logdet - 0.5 * X.shape[-2] * math.log(2 * math.pi)

    return {"mvn": mvn, "mvn_naive": mvn_naive, "gp": gp}


def _jax_fns(jnp, jsl):
    def mvn(x, mu, S):
        L = jnp.linalg.cholesky(S)
        z = jsl.solve_triangular(L, (x - mu)[..., None], lower=True)[..., 0]
        logdet = 2 * jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)).sum(-1)
        return (-0.5 * (z * z).sum(-1) - 0.5 * logdet
                - 0.5 * x.shape[-1] * math.log(2 * math.pi)).sum()

    def mvn_naive(x, mu, S):
        d = (x - mu)[..., None, :]
        q = (d @ jnp.linalg.inv(S) @ jnp.swapaxes(d, -1, -2))[..., 0, 0]
        return (-0.5 * q - 0.5 * jnp.log(jnp.linalg.det(S))).sum()

    def gp(X, y, log_ls, log_noise):
        d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
        K = jnp.exp(-0.5 * d2 * jnp.exp(-2 * log_ls)) \
            + jnp.exp(2 * log_noise) * jnp.eye(X.shape[0], dtype=X.dtype)
        L = jnp.linalg.cholesky(K)
        alpha = jsl.cho_solve((L, True), y)
        logdet = 2 * jnp.log(jnp.diagonal(L)).sum()
        return -0.5 * (y * alpha).sum() - 0.5 * logdet - 0.5 * X.shape[0] * math.log(2 * math.pi)

    return {"mvn": mvn, "mvn_naive": mvn_naive, "gp": gp}


SG_FNS = {"mvn": mvn_sg, "mvn_naive": mvn_naive_sg, "gp": gp_sg}


# --------------------------------------------------------------------------- inputs
def _inputs(kind, n, rng):
    if kind.startswith("mvn"):
        A = rng.standard_normal((BATCH, n, n)) / math.sqrt(n)
        S = A @ np.swapaxes(A, -1, -2) + np.eye(n)
        return [rng.standard_normal((BATCH, n)), rng.standard_normal((BATCH, n)), S]
    return [rng.standard_normal((n, 2)), rng.standard_normal(n), np.array(0.0),
            np.array(-1.0)]


def _time(run, budget):
    run()                               # warm-up
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget and len(times) < 50):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


# --------------------------------------------------------------------------- peers
def _peer_torch(kind, xs):
    import torch

    torch.set_num_threads(1)
    fn = _torch_fns(torch)[kind]
    ts = [torch.tensor(a, requires_grad=True) for a in xs]

    def run():
        return [g.numpy() for g in torch.autograd.grad(fn(*ts), ts)]
    return run


def _peer_jax(kind, xs):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    fn = jax.jit(jax.grad(_jax_fns(jnp, jsl)[kind], argnums=tuple(range(len(xs)))))
    js = [jnp.asarray(a) for a in xs]

    def run():
        return [np.asarray(g) for g in jax.block_until_ready(fn(*js))]
    return run


def _peer_symgrad(target):
    def prepare(kind, xs):
        import symgrad as sg

        mod = sg.compile(SG_FNS[kind], *xs, target=target)
        one = np.array(1.0)
        raw = mod.raw
        if hasattr(raw, "forward_saving"):   # as the runtime runs it: saved factors reused
            def run():
                _, saved = raw.forward_saving(*xs)
                return list(raw.backward_saved(one, *saved, *xs))
            return run

        def run():
            return list(mod.backward(one, *xs))
        return run
    return prepare


PEERS = [("torch eager", _peer_torch), ("JAX jit", _peer_jax),
         ("symgrad numpy", _peer_symgrad("numpy")), ("symgrad C", _peer_symgrad("c"))]


def main(argv):
    quick = "--quick" in argv
    rng = np.random.default_rng(0)
    cases = [("mvn", n) for n in (64, 256, 1024)] + [("mvn_naive", n) for n in (64, 256)] \
        + [("gp", n) for n in (256, 1024)]
    if quick:
        cases = [(k, n) for k, n in cases if n <= 256]
    rows, checks = [], []
    for kind, n in cases:
        xs = _inputs(kind, n, rng)
        budget = 2.0 if n <= 256 else 6.0
        row = [f"{kind} n={n}" + (f" batch {BATCH}" if kind.startswith("mvn") else "")]
        ref = None
        base = None
        for name, prepare in PEERS:
            try:
                run = prepare(kind, [a.copy() for a in xs])
            except ImportError as exc:
                row.append(f"— ({exc.name} missing)")
                continue
            grads = run()
            if ref is None:
                ref = grads
            else:
                err = max(float(np.max(np.abs(g - r)) / max(1.0, float(np.max(np.abs(r)))))
                          for g, r in zip(grads, ref))
                checks.append((row[0], name, err))
                if err > 1e-6:
                    raise AssertionError(f"{name} disagrees with torch on {row[0]}: {err:.1e}")
            t = _time(run, budget)
            base = base or t
            row.append(f"{t * 1e3:.2f} ms" + ("" if t is base else f" ({base / t:.2f}x)"))
        rows.append(row)
        print(row, flush=True)
    import torch

    try:
        import jax
        jax_version = jax.__version__
    except ImportError:
        jax_version = "not installed"
    import symgrad

    header = (f"Gradients through linear algebra, float64, 1 thread; median per full gradient "
              f"(forward + backward); (Nx) = torch time / this time.\n"
              f"torch {torch.__version__}, jax {jax_version}, numpy {np.__version__}, "
              f"symgrad {symgrad.__version__}; {os.cpu_count()} CPUs, shared machine.")
    table = render(["case"] + [p for p, _ in PEERS], rows)
    worst = max(e for _, _, e in checks) if checks else 0.0
    text = (header + "\n\n" + table + f"\n\nEvery peer's gradient agrees with torch's to "
            f"{worst:.1e} (max abs error / max(1, max |torch|)).\n")
    print("\n" + text)
    if not quick:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "linalg.txt"), "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
