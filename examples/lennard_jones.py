"""Lennard-Jones energy; its generated backward gives the forces.

    E(r) = sum over pairs  4 * epsilon * ((sigma / r)**12 - (sigma / r)**6)

`r` holds the distance of every pair of particles. The forward is the total energy (a
reduction over pairs); the backward with grad_out = 1 is dE/dr for every pair, so the force
along each pair is -backward(1.0, r)[0]. `epsilon` and `sigma` are constants of the trace.
Powers are printed as products and (sigma / r)**6 is computed once (CSE).
"""
import numpy as np

import symgrad as sg


class LennardJones(sg.Function):
    @staticmethod
    def forward(ctx, r, epsilon=1.0, sigma=1.0):
        s6 = (sigma / r) ** 6
        return (4.0 * epsilon * (s6 * s6 - s6)).sum()

    @staticmethod
    def example_inputs():
        return (np.linspace(0.95, 2.5, 16),)


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    (r,) = LennardJones.example_inputs()
    module = sg.compile(LennardJones, r)
    print(module.source)
    energy = module.forward(r)
    (dE_dr,) = module.backward(np.float64(1.0), r)
    print(f"energy = {float(energy):.6f}")
    print("force along each pair (-dE/dr):", np.round(-dE_dr, 4))
    raise SystemExit(0 if check(module, r) else 1)
