"""Corpus check: symgrad's derivatives of naive formulas are finite and accurate in float64
at extreme points, against an mpmath reference of the *un-rewritten* formula.

`gradient_via` runs the real pipeline: each formula is written once against a namespace and
traced through `sg.compile` with the symgrad namespace (`sg.exp`, `sg.log`, ...); gradients
come from the generated backward, Hessians from `grad_module()` (the backward differentiated
again). The reference differentiates the same formula written with SymPy's functions.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import numpy
import pytest

import symgrad as sg
from corpus import CORPUS, Formula, sympy_namespace
from symgrad.numerics_reference import reference_gradient

RTOL = 1e-6
# Absolute floor, relative to the largest reference entry of the same gradient/Hessian: an
# entry that is 1e-13 of its neighbours is "zero" at float64 precision.
ATOL_SCALE = 1e-13


def symgrad_namespace() -> SimpleNamespace:
    """The corpus ops, spelled as a symgrad user spells them in a forward."""
    return SimpleNamespace(exp=sg.exp, log=sg.log, sqrt=sg.sqrt, tanh=sg.tanh,
                           cosh=lambda x: x.cosh(), erf=sg.erf, abs=sg.abs, pi=math.pi,
                           where=sg.where)


def symbols_for(record: Formula):
    import sympy

    return sympy.symbols(f"x0:{record.n_inputs}", real=True)


@functools.cache
def _module(record: Formula, order: int):
    """The compiled module of ``record`` (order 1), or its grad_module() (order 2)."""
    ns = symgrad_namespace()
    names = [f"x{i}" for i in range(record.n_inputs)]
    # a forward with one named parameter per input, as a user would write it
    forward = eval(f"lambda {', '.join(names)}: fn(ns, {', '.join(names)})",
                   {"fn": record.fn, "ns": ns})
    examples = [numpy.float64(0.5) * numpy.ones(()) for _ in names]
    mod = sg.compile(forward, *examples, cache_ok=False)
    return mod if order == 1 else mod.grad_module()


def gradient_via(record: Formula, point: tuple[float, ...], order: int = 1) -> numpy.ndarray:
    """symgrad's float64 gradient (order 1) or Hessian (order 2) of ``record`` at ``point``."""
    mod = _module(record, order)
    xs = [numpy.asarray(v, dtype=numpy.float64) for v in point]
    one = numpy.asarray(1.0)
    n = record.n_inputs
    with numpy.errstate(all="ignore"):  # untaken where-branches may overflow; results checked
        if order == 1:
            return numpy.array([float(g) for g in mod.backward(one, *xs)])
        rows = []
        for i in range(n):
            cot = [numpy.asarray(float(i == j)) for j in range(n)]
            rows.append([float(g) for g in mod.backward(*cot, one, *xs)[1:]])
    return numpy.array(rows)


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
