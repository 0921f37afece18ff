"""Loops compiled once: the `scan` structural op and the ops that unpack its result.

A traced `sg.scan(f, init, xs)` is ONE node of the outer graph, `scan`, whose body is a
sub-`Graph` traced once over symbolic per-step values (`ScanBody`). Its operands are the
initial carries, the stacked xs and the values the body closes over (weights of the outer
forward, captured arrays); its value is one flat float vector holding, in order, the final
carries, the stacked ys and (`hist=True`) the stacked carries *entering* each step. `scan_part`
reads one of them out (a slice and a reshape); `scan_part_back` is its adjoint.

Derivative: the VJP of a scan is a reverse scan (`Scan.vjp`) whose body is the VJP of the
body (`differentiate`, once), reading the saved carries: the forward keeps the carry of every
step (T x carry memory, JAX's default), so the backward recomputes nothing. Because the
backward is a scan node again, differentiating it once more (Hessian-vector products, double
backward) uses the same rule; a scan made by a VJP keeps no history of its own carries
(`hist=False`), and its derivative recomputes them with one more forward pass of that loop.
"""
from __future__ import annotations

import hashlib

from .ops.structural import Structural, register


class ScanBody:
    """The body of a scan: a `Graph` with inputs (carries, xs per step, closed-over values) and
    outputs (new carries, ys per step). Compared by content (its fingerprint)."""

    def __init__(self, graph, n_carry, n_x):
        self.graph = graph
        self.n_carry = n_carry
        self.n_x = n_x
        self.n_const = len(graph.inputs) - n_carry - n_x
        self.n_y = len(graph.outputs) - n_carry
        self.key = hashlib.sha1(
            f"{n_carry},{n_x}\n{graph.fingerprint()}".encode()).hexdigest()[:12]
        self._history = None
        self._vjp = {}

    def __eq__(self, other):
        return isinstance(other, ScanBody) and other.key == self.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return f"<body:{self.key}>"

    @property
    def carry_nodes(self):
        return self.graph.inputs[:self.n_carry]

    def with_history(self):
        """The body with the carries entering the step as extra ys (copies)."""
        if self._history is None:
            self._history = _with_history(self.graph, self.n_carry)
        return self._history

    def vjp(self, hist):
        """differentiate() of the body (with the history ys when `hist`), built once."""
        hit = self._vjp.get(hist)
        if hit is None:
            from .differentiate import differentiate

            hit = differentiate(self.with_history() if hist else self.graph)
            self._vjp[hist] = hit
        return hit


def _with_history(graph, k):
    import dataclasses

    from .graph import Node
    from .trace import symbol_of

    names = {n.name for n in graph.nodes()} | set(graph.output_names)
    top = max(n.index for n in graph.nodes()) + 1
    extra, extra_names = [], []
    for i, c in enumerate(graph.inputs[:k]):
        name = f"{c.name}_in"
        while name in names:
            name += "_"
        names.add(name)
        extra.append(Node("elementwise", (c,), c.shape, c.dtype, name, (), symbol_of(c),
                          None, top + i))
        extra_names.append(f"saved{i}")
    return dataclasses.replace(graph, outputs=graph.outputs + tuple(extra),
                               output_names=graph.output_names + tuple(extra_names))


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def layout(body: ScanBody, length: int, hist: bool):
    """(offset, shape) of each part of a scan's packed value: the final carries, the stacked
    ys, then (hist) the stacked carries entering each step; and the total size."""
    parts, offset = [], 0
    outs = body.graph.outputs
    shapes = [o.shape for o in outs[:body.n_carry]]
    shapes += [(length,) + tuple(o.shape) for o in outs[body.n_carry:]]
    if hist:
        shapes += [(length,) + tuple(c.shape) for c in body.carry_nodes]
    for shape in shapes:
        n = _numel(shape)
        parts.append((offset, tuple(shape)))
        offset += n
    return parts, offset


NUMPY_CALL: list = [None]   # emit.scan.numpy_call (filled by the emit layer)


@register
class Scan(Structural):
    op = "scan"
    out_dtype = "float"

    @staticmethod
    def shape(shapes, attrs):
        return (attrs["size"],)

    @staticmethod
    def numpy(node, a, p):
        # the loop function is printed by the emit layer (emit/scan.py), which registers its
        # printer here when it is imported: every NumPy emission imports it first
        return NUMPY_CALL[0](node, a)

    @staticmethod
    def vjp(node, g, args):
        return scan_vjp(node, g, args)


@register
class ScanPart(Structural):
    """One part of a scan's packed value: a slice, reshaped."""

    op = "scan_part"

    @staticmethod
    def shape(shapes, attrs):
        return tuple(attrs["shape"])

    @staticmethod
    def numpy(node, a, p):
        o, shape = node.attr("offset"), tuple(node.attr("shape"))
        return f"{a[0]}[{o}:{o + _numel(shape)}].reshape({shape!r})"

    @staticmethod
    def vjp(node, g, args):
        return [g.tracer.structural("scan_part_back", (g, args[0]), offset=node.attr("offset"),
                                    shape=node.attr("shape"))]


