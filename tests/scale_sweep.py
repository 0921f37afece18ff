"""Scale sweep (issue 26): every formula of ``corpus.CORPUS`` at its points scaled by 10**k,
k in +-(1, 10, 30, 60, 100, 150), first and second order, compared with torch eager (float64)
and the mpmath reference of the un-rewritten formula.

The contract is "never worse than torch": wherever torch's derivative is finite and correct
(within the corpus tolerance of the mpmath reference), symgrad's must be too. Each case is
classified as

- ``both``: torch and symgrad correct;
- ``symgrad_only``: symgrad correct, torch not (nan / inf / inaccurate);
- ``neither``: both wrong (or the reference is not finite: outside any contract);
- ``torch_only``: torch correct and symgrad not: a defect, the sweep's failures;
- ``no_reference``: torch finite but the reference could not be trusted (not judged).

``python tests/scale_sweep.py`` prints the per-formula table of docs/numerics-at-scale.md.
"""
from __future__ import annotations

import functools
import math
import os
import sys
from types import SimpleNamespace

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from corpus import CORPUS, Formula  # noqa: E402

EXPONENTS = (-150, -100, -60, -30, -10, -1, 1, 10, 30, 60, 100, 150)


def torch_namespace() -> SimpleNamespace:
    import torch

    def lift(fn):   # sqrt(2) in a formula: torch's functions take tensors only
        return lambda v: fn(torch.as_tensor(v, dtype=torch.float64))

    return SimpleNamespace(exp=lift(torch.exp), log=lift(torch.log), sqrt=lift(torch.sqrt),
                           tanh=lift(torch.tanh), cosh=lift(torch.cosh), erf=lift(torch.erf),
                           abs=lift(torch.abs), pi=math.pi, where=torch.where)


def torch_derivative(record: Formula, point, order: int) -> numpy.ndarray:
    """torch eager's float64 gradient (order 1) or Hessian (order 2) at ``point``."""
    import torch

    ns = torch_namespace()
    xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in point]
    out = record.fn(ns, *xs)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        return numpy.zeros((len(xs),) * order)
    grads = torch.autograd.grad(out, xs, create_graph=order == 2, allow_unused=True)
    grads = [torch.zeros((), dtype=torch.float64) if g is None else g for g in grads]
    if order == 1:
        return numpy.array([float(g) for g in grads])
    rows = []
    for g in grads:
        if not g.requires_grad:
            rows.append([0.0] * len(xs))
            continue
        row = torch.autograd.grad(g, xs, retain_graph=True, allow_unused=True)
        rows.append([0.0 if r is None else float(r) for r in row])
    return numpy.array(rows)


def scaled_points(record: Formula, exponents=EXPONENTS):
    """(k, point * 10**k) for each corpus point and k, without repeats (0 scales to 0)."""
    seen = set()
    for k in exponents:
        for point in record.points:
            p = tuple(float(v) * 10.0 ** k for v in point)
            if p in seen or not all(math.isfinite(v) for v in p):
                continue
            seen.add(p)
            yield k, p


def _close(got, ref, rtol, atol_scale):
    atol = atol_scale * max(1.0, float(numpy.max(numpy.abs(ref))))
    return bool(numpy.all(numpy.isfinite(got))
                and numpy.all(numpy.abs(got - ref) <= rtol * numpy.abs(ref) + atol))


def classify(record: Formula, point, order: int) -> tuple[str, str]:
    """(category, detail) of one case; see the module docstring."""
    from test_numerics_corpus import ATOL_SCALE, RTOL, gradient_via, reference_via

    from symgrad.numerics_reference import ReferenceError

    with numpy.errstate(all="ignore"):
        t = torch_derivative(record, point, order)
        s = gradient_via(record, point, order)
    if not numpy.all(numpy.isfinite(t)):
        # torch is not finite: nothing to be "never worse" than; the reference is only
        # computed to credit symgrad where it is finite
        if not numpy.all(numpy.isfinite(s)):
            return "neither", f"torch {t}, symgrad {s}"
        try:
            ref = reference_via(record, point, order)
        except ReferenceError:
            return "neither", "no reference"
        if numpy.all(numpy.isfinite(ref)) and _close(s, ref, RTOL, ATOL_SCALE):
            return "symgrad_only", f"torch {t}"
        return "neither", f"torch {t}, symgrad {s}, reference {ref}"
    try:
        ref = reference_via(record, point, order)
    except ReferenceError as exc:
        return "no_reference", str(exc)[:80]
    if not numpy.all(numpy.isfinite(ref)):
        return "neither", f"reference {ref}"
    torch_ok = _close(t, ref, RTOL, ATOL_SCALE)
    sg_ok = _close(s, ref, RTOL, ATOL_SCALE)
    if torch_ok and sg_ok:
        return "both", ""
    if sg_ok:
        return "symgrad_only", f"torch {t}, reference {ref}"
    if torch_ok:
        return "torch_only", f"symgrad {s}, torch {t}, reference {ref}"
    return "neither", f"torch {t}, symgrad {s}, reference {ref}"


def cases(records=CORPUS, exponents=EXPONENTS):
    for record in records:
        for order in (1, 2) if record.second_order else (1,):
            for k, point in scaled_points(record, exponents):
                yield record, order, k, point


@functools.cache
def run_case(name: str, order: int, point: tuple) -> tuple[str, str]:
    record = next(r for r in CORPUS if r.name == name)
    return classify(record, point, order)


def table(records=CORPUS, exponents=EXPONENTS) -> str:
    """The markdown table: per formula and order, per scale exponent, the counts as
    'both / symgrad only / torch only' (torch only must be 0)."""
    rows = ["| formula | order | " + " | ".join(f"1e{k:+d}" for k in exponents) + " |",
            "|---|---|" + "---|" * len(exponents)]
    totals: dict[str, int] = {}
    failures = []
    for record in records:
        for order in (1, 2) if record.second_order else (1,):
            cells = []
            for k in exponents:
                counts: dict[str, int] = {}
                for kk, point in scaled_points(record, (k,)):
                    cat, detail = run_case(record.name, order, point)
                    counts[cat] = counts.get(cat, 0) + 1
                    totals[cat] = totals.get(cat, 0) + 1
                    if cat == "torch_only":
                        failures.append((record.name, order, point, detail))
                n = sum(counts.values())
                cells.append(f"{counts.get('both', 0)}/{counts.get('symgrad_only', 0)}"
                             f"/{counts.get('torch_only', 0)}" if n else "-")
            rows.append(f"| {record.name} | {order} | " + " | ".join(cells) + " |")
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(totals.items()))
    text = "\n".join(rows) + f"\n\nTotals: {summary}\n"
    if failures:
        text += "\nTorch correct, symgrad not:\n" + "\n".join(
            f"- {n} order {o} at {p}: {d}" for n, o, p, d in failures) + "\n"
    return text


if __name__ == "__main__":
    os.environ.setdefault("SYMGRAD_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..",
                                                            ".sgcache"))
    names = sys.argv[1:]
    recs = [r for r in CORPUS if not names or r.name in names]
    print(table(recs))
