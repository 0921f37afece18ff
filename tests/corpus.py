"""Formula corpus: naive formulas as a user writes them, with points where the true gradient
is finite. Used to check that symgrad's derivatives stay finite and accurate there.

Each formula is a plain function of a namespace ``ns`` (``ns.exp``, ``ns.log``, ``ns.sqrt``,
``ns.tanh``, ``ns.erf``, ``ns.cosh``, ``ns.abs``, ``ns.where``, ``ns.pi``) and scalar inputs, so
the same formula runs on SymPy symbols now and on symgrad tensors later.

``known_limits`` maps a point to the reason the generated gradient is still expected to be wrong
there; the test marks those cases xfail(strict=True), so a fix shows up as an XPASS.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import sympy


@dataclass(frozen=True, eq=False)  # hashed by identity (cache keys)
class Formula:
    name: str
    fn: Callable
    n_inputs: int
    points: tuple[tuple[float, ...], ...]
    second_order: bool = False
    known_limits: dict = field(default_factory=dict)


def sympy_namespace() -> SimpleNamespace:
    """The ops a corpus formula may call, as SymPy functions."""
    return SimpleNamespace(
        exp=sympy.exp,
        log=sympy.log,
        sqrt=sympy.sqrt,
        tanh=sympy.tanh,
        cosh=sympy.cosh,
        erf=sympy.erf,
        abs=sympy.Abs,
        pi=sympy.pi,
        where=lambda cond, a, b: sympy.Piecewise((a, cond), (b, True)),
    )


def _one(*values):
    return tuple((v,) for v in values)


WIDE = _one(-700.0, -80.0, -30.0, -1.0, -1e-20, 0.0, 1e-20, 1.0, 30.0, 80.0, 700.0)
NEGATIVE = _one(-700.0, -80.0, -30.0, -1.0, -1e-20, 0.0)
POSITIVE = _one(1e-20, 1e-8, 0.5, 1.0, 30.0, 80.0, 700.0)
UNIT = _one(1e-20, 1e-8, 0.3, 0.5, 0.9, 1.0 - 1e-9)
PAIRS = ((0.0, 0.0), (1.0, -1.0), (30.0, -30.0), (-80.0, 80.0), (700.0, 1.0), (-700.0, 3.0),
         (700.0, -700.0), (1e-20, 0.5))
TRIPLES = ((0.0, 0.0, 0.0), (1.0, 2.0, 3.0), (700.0, -700.0, 0.0), (-80.0, 80.0, 30.0),
           (-700.0, -700.0, -699.0), (30.0, 1e-20, -30.0))
LOGITS_LABELS = tuple((x, y) for x in (-700.0, -80.0, -30.0, -1.0, 0.0, 1.0, 30.0, 80.0, 700.0)
                      for y in (0.0, 0.3, 1.0))

GELU_C = math.sqrt(2 / math.pi)
KT = 0.025          # thermal energy (eV at ~290 K): exponents reach +-3200 at |E - mu| = 80
T_SMALL = 0.01      # temperature of the two-level system


def _sigmoid(ns, x):
    return 1 / (1 + ns.exp(-x))


def _ndtr(ns, x):
    return 0.5 * (1 + ns.erf(x / ns.sqrt(2)))


CORPUS: tuple[Formula, ...] = (
    # ------------------------------------------------------------------ activations
    Formula("softplus_naive", lambda ns, x: ns.log(1 + ns.exp(x)), 1, WIDE, True),
    Formula("softplus_beta2", lambda ns, x: ns.log(1 + ns.exp(2 * x)) / 2, 1, WIDE, True),
    Formula("softplus_neg", lambda ns, x: ns.log(1 + ns.exp(-x)), 1, WIDE, True),
    Formula("log_c_plus_exp", lambda ns, x: ns.log(3 + ns.exp(x)), 1, WIDE, True),
    Formula("sigmoid_exp_ratio", lambda ns, x: ns.exp(x) / (1 + ns.exp(x)), 1, WIDE, True),
    Formula("sigmoid_reciprocal", lambda ns, x: 1 / (1 + ns.exp(-x)), 1, WIDE, True),
    Formula("sigmoid_via_tanh", lambda ns, x: 0.5 * (1 + ns.tanh(x / 2)), 1, WIDE, True),
    Formula("swish", lambda ns, x: x / (1 + ns.exp(-x)), 1, WIDE, True),
    Formula("silu_exp_form", lambda ns, x: x * ns.exp(x) / (1 + ns.exp(x)), 1, WIDE, True),
    Formula("swish_beta", lambda ns, x: x * ns.exp(1.5 * x) / (1 + ns.exp(1.5 * x)), 1, WIDE),
    Formula("mish", lambda ns, x: x * ns.tanh(ns.log(1 + ns.exp(x))), 1, WIDE, True),
    Formula("gelu_tanh",
            lambda ns, x: 0.5 * x * (1 + ns.tanh(GELU_C * (x + 0.044715 * x**3))), 1, WIDE, True),
    Formula("gelu_erf", lambda ns, x: x * _ndtr(ns, x), 1, WIDE, True),
    Formula("elu_negative_branch", lambda ns, x: ns.exp(x) - 1, 1, NEGATIVE, True),
    Formula("selu_negative_branch",
            lambda ns, x: 1.0507009873554805 * 1.6732632423543772 * (ns.exp(x) - 1), 1, NEGATIVE),
    Formula("elu_where", lambda ns, x: ns.where(x > 0, x, ns.exp(x) - 1), 1,
            _one(-700.0, -30.0, -1e-20, 1e-20, 1.0, 30.0, 700.0, 1e3)),
    Formula("log_cosh_exp_form", lambda ns, x: ns.log((ns.exp(x) + ns.exp(-x)) / 2), 1, WIDE,
            True),
    Formula("log_cosh", lambda ns, x: ns.log(ns.cosh(x)), 1, WIDE + _one(1e3), True),
    Formula("tanh_exp_form",
            lambda ns, x: (ns.exp(x) - ns.exp(-x)) / (ns.exp(x) + ns.exp(-x)), 1, WIDE, True),
    Formula("tanh_plain", lambda ns, x: ns.tanh(x), 1, WIDE + _one(1e3, -1e300, 1e300), True),
    Formula("softsign", lambda ns, x: x / (1 + ns.abs(x)), 1,
            _one(-700.0, -30.0, -1.0, 1e-20, 1.0, 30.0, 1e3)),
    Formula("squareplus", lambda ns, x: (x + ns.sqrt(x * x + 4)) / 2, 1, WIDE + _one(-1e3)),
    Formula("logit", lambda ns, p: ns.log(p / (1 - p)), 1, UNIT, True),
    Formula("log_sigmoid_naive", lambda ns, x: ns.log(_sigmoid(ns, x)), 1, WIDE, True),
    Formula("log_one_minus_sigmoid", lambda ns, x: ns.log(1 - _sigmoid(ns, x)), 1, WIDE, True),
    Formula("inverse_softplus", lambda ns, x: ns.log(ns.exp(x) - 1), 1,
            _one(1e-20, 1e-8, 0.5, 1.0, 30.0, 80.0, 700.0), True),
    # ------------------------------------------------------------------ elementary pieces
    Formula("log1p_naive", lambda ns, x: ns.log(1 + x), 1,
            _one(-0.5, -1e-20, 0.0, 1e-20, 0.5, 30.0, 1e3), True),
    Formula("expm1_naive", lambda ns, x: ns.exp(x) - 1, 1,
            _one(-700.0, -30.0, -1e-20, 0.0, 1e-20, 1.0, 30.0, 700.0), True),
    Formula("xlogx", lambda ns, x: x * ns.log(x), 1, POSITIVE, True),
    Formula("logsumexp2", lambda ns, x, y: ns.log(ns.exp(x) + ns.exp(y)), 2, PAIRS, True),
    Formula("logsumexp3", lambda ns, x, y, z: ns.log(ns.exp(x) + ns.exp(y) + ns.exp(z)), 3,
            TRIPLES, True),
    Formula("logsumexp_shifted", lambda ns, x, y: ns.log(ns.exp(x - 1) + ns.exp(2 * y)), 2,
            PAIRS),
    Formula("log_mean_exp2", lambda ns, x, y: ns.log((ns.exp(x) + ns.exp(y)) / 2), 2, PAIRS),
    Formula("smooth_max", lambda ns, x, y: 0.1 * ns.log(ns.exp(x / 0.1) + ns.exp(y / 0.1)), 2,
            ((0.0, 0.0), (1.0, -1.0), (30.0, -30.0), (60.0, 61.0), (-69.0, 69.0))),
    Formula("softmax2_first", lambda ns, x, y: ns.exp(x) / (ns.exp(x) + ns.exp(y)), 2, PAIRS,
            True),
    Formula("softmax3_first",
            lambda ns, x, y, z: ns.exp(x) / (ns.exp(x) + ns.exp(y) + ns.exp(z)), 3, TRIPLES),
    Formula("log_softmax2", lambda ns, x, y: x - ns.log(ns.exp(x) + ns.exp(y)), 2, PAIRS, True),
    Formula("multinomial_log_partition",
            lambda ns, a, b: ns.log(1 + ns.exp(a) + ns.exp(b)), 2, PAIRS, True),
    # ------------------------------------------------------------------ losses
    Formula("bce_logits_naive",
            lambda ns, x, y: -(y * ns.log(_sigmoid(ns, x)) + (1 - y) * ns.log(1 - _sigmoid(ns, x))),
            2, LOGITS_LABELS, True),
    Formula("bce_logits_exp_form",
            lambda ns, x, y: -(y * ns.log(ns.exp(x) / (1 + ns.exp(x)))
                               + (1 - y) * ns.log(1 / (1 + ns.exp(x)))), 2, LOGITS_LABELS),
    Formula("bce_probabilities",
            lambda ns, p, y: -(y * ns.log(p) + (1 - y) * ns.log(1 - p)), 2,
            tuple((p, y) for p in (1e-20, 1e-8, 0.3, 0.5, 0.99) for y in (0.0, 0.3, 1.0)), True),
    Formula("logistic_loss", lambda ns, x, y: ns.log(1 + ns.exp(-x * y)), 2,
            tuple((x, y) for x in (-700.0, -30.0, 0.0, 1.0, 30.0, 700.0) for y in (-1.0, 1.0)),
            True),
    Formula("smooth_hinge", lambda ns, x, y: ns.log(1 + ns.exp(1 - x * y)), 2,
            ((0.0, 1.0), (-700.0, 1.0), (700.0, 1.0), (30.0, -1.0), (-30.0, -1.0))),
    Formula("ranking_softplus", lambda ns, x, y: ns.log(1 + ns.exp(y - x)), 2, PAIRS, True),
    Formula("focal_loss_gamma2",
            lambda ns, x: -(1 - _sigmoid(ns, x))**2 * ns.log(_sigmoid(ns, x)), 1, WIDE, True),
    Formula("softmax_cross_entropy3",
            lambda ns, x, y, z: -x + ns.log(ns.exp(x) + ns.exp(y) + ns.exp(z)), 3, TRIPLES, True),
    Formula("poisson_nll_log_rate", lambda ns, x: ns.exp(x) - 3 * x, 1,
            _one(-700.0, -30.0, 0.0, 1e-20, 1.0, 30.0, 700.0), True),
    Formula("poisson_loglik_rate", lambda ns, lam: 3 * ns.log(lam) - lam, 1, POSITIVE, True),
    Formula("gaussian_nll_log_sigma",
            lambda ns, x, mu, log_s: log_s + 0.5 * (x - mu)**2 * ns.exp(-2 * log_s), 3,
            ((0.0, 0.0, 0.0), (1.0, -1.0, -30.0), (700.0, -700.0, 30.0), (1e-20, 0.0, 1e-20),
             (3.0, 1.0, 80.0)), True),
    Formula("gaussian_nll_sigma",
            lambda ns, x, mu, s: ns.log(s) + 0.5 * ns.log(2 * ns.pi) + (x - mu)**2 / (2 * s**2), 3,
            ((0.0, 0.0, 1.0), (1.0, -1.0, 1e-8), (700.0, -700.0, 30.0), (1e-20, 0.0, 1e3)),
            True),
    Formula("student_t_nll", lambda ns, x: 2 * ns.log(1 + x**2 / 3), 1,
            _one(-1e3, -30.0, -1e-20, 0.0, 1e-20, 1.0, 700.0), True),
    Formula("cauchy_nll", lambda ns, x: ns.log(1 + x**2), 1, WIDE + _one(1e3), True),
    Formula("pseudo_huber", lambda ns, x: ns.sqrt(1 + x**2) - 1, 1, WIDE + _one(1e3), True),
    Formula("log_cosh_residual", lambda ns, x, y: ns.log(ns.cosh(x - y)), 2,
            PAIRS + ((400.0, -400.0),), True),
    Formula("sqrt_one_plus_exp", lambda ns, x: ns.sqrt(1 + ns.exp(2 * x)), 1, WIDE, True),
    Formula("gumbel_nll", lambda ns, x: x + ns.exp(-x), 1,
            _one(-700.0, -30.0, 0.0, 1e-20, 1.0, 30.0, 700.0, 1e3), True),
    Formula("probit_loglik", lambda ns, x: ns.log(_ndtr(ns, x)), 1,
            _one(-40.0, -30.0, -5.0, -1.0, 0.0, 1e-20, 1.0, 5.0, 30.0), True),
    Formula("gaussian_mixture_loglik",
            lambda ns, x: ns.log(0.3 * ns.exp(-(x - 1)**2 / 2) + 0.7 * ns.exp(-(x + 1)**2 / 2)),
            1, WIDE, True),
    # ------------------------------------------------------------------ physics
    Formula("lennard_jones", lambda ns, r: 4 * (r**-12 - r**-6), 1,
            _one(0.5, 1.0, 2 ** (1 / 6), 3.0, 30.0, 1e3), True),
    Formula("morse", lambda ns, r: (1 - ns.exp(-(r - 1)))**2, 1,
            _one(-5.0, 0.0, 1.0, 1e-20, 30.0, 80.0, 700.0), True),
    Formula("coulomb_softened", lambda ns, r: 1 / ns.sqrt(r**2 + 0.01), 1,
            _one(-1e3, -1.0, 0.0, 1e-20, 1.0, 30.0, 700.0), True),
    Formula("gravity_softened_2d", lambda ns, x, y: -1 / ns.sqrt(x**2 + y**2 + 1e-4), 2,
            ((0.0, 0.0), (1e-20, 0.0), (1.0, -1.0), (700.0, -700.0), (30.0, 1e-20)), True),
    Formula("fermi_dirac_occupation",
            lambda ns, e, mu: 1 / (ns.exp((e - mu) / KT) + 1), 2,
            ((0.0, 0.0), (30.0, 0.0), (-30.0, 0.0), (80.0, -80.0), (-80.0, 80.0), (0.01, 0.0)),
            True),
    Formula("fermi_dirac_grand_potential",
            lambda ns, e, mu: -KT * ns.log(1 + ns.exp((mu - e) / KT)), 2,
            ((0.0, 0.0), (30.0, 0.0), (-30.0, 0.0), (80.0, -80.0), (-80.0, 80.0)), True),
    Formula("bose_einstein_log_partition", lambda ns, x: -ns.log(1 - ns.exp(-x)), 1,
            _one(1e-20, 1e-8, 1e-3, 1.0, 30.0, 80.0, 700.0), True),
    Formula("bose_einstein_occupation", lambda ns, x: 1 / (ns.exp(x) - 1), 1,
            _one(1e-20, 1e-8, 1e-3, 1.0, 30.0, 80.0, 700.0), True),
    Formula("planck_spectrum", lambda ns, x: x**3 / (ns.exp(x) - 1), 1,
            _one(1e-20, 1e-8, 1.0, 30.0, 80.0, 300.0), True),
    Formula("boltzmann_free_energy_2level",
            lambda ns, e1, e2: -T_SMALL * ns.log(ns.exp(-e1 / T_SMALL) + ns.exp(-e2 / T_SMALL)), 2,
            ((0.0, 0.0), (1.0, -1.0), (30.0, -30.0), (-8.0, 8.0), (5.0, 5.0 + 1e-12)), True),
    Formula("boltzmann_mean_energy_2level",
            lambda ns, e1, e2: (e1 * ns.exp(-e1 / T_SMALL) + e2 * ns.exp(-e2 / T_SMALL))
            / (ns.exp(-e1 / T_SMALL) + ns.exp(-e2 / T_SMALL)), 2,
            ((0.0, 0.0), (1.0, -1.0), (30.0, -30.0), (-8.0, 8.0), (0.01, -0.01))),
    Formula("gaussian_kernel", lambda ns, x, y: ns.exp(-(x - y)**2 / 2), 2,
            ((0.0, 0.0), (1.0, -1.0), (30.0, -30.0), (700.0, 700.0), (1e-20, 0.0)), True),
    # ------------------------------------------------------------------ finance
    Formula("black_scholes_call",
            lambda ns, s, sigma: s * _ndtr(ns, (ns.log(s / 100) + (0.05 + sigma**2 / 2))
                                           / sigma)
            - 100 * math.exp(-0.05) * _ndtr(ns, (ns.log(s / 100) + (0.05 - sigma**2 / 2))
                                           / sigma), 2,
            ((100.0, 0.2), (50.0, 0.2), (200.0, 0.2), (1.0, 0.3), (1e4, 0.5), (100.0, 1e-3)),
            True),
    Formula("black_scholes_d1",
            lambda ns, s, sigma: (ns.log(s / 100) + (0.05 + sigma**2 / 2)) / sigma, 2,
            ((100.0, 0.2), (1e-20, 0.2), (1e3, 1e-8), (100.0, 30.0)), True),
    Formula("normal_cdf", lambda ns, x: _ndtr(ns, x), 1,
            _one(-30.0, -5.0, -1e-20, 0.0, 1.0, 5.0, 30.0), True),
    Formula("erfc_tail", lambda ns, x: 1 - ns.erf(x), 1,
            _one(-3.0, 0.0, 1e-20, 3.0, 10.0, 26.0), True),
    Formula("log_normal_loglik",
            lambda ns, x, mu: -ns.log(x) - (ns.log(x) - mu)**2 / 2, 2,
            ((1.0, 0.0), (1e-20, 0.0), (1e3, 2.0), (0.5, -30.0)), True),
)

assert len({f.name for f in CORPUS}) == len(CORPUS), "duplicate corpus names"
