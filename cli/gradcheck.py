"""gradcheck / gradgradcheck of a generated module, by central differences in float64.

Independent of the autograd runtime: it calls only the module's `forward`, `backward` and
`grad_module()`. For each point, the backward's vector-Jacobian product with a random
cotangent `v` is compared, entry by entry, with the central difference of `<v, forward(x)>`.
The second-order check runs the same test on `grad_module()`, whose forward is the backward.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy


@dataclass
class Report:
    """The outcome of one check: worst errors over every point and input."""

    order: int
    points: int = 0
    skipped: int = 0
    kinks: int = 0           # entries skipped: a random point within eps of a kink
    max_abs: float = 0.0
    max_rel: float = 0.0
    failures: list[str] = field(default_factory=list)
    # where the worst error is: (error, point index, 'grad_x[3]'); None before any entry
    worst: tuple | None = None
    # entries compared where the backward or the differences were not exactly 0: a check
    # whose every comparison was 0 == 0 (all-zero examples of x**3) checked nothing
    nonzero: int = 0

    @property
    def vacuous(self) -> bool:
        return self.points > 0 and self.nonzero == 0

    @property
    def ok(self) -> bool:
        return not self.failures and self.points > 0 and not self.vacuous


def _outputs(module, inputs):
    out = module.raw.forward(*inputs)
    return out if isinstance(out, tuple) else (out,)


def _pairing_change(outs, base, cotangents):
    """<v, f(x') - f(x)>: each output's change before the sum, so that a large output
    elsewhere (1/r**12 at a random r near 0) cannot swallow a small one's change."""
    total = 0.0
    for o, b, v in zip(outs, base, cotangents):
        if v is not None:
            change = numpy.asarray(o, dtype=numpy.float64) - numpy.asarray(b, dtype=numpy.float64)
            total += float(numpy.sum(change * v))
    return total


def check_module(module, inputs, order=1, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0,
                 skip_kinks=False) -> Report:
    """Check `module.backward` against central differences of `module.forward` at `inputs`.

    Args:
        module: a `CompiledModule`.
        inputs: float64 arrays (and constants) in the forward's order.
        order: recorded in the report (1: gradcheck, 2: gradgradcheck on a grad module).
        eps, atol, rtol: as torch.autograd.gradcheck.
        skip_kinks: for points nobody chose (random ones): an entry whose one-sided
            differences disagree (the forward is not differentiable there: clamp(y, -1, 1)
            at y = 1 + 1e-7) and whose backward matches one of them is counted in `kinks`,
            not failed.

    Returns:
        A `Report` for this one point.
    """
    report = Report(order)
    rng = numpy.random.default_rng(seed)
    inputs = [numpy.array(a, dtype=numpy.float64) if _is_float(a) else a for a in inputs]
    outs = _outputs(module, inputs)
    flags = list(module.differentiable_outputs) + [True] * (len(outs) - len(
        module.differentiable_outputs))
    if not all(numpy.all(numpy.isfinite(o)) for o, d in zip(outs, flags) if d):
        report.skipped += 1          # outside the forward's domain: nothing to compare
        return report
    cotangents = [rng.standard_normal(numpy.shape(o)) if d else None
                  for o, d in zip(outs, flags)]
    grads = module.raw.backward(*[c if c is not None else numpy.zeros(numpy.shape(o))
                                  for c, o in zip(cotangents, outs)], *inputs)
    # copies: an output may be an input itself (x -> x), which the loop below perturbs
    center = [numpy.array(o, dtype=numpy.float64) for o in outs]
    for i, (x, g) in enumerate(zip(inputs, grads)):
        if not _is_float(x):
            continue
        name = module.input_names[i] if i < len(module.input_names) else f"input {i}"
        numeric = numpy.zeros(numpy.shape(x))
        flat = x.reshape(-1)
        num_flat = numeric.reshape(-1)
        ups, downs = numpy.zeros(flat.size), numpy.zeros(flat.size)
        for k in range(flat.size):
            old = flat[k]
            flat[k] = old + eps
            up = _pairing_change(_outputs(module, inputs), center, cotangents)
            flat[k] = old - eps
            down = _pairing_change(_outputs(module, inputs), center, cotangents)
            flat[k] = old
            num_flat[k] = (up - down) / (2 * eps)
            ups[k], downs[k] = up, down   # relative to f(x): the center is 0
        if g is not None and numpy.shape(g) != numpy.shape(x):
            report.failures.append(f"grad_{name}: shape {numpy.shape(g)}, expected "
                                   f"{numpy.shape(x)}")
            continue
        # None is torch's "zero gradient" (the input does not reach a differentiable output)
        analytic = numpy.zeros(numpy.shape(x)) if g is None else numpy.asarray(
            g, dtype=numpy.float64)
        err = numpy.abs(analytic - numeric)
        bad = ~(err <= atol + rtol * numpy.abs(numeric))
        if bad.any() and skip_kinks:
            at_kink = _kinks(analytic.reshape(-1), ups, downs, 0.0,
                             eps, atol, rtol).reshape(bad.shape) & bad
            report.kinks += int(at_kink.sum())
            bad &= ~at_kink
            err = numpy.where(at_kink, 0.0, err)      # not counted in the worst errors
        report.nonzero += int(numpy.count_nonzero((analytic != 0) | (numeric != 0)))
        if err.size:
            flat_err = numpy.nan_to_num(err.reshape(-1), nan=numpy.inf)
            at = int(numpy.argmax(flat_err))
            entry = f"grad_{name}[{_index(at, numpy.shape(x))}]"
            if report.worst is None or flat_err[at] > report.worst[0]:
                report.worst = (float(flat_err[at]), None, entry)
            worst = float(numpy.max(err)) if not numpy.isnan(err).any() else float("inf")
            report.max_abs = max(report.max_abs, worst)
            rel = err / numpy.maximum(numpy.abs(numeric), 1e-12)
            report.max_rel = max(report.max_rel, float(numpy.nan_to_num(numpy.max(rel),
                                                                         nan=numpy.inf)))
        if bad.any():
            k = int(numpy.argmax(bad.reshape(-1)))
            report.failures.append(
                f"grad_{name}[{_index(k, numpy.shape(x))}]: backward "
                f"{analytic.reshape(-1)[k]:.6g}, finite differences {numeric.reshape(-1)[k]:.6g}")
    report.points = 1
    return report


def _index(k, shape) -> str:
    """Flat index k in `shape` as 'i, j' (a 0-d input: '')."""
    return ", ".join(str(int(i)) for i in numpy.unravel_index(k, shape)) if shape else ""


def _kinks(analytic, ups, downs, center, eps, atol, rtol):
    """Entries where the forward has a kink within eps: the one-sided differences disagree and
    the backward equals one of them (torch's convention picks a side)."""
    right = (ups - center) / eps
    left = (center - downs) / eps

    def close(a, b):
        return numpy.abs(a - b) <= 10 * (atol + rtol * numpy.maximum(numpy.abs(a), numpy.abs(b)))

    return ~close(left, right) & (close(analytic, left) | close(analytic, right))


def merge(reports) -> Report:
    """One report over several points."""
    reports = list(reports)
    out = Report(reports[0].order if reports else 1)
    for i, r in enumerate(reports):
        out.points += r.points
        out.skipped += r.skipped
        out.kinks += r.kinks
        out.nonzero += r.nonzero
        out.max_abs = max(out.max_abs, r.max_abs)
        out.max_rel = max(out.max_rel, r.max_rel)
        out.failures.extend(f"at point {i}: {line}" for line in r.failures)
        if r.worst is not None and (out.worst is None or r.worst[0] > out.worst[0]):
            out.worst = (r.worst[0], i, r.worst[2])
    return out


# Where random points are drawn when the example's own neighbourhood is not in the forward's
# domain (or there is no example): signed, positive, inside (0, 1) (a probability).
RANGES = ((-1.5, 1.5), (0.2, 1.5), (0.05, 0.95))


def finite_forward(module, point) -> bool:
    """Whether the forward runs at `point` and every output is finite there."""
    try:
        with numpy.errstate(all="ignore"):
            outs = _outputs(module, point)
    except Exception:  # noqa: BLE001 - not a point to check at
        return False
    return all(numpy.all(numpy.isfinite(numpy.asarray(o, dtype=numpy.float64))) for o in outs)


def draw_points(module, base, n, rng, around=True):
    """`n` random points that exercise the forward: (points, skipped), where skipped counts
    the draws outside the forward's domain (not finite there), which are reported.

    `around`: near the example point `base` first, its entries moved by 20 % of their size
    with their signs kept (a domain like x > 0 stays), and by uniform(-0.5, 0.5) where an entry
    is 0 (all-zero examples, np.zeros(1000), would give n copies of one point: a check that
    checks nothing); then the RANGES. Without examples, the RANGES only. Non-float inputs
    (an index) are kept as they are."""
    points, skipped = [], 0
    for k in range(n):
        candidates = []
        if around:
            candidates.append(lambda a: numpy.where(
                a != 0, a * (1 + 0.2 * rng.uniform(-1, 1, numpy.shape(a))),
                rng.uniform(-0.5, 0.5, numpy.shape(a))))
        for lo, hi in RANGES[k % 2:] + RANGES[:k % 2]:
            candidates.append(lambda a, lo=lo, hi=hi: rng.uniform(lo, hi, numpy.shape(a)))
        for draw in candidates:
            point = [draw(numpy.asarray(a, dtype=numpy.float64)) if _is_float(a) else a
                     for a in base]
            if finite_forward(module, point):
                points.append(point)
                break
            skipped += 1
    return points, skipped


def describe_point(module, point, limit=6) -> str:
    """'x = [0.1, ...], y = 2.0': the float inputs of a point, short."""
    parts = []
    for name, a in zip(module.input_names, point):
        if _is_float(a) or hasattr(a, "shape"):
            text = numpy.array2string(numpy.asarray(a), precision=4, threshold=limit,
                                      edgeitems=2, separator=", ")
            parts.append(f"{name} = {' '.join(text.split())}")
    return "; ".join(parts)


def gradcheck(module, points, random_from=None, **tols) -> Report:
    """First order at every point; points from index `random_from` on are random ones
    (entries at a kink there are skipped, see `check_module`)."""
    first = len(points) if random_from is None else random_from
    return merge(check_module(module, p, 1, seed=i, skip_kinks=i >= first, **tols)
                 for i, p in enumerate(points))


def gradgradcheck(module, points, random_from=None, **tols) -> Report:
    """Second order: the grad module's backward against differences of its forward (the
    first-order backward), at each point with a random first-order cotangent."""
    grad = module.grad_module()
    first = len(points) if random_from is None else random_from
    reports = []
    for i, p in enumerate(points):
        rng = numpy.random.default_rng(1000 + i)
        p = [numpy.array(a, dtype=numpy.float64) if _is_float(a) else a for a in p]
        outs = _outputs(module, p)
        cot = [rng.standard_normal(numpy.shape(o)) for o in outs]
        reports.append(check_module(grad, [*cot, *p], 2, seed=2000 + i,
                                    skip_kinks=i >= first, **tols))
    return merge(reports)


def _is_float(a) -> bool:
    dtype = getattr(a, "dtype", None)
    if dtype is None:
        return False          # Python numbers are constants of the trace, not inputs
    return numpy.issubdtype(numpy.dtype(str(dtype)), numpy.floating)


def check(module, *inputs, second_order=True, points=3, seed=0, out=print) -> bool:
    """gradcheck (and gradgradcheck) at `inputs` and at points around it; prints a summary.

    `inputs` are the forward's arguments as given to `sg.compile` (constants are skipped).
    Points around the example keep each entry's sign, so they stay in the forward's domain.
    """
    base = [numpy.asarray(getattr(a, "numpy", lambda: a)(), dtype=numpy.float64)
            for a in inputs if hasattr(a, "shape") and hasattr(a, "dtype")]
    rng = numpy.random.default_rng(seed)
    drawn, outside = draw_points(module, base, points, rng)
    all_points = [base] + drawn
    reports = [gradcheck(module, all_points, random_from=1)]
    if second_order:
        reports.append(gradgradcheck(module, all_points, random_from=1))
    for r in reports:
        for line in summary(r, module, all_points, outside=outside, random_from=1):
            out(line)
    return all(r.ok for r in reports)


def summary(report, module, points, label="", outside=0, random_from=0) -> list:
    """The lines that report a check: its status and worst errors, the draws skipped outside
    the forward's domain, the point of the worst error, the failures (each at its point)."""
    what = "gradcheck" if report.order == 1 else "gradgradcheck"
    status = "FAILED" if report.failures or report.points == 0 else \
        "NOT CHECKED" if report.vacuous else "ok"
    label = f" {label}" if label else ""
    skipped = f", {report.skipped} skipped (not finite)" if report.skipped else ""
    if outside:
        skipped += f", {outside} random draw{'s' if outside != 1 else ''} outside the " \
                   "forward's domain skipped"
    if report.kinks:
        skipped += f", {report.kinks} entr{'y' if report.kinks == 1 else 'ies'} skipped " \
                   "(random point at a kink)"
    lines = [f"{what}{label}: {status}  max abs error {report.max_abs:.2e}, max rel error "
             f"{report.max_rel:.2e} over {report.points} point(s){skipped}"]
    if report.vacuous:
        lines.append("    every derivative compared was exactly 0 at every point: nothing was "
                     "checked; give example inputs where the forward is not flat (or more "
                     "--points)")
    if report.worst is not None and report.worst[1] is not None and report.points:
        i = report.worst[1]
        kind = "the example" if i < random_from else "random"
        lines.append(f"    worst: {report.worst[2]} at point {i} ({kind}): "
                     f"{describe_point(module, points[i])}")
    lines += [f"    {line}" for line in report.failures[:10]]
    if report.points == 0:
        lines.append("    no point where the forward is finite; pass example_inputs or --shape")
    return lines