@register
class ScanPartBack(Structural):
    """The adjoint of scan_part: the packed vector, zero but for that part."""

    op = "scan_part_back"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        o, n = node.attr("offset"), _numel(node.attr("shape"))
        size = _numel(node.args[1].shape)
        return (f"numpy.concatenate((numpy.zeros({o}, dtype=dtype), numpy.ravel({a[0]}), "
                f"numpy.zeros({size - o - n}, dtype=dtype)))")

    @staticmethod
    def vjp(node, g, args):
        return [g.tracer.structural("scan_part", (g,), offset=node.attr("offset"),
                                    shape=node.attr("shape")), None]


def parts_of(tr, packed, body, length, hist, site=None):
    """The traced parts of a scan's packed value (see `layout`)."""
    parts, _ = layout(body, length, hist)
    return [tr.structural("scan_part", (packed,), site=site, offset=o, shape=s)
            for o, s in parts]


def make_scan(tr, body, args, length, reverse, hist, site=None):
    """A scan node in tracer `tr` (operands: carries, xs, closed-over values)."""
    _, size = layout(body, length, hist)
    return tr.structural("scan", tuple(args), site=site, body=body, length=int(length),
                         reverse=bool(reverse), hist=bool(hist), size=size)


def finish_outputs(tr, values):
    """Nodes for a body's outputs: an input, or a value returned twice, gets a node of its own
    (a body output is written every step; it must not alias an input)."""
    from .trace import SymbolicTensor

    nodes = []
    for v in values:
        node = tr.materialize(v)
        if node.op == "input" or node in nodes:
            node = tr.materialize(SymbolicTensor(tr, v.expr, v.shape, v.dtype, site=v.site),
                                  copy=True)
        nodes.append(node)
    return nodes


def scan_vjp(node, g, args):
    """The VJP of a scan: a reverse scan over the VJP of its body (see the module doc)."""
    from .differentiate import replay
    from .graph import Graph
    from .trace import Tracer, dissolve_bindings

    tr = g.tracer
    body, T = node.attr("body"), node.attr("length")
    reverse, hist = node.attr("reverse"), node.attr("hist")
    k, m, q = body.n_carry, body.n_x, body.n_y
    xs, consts = args[k:k + m], args[k + m:]
    # the carries entering each step: saved by the forward, or recomputed (a VJP's own scan)
    src = tr.value_of(node) if hist else make_scan(tr, body, args, T, reverse, True, node.site)
    saved = parts_of(tr, src, body, T, True, node.site)[k + q:]
    gparts = parts_of(tr, g, body, T, hist, node.site)
    g_final, g_ys = gparts[:k], gparts[k:]
    bv = body.vjp(hist)

    # the backward body: carries (adjoint of the carry, accumulated adjoints of the closed-over
    # float values), xs (adjoints of the ys, saved carries, xs), the closed-over values
    inner = body.graph.inputs
    float_consts = [j for j in range(len(consts)) if inner[k + m + j].dtype == "float"]
    float_xs = [j for j in range(m) if inner[k + j].dtype == "float"]
    t2 = Tracer()
    gc = [t2.input(f"g_{c.name}", c.shape) for c in inner[:k]]
    acc = [t2.input(f"g_{inner[k + m + j].name}", inner[k + m + j].shape) for j in float_consts]
    outs = bv.derivative_of.outputs
    gy = [t2.input(f"g_{name}", o.shape)
          for name, o in zip(bv.derivative_of.output_names[k:], outs[k:])]
    hs = [t2.input(c.name, c.shape, c.dtype) for c in inner[:k]]
    xv = [t2.input(x.name, x.shape, x.dtype) for x in inner[k:k + m]]
    cv = [t2.input(c.name, c.shape, c.dtype) for c in inner[k + m:]]
    replay(bv, t2, [*gc, *gy, *hs, *xv, *cv])
    grads = [None if o is None else t2.value_of(o) for o in bv.outputs]
    new_gc = [grads[i] if grads[i] is not None else t2.structural("zeros_like", (hs[i],))
              for i in range(k)]
    new_acc = []
    for a, j in zip(acc, float_consts):
        d = grads[k + m + j]
        new_acc.append(a if d is None else a + d)
    gx = [grads[k + j] if grads[k + j] is not None else t2.structural("zeros_like", (xv[j],))
          for j in float_xs]
    out_nodes = finish_outputs(t2, [*new_gc, *new_acc, *gx])
    n_out = len(out_nodes)
    graph = Graph(name=f"{body.graph.name}_vjp",
                  inputs=tuple(v.node for v in (*gc, *acc, *gy, *hs, *xv, *cv)),
                  outputs=tuple(out_nodes),
                  output_names=tuple(f"out{i}" for i in range(n_out)), dag=body.graph.dag)
    if not graph.dag:
        graph = dissolve_bindings(graph, t2.bindings)
    back = ScanBody(graph, k + len(acc), len(gy) + k + m)
    init = [*g_final, *(tr.structural("zeros_like", (consts[j],)) for j in float_consts)]
    bscan = make_scan(tr, back, [*init, *g_ys, *saved, *xs, *consts], T, not reverse, False,
                      node.site)
    parts = parts_of(tr, bscan, back, T, False, node.site)
    result = list(parts[:k])
    gx_parts = dict(zip(float_xs, parts[k + len(acc):]))
    result += [gx_parts.get(j) for j in range(m)]
    gacc = dict(zip(float_consts, parts[k:k + len(acc)]))
    result += [gacc.get(j) for j in range(len(consts))]
    return result

