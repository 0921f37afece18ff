"""sg.scan in the torch and jax targets: one loop function per distinct loop body.

- **torch**: (its loop functions are emit/torch_lines.py's, with the torch lines that print
  their body) as in the NumPy module (emit/scan.py), a Python `for` over the steps around the
  body's statements printed for torch (`torch_lines`, with the in-place pass on each
  statement's own temporaries), writing the stacked ys, the saved carries and the final
  carries into one preallocated tensor on the inputs' device and dtype. Carries are only
  rebound, never written into; an in-place step writes only into a temporary of its own
  statement. When torch's autograd records (double_backward="torch"), the function runs
  `_<name>_recorded`, the same loop without in-place steps.
- **jax**: `jax.lax.scan` over a nested step function holding the body's statements; the
  closed-over values are read through its closure, so the loop is traced once by jit, and
  vmap / grad see one scan.

Both return the scan's packed value (final carries, stacked ys, stacked saved carries; see
scan_rules.layout), read by the `scan_part` steps around the call. Their size does not depend
on the number of steps. This module holds what both share (the loop's layout, docstring and
optimized body) and the jax loops.
"""
from __future__ import annotations

import re

from ..errors import CompileError
from ..optimize import optimize
from ..scan_rules import layout
from .framework_text import _jax_line
from .printers import formula_lines
from .render import py_comment, py_doc
from .scan import NODES as _NODES
from .statements import numpy_lines, pair_sigmoids

_JAX_DEFS: dict[str, str] = {}     # loop name -> its jax text
CALL = re.compile(r"(?<![\w.])(_scan_[0-9a-f]{12})\(")


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _parts(node):
    body = node.attr("body")
    return layout(body, node.attr("length"), node.attr("hist"))


def _docstring(node, graph, indent="    "):
    T, reverse = node.attr("length"), node.attr("reverse")
    body = node.attr("body")
    out = [(f'{indent}"""A loop of {T} steps{", last to first" if reverse else ""}, the body '
            "traced once."),
           "",
           f"{indent}Returns one vector: the final carries, the stacked ys"
           + (", the carries entering each step (saved for the backward)."
              if node.attr("hist") else "."),
           "",
           f"{indent}One step ({body!r} of the graph's docstring), per-step values:",
           ""]
    out += [f"{indent}    {py_doc(line)}" for line in formula_lines(graph)]
    out.append(f'{indent}"""')
    return out


def _routine(node, name):
    body = node.attr("body")
    graph = body.with_history() if node.attr("hist") else body.graph
    return graph, optimize(graph, name)


# --------------------------------------------------------------------------- jax
def jax_scan_helpers(source: str) -> list[str]:
    """The jax texts of the loop functions `source` calls (NumPy-printed scan calls), nested
    ones first."""
    def define(name):
        hit = _JAX_DEFS.get(name)
        if hit is None:
            node = _NODES.get(name)
            if node is None:
                raise CompileError(f"target jax: the loop {name} was not printed by this "
                                   "process (internal)")
            hit = _JAX_DEFS[name] = _jax_define(name, node)
        return hit

    order, seen = [], set()

    def visit(text):
        for name in CALL.findall(text):
            if name in seen:
                continue
            seen.add(name)
            visit(define(name))
            order.append(name)

    visit(source)
    return [_JAX_DEFS[n] for n in order]


def _jax_define(name, node) -> str:
    graph, routine = _routine(node, name)
    routine = pair_sigmoids(routine)
    lines = numpy_lines(routine, copy_all=False, outputs=())
    body = node.attr("body")
    k, m = body.n_carry, body.n_x
    T, reverse = node.attr("length"), node.attr("reverse")
    args = list(routine.args)
    carries, xs, consts = args[:k], args[k:k + m], args[k + m:]
    params = carries + [f"_xs_{x}" for x in xs] + consts
    parts, _ = _parts(node)
    site = f"  # sg.scan at {py_comment(node.site)}" if node.site else ""
    out = [f"def {name}({', '.join(params + ['dtype'])}):{site}"] + _docstring(node, graph)
    out.append("    def _step(_carry, _x):")
    if carries:
        out.append(f"        {', '.join(carries)}, = _carry")
    if xs:
        out.append(f"        {', '.join(xs)}, = _x")
    for target, code, comment in lines:
        out.append(f"        {target} = {_jax_line(code)}"
                   + (f"  # {py_comment(comment)}" if comment else ""))
    returns = list(routine.returns)
    # the carry keeps its shape and dtype across steps (lax.scan checks it); a y has its
    # step's shape (a number or a broadcast value is made a full array)
    new = [f"_full({r}, {parts[i][1]!r}, dtype)" for i, r in enumerate(returns[:k])]
    ys = [f"_full({y}, {parts[k + j][1][1:]!r}, dtype)" for j, y in enumerate(returns[k:])]
    out.append(f"        return ({' '.join(c + ',' for c in new)}), "
               f"({' '.join(y + ',' for y in ys)})")
    init = " ".join(f"_full({c}, {parts[i][1]!r}, dtype)," for i, c in enumerate(carries))
    xs_text = " ".join(f"_xs_{x}," for x in xs)
    out.append(f"    _carry, _ys = jax.lax.scan(_step, ({init}), ({xs_text}), length={T}, "
               f"reverse={bool(reverse)})")
    out.append("    return jnp.concatenate([jnp.ravel(v) for v in _carry + _ys] + "
               "[jnp.zeros(0, dtype)])")
    return "\n".join(out) + "\n"


JAX_FULL = '''\
def _full(v, shape, dtype):
    """v as an array of shape and dtype (a loop's carry keeps both across steps)."""
    return jnp.broadcast_to(jnp.asarray(v, dtype), shape)
'''
