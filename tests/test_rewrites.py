"""symgrad.rewrites: each rewrite fires on SymPy's canonical forms, and never changes a value."""

from __future__ import annotations

import dataclasses
import random

import numpy
import pytest
import sympy
from sympy import exp, log, tanh
from sympy.printing.numpy import NumPyPrinter

from corpus import CORPUS, sympy_namespace
from symgrad.numerics_reference import ReferenceError, reference_value
from symgrad.ops.stable import (
    erfc,
    exprel,
    expm1,
    inv_exprel,
    inv_sinhc,
    log1mexp,
    log_cosh,
    log1p,
    log1prel,
    log_sigmoid,
    logaddexp,
    logsumexp,
    numpy_helper_namespace,
    sigmoid,
    sinc,
    softplus,
)
from symgrad.ops.elementwise import hypot, one_minus_square
from symgrad.rewrites import STABILIZE, Rewrite, stabilize

x, y, z = sympy.symbols("x y z", real=True)

# naive input, expected output, a rewrite that must be among those fired
CASES = [
    (log(1 + exp(x)), softplus(x), "logsumexp"),
    (log(exp(x) + 1), softplus(x), "logsumexp"),
    (log(1 + exp(-x)), softplus(-x), "logsumexp"),
    (log1p(exp(x)), softplus(x), "logsumexp"),
    (log(exp(x) + exp(y)), logaddexp(x, y), "logsumexp"),
    (log(exp(x) + exp(y) + exp(z)), logsumexp(x, y, z), "logsumexp"),
    (exp(x) / (1 + exp(x)), sigmoid(x), "sigmoid"),
    (1 / (1 + exp(-x)), sigmoid(x), "sigmoid"),
    (exp(-x) / (1 + exp(-x)), sigmoid(-x), "sigmoid"),
    (exp(x) / (exp(x) + 1) ** 2, sigmoid(x) * sigmoid(-x), "sigmoid"),
    (sympy.diff(exp(x) / (1 + exp(x)), x), sigmoid(x) * sigmoid(-x), "sigmoid_complement"),
    (1 - 1 / (1 + exp(-x)), sigmoid(-x), "sigmoid_complement"),
    (log(1 / (1 + exp(-x))), log_sigmoid(x), "log_sigmoid"),
    (log(1 - 1 / (1 + exp(-x))), log_sigmoid(-x), "log_sigmoid"),
    (log(1 + x), log1p(x), "log1p"),
    (log(1 - exp(-x)), log1mexp(x), "log1mexp"),
    (log(-expm1(-x)), log1mexp(x), "log1mexp"),
    (log1p(-exp(x)), log1mexp(-x), "log1mexp"),
    (log(exp(x) - 1), x + log1mexp(x), "log1mexp"),   # inverse softplus
    (log(expm1(x)), x + log1mexp(x), "log1mexp"),
    (log(x ** 2), 2 * log(sympy.Abs(x)), "log_power"),
    (log(2 * sympy.pi * x ** 2), log(2 * sympy.pi) + 2 * log(sympy.Abs(x)), "log_power"),
    (log(x ** 2 + y ** 2), 2 * log(hypot(x, y)), "log_power"),
    (log(1 / x), -log(x), "log_power"),
    (sympy.sqrt(x ** 2 + y ** 2 + z ** 2), hypot(x, y, z), "hypot"),
    (1 / sympy.sqrt(x ** 2 + y ** 2 + 1), 1 / hypot(1, x, y), "hypot"),
    (sympy.sin(x) / x, sinc(x), "removable_singularity"),
    (sympy.sin(2 * x) / x, 2 * sinc(2 * x), "removable_singularity"),
    ((exp(x) - 1) / x, exprel(x), "removable_singularity"),
    (log(1 + x) / x, log1prel(x), "removable_singularity"),
    (x / (exp(x) - 1), inv_exprel(x), "removable_singularity"),
    (x / sympy.sin(x), 1 / sinc(x), "removable_singularity"),
    (sympy.sqrt(x**2 + y**2), hypot(x, y), "hypot"),
    (1 / sympy.sqrt(x**2 + 1), 1 / hypot(1, x), "hypot"),
    (1 / sympy.sqrt(1 - x**2), 1 / sympy.sqrt(one_minus_square(x)), "difference_of_squares"),
    (exp(x) - 1, expm1(x), "expm1"),
    (3 * exp(x) - 3, 3 * expm1(x), "expm1"),
    (exp(x) / (exp(x) - 1), -1 / expm1(-x), "expm1_ratio"),
    (exp(x) / exp(y), exp(x - y), "exp_product"),
    (exp(x) * exp(2 * y), exp(x + 2 * y), "exp_product"),
    (exp(x) / (exp(x) + exp(y)), sigmoid(x - y), "sigmoid_normalizer"),
    (1 + tanh(x), 2 * sigmoid(2 * x), "tanh_sigmoid"),
    (1 - tanh(x), 2 * sigmoid(-2 * x), "tanh_sigmoid"),
    (1 + sympy.erf(x), erfc(-x), "erfc"),
    (sympy.Rational(1, 2) - sympy.erf(x) / 2, erfc(x) / 2, "erfc"),
    (log(exp(x) * y), x + log(y), "log_exp"),
    (log(sympy.cosh(x)), log_cosh(x), "hyperbolic"),
    (log(x + sympy.sqrt(x**2 + 1)), sympy.asinh(x), "hyperbolic"),
    (x / sympy.sinh(x), inv_sinhc(x), "removable_singularity"),
    ((1 - sympy.cos(x)) / x**2, sinc(x / 2)**2 / 2, "removable_singularity"),
    (sympy.sinh(x) / sympy.cosh(x), tanh(x), "hyperbolic"),
]


