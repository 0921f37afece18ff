"""The one IR between stages: a small DAG of tensor-level nodes.

A `Node` is either an input, an *elementwise region* (one SymPy expression over the symbols of
its leaf nodes, broadcast to the node's shape), or a *structural* op (reduction, matmul, movement)
whose forward and adjoint rule live in `symgrad.ops.structural`. A chain of elementwise ops is a
single region, so SymPy sees the whole per-element formula at once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, eq=False)
class Node:
    """One value of a traced program. Identity-hashed: two nodes are the same only if `is`."""

    op: str                              # "input", "elementwise" or a structural op name
    args: tuple["Node", ...]             # leaves (elementwise) or operands (structural)
    shape: tuple[int, ...] | None        # None in generic (shape-polymorphic) traces
    dtype: str                           # "float", "bool" or "int"
    name: str                            # unique within its trace; the symbol name of this value
    attrs: tuple[tuple[str, Any], ...] = ()   # structural op parameters, hashable and printable
    expr: Any = None                     # elementwise: SymPy expression over the leaves' symbols
    site: str | None = None              # "file.py:14": the user's line that created it
    index: int = 0                       # creation order: deterministic schedules

    def attr(self, key, default=None):
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def __repr__(self):
        return f"Node({self.op}, {self.name}, shape={self.shape})"


@dataclass(frozen=True)
class Param:
    """A structural op parameter supplied at run time (generic traces of built-in ops)."""

    name: str

    def __repr__(self):
        return self.name


@dataclass(frozen=True)
class Graph:
    """A traced program: inputs, outputs and the constants it was specialised on."""

    name: str                                      # what is traced, e.g. "Softplus"
    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    output_names: tuple[str, ...]
    constants: tuple[tuple[str, Any], ...] = ()   # non-tensor arguments: part of the cache key
    source: str = ""                               # "examples/softplus.py:Softplus"
    params: tuple[str, ...] = ()                   # run-time keyword parameters (built-in ops)
    generic: bool = False                          # shapes unknown at trace time
    returns_tuple: bool = True                     # the forward returned a tuple / list
    rewrites: tuple[str, ...] = ()                 # stabilizing rewrites applied while building it
    derivative_of: "Graph | None" = field(default=None, repr=False)
    arg_names: tuple[str, ...] = ()                # the forward's names of the inputs
    # source files besides the forward's own whose code ran while it was traced (helpers it
    # imports): the disk cache checks them; None when they could not be recorded
    deps: "tuple[str, ...] | None" = ()

    def root(self) -> "Graph":
        """The traced graph this one derives from (itself for a traced graph)."""
        g = self
        while g.derivative_of is not None:
            g = g.derivative_of
        return g

    def nodes(self) -> list[Node]:
        """Every node reachable from the outputs, in creation order (a valid schedule)."""
        seen: dict[int, Node] = {}
        stack = [o for o in self.outputs if o is not None]   # None: a gradient that is absent
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen[id(node)] = node
            stack.extend(node.args)
        for node in self.inputs:
            seen.setdefault(id(node), node)
        return sorted(seen.values(), key=lambda n: n.index)

    def fingerprint(self) -> str:
        """A canonical text of the whole graph: equal graphs give equal text."""
        from sympy import srepr

        lines = [f"graph {self.name} generic={self.generic} params={self.params}"]
        lines.append(f"constants {self.constants!r}")
        for node in self.nodes():
            args = ",".join(a.name for a in node.args)
            body = srepr(node.expr) if node.op == "elementwise" else repr(node.attrs)
            lines.append(f"{node.name}:{node.op}:{node.dtype}:{node.shape}({args}) {body}")
        lines.append("outputs " + ",".join(n.name for n in self.outputs))
        return "\n".join(lines)

    def __str__(self):
        from .emit.printers import formula_text

        return formula_text(self)

    # notebooks (Jupyter / IPython rich display): the formulas as Markdown or LaTeX
    def _repr_markdown_(self):
        from .emit.printers import formula_text

        title = f"**{self.name}**" + (f" (`{self.source}`)" if self.source else "")
        return f"{title}\n\n```\n{formula_text(self)}\n```\n"

    def _repr_latex_(self):
        from .emit.printers import formula_latex

        return f"$${formula_latex(self)}$$"
