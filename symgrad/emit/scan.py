"""Emitting a scan as a loop: one module-level function per distinct loop body.

A `scan` node prints as a call `_scan_<key>(operands..., dtype)`; the function it calls is
generated here from the body's optimized routine: a `for` loop over the steps around the
body's statements (with their provenance comments), writing the ys and the saved carries
straight into the packed result. Its size does not depend on the number of steps. The NumPy
module and the C target's Python loader paste the functions their code calls
(`scan_helpers`), nested loops included.
"""
from __future__ import annotations

import re

from ..scan_rules import NUMPY_CALL, layout
from .statements import numpy_lines, pair_sigmoids

_DEFS: dict[str, str] = {}     # helper name -> its text
NODES: dict[str, object] = {}  # helper name -> a scan node it prints (the jax target's loops)
_CALL = re.compile(r"(?<![\w.])(_scan_[0-9a-f]{12})\(")


def numpy_call(node, args) -> str:
    name = helper_name(node)
    NODES[name] = node
    if name not in _DEFS:
        _DEFS[name] = _define(name, node)
    return f"{name}({', '.join(args)}, dtype)"


def helper_name(node) -> str:
    body = node.attr("body")
    tag = f"{body.key}{node.attr('length')}{int(node.attr('reverse'))}{int(node.attr('hist'))}"
    import hashlib

    return "_scan_" + hashlib.sha1(tag.encode()).hexdigest()[:12]


def scan_helpers(source: str) -> list[str]:
    """The texts of the scan functions `source` calls, nested ones first."""
    order: list[str] = []
    seen: set = set()

    def visit(text):
        for name in _CALL.findall(text):
            if name in seen or name not in _DEFS:
                continue
            seen.add(name)
            visit(_DEFS[name])
            order.append(name)

    visit(source)
    return [_DEFS[n] for n in order]


def _define(name, node) -> str:
    from ..optimize import optimize

    body = node.attr("body")
    T, reverse, hist = node.attr("length"), node.attr("reverse"), node.attr("hist")
    k, m = body.n_carry, body.n_x
    graph = body.with_history() if hist else body.graph
    routine = pair_sigmoids(optimize(graph, name))
    # no copies of values that are returned: the loop never writes into an array it did not
    # make (ys and saved carries are copied into the result, carries are only rebound)
    lines = numpy_lines(routine, copy_all=False, outputs=())
    args = list(routine.args)
    carries, xs, consts = args[:k], args[k:k + m], args[k + m:]
    parts, size = layout(body, T, hist)
    xs_all = [f"_xs_{x}" for x in xs]
    signature = ", ".join(carries + xs_all + consts + ["dtype"])
    from .printers import formula_lines
    from .render import py_comment, py_doc

    site = f"  # sg.scan at {py_comment(node.site)}" if node.site else ""
    order = f"range({T} - 1, -1, -1)" if reverse else f"range({T})"
    out = [f"def {name}({signature}):{site}",
           f'    """A loop of {T} steps{", last to first" if reverse else ""}, the body '
           "traced once.",
           "",
           "    Returns one vector: the final carries, the stacked ys"
           + (", the carries entering each step (saved for the backward)." if hist else "."),
           "",
           f"    One step ({body!r} of the graph's docstring), per-step values:",
           ""]
    out += [f"        {py_doc(line)}" for line in formula_lines(graph)]
    out += ['    """',
           f"    _out = numpy.empty({size}, dtype=dtype)"]
    returns = list(routine.returns)
    stacked = []
    for j, (offset, shape) in enumerate(parts[k:]):
        n = 1
        for s in shape:
            n *= s
        stacked.append(f"_ys{j}")
        out.append(f"    _ys{j} = _out[{offset}:{offset + n}].reshape({shape!r})")
    out.append(f"    for _t in {order}:")
    for x, full in zip(xs, xs_all):
        out.append(f"        {x} = {full}[_t]")
    for target, code, comment in lines:
        out.append(f"        {target} = {code}" + (f"  # {py_comment(comment)}" if comment else ""))
    for j, name_y in enumerate(returns[k:]):
        out.append(f"        {stacked[j]}[_t] = {name_y}")
    if carries:
        out.append(f"        {', '.join(carries)}, = {', '.join(returns[:k])},")
    for i, c in enumerate(carries):
        offset, shape = parts[i]
        n = 1
        for s in shape:
            n *= s
        out.append(f"    _out[{offset}:{offset + n}] = numpy.ravel({c})")
    out.append("    return _out")
    return "\n".join(out) + "\n"


NUMPY_CALL[0] = numpy_call   # the scan op's NumPy printer (scan_rules.Scan.numpy)