@pytest.mark.parametrize("naive, expected, name", CASES, ids=[str(c[0]) for c in CASES])
def test_rewrite_fires_on_canonical_form(naive, expected, name):
    out, fired = stabilize(naive)
    assert out == expected
    assert name in fired


def test_rewrites_are_named_frozen_data():
    names = [r.name for r in STABILIZE]
    assert len(names) == len(set(names))
    for rewrite in STABILIZE:
        assert isinstance(rewrite, Rewrite) and rewrite.description
        with pytest.raises(dataclasses.FrozenInstanceError):
            rewrite.name = "other"


def test_fired_names_follow_stabilize_order_and_are_deterministic():
    expr = log(1 + exp(x)) + exp(y) - 1 + 1 / (1 + exp(-z))
    out1, fired1 = stabilize(expr)
    out2, fired2 = stabilize(expr)
    assert out1 == out2 and fired1 == fired2
    order = [r.name for r in STABILIZE]
    assert list(fired1) == sorted(fired1, key=order.index)


def test_stabilize_is_idempotent_and_leaves_plain_math_alone():
    # (sqrt(x**2 + 1) is rewritten to hypot(1, x): the square overflows at x = 1e200)
    for expr in (x**2 + sympy.sin(y), log(x) + exp(x), sympy.sqrt(x**2 - 1)):
        assert stabilize(expr) == (expr, ())
    for naive, _, _ in CASES:
        once, _ = stabilize(naive)
        assert stabilize(once) == (once, ())


def test_piecewise_zero_branch_absorbs_factor():
    expr = log(x) * sympy.Piecewise((x, x > 0), (0, True))
    out, fired = stabilize(expr)
    assert "piecewise_zero" in fired
    assert out == sympy.Piecewise((x * log(x), x > 0), (0, True))
    fn = sympy.lambdify([x], out, modules="numpy", printer=NumPyPrinter())
    with numpy.errstate(all="ignore"):
        values = fn(numpy.array([-1.0, 0.0, 2.0]))
    assert values[0] == 0.0 and values[1] == 0.0  # no 0 * nan from log of a negative


