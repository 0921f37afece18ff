"""The loss of a two-layer MLP: tanh hidden layer, mean squared error.

    h    = tanh(x @ W1 + b1)
    pred = h @ W2 + b2
    loss = mean((pred - y)**2)

Six inputs, one scalar output: the backward returns the gradient of every parameter (and of
x and y) in one generated function. Matmul's adjoint (grad @ W.T, x.T @ grad) and the sums
for the broadcast biases come from the structural rules; tanh' = 1 - tanh**2 from SymPy.
"""
import numpy as np

import symgrad as sg


class MLPLoss(sg.Function):
    @staticmethod
    def forward(ctx, x, W1, b1, W2, b2, y):
        h = (x @ W1 + b1).tanh()
        pred = h @ W2 + b2
        err = pred - y
        return (err * err).mean()

    @staticmethod
    def example_inputs():
        rng = np.random.default_rng(0)
        batch, n_in, n_hidden, n_out = 5, 3, 4, 2
        return (rng.standard_normal((batch, n_in)),
                0.5 * rng.standard_normal((n_in, n_hidden)),
                0.1 * rng.standard_normal(n_hidden),
                0.5 * rng.standard_normal((n_hidden, n_out)),
                0.1 * rng.standard_normal(n_out),
                rng.standard_normal((batch, n_out)))


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    module = sg.compile(MLPLoss, *MLPLoss.example_inputs())
    print(module.source)
    raise SystemExit(0 if check(module, *MLPLoss.example_inputs()) else 1)
