"""Black-Scholes price of a European call, and its Greeks for free.

    d1 = (log(S / K) + (r + sigma**2 / 2) * T) / (sigma * sqrt(T))
    d2 = d1 - sigma * sqrt(T)
    N(d) = (1 + erf(d / sqrt(2))) / 2
    C  = S * N(d1) - K * exp(-r * T) * N(d2)

Five inputs (spot S, strike K, maturity T, rate r, volatility sigma), elementwise over a
book of options. The backward with grad_out = 1 returns the Greeks: delta = dC/dS,
dC/dK, theta = -dC/dT, rho = dC/dr and vega = dC/dsigma. CSE shares d1, d2, sqrt(T) and the
normal densities between them.
"""
import math

import numpy as np

import symgrad as sg


def normal_cdf(d):
    return 0.5 * (1.0 + sg.erf(d / math.sqrt(2.0)))


class BlackScholesCall(sg.Function):
    @staticmethod
    def forward(ctx, S, K, T, r, sigma):
        vol = sigma * sg.sqrt(T)
        d1 = (sg.log(S / K) + (r + 0.5 * sigma * sigma) * T) / vol
        d2 = d1 - vol
        return S * normal_cdf(d1) - K * sg.exp(-r * T) * normal_cdf(d2)

    @staticmethod
    def example_inputs():
        S = np.array([90.0, 100.0, 110.0, 100.0])
        K = np.array([100.0, 100.0, 100.0, 120.0])
        T = np.array([0.5, 1.0, 2.0, 0.25])
        r = np.array([0.01, 0.03, 0.05, 0.02])
        sigma = np.array([0.2, 0.25, 0.3, 0.4])
        return (S, K, T, r, sigma)


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    inputs = BlackScholesCall.example_inputs()
    module = sg.compile(BlackScholesCall, *inputs)
    print(module.source)
    price = module.forward(*inputs)
    delta, dK, dT, rho, vega = module.backward(np.ones_like(price), *inputs)
    print("price:", np.round(price, 4))
    print("delta:", np.round(delta, 4), " vega:", np.round(vega, 4))
    raise SystemExit(0 if check(module, *inputs) else 1)
