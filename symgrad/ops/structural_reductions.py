"""Structural ops, reductions and broadcasting: sum, mean, amax/amin, max/min and argmax/argmin
along a dim, prod, the ops their adjoints are written with (unreduce, index_back, take_dim,
prod_others), and sum_to, broadcast_like, expand."""
from __future__ import annotations

from ..errors import ShapeError
from . import Param
from .structural_base import SHAPE_HELPERS, Structural, _concrete, reduced_shape, register


# --------------------------------------------------------------------------- reductions
@register
class Sum(Structural):
    op = "sum"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]):
            return None
        return reduced_shape(shapes[0], attrs["dims"], attrs["keepdim"])

    @staticmethod
    def numpy(node, a, p):
        return f"_sum({a[0]}, {p.param(node, 'dims')}, {p.param(node, 'keepdim')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("unreduce", (g, x), dims=node.attr("dims"),
                                    keepdim=node.attr("keepdim"), mean=False)]


@register
class Mean(Sum):
    op = "mean"

    @staticmethod
    def numpy(node, a, p):
        return f"_mean({a[0]}, {p.param(node, 'dims')}, {p.param(node, 'keepdim')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("unreduce", (g, x), dims=node.attr("dims"),
                                    keepdim=node.attr("keepdim"), mean=True)]


@register
class Unreduce(Structural):
    """Adjoint of sum / mean: put back the reduced dims and broadcast to the operand's shape."""

    op = "unreduce"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return (f"_unreduce({a[0]}, {p.shape_of(node.args[1])}, {p.param(node, 'dims')}, "
                f"{p.param(node, 'keepdim')}, mean={p.param(node, 'mean')})")

    @staticmethod
    def vjp(node, g, args):
        op = "mean" if node.attr("mean") else "sum"
        return [g.tracer.structural(op, (g,), dims=node.attr("dims"), keepdim=node.attr("keepdim")),
                None]


@register
class Amax(Sum):
    """max over dims (or all) returning values only; ties share the gradient evenly (torch amax)."""

    op = "amax"
    fn = "max"

    @classmethod
    def numpy(cls, node, a, p):
        return f"_{cls.fn}({a[0]}, {p.param(node, 'dims')}, {p.param(node, 'keepdim')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        tr = g.tracer
        dims, keepdim = node.attr("dims"), node.attr("keepdim")
        best = tr.structural("unreduce", (tr.value_of(node), x), dims=dims, keepdim=keepdim,
                             mean=False)
        hit = tr.where(x == best, 1.0, 0.0)
        count = tr.structural("sum", (hit,), dims=dims, keepdim=keepdim)
        share = tr.structural("unreduce", (g / count, x), dims=dims, keepdim=keepdim, mean=False)
        return [tr.where(x == best, share, 0.0)]


@register
class Amin(Amax):
    op = "amin"
    fn = "min"


@register
class MaxDim(Sum):
    """Values of max along one dim; the gradient goes to the first index of the maximum."""

    op = "max_dim"
    fn = "max"
    arg = "argmax"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]):
            return None
        return reduced_shape(shapes[0], (attrs["dim"],), attrs["keepdim"])

    @classmethod
    def numpy(cls, node, a, p):
        return f"_{cls.fn}({a[0]}, {p.param(node, 'dim')}, {p.param(node, 'keepdim')})"

    @classmethod
    def vjp(cls, node, g, args):
        x, = args
        tr = g.tracer
        dim, keepdim = node.attr("dim"), node.attr("keepdim")
        idx = tr.structural(cls.arg, (x,), dim=dim, keepdim=keepdim)
        return [tr.structural("index_back", (g, idx, x), dim=dim, keepdim=keepdim)]


@register
class MinDim(MaxDim):
    op = "min_dim"
    fn = "min"
    arg = "argmin"


@register
class ArgMax(MaxDim):
    op = "argmax"
    fn = "argmax"
    out_dtype = "int"
    differentiable = False

    @classmethod
    def numpy(cls, node, a, p):
        keep = p.param(node, "keepdim")
        return f"numpy.{cls.fn}({a[0]}, axis={p.param(node, 'dim')}, keepdims={keep})"

    @staticmethod
    def vjp(node, g, args):
        return [None]


@register
class ArgMin(ArgMax):
    op = "argmin"
    fn = "argmin"


