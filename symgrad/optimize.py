"""Stage 3 — optimize: stabilizing rewrites, then one common-subexpression elimination across
every elementwise expression of a routine (forward recompute and all gradients share temps).

The result, a `Routine`, is exactly what the emitters read: an ordered list of steps over
final variable names. Temporaries are placed just before their first use, so every target can
evaluate the steps top to bottom.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import sympy

from .graph import Graph, Node
from .ops.structural import STRUCTURAL
from .trace import symbol_of


@dataclass(frozen=True)
class Step:
    """One assignment. `node` is None for a CSE temporary."""

    target: str
    expr: object = None            # SymPy expression over variable names (elementwise / temp)
    node: Node | None = None       # the graph node computed (None for temps)


@dataclass
class Routine:
    """One generated function (forward, or backward) after optimization."""

    name: str
    graph: Graph
    args: tuple[str, ...]
    params: tuple[str, ...]
    steps: list[Step]
    returns: tuple[str | None, ...]
    names: dict[int, str]                     # id(node) -> variable name
    ops_before: int = 0
    ops_after: int = 0
    rewrites: tuple[str, ...] = ()
    timings: dict = field(default_factory=dict)

    def name_of(self, node):
        return self.names[id(node)]


def schedule(graph: Graph) -> list[Node]:
    """The nodes the outputs need, in creation order. An operand read only for its shape is
    not needed when that shape is known at compile time."""
    needed: dict[int, Node] = {}
    stack = [n for n in graph.outputs if n is not None]
    while stack:
        node = stack.pop()
        if id(node) in needed:
            continue
        needed[id(node)] = node
        rule = STRUCTURAL.get(node.op)
        free = node.expr.free_symbols if node.op == "elementwise" and node.shape is not None \
            else None   # computed once per node: free_symbols walks the whole expression
        for i, arg in enumerate(node.args):
            if rule is not None and i in rule.shape_args and arg.shape is not None:
                continue
            if free is not None and symbol_of(arg) not in free:
                continue
            stack.append(arg)
    return sorted(needed.values(), key=lambda n: n.index)


def _stabilize(expr):
    try:
        from .rewrites import stabilize
    except ImportError:  # pragma: no cover - the rewrites module ships with the package
        return expr, ()
    return stabilize(expr)


def optimize(graph: Graph, name: str, cse: bool = True) -> Routine:
    """Rewrite, CSE and order one routine of `graph`."""
    t0 = time.perf_counter()
    nodes = schedule(graph)
    names: dict[int, str] = {}
    for node in graph.inputs:
        names[id(node)] = node.name
    for node, out_name in zip(graph.outputs, graph.output_names):
        if node is not None and id(node) not in names:
            names[id(node)] = out_name
    k = 0
    for node in nodes:
        if id(node) not in names:
            names[id(node)] = f"v{k}"
            k += 1
    rename = {symbol_of(n): _var(names[id(n)], n) for n in nodes + list(graph.inputs)
              if id(n) in names}

    exprs, owners, fired = [], [], []
    for node in nodes:
        if node.op != "elementwise":
            continue
        expr, names_fired = _stabilize(node.expr)
        for r in names_fired:
            if r not in fired:
                fired.append(r)
        exprs.append(expr.xreplace(rename))
        owners.append(node)
    t1 = time.perf_counter()

    ops_before = _count(exprs)
    if cse and exprs:
        temps, reduced = sympy.cse(exprs, symbols=_temp_symbols(), order="canonical",
                                   ignore=())
    else:
        temps, reduced = [], list(exprs)
    ops_after = _count([e for _, e in temps]) + _count(reduced)
    t2 = time.perf_counter()

    # place each temp right before the first step that needs it (directly or through temps)
    position = {id(n): i for i, n in enumerate(nodes)}
    node_expr = {id(n): e for n, e in zip(owners, reduced)}
    first_use: dict = {}
    for n, e in zip(owners, reduced):
        for s in e.free_symbols:
            first_use[s] = min(first_use.get(s, 1 << 30), position[id(n)])
    for sym, e in reversed(temps):
        for s in e.free_symbols:
            if sym in first_use:
                first_use[s] = min(first_use.get(s, 1 << 30), first_use[sym])
    steps: list[Step] = []
    pending = list(temps)
    for i, node in enumerate(nodes):
        if node.op == "input":
            continue
        ready = [(s, e) for s, e in pending if first_use.get(s, 1 << 30) <= i]
        pending = [(s, e) for s, e in pending if first_use.get(s, 1 << 30) > i]
        steps.extend(Step(str(s), e) for s, e in ready)
        steps.append(Step(names[id(node)], node_expr.get(id(node)), node))
    t3 = time.perf_counter()
    return Routine(name=name, graph=graph, args=tuple(names[id(n)] for n in graph.inputs),
                   params=graph.params, steps=steps,
                   returns=tuple(None if n is None else names[id(n)] for n in graph.outputs),
                   names=names, ops_before=ops_before, ops_after=ops_after,
                   rewrites=tuple(dict.fromkeys(graph.rewrites + tuple(fired))),
                   timings={"stabilize": t1 - t0, "cse": t2 - t1, "schedule": t3 - t2})


def _var(name, node):
    if node.dtype == "int":
        return sympy.Symbol(name, integer=True)
    if node.dtype == "bool":
        return sympy.Symbol(name)
    return sympy.Symbol(name, real=True)


def _temp_symbols():
    k = 0
    while True:
        yield sympy.Symbol(f"t{k}")
        k += 1


def _count(exprs):
    return int(sum(sympy.count_ops(e) for e in exprs))
