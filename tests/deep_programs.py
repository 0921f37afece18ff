"""Deep, value-reusing programs (the DAG-IR issue's test and benchmark cases).

Each maker takes a size (steps, iterations, layers) and a namespace `m` with torch's names
(`symgrad` or `torch`), and returns (forward, example inputs as NumPy arrays). The same
forward runs on symgrad (traced, compiled, or on runtime tensors) and on torch, so gradients
can be compared value for value.
"""
import numpy as np


def rk4(n, m, h=0.05):
    """An unrolled RK4 integrator of a damped pendulum (state vectors of 7), n steps."""
    def deriv(th, om):
        return om, -0.3 * om - 9.81 * m.sin(th)

    def forward(th, om):
        for _ in range(n):
            k1t, k1o = deriv(th, om)
            k2t, k2o = deriv(th + h / 2 * k1t, om + h / 2 * k1o)
            k3t, k3o = deriv(th + h / 2 * k2t, om + h / 2 * k2o)
            k4t, k4o = deriv(th + h * k3t, om + h * k3o)
            th = th + h / 6 * (k1t + 2 * k2t + 2 * k3t + k4t)
            om = om + h / 6 * (k1o + 2 * k2o + 2 * k3o + k4o)
        return (th * th + om * om).sum()

    return forward, (np.linspace(0.1, 1.0, 7), np.linspace(-0.5, 0.5, 7))


def coupled(n, m):
    """The coupled map x, y = 0.9 x cos(y) + 0.1, y + 0.5 sin(x), n iterations."""
    def forward(x, y):
        for _ in range(n):
            x, y = 0.9 * x * m.cos(y) + 0.1, y + 0.5 * m.sin(x)
        return (x * y).sum()

    return forward, (np.linspace(0.1, 1.0, 7), np.linspace(0.2, 0.9, 7))


def lstm(T, m, B=4, I=6, H=8):
    """An LSTM cell (batch B, inputs I, hidden H) unrolled over T steps."""
    def forward(xs, Wx, Wh, b):
        h = c = None
        for t in range(T):
            z = xs[t] @ Wx + b if h is None else xs[t] @ Wx + h @ Wh + b
            i, f = m.sigmoid(z[:, 0:H]), m.sigmoid(z[:, H:2 * H])
            g, o = m.tanh(z[:, 2 * H:3 * H]), m.sigmoid(z[:, 3 * H:4 * H])
            c = i * g if c is None else f * c + i * g
            h = o * m.tanh(c)
        return (h * h).sum()

    rng = np.random.default_rng(0)
    return forward, (rng.standard_normal((T, B, I)), 0.3 * rng.standard_normal((I, 4 * H)),
                     0.3 * rng.standard_normal((H, 4 * H)), 0.1 * rng.standard_normal(4 * H))


def resmlp(L, m, n=16, width=8):
    """A residual MLP of L layers: x <- x + tanh(x @ W_l) * 0.5, squared-norm loss."""
    def forward(x, W):
        for layer in range(L):
            x = x + 0.5 * m.tanh(x @ W[layer])
        return (x * x).sum()

    rng = np.random.default_rng(1)
    return forward, (rng.standard_normal((n, width)),
                     rng.standard_normal((L, width, width)) / np.sqrt(width))


def loop_scan(f, init, xs=None, length=None, reverse=False):
    """lax.scan's semantics as a Python loop (the unrolled reference; torch has no scan)."""
    n = length if xs is None else len(xs)
    carry, ys = init, []
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        carry, y = f(carry, None if xs is None else xs[t])
        ys.append(y)
    return carry, ys[::-1] if reverse else ys


def rk4_scan(n, m, h=0.05):
    """The RK4 integrator of `rk4` as one loop: `m.scan` (sg.scan, jax.lax.scan), or a Python
    loop where the namespace has none (torch: the unrolled program)."""
    scan = getattr(m, "scan", loop_scan)

    def deriv(th, om):
        return om, -0.3 * om - 9.81 * m.sin(th)

    def step(state, _):
        th, om = state
        k1t, k1o = deriv(th, om)
        k2t, k2o = deriv(th + h / 2 * k1t, om + h / 2 * k1o)
        k3t, k3o = deriv(th + h / 2 * k2t, om + h / 2 * k2o)
        k4t, k4o = deriv(th + h * k3t, om + h * k3o)
        th = th + h / 6 * (k1t + 2 * k2t + 2 * k3t + k4t)
        om = om + h / 6 * (k1o + 2 * k2o + 2 * k3o + k4o)
        return (th, om), None

    def forward(th, om):
        (th, om), _ = scan(step, (th, om), length=n)
        return (th * th + om * om).sum()

    return forward, (np.linspace(0.1, 1.0, 7), np.linspace(-0.5, 0.5, 7))


PROGRAMS = {"rk4": rk4, "coupled": coupled, "lstm": lstm, "resmlp": resmlp,
            "rk4_scan": rk4_scan}