def _corpus_expressions():
    ns = sympy_namespace()
    for record in CORPUS:
        xs = sympy.symbols(f"x0:{record.n_inputs}", real=True)
        expr = record.fn(ns, *xs)
        yield record.name, xs, expr, record.points
        for i, s in enumerate(xs):
            yield f"{record.name}/d{i}", xs, sympy.diff(expr, s), record.points


@pytest.mark.parametrize("name, xs, expr, points",
                         list(_corpus_expressions()), ids=lambda v: v if isinstance(v, str) else "")
def test_rewrites_never_change_values(name, xs, expr, points):
    """At moderate points where the original is finite, rewritten == original to 1e-12
    (both evaluated at high precision, so this checks the identity, not float rounding)."""
    stable, _ = stabilize(expr)
    rng = random.Random(name)
    candidates = [p for p in points if all(abs(v) <= 30 for v in p)]
    candidates += [tuple(rng.choice([v for v in (p[i] for p in points)]) * rng.uniform(0.5, 1.5)
                         for i in range(len(xs))) for p in points[:3]]
    checked = 0
    for point in candidates:
        subs = dict(zip(xs, point))
        try:
            original = reference_value(expr, subs, prec=30)
        except ReferenceError:
            continue  # original undefined here (log of a negative, 0/0): nothing to preserve
        rewritten = reference_value(stable, subs, prec=30)
        assert rewritten == pytest.approx(original, rel=1e-12, abs=1e-300), (name, point)
        checked += 1
    assert checked > 0


def test_rewritten_corpus_prints_for_numpy():
    """Every stabilized corpus expression prints with NumPyPrinter and evaluates."""
    helpers = numpy_helper_namespace()
    for name, xs, expr, points in _corpus_expressions():
        stable, _ = stabilize(expr)
        fn = sympy.lambdify(xs, stable, modules=[helpers, "numpy"])
        with numpy.errstate(all="ignore"):
            fn(*[numpy.float64(v) for v in points[0]])


def test_stabilize_is_fast_on_a_large_derivative():
    """stabilize runs on every derivative the compiler emits: no expand/Poly on whole sums."""
    import time

    a, b, c, d, e, f = sympy.symbols("a b c d e f", real=True)
    expr = ((a * b + c) / (d * d + e * f + 1)
            + log(1 + exp(a * b - c)) * tanh(d + e) / (1 + exp(-f)))
    hessian_trace = sum(sympy.diff(expr, s, 2) for s in (a, b, c, d, e, f))
    start = time.perf_counter()
    stabilize(hessian_trace)
    assert time.perf_counter() - start < 2.0


def test_skipping_a_rewrite_without_its_functions_changes_nothing(monkeypatch):
    """stabilize skips a rewrite's walk when the expression holds none of the classes it
    matches on (``Rewrite.needs``): over the canonical cases, the value corpus and its
    derivatives, the results and the fired names equal those of walking every rewrite."""
    import dataclasses

    from symgrad import rewrites

    u = sympy.Symbol("u", real=True)
    exprs = [naive for naive, _, _ in CASES] + [e for _, _, e, _ in _corpus_expressions()]
    exprs += [sympy.atanh(sympy.tanh(u)) * u, sympy.asinh(sympy.sinh(u)) + 1,
              3 * sympy.cosh(u) ** 2 - 3 * sympy.sinh(u) ** 2 + u]   # the hyperbolic rewrite
    skipping = [stabilize(e) for e in exprs]
    monkeypatch.setattr(rewrites, "STABILIZE",
                        tuple(dataclasses.replace(r, needs=()) for r in rewrites.STABILIZE))
    walking = [rewrites.stabilize(e) for e in exprs]
    assert skipping == walking
    assert sum(bool(fired) for _, fired in skipping) > len(CASES)   # rewrites did fire
