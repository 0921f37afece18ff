"""High-precision reference values and derivatives, for checking generated code.

Contract: the reference is the expression lambdified for mpmath and evaluated at increasing
precision (``prec``, ``2*prec + 20``, ...) until two successive evaluations agree; mpmath has no
overflow (exp(1e5) is a number), and the doubling resolves cancellation. If no two agree, or the
value is undefined at every precision, ``ReferenceError`` is raised instead of returning a wrong
number. Values that overflow double precision come back as ``inf``; values below its range as 0.0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import mpmath
import sympy

from symgrad.ops import stable

__all__ = ["reference_value", "reference_gradient", "extreme_points", "outside_real_domain",
           "ReferenceError"]


MAX_DPS = 2500
ZERO_DPS = 360  # past the double range (1e-324) relative to O(1) terms


class ReferenceError(ArithmeticError):
    """The high-precision evaluation could not be trusted at this point."""


def _mpmath_namespace() -> dict[str, object]:
    """mpmath implementations of the stable primitives (from their ``_eval_mpmath``)."""
    namespace: dict[str, object] = {}
    dummies = sympy.symbols("a0:3", real=True)
    for name, cls in stable.STABLE_OPS.items():
        if name in ("log1p", "expm1", "erfc"):
            continue  # mpmath has these under the same name
        nargs = 3 if name == "logsumexp" else (2 if name == "logaddexp" else 1)
        namespace[name] = cls(*dummies[:nargs])._eval_mpmath()[0]
    # symgrad's hypot takes two or more arguments (mpmath's two)
    namespace["hypot"] = lambda *args: mpmath.sqrt(mpmath.fsum(a * a for a in args))
    return namespace


def _sympy_fallback(cls):
    """mpmath-callable for a SymPy function class mpmath does not know (relu, maximum, ...):
    SymPy evaluates it at Float arguments of the working precision."""

    def call(*args):
        dps = mpmath.mp.dps
        value = cls(*[sympy.Float(a, dps) for a in args]).evalf(dps)
        if not value.is_number:
            raise ValueError(f"{cls.__name__} does not evaluate numerically")
        return value._to_mpmath(mpmath.mp.prec)

    return call


@functools.lru_cache(maxsize=4096)
def _mpmath_function(expr: sympy.Expr, symbols: tuple[sympy.Symbol, ...]):
    namespace = _mpmath_namespace()
    for fn in sorted(expr.atoms(sympy.Function), key=sympy.default_sort_key):
        name = fn.func.__name__
        if name not in namespace and not hasattr(mpmath, name):
            namespace[name] = _sympy_fallback(fn.func)
    return sympy.lambdify(symbols, expr, modules=[namespace, "mpmath"])


def _evaluate(expr: sympy.Expr, symbols, values, dps: int):
    fn = _mpmath_function(expr, symbols)
    with mpmath.workdps(dps):
        try:
            value = fn(*[mpmath.mpf(v) for v in values])
        except (ZeroDivisionError, ValueError, OverflowError, TypeError, NameError) as exc:
            raise ReferenceError(f"{expr} is undefined at {values}: {exc}") from exc
        if isinstance(value, mpmath.mpc):
            # x**p * log(x) at x = p = -80 is 2.5e-152 + 7.9e-152j: small values compare
            # relatively; log(233) - log(1 - 233) + 2**700 is 5e210 + 3.14j: large, absolutely
            if abs(value.imag) > mpmath.mpf(10) ** (-dps + 5) * min(abs(value), 1):
                raise ReferenceError(f"{expr} is complex at {values}: {value}")
            value = value.real
        value = mpmath.mpf(value)
        if not mpmath.isfinite(value):
            raise ReferenceError(f"{expr} is not finite at {values}: {value}")
        return value


def _to_float(value) -> float:
    if abs(value) > mpmath.mpf("1.7976931348623157e308"):
        return math.copysign(math.inf, value)
    return float(value)


def reference_value(expr: sympy.Expr, subs: dict, prec: int = 50) -> float:
    """Evaluate ``expr`` at ``subs`` with mpmath and round to a float.

    The working precision starts at ``prec`` digits and doubles (up to ``MAX_DPS``) until two
    successive evaluations agree to 1e-20 relative, or both round to 0.0 in double precision
    with the lower one at ``ZERO_DPS`` digits or more: cancellation such as
    1 - 1/(1 + exp(-700)) or 1 + erf(-21) needs ~300 digits and gets them.

    Args:
        expr: a SymPy expression (stable primitives from symgrad.ops.stable are allowed).
        subs: symbol -> value (Python floats are taken as their exact binary value).
        prec: decimal digits of the first evaluation.

    Returns:
        The value rounded to the nearest double (``inf`` if it overflows double range).

    Raises:
        ReferenceError: the value is undefined (nan, complex, division by zero) at every
            precision tried, or no two successive precisions agreed.
    """
    symbols = tuple(subs)
    values = [float(subs[s]) for s in symbols]
    # two precisions can cancel alike: exp(x) - 1 is 0 at 50 and at 120 digits for x = 1e-300,
    # so exp(x)/x - (exp(x) - 1)/x**2 (the derivative of expm1(x)/x, 0.5) agreed on 1e300.
    # Start past the inputs' own digits: 300 more for 1e-300
    tiny = [-math.log10(abs(v)) for v in values if v != 0 and math.isfinite(v) and abs(v) < 1]
    previous, dps, last_error = None, prec + int(max(tiny, default=0)), None
    while dps <= MAX_DPS:
        try:
            value = _evaluate(expr, symbols, values, dps)
        except ReferenceError as exc:  # e.g. 1 - 1/(1 + exp(-700)) is 0 at 50 digits
            previous, last_error = None, exc
        else:
            if previous is not None:
                with mpmath.workdps(dps):
                    agree = abs(value - previous[1]) <= mpmath.mpf(10) ** -20 * abs(value)
                # zero (or below the double range, like sech(700)**2 = 4e-608) at two
                # precisions is trusted only past ZERO_DPS digits: 1 + erf(-21) is exactly 0
                # at 50 and at 120 digits, and 5e-198 at 260
                tiny = _to_float(value) == _to_float(previous[1]) == 0.0
                if (agree and value != 0) or (tiny and previous[0] >= ZERO_DPS):
                    return _to_float(value)
            previous = (dps, value)
        dps = 2 * dps + 20
    raise last_error or ReferenceError(f"no stable reference for {expr} at {subs}")


def reference_gradient(expr: sympy.Expr, symbols: Sequence[sympy.Symbol],
                       point: Sequence[float], order: int = 1, prec: int = 50):
    """Gradient (order=1) or Hessian (order=2) of ``expr`` at ``point``, at high precision.

    The derivatives are taken symbolically with ``sympy.diff`` on ``expr`` as given (no
    stabilizing rewrite), so the reference is independent of the code under test.

    Args:
        expr: scalar SymPy expression.
        symbols: the inputs, in order.
        point: one float per symbol.
        order: 1 for the gradient (list of floats), 2 for the Hessian (list of lists).
        prec: decimal digits.

    Returns:
        list[float] for order 1, list[list[float]] for order 2.
    """
    subs = dict(zip(symbols, point, strict=True))
    if order == 1:
        return [reference_value(sympy.diff(expr, s), subs, prec) for s in symbols]
    if order == 2:
        first = [sympy.diff(expr, s) for s in symbols]
        return [[reference_value(sympy.diff(d, s), subs, prec) for s in symbols] for d in first]
    raise ValueError(f"order must be 1 or 2, got {order}")


def outside_real_domain(expr: sympy.Expr, subs: dict, dps: int = 40) -> bool:
    """Whether a function or power inside ``expr`` is complex at ``subs``: log(S/K) at S < 0.

    The value as a whole can still look real (Black-Scholes' erf of that complex d1 is 1 up
    to 1e-79i), yet float code computes nan there, as torch does, and nan is the right answer.
    A subterm that cannot be evaluated is left out: this only ever says "outside" for a
    complex value it saw."""
    symbols = tuple(subs)
    values = [mpmath.mpf(float(subs[s])) for s in symbols]
    seen = set()
    for sub in sympy.preorder_traversal(expr):
        if not isinstance(sub, (sympy.Function, sympy.Pow)) or sub in seen:
            continue
        seen.add(sub)
        if isinstance(sub, sympy.Pow) and sub.exp.is_integer:
            continue
        try:
            with mpmath.workdps(dps):
                value = _mpmath_function(sub, symbols)(*values)
                if isinstance(value, mpmath.mpc) and \
                        abs(value.imag) > mpmath.mpf(10) ** -20 * abs(value):
                    return True
        except Exception:  # noqa: BLE001 - no verdict from a term that does not evaluate
            continue
    return False


_PROBES = (0.0, 1e-20, -1e-20, 0.5, -0.5, 1.0, -1.0, 30.0, -30.0, 80.0, -80.0,
           700.0, -700.0, 1e3, -1e3)


def extreme_points(n_inputs: int) -> list[tuple[float, ...]]:
    """A deterministic list of probe points for an ``n_inputs``-argument function.

    Every input takes each probe value (0, ±1e-20, ±0.5, ±1, ±30, ±80, ±700, ±1e3) with the
    others held at 0.5, and all inputs take each probe value together. Callers filter the
    points to the function's domain.

    Args:
        n_inputs: number of scalar inputs.

    Returns:
        List of tuples of floats, without duplicates, in a fixed order.
    """
    points: list[tuple[float, ...]] = []
    for value in _PROBES:
        points.append((value,) * n_inputs)
    if n_inputs > 1:
        for i in range(n_inputs):
            for value in _PROBES:
                point = [0.5] * n_inputs
                point[i] = value
                points.append(tuple(point))
    unique: list[tuple[float, ...]] = []
    for p in points:
        if p not in unique:
            unique.append(p)
    return unique
