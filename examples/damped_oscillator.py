"""A damped harmonic oscillator's position, differentiated with respect to every parameter.

    x(t) = A * exp(-gamma * t) * cos(omega * t + phi)

Five inputs (time t, amplitude A, damping gamma, frequency omega, phase phi). The backward
gives the sensitivity of the trajectory to each parameter, which is what a least-squares fit
of the parameters to measured positions needs. exp(-gamma t), cos and sin of the phase are
each computed once.
"""
import numpy as np

import symgrad as sg


class DampedOscillator(sg.Function):
    @staticmethod
    def forward(ctx, t, A, gamma, omega, phi):
        return A * sg.exp(-gamma * t) * sg.cos(omega * t + phi)

    @staticmethod
    def example_inputs():
        t = np.linspace(0.0, 5.0, 11)
        return (t, np.array(1.5), np.array(0.3), np.array(2.0), np.array(0.25))


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    inputs = DampedOscillator.example_inputs()
    module = sg.compile(DampedOscillator, *inputs)
    print(module.source)
    raise SystemExit(0 if check(module, *inputs) else 1)