@register
class IndexBack(Structural):
    """Adjoint of max_dim / take_dim: zeros of the operand's shape with g at the indices."""

    op = "index_back"
    shape_args = (2,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[2]

    @staticmethod
    def numpy(node, a, p):
        return (f"_index_back({a[0]}, {a[1]}, {p.shape_of(node.args[2])}, "
                f"{p.param(node, 'dim')}, {p.param(node, 'keepdim')})")

    @staticmethod
    def vjp(node, g, args):
        _, idx, _ = args
        return [g.tracer.structural("take_dim", (g, idx), dim=node.attr("dim"),
                                    keepdim=node.attr("keepdim")), None, None]


@register
class TakeDim(Structural):
    op = "take_dim"

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return f"_take_dim({a[0]}, {a[1]}, {p.param(node, 'dim')}, {p.param(node, 'keepdim')})"

    @staticmethod
    def vjp(node, g, args):
        x, idx = args
        return [g.tracer.structural("index_back", (g, idx, x), dim=node.attr("dim"),
                                    keepdim=node.attr("keepdim")), None]


@register
class Prod(Sum):
    op = "prod"

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.prod({a[0]}, axis={p.param(node, 'dims')}, keepdims={p.param(node, 'keepdim')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        tr = g.tracer
        dims, keepdim = node.attr("dims"), node.attr("keepdim")
        spread = tr.structural("unreduce", (g, x), dims=dims, keepdim=keepdim, mean=False)
        # product of the other factors, computed without dividing by x (x may hold zeros)
        return [spread * tr.structural("prod_others", (x,), dims=dims)]


@register
class ProdOthers(Structural):
    op = "prod_others"

    @staticmethod
    def numpy(node, a, p):
        return f"_prod_others({a[0]}, {p.param(node, 'dims')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("prod_others_vjp", (g, x), dims=node.attr("dims"))]


@register
class ProdOthersVjp(Structural):
    """Adjoint of prod_others (prod's second derivative), exact where x holds zeros."""

    op = "prod_others_vjp"

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return f"_prod_others_vjp({a[0]}, {a[1]}, {p.param(node, 'dims')})"

    @staticmethod
    def vjp(node, h, args):
        g, x = args
        tr, dims = h.tracer, node.attr("dims")
        # linear in g with a symmetric matrix (so its adjoint is itself, fed h); in x, the
        # next directional derivative of prod_others
        grad_g = tr.structural("prod_others_vjp", (h, x), dims=dims)
        return [_summed_to(grad_g, g), tr.structural("prod_others_dual", (x, g, h), dims=dims)]


@register
class ProdOthersDual(Structural):
    """prod_others_dual(x, g1, ..., gk): the eps1...epsk part of the product of the others
    along `dims` in dual numbers x + eps1*g1 + ... + epsk*gk (each eps squaring to 0) — the
    k-th directional derivative of prod_others, so prod's (k+2)-th derivative; exact with
    zeros (prefix and suffix products, no division)."""

    op = "prod_others_dual"

    @staticmethod
    def numpy(node, a, p):
        return f"_prod_others_dual({', '.join(a)}, dims={p.param(node, 'dims')})"

    @staticmethod
    def vjp(node, h, args):
        x, *gs = args
        tr, dims = h.tracer, node.attr("dims")
        # multilinear in the g's, each through a symmetric matrix: the adjoint for g_i puts h
        # in its place; for x, one more dual direction
        grads = [tr.structural("prod_others_dual", (x, *gs, h), dims=dims)]
        for i, gi in enumerate(gs):
            fed = tr.structural("prod_others_dual", (x, *gs[:i], h, *gs[i + 1:]), dims=dims)
            grads.append(_summed_to(fed, gi))
        return grads


def _summed_to(grad, like):
    """`grad` (of x's shape) summed down to the shape of `like` when `like` broadcasts."""
    if SHAPE_HELPERS["needs_sum_to"](grad.shape, like.shape):
        return grad.tracer.structural("sum_to", (grad, like))
    return grad


# --------------------------------------------------------------------------- broadcasting
@register
class SumTo(Structural):
    """Adjoint of broadcasting: sum g down to the shape of `like`."""

    op = "sum_to"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        have, want = node.args[0].shape, node.args[1].shape
        if not _concrete(have, want) or have == want:
            return f"_sum_to({a[0]}, {p.shape_of(node.args[1])})"
        # static shapes: the summed axes are known now (_sum_to works them out per call)
        lead = len(have) - len(want)
        inner = tuple(lead + i for i, n in enumerate(want) if n == 1 and have[lead + i] != 1)
        if lead and not inner and want:   # only broadcast leading dims: sum them away
            return f"_sum({a[0]}, {tuple(range(lead))!r}, False)"
        summed = f"_sum({a[0]}, {tuple(range(lead)) + inner!r}, True)"
        return summed if not lead else f"numpy.reshape({summed}, {want!r})"

    @staticmethod
    def vjp(node, g, args):
        u, _ = args
        return [g.tracer.structural("broadcast_like", (g, u)), None]


@register
class BroadcastLike(Structural):
    op = "broadcast_like"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.broadcast_to({a[0]}, {p.shape_of(node.args[1])})"

    @staticmethod
    def vjp(node, g, args):
        x, _ = args
        return [g.tracer.structural("sum_to", (g, x)), None]


@register
class Expand(Structural):
    op = "expand"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]) or isinstance(attrs["sizes"], Param):
            return None
        sizes, shape = attrs["sizes"], shapes[0]
        lead = len(sizes) - len(shape)
        if lead < 0:
            raise ShapeError(f"expand: the number of sizes provided ({len(sizes)}) must be "
                             f"greater or equal to the number of dimensions in the tensor "
                             f"({len(shape)})")
        out = []
        for i, n in enumerate(sizes):
            old = shape[i - lead] if i >= lead else None
            if n == -1:
                if old is None:
                    raise ShapeError("expand: -1 is not allowed in a leading, new dimension")
                n = old
            elif old is not None and old != 1 and old != n:
                raise ShapeError(f"expand: the expanded size of the tensor ({n}) must match the "
                                 f"existing size ({old}) at non-singleton dimension {i}. "
                                 f"Target sizes: {list(sizes)}. Tensor sizes: {list(shape)}")
            out.append(n)
        return tuple(out)

    @staticmethod
    def numpy(node, a, p):
        if node.shape is not None and isinstance(node.shape, tuple):
            return f"numpy.broadcast_to({a[0]}, {node.shape!r})"
        return f"_expand({a[0]}, {p.param(node, 'sizes')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("sum_to", (g, x))]
