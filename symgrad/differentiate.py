"""Stage 2 — differentiate: reverse mode over a traced `Graph`, giving the graph of its VJP.

The result is again a `Graph` (inputs: the output gradients, then the original inputs; outputs:
one gradient per input), built by *replaying* the forward in a fresh trace and accumulating
adjoints from the last node back. Because it is a Graph of the same kinds, differentiating it
again gives second and higher derivatives.

Inside an elementwise region the adjoints are computed by symbolic reverse accumulation over
the region's SymPy DAG (`region_vjp`): each sub-expression's adjoint is built once from its
parents', so work shared between the inputs' gradients is shared by construction, not left for
CSE to rediscover (which `sympy.diff` per input would). Adjoints flowing into a `where` branch
are multiplied *inside* the branch, so a branch that is not taken cannot poison the gradient
with `0 * inf = nan` (the "double where" trap of eager autograd).
"""
from __future__ import annotations

import functools

import sympy
from sympy import S, Piecewise
from sympy.core.relational import Relational
from sympy.logic.boolalg import Boolean

from . import _fastsym
from .errors import CompileError
from .graph import Graph, Node
from .ops.structural import SHAPE_HELPERS, STRUCTURAL
from ._tracer import DERIVATIVE_MAX
from .trace import (GenericShape, SymbolicTensor, Tracer, broadcast_shapes,
                    dissolve_bindings, free_symbols, site_of, symbol_of)
from .trace import _folded_out_of_range

_SEED = sympy.Symbol("_seed_", real=True)   # placeholder for the incoming adjoint


def differentiate(graph: Graph) -> Graph:
    """The VJP of `graph`: backward(*grad_outputs, *inputs) -> one gradient per input.

    Each region is stabilized *before* it is differentiated, so derivatives come from the
    stable primitives' own rules (sigmoid' = sigmoid(x) sigmoid(-x), ...) rather than from
    naive forms that would have to be repaired afterwards (which fails at second order)."""
    tr = Tracer(generic=graph.generic)
    tr.constant_inputs = frozenset(graph.constant_inputs)
    tr.large = graph.dag   # its adjoint sums are built by shape (_trace_elementwise._by_shape)
    fired: list[str] = []
    single = len(graph.outputs) == 1
    grads_in = []
    for out, name in zip(graph.outputs, graph.output_names):
        grad_name = "grad_out" if single else f"grad_{name}"
        # out None: an absent gradient (of a bool or int input) in a derivative graph; its
        # adjoint input stays in the signature and is never read
        shape = out.shape if out is not None and not graph.generic else None
        grads_in.append(tr.input(grad_name, shape, "float"))
    xs = [tr.input(x.name, x.shape, x.dtype) for x in graph.inputs]

    replay(graph, tr, xs, fired, dag=graph.dag)

    adjoint: dict[int, SymbolicTensor] = {}
    for out, g in zip(graph.outputs, grads_in):
        if out is not None and out.dtype == "float":
            _accumulate(adjoint, out, g)

    nodes = graph.nodes()
    for node in reversed(nodes):
        g = adjoint.pop(id(node), None)
        if g is None or node.op == "input":
            if g is not None:
                adjoint[id(node)] = g
            continue
        args = [tr.value_of(a) for a in node.args]
        try:
            with site_of(node.site):
                if node.op == "elementwise":
                    contributions = region_vjp(node, g, args, tr, fired, dag=graph.dag)
                else:
                    contributions = STRUCTURAL[node.op].vjp(node, g, args)
        except CompileError as exc:
            where = f" (the op at {node.site})" if node.site else ""
            raise CompileError(f"cannot differentiate {node.op}{where}: {exc}") from None
        for arg, c in zip(node.args, contributions):
            if c is not None and arg.dtype == "float":
                _accumulate(adjoint, arg, c)

    outputs, names = [], []
    # an input may itself be named grad_<other input> (forward(x, grad_x)): the gradients'
    # names must not shadow the backward's inputs, which later lines still read
    taken = {v.node.name for v in (*grads_in, *xs)}
    for x_old, x in zip(graph.inputs, xs):
        name = f"grad_{x.node.name}"
        while name in taken:
            name += "_"
        taken.add(name)
        names.append(name)
        if x.dtype != "float" or x.node.name in tr.constant_inputs:
            outputs.append(None)
            continue
        g = adjoint.get(id(x_old))
        if g is None:
            g = tr.structural("zeros_like", (x,))
        elif g.node is x.node or g.node in outputs or g.node in [v.node for v in grads_in]:
            # the gradient is one of backward's own inputs: give it a node of its own
            g = SymbolicTensor(tr, g.expr, g.shape, g.dtype)
            outputs.append(tr.materialize(g, copy=True))
            continue
        outputs.append(tr.materialize(g))
    vjp = Graph(name=f"{graph.name}_vjp", inputs=tuple(v.node for v in (*grads_in, *xs)),
                 outputs=tuple(outputs), output_names=tuple(names), constants=graph.constants,
                 source=graph.source, params=graph.params, generic=graph.generic,
                 constant_inputs=graph.constant_inputs,
                 mask_orders=max(graph.mask_orders - 1, 0), derivative_of=graph,
                 rewrites=tuple(dict.fromkeys(graph.rewrites + tuple(fired))), dag=graph.dag)
    # a small program's derivative is built as one formula per region (bindings inlined), as
    # its forward is; a large one's keeps the bindings that keep it linear
    if not graph.dag:
        vjp = dissolve_bindings(vjp, tr.bindings, budget=DERIVATIVE_MAX)
        if not vjp.dag:
            return vjp
    _remember_tracer(vjp, tr)
    return vjp


