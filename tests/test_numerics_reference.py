"""symgrad.numerics_reference: trustworthy high-precision values at extreme points."""

from __future__ import annotations

import math

import pytest
import sympy

from symgrad.numerics_reference import (
    ReferenceError,
    extreme_points,
    reference_gradient,
    reference_value,
)
from symgrad.ops.stable import logsumexp, sigmoid

x, y = sympy.symbols("x y", real=True)


def test_cancellation_is_resolved_by_escalating_precision():
    # 1 - 1/(1 + exp(-700)) = exp(-700)/(1 + exp(-700)): 0 at 50 digits, 1e-304 at 300+
    value = reference_value(1 - 1 / (1 + sympy.exp(-x)), {x: 700.0})
    assert value == pytest.approx(math.exp(-700), rel=1e-15)
    # 1 + erf(-21.2) = erfc(21.2) ~ 1e-197
    value = reference_value(1 + sympy.erf(x), {x: -21.2})
    assert value == pytest.approx(float(sympy.erfc(sympy.Float(21.2, 60)).evalf(30)), rel=1e-15)


def test_overflow_free_and_below_double_range():
    assert reference_value(sympy.log(1 + sympy.exp(x)), {x: 1e4}) == 1e4
    assert reference_value(sympy.exp(x), {x: 1e3}) == math.inf
    assert reference_value(1 - sympy.tanh(x) ** 2, {x: 700.0}) == 0.0


def test_stable_primitives_and_gradients():
    assert reference_value(sigmoid(x), {x: -700.0}) == pytest.approx(math.exp(-700), rel=1e-14)
    assert reference_value(logsumexp(x, y, 2 * x), {x: 1000.0, y: 0.0}) == pytest.approx(
        2000.0, rel=1e-15)
    grad = reference_gradient(sympy.log(sympy.exp(x) + sympy.exp(y)), [x, y], [800.0, 799.0])
    assert grad[0] + grad[1] == pytest.approx(1.0, rel=1e-15)
    hess = reference_gradient(x**2 * y, [x, y], [3.0, 2.0], order=2)
    assert hess == [[4.0, 6.0], [6.0, 0.0]]


def test_undefined_points_raise():
    with pytest.raises(ReferenceError):
        reference_value(sympy.log(x), {x: -1.0})
    with pytest.raises(ReferenceError):
        reference_value(1 / x, {x: 0.0})


def test_extreme_points_deterministic_and_cover_probes():
    points = extreme_points(2)
    assert points == extreme_points(2)
    assert len(points) == len(set(points))
    flat = {v for p in points for v in p}
    for probe in (0.0, 1e-20, 30.0, -30.0, 80.0, -80.0, 700.0, -700.0, 1e3, -1e3):
        assert probe in flat
    assert all(len(p) == 2 for p in points)


def test_tiny_complex_values_are_not_taken_as_real():
    # d/dp x**p = x**p*log(x): at x = p = -80 it is 2.5e-152 + 7.9e-152j, not a real number
    p = sympy.Symbol("p", real=True)
    with pytest.raises(ReferenceError, match="complex"):
        reference_value(sympy.diff(x ** p, p), {x: -80.0, p: -80.0})
    # a real value computed through complex intermediates is still accepted
    assert reference_value(sympy.diff(x ** p, p), {x: 80.0, p: -80.0}) == pytest.approx(
        80.0 ** -80 * math.log(80.0), rel=1e-14)
    # a large real part does not hide an imaginary part of order one
    with pytest.raises(ReferenceError, match="complex"):
        reference_value(sympy.log(x) - sympy.log(1 - x) + 2 ** x, {x: 700.0})
