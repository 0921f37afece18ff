"""The C target's native loops: a scan whose body is one C segment runs entirely in C.

The body's optimized routine is planned as any routine (`c.plan`); when all of it is one
segment of static shapes (elementwise work in fused loops, reductions, small matmuls, views),
that segment becomes a C function of its own, and a second C function runs the loop: per step
it calls the segment with pointers to the carries (two buffers per carry, swapped each step),
to row t of each x, to the closed-over values, and to row t of each y in the packed result;
then writes the final carries. One ctypes call from the loader runs all T steps. Any other
body (a large matmul, a nested loop) keeps the loader's Python loop over NumPy statements
(`symgrad/emit/scan.py`).
"""
from __future__ import annotations

from ..optimize import optimize
from ..scan_rules import layout
from .c_plan import plan
from .c_segment import _SegmentWriter
from .render import c_comment
from .scan import helper_name


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def native_scan(node, printer):
    """(C routine context for the kernels file, loop function name, number of pointer
    arguments, scratch bytes) for a scan node whose body is one C segment; None otherwise."""
    body = node.attr("body")
    T, reverse, hist = node.attr("length"), node.attr("reverse"), node.attr("hist")
    graph = body.with_history() if hist else body.graph
    name = "c" + helper_name(node)[1:]       # cscan_<hash>: not the NumPy helper's name
    routine = optimize(graph, f"{name}_body")
    if len(set(routine.returns)) != len(routine.returns) or None in routine.returns:
        return None
    items, shapes, dtypes = plan(routine)
    if len(items) != 1 or items[0][0] != "c" or items[0][1].leaves is not None:
        return None
    seg = items[0][1]
    if set(seg.outputs) != set(routine.returns):
        return None
    ctx = _SegmentWriter(seg, routine, shapes, dtypes, printer, 0).run()
    if max((_numel(sh) for sh in shapes.values() if sh is not None), default=0) < (1 << 16):
        # small steps: entering an OpenMP region once a step (even one its if() keeps on one
        # thread) costs more than the step: RK4, 64 steps, fwd+bwd on 2 threads 229 -> 128 us
        ctx["body"] = [line.replace("#if SYMGRAD_THREADS > 1", "#if 0  /* one thread: a "
                                    "loop step is too small for a parallel region */")
                       for line in ctx["body"]]
    ftype = printer.float_type
    ctype = {"float": ftype, "int": "int64_t", "bool": "unsigned char"}
    k, m = body.n_carry, body.n_x
    args = list(routine.args)
    parts, size = layout(body, T, hist)

    numel = _numel

    params = ["char *restrict scratch"] if ctx["scratch"] else []
    for i, a in enumerate(args):
        params.append(f"const {ctype[dtypes[a]]} *restrict in_{i}")
    params.append(f"{ftype} *restrict out")
    lines = [f"/* {T} steps{', last to first' if reverse else ''}: {ctx['name']} once a step */"]
    total = sum(numel(shapes[a]) for a in args[:k])
    lines.append(f"{ftype} *const carry = ({ftype} *)malloc(sizeof({ftype}) * "
                 f"{max(2 * total, 1)});")
    offset = 0
    for i, a in enumerate(args[:k]):
        n = numel(shapes[a])
        lines.append(f"const {ftype} *cur_{i} = in_{i};")
        lines.append(f"{ftype} *next_{i} = carry + {offset};")
        lines.append(f"{ftype} *spare_{i} = carry + {offset + total};")
        offset += n
    lines.append(f"for (int64_t s = 0; s < {T}; ++s) {{")
    lines.append(f"    const int64_t t = {f'{T - 1} - s' if reverse else 's'};")
    index = {a: i for i, a in enumerate(args)}
    call = ["scratch"] if ctx["scratch"] else []
    for a in seg.inputs:
        i = index[a]
        if i < k:
            call.append(f"cur_{i}")
        elif i < k + m:
            call.append(f"in_{i} + t * {numel(shapes[a])}")
        else:
            call.append(f"in_{i}")
    returns = list(routine.returns)
    for r in seg.outputs:
        j = returns.index(r)
        if j < k:
            call.append(f"next_{j}")
        else:
            o, shape = parts[j]
            call.append(f"out + {o} + t * {numel(shape[1:])}")
    lines.append(f"    {ctx['name']}({', '.join(call)});")
    for i in range(k):
        lines.append(f"    {{ {ftype} *done = next_{i}; next_{i} = (cur_{i} == in_{i}) ? "
                     f"spare_{i} : ({ftype} *)cur_{i}; cur_{i} = done; }}")
    lines.append("}")
    for i in range(k):
        o, shape = parts[i]
        lines.append(f"for (int64_t e = 0; e < {numel(shape)}; ++e) out[{o} + e] = cur_{i}[e];")
    lines.append("free(carry);")
    loop = {"name": name, "params": ", ".join(params), "steps": f"the loop of {name}",
            "body": lines, "scratch": ctx["scratch"], "kernels": []}
    site = f" at {c_comment(node.site)}" if node.site else ""
    c_routine = {"name": name, "doc_title": f"sg.scan{site}: a loop of {T} steps, its body one "
                 "C segment",
                 "formulas": [], "segments": [ctx, loop]}
    operands = [(a, shapes[a], dtypes[a]) for a in args]
    return c_routine, name, len(params), ctx["scratch"], operands, size