# id(vjp) -> (weak reference to a large program's VJP, the tracer that built it, which holds
# the forward replayed): the saving plan (_saving_plan.with_forward_outputs) reads the forward's
# outputs from it instead of replaying the forward a second time. A few at most.
_TRACERS: dict = {}


def _remember_tracer(vjp, tr):
    import weakref

    for key in [k for k, (ref, _) in _TRACERS.items() if ref() is None]:
        del _TRACERS[key]
    if len(_TRACERS) >= 4:
        _TRACERS.pop(next(iter(_TRACERS)))
    _TRACERS[id(vjp)] = (weakref.ref(vjp), tr)


def tracer_of(vjp):
    """The tracer that built `vjp` (a large program's, once), or None; forgotten once read."""
    hit = _TRACERS.pop(id(vjp), None)
    return hit[1] if hit is not None and hit[0]() is vjp else None


def stable_expr(expr, fired=None, dag=False):
    """`expr` after the stabilizing rewrites (memoized: replay and region_vjp both ask).
    `dag`: a large program's formula, stabilized once per formula shape (`_stabilize_shape`)."""
    out, names = _stabilize_shape(expr) if dag else _stabilize_cached(expr)
    if fired is not None:
        fired.extend(n for n in names if n not in fired)
    return out


@functools.lru_cache(maxsize=16384)   # shared with optimize._stabilize
def _stabilize_cached(expr):
    from .rewrites import stabilize

    return stabilize(expr)


@functools.lru_cache(maxsize=16384)   # shared with optimize._stabilize
def _stabilize_shape(expr):
    """`_stabilize_cached` run once per formula shape (`_fastsym.canonical`: the rewrites run
    on the formula over placeholders, the result is renamed back). A formula no rewrite
    changes is returned as it is."""
    if not expr.args:
        return _stabilize_cached(expr)
    canon, forward = _fastsym.canonical(expr)
    out, names = _stabilize_cached(canon)
    if out is canon:
        return expr, names
    return _fastsym.rename(out, {p: s for s, p in forward.items()}, {}), names


def replay(graph: Graph, tr: Tracer, xs, fired=None, dag=False) -> None:
    """Re-create the forward's values in `tr` (elementwise regions stay pending, so they fuse
    into the derivative's expressions; stabilized, as the forward itself is emitted)."""
    for old, new in zip(graph.inputs, xs):
        tr.replayed[id(old)] = new
    for node in graph.nodes():
        if node.op == "input":
            continue
        args = [tr.value_of(a) for a in node.args]
        if node.op == "elementwise":
            # each read of a replayed value is a use: a reused one is a binding again
            mapping = {symbol_of(a): tr.bind(v).expr for a, v in zip(node.args, args)}
            shape = node.shape
            if shape is None:
                shape = GenericShape(())
                for v in args:
                    shape = broadcast_shapes(shape, v.shape)
            expr = stable_expr(node.expr, fired, dag) if node.dtype == "float" else node.expr
            expr = _fastsym.substitute(expr, mapping, tr.shape_memo) if dag else \
                _fastsym.xreplace(expr, mapping, {})
            tr.replayed[id(node)] = SymbolicTensor(tr, expr, shape, node.dtype, site=node.site)
        else:
            value = tr.structural(node.op, args, site=node.site, **dict(node.attrs))
            tr.replayed[id(node)] = value


