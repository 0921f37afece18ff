"""GELU, tanh approximation (as torch.nn.GELU(approximate="tanh")).

    gelu(x) = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))

Shows constants folded into the formula and a derivative that reuses the forward's tanh:
after CSE the backward computes tanh(...) once and its derivative as 1 - tanh**2.
"""
import math

import numpy as np

import symgrad as sg


class GELU(sg.Function):
    @staticmethod
    def forward(ctx, x):
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + sg.tanh(inner))

    @staticmethod
    def example_inputs():
        return (np.linspace(-3.0, 3.0, 13),)


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    module = sg.compile(GELU, *GELU.example_inputs())
    print(module.source)
    raise SystemExit(0 if check(module, *GELU.example_inputs()) else 1)
