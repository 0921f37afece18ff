"""The overflow probe: evaluate a generated backward at extreme inputs and report every
gradient that goes non-finite where the true derivative (evaluated with mpmath at high
precision, from the *un-rewritten* forward) is finite.

Used by `sg.compile(..., check_finite=True)` and `symgrad check`. The forward's own outputs
are probed too. Only an elementwise forward has a scalar formula to reference, so forwards
with reductions, matmul or movement ops are reported as `skipped` rather than guessed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy

from .errors import SymgradError


class NumericsError(SymgradError, ArithmeticError):
    """A generated derivative is non-finite where the true derivative is finite."""


@dataclass(frozen=True)
class Finding:
    input: str                     # the gradient that went wrong: grad_<input>
    output: str                    # with respect to this output
    point: tuple[float, ...]       # the inputs
    generated: float
    reference: float

    def __str__(self):
        args = ", ".join(f"{v:g}" for v in self.point)
        what = self.output if self.input == "(forward)" else f"d{self.output}/d{self.input}"
        return f"{what} at ({args}): generated {self.generated!r}, true value {self.reference!r}"


@dataclass
class FiniteReport:
    probed: int = 0
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None

    @property
    def ok(self):
        return not self.findings

    def __str__(self):
        if self.skipped:
            return f"overflow probe skipped: {self.skipped}"
        if self.ok:
            return f"overflow probe: {self.probed} extreme points, every gradient finite"
        lines = [f"overflow probe: {len(self.findings)} non-finite gradient(s) where the "
                 f"true derivative is finite:"]
        lines += [f"  {f}" for f in self.findings[:20]]
        return "\n".join(lines)


def probe_finite(module, points=None) -> FiniteReport:
    """Probe `module` (a CompiledModule) at extreme points; see the module docstring."""
    import sympy

    from .emit.printers import inline
    from .numerics_reference import (ReferenceError, extreme_points, outside_real_domain,
                                     reference_value)
    from .trace import symbol_of

    graph = module.graph
    report = FiniteReport()
    if any(n.op not in ("input", "elementwise") for n in graph.nodes()):
        report.skipped = "the forward has reductions or movement ops (elementwise forwards only)"
        return report
    floats = [n for n in graph.inputs if n.dtype == "float"]
    if len(floats) != len(graph.inputs):
        report.skipped = "the forward has integer or boolean inputs"
        return report
    symbols = [symbol_of(n) for n in graph.inputs]
    outputs = [(name, inline(node)) for name, node in zip(graph.output_names, graph.outputs)
               if node.dtype == "float"]
    derivs = {(o, i): sympy.diff(expr, s) for o, expr in outputs
              for i, s in zip(graph.inputs, symbols)}
    dtype = numpy.float32 if module.meta.get("dtype") == "float32" else numpy.float64
    for point in points or extreme_points(len(symbols)):
        inputs = [numpy.full(n.shape or (), v, dtype=dtype) for n, v in zip(graph.inputs, point)]
        try:
            with numpy.errstate(all="ignore"):
                values = module.raw.forward(*inputs)
        except Exception:  # noqa: BLE001 - a point outside the forward's domain
            continue
        subs = dict(zip(symbols, point))
        if any(outside_real_domain(expr, subs) for _, expr in outputs):
            continue   # log(S/K) at S < 0: nan is the right answer everywhere here
        report.probed += 1
        outside = set()   # outputs undefined over the reals here (x**p at x < 0): nan is right
        for k, ((out_name, expr), v) in enumerate(zip(outputs, values)):
            v = numpy.asarray(v)
            if not numpy.all(numpy.isfinite(v)):
                ref = _reference(reference_value, ReferenceError, expr, subs)
                if ref is None:
                    outside.add(k)
                elif math.isfinite(ref):
                    bad = v[~numpy.isfinite(v)].ravel()[0]
                    report.findings.append(Finding("(forward)", out_name, tuple(point),
                                                   float(bad), ref))
        for k, (out_name, expr) in enumerate(outputs):
            if k in outside:
                continue
            grads_out = [numpy.ones_like(v) if j == k else numpy.zeros_like(v)
                         for j, v in enumerate(values)]
            with numpy.errstate(all="ignore"):
                grads = module.raw.backward(*grads_out, *inputs)
            for node, g in zip(graph.inputs, grads):
                g = numpy.asarray(g)
                if numpy.all(numpy.isfinite(g)):
                    continue
                ref = _reference(reference_value, ReferenceError, derivs[(out_name, node)], subs)
                # the backward sums every output's term: another output's undefined derivative
                # here (d sqrt(x^2 + y^2)/dx at 0) times its 0 seed is nan, as in torch
                others = [_reference(reference_value, ReferenceError, derivs[(o, node)], subs)
                          for j, (o, _) in enumerate(outputs) if j != k]
                if any(r is None or not math.isfinite(r) for r in others):
                    continue
                if ref is not None and math.isfinite(ref):
                    bad = g[~numpy.isfinite(g)].ravel()[0]
                    report.findings.append(Finding(node.name, out_name, tuple(point),
                                                   float(bad), ref))
    return report


def _reference(reference_value, reference_error, expr, subs):
    try:
        return reference_value(expr, subs, prec=30)
    except (reference_error, ValueError, TypeError, ZeroDivisionError):
        return None   # no trustworthy reference here: say nothing rather than guess


def check_finite(module) -> FiniteReport:
    """Raise NumericsError when the probe finds a non-finite gradient; else return the report."""
    report = probe_finite(module)
    if not report.ok:
        raise NumericsError(str(report))
    return report