def _accumulate(adjoint, node, contribution):
    prev = adjoint.get(id(node))
    if prev is None:
        adjoint[id(node)] = contribution
        return
    # a sum of adjoints is traced to a use's line in the forward, never to the compiler's
    # caller (the line that called sg.compile, or none from the command line)
    with site_of(contribution.site or prev.site):
        total = prev + contribution
    adjoint[id(node)] = total


# --------------------------------------------------------------------------- regions
def region_vjp(node: Node, g: SymbolicTensor, args, tr: Tracer, fired=None, dag=False):
    """Adjoints of an elementwise region's leaves, given the adjoint `g` of its value.
    `dag`: a large program's region, its partials built once per formula shape."""
    leaves = [symbol_of(a) for a in node.args]
    # a graph's constant inputs (pow_scalar's exponent) get no gradient, so x**p with such a
    # p has no masks for one (torch's 0 where a tensor exponent is 0, or x is 0 and p >= 0)
    wanted = [s for s, a in zip(leaves, node.args)
              if not (a.op == "input" and a.name in tr.constant_inputs)]
    stable = stable_expr(node.expr, fired, dag)
    if dag:
        # a large program's: the partials of the region's shape (`_fastsym.canonical`, once
        # per shape), kept over its placeholders (`as_read`: the symbol a leaf is read as)
        canon, as_read = _fastsym.canonical(stable)
        key = tuple(as_read[s] for s in wanted if s in as_read)
        shaped = _partials_of_shape(canon, key)
        partials = {s: shaped[as_read[s]] if s in as_read else S.Zero for s in wanted}
    else:
        as_read = {}
        partials = reverse_accumulate(stable, wanted, seed=_SEED)
    # the adjoint and the leaves' values are pasted into every partial that reads them: bind
    # those read more than once, so the gradient refers to them instead of copying them
    pending = [(s, v) for s, v in zip(leaves, args) if v.node is None]
    if g.node is None or pending:   # walk the partials only when there is a formula to bind
        # (a large program's: counted once per shape of the region, `_reads_of_shape`)
        reads = _reads_of_shape(canon, key) if dag else _reads(partials.values())
        tr.bind(g, reads.get(_SEED, 0))
        for s, v in pending:
            tr.bind(v, reads.get(as_read.get(s, s), 0))
    mapping = {s: v.expr for s, v in zip(leaves, args)}
    mapping[_SEED] = g.expr
    if dag:
        read_as = {as_read.get(s, s): e for s, e in mapping.items()}
    shape = g.shape                          # g has the region's shape at run time, and
    region = tr.value_of(node).shape         # the region's shape decides the unbroadcasting
    out = []
    memo: dict = {}   # the leaves' partials share sub-expressions: each replaced once
    for leaf, value in zip(node.args, args):
        d = partials.get(symbol_of(leaf), S.Zero)
        if d == 0 or leaf.dtype != "float":
            out.append(None)
            continue
        expr = _fastsym.substitute_shaped(d, read_as, tr.shape_memo, fold_piecewise) if dag \
            else fold_piecewise(_fastsym.xreplace(d, mapping, memo))
        if _folded_out_of_range(expr, (d, *mapping.values())):
            # the adjoint's constants folded with the partial's (1e10 * 1e300): compute the
            # adjoint and the operands first, then the product, in order
            if dag:
                d = _fastsym.rename(d, {p: s for s, p in as_read.items()}, {})
            g, args = g._unfold(), [v._unfold() for v in args]
            mapping = {s: v.expr for s, v in zip(leaves, args)}
            mapping[_SEED] = g.expr
            if dag:   # the next leaves read the unfolded values too
                read_as = {as_read.get(s, s): e for s, e in mapping.items()}
            expr = fold_piecewise(d.xreplace(mapping))
        contribution = SymbolicTensor(tr, expr, shape, "float", site=node.site)
        if _needs_sum_to(region, value.shape):
            contribution = tr.structural("sum_to", (contribution, value), site=node.site)
        out.append(contribution)
    return out


