"""Corpus check: symgrad's derivatives of naive formulas are finite and accurate in float64
at extreme points, against an mpmath reference of the *un-rewritten* formula.

Interim harness: ``gradient_via`` differentiates with ``sympy.diff``, applies ``stabilize`` and
lambdifies with the stable printers. When the pipeline lands, only ``gradient_via`` changes
(to ``sg.compile(fn).backward``).
"""

from __future__ import annotations

import functools

import numpy
import pytest
import sympy
from sympy.printing.numpy import NumPyPrinter

from corpus import CORPUS, Formula, sympy_namespace
from symgrad.numerics_reference import reference_gradient
from symgrad.ops.stable import NUMPY_PRINT_METHODS, numpy_helper_namespace
from symgrad.rewrites import stabilize

RTOL = 1e-6
# Absolute floor, relative to the largest reference entry of the same gradient/Hessian: an
# entry that is 1e-13 of its neighbours is "zero" at float64 precision.
ATOL_SCALE = 1e-13


class StableNumPyPrinter(NumPyPrinter):
    """NumPyPrinter plus the vectorised erf/erfc printers from symgrad.ops.stable."""

    _print_erf = NUMPY_PRINT_METHODS["_print_erf"]
    _print_erfc = NUMPY_PRINT_METHODS["_print_erfc"]


def symbols_for(record: Formula) -> tuple[sympy.Symbol, ...]:
    return sympy.symbols(f"x0:{record.n_inputs}", real=True)


@functools.cache
def _compiled(record: Formula, order: int):
    """Lambdified stabilized derivatives of ``record`` (gradient or flattened Hessian)."""
    xs = symbols_for(record)
    expr = record.fn(sympy_namespace(), *xs)
    derivs = [sympy.diff(expr, x) for x in xs]
    if order == 2:
        derivs = [sympy.diff(d, x) for d in derivs for x in xs]
    stable = [stabilize(d)[0] for d in derivs]
    printer = StableNumPyPrinter({"fully_qualified_modules": True, "inline": True,
                                  "allow_unknown_functions": False})
    fn = sympy.lambdify(xs, stable, modules=[numpy_helper_namespace(), "numpy"], printer=printer)
    return fn, stable


def gradient_via(record: Formula, point: tuple[float, ...], order: int = 1) -> numpy.ndarray:
    """symgrad's float64 gradient (order 1) or Hessian (order 2) of ``record`` at ``point``."""
    fn, _ = _compiled(record, order)
    with numpy.errstate(all="ignore"):  # untaken where-branches may overflow; results checked
        values = fn(*[numpy.float64(v) for v in point])
    out = numpy.array([numpy.asarray(v, dtype=numpy.float64) for v in values], dtype=numpy.float64)
    n = record.n_inputs
    return out.reshape((n, n) if order == 2 else (n,))


@functools.cache
def reference_via(record: Formula, point: tuple[float, ...], order: int = 1) -> numpy.ndarray:
    xs = symbols_for(record)
    expr = record.fn(sympy_namespace(), *xs)
    return numpy.array(reference_gradient(expr, xs, point, order=order), dtype=numpy.float64)


def mismatch(got: numpy.ndarray, ref: numpy.ndarray) -> str | None:
    """None when ``got`` is finite and close to ``ref``; otherwise a description."""
    if not numpy.all(numpy.isfinite(ref)):
        return f"reference is not finite ({ref}): the point is outside the corpus contract"
    if not numpy.all(numpy.isfinite(got)):
        return f"non-finite: got {got}, reference {ref}"
    atol = ATOL_SCALE * max(1.0, float(numpy.max(numpy.abs(ref))))
    err = numpy.abs(got - ref)
    bad = err > RTOL * numpy.abs(ref) + atol
    if numpy.any(bad):
        return f"inaccurate: got {got}, reference {ref}, abs error {err}"
    return None


def _cases():
    for record in CORPUS:
        for order in (1, 2) if record.second_order else (1,):
            for point in record.points:
                marks = ()
                reason = record.known_limits.get(point)
                if reason is not None and (order == 2 or not reason.startswith("order 2:")):
                    # known limit: strict, so a fix shows up as XPASS and the entry is removed
                    marks = (pytest.mark.xfail(reason=reason, strict=True),)
                yield pytest.param(record, point, order, marks=marks,
                                   id=f"{record.name}-d{order}-{','.join(map(repr, point))}")


@pytest.mark.parametrize("record, point, order", list(_cases()))
def test_corpus_gradient_finite_and_accurate(record, point, order):
    got = gradient_via(record, point, order)
    ref = reference_via(record, point, order)
    problem = mismatch(got, ref)
    assert problem is None, f"{record.name} order {order} at {point}: {problem}"


def test_corpus_size_and_second_order_share():
    assert len(CORPUS) >= 60
    assert sum(r.second_order for r in CORPUS) * 3 >= len(CORPUS)
