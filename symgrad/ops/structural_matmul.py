"""Structural ops, products: matmul, the two products its adjoint is written with
(matmul_grad_a, matmul_grad_b), and einsum."""
from __future__ import annotations

from ..errors import ShapeError
from .structural_base import SHAPE_HELPERS, Structural, _concrete, register


# --------------------------------------------------------------------------- linear algebra
def _matmul_shape(a, b):
    if len(a) == 0 or len(b) == 0:
        raise ShapeError("matmul: both arguments need at least 1 dimension, got shapes "
                         f"{a} and {b}")
    ka = a[-1]
    kb = b[0] if len(b) == 1 else b[-2]
    if ka != kb:
        raise ShapeError(f"matmul: shapes {a} and {b} cannot be multiplied ({ka} != {kb})")
    batch = SHAPE_HELPERS["broadcast_shapes"](a[:-2], b[:-2], "matmul")
    rows = a[-2:-1]
    cols = b[-1:] if len(b) > 1 else ()
    return tuple(batch) + tuple(rows) + tuple(cols)


@register
class Matmul(Structural):
    op = "matmul"

    @staticmethod
    def shape(shapes, attrs):
        return _matmul_shape(*shapes) if _concrete(*shapes) else None

    @staticmethod
    def numpy(node, a, p):
        x, y = (arg.shape for arg in node.args)
        if _concrete(x, y) and min(len(x), len(y)) >= 2:
            return _product(a[0], a[1], x, x[-1])
        return f"numpy.matmul({a[0]}, {a[1]})"

    @staticmethod
    def vjp(node, g, args):
        a, b = args
        tr = g.tracer
        return [tr.structural("matmul_grad_a", (g, a, b)), tr.structural("matmul_grad_b", (g, a, b))]


def _plain_matmul_grad(left, right, want, transpose_second) -> bool:
    """Whether a matmul gradient is one plain matmul for these static shapes: both operands at
    least 2-D, and the product (left @ right^T if transpose_second, else left^T @ right)
    already has the operand's shape `want`, so nothing is summed away."""
    if not _concrete(left, right, want) or min(len(left), len(right), len(want)) < 2:
        return False
    rows, cols = (left[-2], right[-2]) if transpose_second else (left[-1], right[-1])
    n = max(len(left), len(right)) - 2
    batch_l = (1,) * (n - len(left) + 2) + left[:-2]
    batch_r = (1,) * (n - len(right) + 2) + right[:-2]
    if any(p != q and 1 not in (p, q) for p, q in zip(batch_l, batch_r)):
        return False
    return tuple(max(p, q) for p, q in zip(batch_l, batch_r)) + (rows, cols) == tuple(want)


def _transposed(name, shape) -> str:
    return f"{name}.T" if len(shape) == 2 else f"numpy.swapaxes({name}, -1, -2)"


def _product(left, right, left_shape, contracted) -> str:
    """A plain matmul `left @ right` (both operands at least 2-D, static shapes): a broadcast
    multiply when the contracted size is 1. The product is then an outer product, which
    `numpy.multiply` writes in one pass, where BLAS takes 3x as long (15625x1 @ 1x64: 1.45 ms
    against 0.46 ms); matmul's batch broadcasting is NumPy's broadcasting, so values and shape
    are the same."""
    if contracted == 1 and len(left_shape) >= 2:
        return f"numpy.multiply({left}, {right})"
    return f"numpy.matmul({left}, {right})"


@register
class MatmulGradA(Structural):
    """d<g, a @ b>/da, with matmul's 1-D and batch-broadcast rules."""

    op = "matmul_grad_a"
    constant_args = (1,)   # a: only its shape (1-D and batch rules)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        g, x, y = (arg.shape for arg in node.args)
        if _plain_matmul_grad(g, y, x, transpose_second=True):   # no 1-D or broadcast steps
            return _product(a[0], _transposed(a[2], y), g, g[-1])
        return f"_matmul_grad_a({a[0]}, {a[1]}, {a[2]})"

    @staticmethod
    def vjp(node, u, args):
        # <u, grad_a(g, a, b)> = <g, u @ b>: linear in g and in b, constant in a
        g, a, b = args
        tr = u.tracer
        return [tr.structural("matmul", (u, b)), None, tr.structural("matmul_grad_b", (g, u, b))]


@register
class MatmulGradB(Structural):
    op = "matmul_grad_b"
    constant_args = (2,)   # b: only its shape

    @staticmethod
    def shape(shapes, attrs):
        return shapes[2]

    @staticmethod
    def numpy(node, a, p):
        g, x, y = (arg.shape for arg in node.args)
        if _plain_matmul_grad(x, g, y, transpose_second=False):
            return _product(_transposed(a[1], x), a[0], x, x[-2])
        return f"_matmul_grad_b({a[0]}, {a[1]}, {a[2]})"

    @staticmethod
    def vjp(node, u, args):
        # <u, grad_b(g, a, b)> = <g, a @ u>
        g, a, b = args
        tr = u.tracer
        return [tr.structural("matmul", (a, u)), tr.structural("matmul_grad_a", (g, a, u)), None]


EINSUM_OPTIMIZE_WORK = 100_000


@register
class Einsum(Structural):
    """torch.einsum over operands whose subscripts hold no repeated letter and agree on each
    letter's size (the tracer takes diagonals and expands size-1 letters first). The adjoint
    for an operand is an einsum of g with the other operands; a letter only that operand has
    (summed away) comes back as a broadcast."""

    op = "einsum"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(*shapes):
            return None
        ins, out = attrs["subscripts"].split("->")
        size = {}
        for sub, shape in zip(ins.split(","), shapes):
            size.update(zip(sub, shape))
        return tuple(size[c] for c in out)

    @staticmethod
    def numpy(node, a, p):
        shapes = [n.shape for n in node.args]
        if not _concrete(*shapes):   # decided per call from the sizes
            return f"_einsum({p.param(node, 'subscripts')}, {', '.join(a)})"
        size = {}
        for sub, shape in zip(node.attr("subscripts").split("->")[0].split(","), shapes):
            size.update(zip(sub, shape))
        work = 1
        for n in size.values():
            work *= n
        # numpy.einsum's own loops beat its optimized path (tensordot: BLAS) below ~1e5
        # multiply-adds, where the path search (~20 us) dominates
        optimize = ", optimize=True" if work > EINSUM_OPTIMIZE_WORK or len(a) > 2 else ""
        return f"numpy.einsum({p.param(node, 'subscripts')}, {', '.join(a)}{optimize})"

    @staticmethod
    def vjp(node, g, args):
        tr = g.tracer
        ins, out = node.attr("subscripts").split("->")
        subs = ins.split(",")
        grads = []
        for i, (sub, x) in enumerate(zip(subs, args)):
            others = [(s, v) for j, (s, v) in enumerate(zip(subs, args)) if j != i]
            have = set(out).union(*(set(s) for s, _ in others))
            kept = "".join(c for c in sub if c in have)
            spec = ",".join([out] + [s for s, _ in others]) + "->" + kept
            grad = tr.structural("einsum", (g, *(v for _, v in others)), subscripts=spec)
            if kept != sub:   # letters summed away in this operand alone: broadcast back
                if _concrete(x.shape):
                    ones = tuple(n if c in have else 1 for c, n in zip(sub, x.shape))
                    grad = tr.structural("reshape", (grad,), shape=ones)
                else:
                    for pos, c in enumerate(sub):
                        if c not in have:
                            grad = tr.structural("unsqueeze", (grad,), dim=pos)
                grad = tr.structural("broadcast_like", (grad, x))
            grads.append(grad)
        return grads