def _reads(partials):
    """{symbol: how many of the nonzero `partials` read it}."""
    counts: dict = {}
    for d in partials:
        if d != 0:
            for s in free_symbols(d):
                counts[s] = counts.get(s, 0) + 1
    return counts


@functools.lru_cache(maxsize=4096)
def _reads_of_shape(canon, wanted):
    """_reads of `_partials_of_shape(canon, wanted)`'s partials, once per shape."""
    shaped = _partials_of_shape(canon, wanted)
    return _reads(shaped[p] for p in wanted)


@functools.lru_cache(maxsize=4096)
def _partials_of_shape(canon, wanted):
    """reverse_accumulate(canon, wanted, seed=_SEED) of a region's canonical form: an
    unrolled program's steps share their regions' shapes, so each shape's reverse
    accumulation (SymPy products and sums of the local derivatives) runs once."""
    return reverse_accumulate(canon, list(wanted), seed=_SEED)


def _needs_sum_to(shape, leaf_shape):
    if isinstance(shape, tuple) and isinstance(leaf_shape, tuple):
        return shape != leaf_shape
    if isinstance(shape, GenericShape) and isinstance(leaf_shape, GenericShape):
        return not set(shape.sources) <= set(leaf_shape.sources)
    return True


SHAPE_HELPERS["needs_sum_to"] = _needs_sum_to   # the adjoint rules' sum_to (ops/structural.py)


def reverse_accumulate(expr, wrt, seed=S.One, pow_masks=True):
    """d(seed * expr)/d(s) for each symbol s in `wrt`, by reverse accumulation over the DAG.
    pow_masks: torch's 0 gradients of x**y (y depending on `wrt`) at y = 0 and at x = 0."""
    wanted = set(wrt)
    depends: dict = {}

    def dep(e):
        # bool(e.free_symbols & wanted), each distinct sub-expression decided once (SymPy's
        # free_symbols walks a shared sub-expression once per path to it)
        hit = depends.get(e)
        if hit is None:
            if not isinstance(e, sympy.Basic):
                return False
            stack = [(e, False)]
            while stack:
                u, ready = stack.pop()
                if u in depends:
                    continue
                if isinstance(u, sympy.Symbol):
                    depends[u] = u in wanted
                elif not ready:
                    stack.append((u, True))
                    stack.extend((a, False) for a in u.args
                                 if isinstance(a, sympy.Basic) and a not in depends)
                else:
                    depends[u] = any(depends.get(a, False) for a in u.args)
            hit = depends[e]
        return hit

    order, seen = [], set()
    stack = [(expr, False)]
    while stack:
        e, done = stack.pop()
        if done:
            order.append(e)
            continue
        if e in seen or not dep(e):
            continue
        seen.add(e)
        stack.append((e, True))
        for a in _children(e):
            if a not in seen:
                stack.append((a, False))
    adj = {expr: seed}
    for e in reversed(order):
        a = adj.get(e)
        if a is None or e.is_Symbol:
            continue
        for child, local in _local_derivatives(e, dep, pow_masks):
            adj[child] = adj.get(child, S.Zero) + _scale(a, local)
    return {s: _drop_deltas(adj.get(s, S.Zero)) for s in wrt}


def _children(e):
    if isinstance(e, Piecewise):
        return [pair.expr for pair in e.args]
    if isinstance(e, (Relational, Boolean)):
        return []
    return list(e.args)


