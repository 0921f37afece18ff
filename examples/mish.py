"""Mish: x * tanh(softplus(x)), a smooth activation whose derivative is long by hand.

    mish(x) = x * tanh(log(1 + exp(x)))

By hand, d/dx needs the product rule, the chain rule through tanh and softplus, and care
with exp overflow. Here the forward is one line; the generated backward shares
tanh(softplus(x)) with the forward's formula and the softplus is printed stably.
"""
import numpy as np

import symgrad as sg


class Mish(sg.Function):
    @staticmethod
    def forward(ctx, x):
        return x * sg.tanh(sg.log1p(sg.exp(x)))

    @staticmethod
    def example_inputs():
        return (np.linspace(-5.0, 5.0, 11),)


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    module = sg.compile(Mish, *Mish.example_inputs())
    print(module.source)
    raise SystemExit(0 if check(module, *Mish.example_inputs()) else 1)
