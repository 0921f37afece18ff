"""Layer normalization over the last dimension, with a weight and a bias.

    mu    = mean(x, -1)
    var   = mean((x - mu)**2, -1)
    y     = (x - mu) / sqrt(var + eps) * weight + bias

The backward of a normalization couples every element of a row through mu and var; it is
the classic example of a derivative that is tedious and error-prone by hand. `eps` is a
constant. The gradients of weight and bias are reduced over the batch (the adjoint of
broadcasting), which the generated code shows as `_sum_to`.
"""
import numpy as np

import symgrad as sg


class LayerNorm(sg.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps=1e-5):
        mu = x.mean(-1, keepdim=True)
        centered = x - mu
        var = (centered * centered).mean(-1, keepdim=True)
        return centered / (var + eps).sqrt() * weight + bias

    @staticmethod
    def example_inputs():
        rng = np.random.default_rng(0)
        return (rng.standard_normal((3, 4)), 1.0 + 0.1 * rng.standard_normal(4),
                0.1 * rng.standard_normal(4))


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    module = sg.compile(LayerNorm, *LayerNorm.example_inputs())
    print(module.source)
    raise SystemExit(0 if check(module, *LayerNorm.example_inputs()) else 1)