def _local_derivatives(e, dep, pow_masks=True):
    """(child, d e / d child) for each child of `e` that depends on a wanted symbol."""
    if isinstance(e, sympy.Add):
        return [(a, S.One) for a in e.args if dep(a)]
    if isinstance(e, sympy.Mul):
        args = e.args
        return [(a, sympy.Mul(*(args[:i] + args[i + 1:]))) for i, a in enumerate(args) if dep(a)]
    if isinstance(e, sympy.Pow):
        b, p = e.args
        out = []
        if dep(b):
            d = p * b ** (p - 1)
            if dep(p) and pow_masks:   # tensor exponent: torch's 0 where it is 0 (0 * 0**-1 = nan)
                d = Piecewise((S.Zero, sympy.Eq(p, 0)), (d, True))
            out.append((b, d))
        if dep(p):
            d = e * sympy.log(b)
            if dep(b) and pow_masks:   # torch's 0 where b == 0 and p >= 0 (0 * log(0) = nan)
                d = Piecewise((S.Zero, sympy.And(sympy.Eq(b, 0), p >= 0)), (d, True))
            out.append((p, d))
        return out
    if isinstance(e, Piecewise):
        conds = [pair.cond for pair in e.args]
        out = []
        for k, pair in enumerate(e.args):
            if dep(pair.expr):
                branches = [(S.One if j == k else S.Zero, c) for j, c in enumerate(conds)]
                out.append((pair.expr, Piecewise(*branches)))
        return out
    if isinstance(e, (Relational, Boolean)):
        return []
    if isinstance(e, (sympy.sign, sympy.floor, sympy.ceiling)):
        return [(e.args[0], S.Zero)] if dep(e.args[0]) else []   # torch: sign' = floor' = 0
    if isinstance(e, sympy.Function):
        out = []
        for i, a in enumerate(e.args):
            if dep(a):
                try:
                    d = e.fdiff(i + 1)
                except Exception as exc:  # SymPy raises ArgumentIndexError and others
                    raise CompileError(f"{type(e).__name__} has no derivative with respect "
                                       f"to argument {i + 1}: {exc}") from None
                if d.has(sympy.Derivative):
                    raise CompileError(f"{type(e).__name__} has no closed-form derivative")
                out.append((a, d))
        return out
    raise CompileError(f"cannot differentiate the expression {type(e).__name__}: {e}")


def _scale(adj, local):
    """adj * local, multiplied into Piecewise branches so untaken branches stay exactly 0."""
    if local == 1:
        return adj
    if isinstance(adj, Piecewise):
        return Piecewise(*[(S.Zero if e == 0 else e * local, c) for e, c in adj.args])
    if isinstance(local, Piecewise):
        return Piecewise(*[(S.Zero if e == 0 else adj * e, c) for e, c in local.args])
    if isinstance(adj, sympy.Add) and any(isinstance(t, Piecewise) for t in adj.args):
        return sympy.Add(*[_scale(t, local) for t in adj.args])
    return adj * local


def fold_piecewise(expr):
    """Move factors into Piecewise branches: a * where(c, b, 0) -> where(c, a * b, 0); and add
    Piecewise terms with the same conditions branch by branch: where(c, a, b) + where(c, d, e)
    -> where(c, a + d, b + e), one selection instead of several (Huber's gradient: three
    where's -> one). Both are exact: each element gets the same sum of the same values."""
    def fold(e):
        if isinstance(e, sympy.Mul):
            pieces = [a for a in e.args if isinstance(a, Piecewise)]
            if pieces:
                p = pieces[0]
                rest = sympy.Mul(*[a for a in e.args if a is not p])
                return Piecewise(*[(S.Zero if b == 0 else rest * b, c) for b, c in p.args])
        if isinstance(e, sympy.Add):
            return _add_piecewise(e)
        return e

    return _postorder(expr, fold)


def _add_piecewise(e):
    """The Add e with its Piecewise terms of identical conditions summed branch by branch."""
    groups: dict = {}
    for term in e.args:
        if isinstance(term, Piecewise):
            groups.setdefault(tuple(p.cond for p in term.args), []).append(term)
    if all(len(g) < 2 for g in groups.values()):
        return e
    out = [t for t in e.args if not isinstance(t, Piecewise)]
    for conds, terms in groups.items():
        out.append(Piecewise(*[(sympy.Add(*[t.args[i].expr for t in terms]), c)
                               for i, c in enumerate(conds)]))
    return sympy.Add(*out)


def _postorder(expr, fn):
    memo = {}

    def walk(e):
        hit = memo.get(e)
        if hit is not None:
            return hit
        if e.args and not isinstance(e, (Relational, Boolean)):
            if isinstance(e, Piecewise):
                new = Piecewise(*[(walk(p.expr), p.cond) for p in e.args])
            else:
                args = tuple(walk(a) for a in e.args)
                new = e.func(*args) if args != e.args else e
        else:
            new = e
        out = fn(new)
        memo[e] = out
        return out

    return walk(expr)


def _drop_deltas(expr):
    # d sign(x)/dx = 2 DiracDelta(x): zero almost everywhere, as torch's sign' = 0
    if any(isinstance(e, sympy.DiracDelta) for e in _fastsym.subexpressions([expr])):
        expr = expr.replace(lambda e: isinstance(e, sympy.DiracDelta), lambda e: S.Zero)
    return expr
