"""The one IR between stages: a small DAG of tensor-level nodes.

A `Node` is either an input, an *elementwise region* (one SymPy expression over the symbols of
its leaf nodes, broadcast to the node's shape), or a *structural* op (reduction, matmul, movement)
whose forward and adjoint rule live in `symgrad.ops.structural`. A chain of elementwise ops is a
single region, so SymPy sees the whole per-element formula at once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .ops import Param  # noqa: F401  (moved to ops/__init__.py; re-exported)


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
class Graph:
    """A traced program: inputs, outputs and the constants it was specialised on."""

    name: str                                      # what is traced, e.g. "Softplus"
    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    output_names: tuple[str, ...]
    constants: tuple[tuple[str, Any], ...] = ()   # non-tensor arguments: part of the cache key
    source: str = ""                               # "examples/softplus.py:Softplus"
    params: tuple[str, ...] = ()                   # run-time keyword parameters (built-in ops)
    constant_inputs: tuple[str, ...] = ()          # inputs without a gradient (pow_scalar's b)
    # how many orders of derivatives torch's backward keeps differentiable in its mask's
    # operand, so that they require grad when the input does (dependencies(every_operand=
    # True)): relu's, threshold_backward(grad, result), at every order (inf); leaky_relu's
    # and hardtanh's, *_backward(grad, self), at the first (1). Its derivative graph has one
    # order fewer.
    mask_orders: float = 0
    generic: bool = False                          # shapes unknown at trace time
    returns_tuple: bool = True                     # the forward returned a tuple / list
    rewrites: tuple[str, ...] = ()                 # stabilizing rewrites applied while building it
    derivative_of: "Graph | None" = field(default=None, repr=False)
    arg_names: tuple[str, ...] = ()                # the forward's names of the inputs
    # source files besides the forward's own whose code ran while it was traced (helpers it
    # imports): the disk cache checks them; None when they could not be recorded
    deps: "tuple[str, ...] | None" = ()
    # the program kept its bindings (values used more than once are nodes of their own:
    # trace.dissolve_bindings); its derivatives keep theirs too
    dag: bool = False
    # arrays the forward captured (closure, globals, made inside it): the last inputs, in
    # constant_inputs; per such input (how the runtime finds it, the array at trace time)
    captured: tuple = field(default=(), compare=False, repr=False)
    # module globals holding numbers that the forward's code reads by name, (name, value): the
    # docstring formulas show such a number by its name (`r0`), as they do the constants
    named_globals: tuple = field(default=(), compare=False, repr=False)
    # torch's dtype of each output for the inputs' dtypes at trace time (input_dtypes), op by
    # op (Tracer.output_dtypes; "default": the default float dtype); () when unknown
    output_dtypes: tuple = field(default=(), compare=False, repr=False)
    input_dtypes: tuple = field(default=(), compare=False, repr=False)

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

    def dependencies(self, n_linear: int = 0, every_operand: bool = False) -> tuple:
        """What torch's autograd would connect each output to: per output (None for an absent
        one), per linear input j < n_linear (a VJP's grad outputs), the sorted indices of the
        inputs its term in input j is a differentiable function of, j included (None: no such
        term). With n_linear=0, one entry per output: all it depends on.

        A VJP is linear in its grad outputs; splitting by them keeps a gradient that never
        arrives (zeros) from connecting the others: x*w's gradient module computes
        gg_x*w + gg_w*x for g, which depends on x only when gg_w arrives.

        No dependence: read only for shape (`shape_args`, `constant_args`); through a
        structural op that carries no gradient (`differentiable = False`: zeros_like,
        stop_gradient, argmax); through an integer or bool value; only inside the conditions of
        a Piecewise (a mask, as in torch's where, maximum, clamp and max backward formulas).
        Inside functions such as sign or floor: dependence (torch's sgn and floor are
        differentiable, with zero gradient). `every_operand` counts every operand but those
        read for their shape, conditions and zeros_like's included: torch's relu backward,
        threshold_backward(grad, result), is differentiable in its mask's operand, and its
        derivative there, zeros_like(grad), flows back through relu's own backward, so every
        order of relu's gradient requires grad when the input does."""
        from ._symbols import symbol_of   # lazy: graph.py itself imports no SymPy
        from .ops.structural import STRUCTURAL

        index = {id(n): i for i, n in enumerate(self.inputs)}
        maps: dict[int, dict] = {}
        symbols: dict = {}
        # the maps of subexpressions, shared by the nodes' expressions (a backward's adjoint
        # terms recur across its nodes: half of rk4-100's); valid while no symbol gets a map
        # after an expression read it (then the memo is dropped, so that none is stale)
        shared = _SharedMaps()
        for node in self.nodes():
            k = index.get(id(node))
            if node.dtype != "float":
                found = _CONSTANT
            elif node.op == "input":
                found = _CONSTANT if k is None else {k if k < n_linear else None: frozenset((k,))}
            elif node.op == "elementwise":
                found = _expr_map(node.expr, symbols, every_operand, shared)
            else:
                rule = STRUCTURAL[node.op]
                if not (rule.differentiable or every_operand):
                    found = _CONSTANT
                else:
                    found = _product([maps[id(a)] for i, a in enumerate(node.args)
                                      if i not in rule.shape_args
                                      and i not in rule.constant_args])
            maps[id(node)] = found
            sym = symbol_of(node)
            if sym in shared.read or sym in symbols:
                shared.clear()
            symbols[sym] = found
        result = []
        for out in self.outputs:
            if out is None:
                result.append(None)
                continue
            m = maps[id(out)]
            if not n_linear:
                result.append(tuple(sorted(frozenset().union(*m.values()))))
                continue
            free = m.get(None, frozenset())
            terms = [m.get(j) for j in range(n_linear)]
            if free and all(t is None for t in terms):   # no term in them (every_operand's
                terms = [free] * n_linear                     # zeros_like(x)): x alone
            result.append(tuple(None if t is None else tuple(sorted(t | free)) for t in terms))
        return tuple(result)

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
        from ._formulas import formula_text   # lazy: graph.py itself imports no SymPy

        return formula_text(self)

    # notebooks (Jupyter / IPython rich display): the formulas as Markdown or LaTeX
    def _repr_markdown_(self):
        from ._formulas import formula_text   # lazy: graph.py itself imports no SymPy

        title = f"**{self.name}**" + (f" (`{self.source}`)" if self.source else "")
        return f"{title}\n\n```\n{formula_text(self)}\n```\n"

    def _repr_latex_(self):
        from ._formulas import formula_latex   # lazy: graph.py itself imports no SymPy

        return f"$${formula_latex(self)}$$"


# Dependence maps: {None: inputs of the part free of linear inputs, j: inputs of the term in
# linear input j}, each a frozenset of input indices.
_CONSTANT = {None: frozenset()}


def _everything(m):
    return frozenset().union(*m.values())


def _merge(maps):
    """A sum's map: each term keeps its own dependences."""
    out: dict = {}
    for m in maps:
        for key, deps in m.items():
            out[key] = out.get(key, frozenset()) | deps
    return out


def _product(maps):
    """A product's (or any other function's) map: a term in linear input j also depends on
    everything the other factors do."""
    if not maps:
        return _CONSTANT
    if len(maps) == 1:
        return maps[0]
    if all(len(m) == 1 and None in m for m in maps):   # no linear input: the union
        return {None: frozenset().union(*(m[None] for m in maps))}
    out: dict = {}
    if all(None in m for m in maps):
        out[None] = frozenset().union(*(m[None] for m in maps))
    alls = [_everything(m) for m in maps]
    for i, m in enumerate(maps):
        others = None   # (formed once per factor, not per key)
        for key, deps in m.items():
            if key is None:
                continue
            if others is None:
                others = frozenset().union(*(a for n, a in enumerate(alls) if n != i))
            out[key] = out.get(key, frozenset()) | deps | others
    return out


class _SharedMaps(dict):
    """Graph.dependencies' memo of subexpression maps across nodes; `read`: the symbols
    the remembered maps were made with."""

    def __init__(self):
        super().__init__()
        self.read: set = set()

    def clear(self):
        super().clear()
        self.read.clear()


def _expr_map(expr, symbols, every_operand, memo=None):
    """The dependence map of an elementwise expression over symbols with known maps
    (iterative, as backward expressions can be deep). `memo`: a _SharedMaps (the maps of
    subexpressions already seen, made with the same symbol maps), or None."""
    from sympy import Add, Piecewise
    from sympy.core.relational import Relational
    from sympy.logic.boolalg import BooleanFunction

    if memo is None:
        memo = _SharedMaps()
    read = memo.read

    def get(a):   # a number is constant, and never looked up (its hash is recomputed)
        return _CONSTANT if a.is_Number else memo[a]

    def operands(e):
        if isinstance(e, Piecewise):
            if every_operand:
                return tuple(x for pair in e.args for x in pair)
            return tuple(v for v, _ in e.args)
        if isinstance(e, (Relational, BooleanFunction)) and not every_operand:
            return ()
        return e.args

    if expr.is_Number:
        return _CONSTANT
    # an entry is (e, None) before e's operands, (e, its operands) after them
    stack = [(expr, None)]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        e, ops = pop()
        if e in memo:
            continue
        if e.is_Symbol:
            memo[e] = symbols.get(e, _CONSTANT)
            read.add(e)
        elif ops is None:
            ops = operands(e)
            push((e, ops))
            extend([(a, None) for a in ops if not a.is_Number and a not in memo])
        elif isinstance(e, Piecewise):
            if every_operand:
                values = _merge([get(v) for v, _ in e.args])
                conds = frozenset().union(*(_everything(get(c)) for _, c in e.args))
                memo[e] = {k: d | conds for k, d in values.items()}
            else:
                memo[e] = _merge([get(a) for a in ops])
        elif isinstance(e, Add):
            memo[e] = _merge([get(a) for a in e.args])
        else:
            memo[e] = _product([get(a) for a in ops])
    return memo[expr]
