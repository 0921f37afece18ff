"""Softplus with a `beta` constant: the smallest complete example.

    softplus(x) = log(1 + exp(beta * x)) / beta

Only the forward is written. symgrad traces it into SymPy, differentiates it (the derivative
is sigmoid(beta * x)), applies stabilizing rewrites (log(1 + u) -> log1p(u)) and emits a
NumPy module. `beta` is not a tensor: it is a constant of the trace, printed in the generated
module's header and part of the cache key.

    python examples/softplus.py                       # compile, print, gradcheck
    symgrad show examples/softplus.py:Softplus        # the formulas
"""
import numpy as np

import symgrad as sg


class Softplus(sg.Function):
    @staticmethod
    def forward(ctx, x, beta=1.0):
        return sg.log1p(sg.exp(beta * x)) / beta

    @staticmethod
    def example_inputs():
        return (np.linspace(-4.0, 4.0, 9),)


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    module = sg.compile(Softplus, *Softplus.example_inputs())
    print(module.source)
    raise SystemExit(0 if check(module, *Softplus.example_inputs()) else 1)
