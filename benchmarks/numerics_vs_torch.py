"""How many corpus gradients does torch eager get wrong, against symgrad's stabilized ones?

Report, not a test: for every formula of tests/corpus.py, every probe point and every order the
corpus asks for (gradient; Hessian where ``second_order``), compare in float64 against the mpmath
reference with the corpus test's criterion (finite, and within 1e-6 relative with an absolute
floor of 1e-13 times the largest reference entry).

    python benchmarks/numerics_vs_torch.py [--verbose]

symgrad's side is ``gradient_via`` from tests/test_numerics_corpus.py: the generated backward
of ``sg.compile(fn)`` (gradients) and of its ``grad_module()`` (Hessians).
"""

from __future__ import annotations

import math
import os
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, ".."))

try:
    import torch
except ImportError:  # pragma: no cover - report only
    print("torch is not installed (pip install torch==2.13.0); nothing to compare")
    raise SystemExit(0)

import numpy

from corpus import CORPUS  # noqa: E402
from symgrad.numerics_reference import ReferenceError  # noqa: E402
from test_numerics_corpus import gradient_via, mismatch, reference_via  # noqa: E402


def _lift(fn):
    def call(*args):
        return fn(*[a if torch.is_tensor(a) else torch.tensor(a, dtype=torch.float64)
                    for a in args])
    return call


def torch_namespace() -> SimpleNamespace:
    return SimpleNamespace(
        exp=_lift(torch.exp), log=_lift(torch.log), sqrt=_lift(torch.sqrt),
        tanh=_lift(torch.tanh), cosh=_lift(torch.cosh), erf=_lift(torch.erf),
        abs=_lift(torch.abs), pi=math.pi,
        where=lambda cond, a, b: torch.where(cond, a, b),
    )


def torch_derivatives(record, point, order):
    """torch eager gradient (order 1) or Hessian (order 2), float64."""
    inputs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in point]
    out = record.fn(torch_namespace(), *inputs)
    grads = torch.autograd.grad(out, inputs, create_graph=order == 2, allow_unused=True)
    grads = [g if g is not None else torch.zeros((), dtype=torch.float64) for g in grads]
    if order == 1:
        return numpy.array([g.item() for g in grads])
    rows = []
    for g in grads:
        if not g.requires_grad:
            rows.append([0.0] * len(inputs))
            continue
        second = torch.autograd.grad(g, inputs, retain_graph=True, allow_unused=True)
        rows.append([s.item() if s is not None else 0.0 for s in second])
    return numpy.array(rows)


def main(verbose: bool = False) -> None:
    total = torch_bad = symgrad_bad = skipped = 0
    torch_nonfinite = symgrad_nonfinite = 0
    worst: list[tuple[str, str]] = []
    for record in CORPUS:
        for order in (1, 2) if record.second_order else (1,):
            for point in record.points:
                try:
                    ref = reference_via(record, point, order)
                except ReferenceError:
                    skipped += 1
                    continue
                total += 1
                label = f"{record.name} d{order} at {point}"
                with numpy.errstate(all="ignore"):
                    ours = gradient_via(record, point, order)
                theirs = torch_derivatives(record, point, order)
                problem = mismatch(theirs, ref)
                if problem:
                    torch_bad += 1
                    torch_nonfinite += problem.startswith("non-finite")
                    worst.append((label, problem))
                problem = mismatch(ours, ref)
                if problem:
                    symgrad_bad += 1
                    symgrad_nonfinite += problem.startswith("non-finite")
                    if verbose:
                        print(f"symgrad wrong: {label}: {problem}")
    print(f"corpus: {len(CORPUS)} formulas, {total} (formula, point, order) cases"
          + (f", {skipped} without a reference" if skipped else ""))
    print(f"torch {torch.__version__} eager: {torch_bad} wrong "
          f"({torch_nonfinite} non-finite, {torch_bad - torch_nonfinite} inaccurate)")
    print(f"symgrad (stabilized): {symgrad_bad} wrong "
          f"({symgrad_nonfinite} non-finite, {symgrad_bad - symgrad_nonfinite} inaccurate)")
    formulas = sorted({label.split(" ")[0] for label, _ in worst})
    print(f"formulas where torch is wrong somewhere ({len(formulas)}): {', '.join(formulas)}")
    if verbose:
        for label, problem in worst:
            print(f"torch wrong: {label}: {problem[:160]}")


if __name__ == "__main__":
    main(verbose="--verbose" in sys.argv)
