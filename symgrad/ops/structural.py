"""Structural ops: reductions, matmul and movement. One class per op holds its shape rule, how
NumPy computes it, and its adjoint rule (`vjp`), written with other structural ops so that a
backward is again a graph of the same kinds and can be differentiated once more.

`vjp(node, g, args)` receives the traced adjoint `g` of the node's output and the traced values
of its operands (`SymbolicTensor`s in the derivative's trace) and returns one adjoint (or None)
per operand. Shape rules return None when the trace is generic (shapes known only at run time).
"""
from __future__ import annotations

from ..errors import CompileError, ShapeError
from . import Param

STRUCTURAL: dict[str, type["Structural"]] = {}
# The shape rules run inside a trace and the adjoint rules inside differentiate; the shape
# helpers they share with those layers are registered by them when imported (the op table
# imports nothing above it): "broadcast_shapes" (symgrad.trace), "needs_sum_to"
# (symgrad.differentiate).
SHAPE_HELPERS: dict = {}


def register(cls):
    STRUCTURAL[cls.op] = cls
    return cls


def _concrete(*shapes):
    return all(isinstance(s, tuple) for s in shapes)


def reduced_shape(shape, dims, keepdim):
    if dims is None:
        return tuple(1 for _ in shape) if keepdim else ()
    return tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)


class Structural:
    op = ""
    out_dtype = None                   # None: the dtype of the first operand
    differentiable = True              # False: the output carries no gradient from its operands
    shape_args: tuple[int, ...] = ()   # operands read only for their shape
    # operands the output is not a differentiable function of, besides shape_args (its vjp
    # gives them None; read whole, e.g. for their shape): Graph.dependencies skips them
    constant_args: tuple[int, ...] = ()

    @staticmethod
    def shape(shapes, attrs):
        return shapes[0]

    @staticmethod
    def numpy(node, a, p) -> str:
        # every registered op overrides this; reaching it means a new op lacks its lowering
        raise CompileError(f"structural op {node.op!r} has no NumPy lowering")

    @staticmethod
    def vjp(node, g, args):
        raise CompileError(f"no derivative rule for {node.op}")


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


# --------------------------------------------------------------------------- movement
@register
class Reshape(Structural):
    op = "reshape"

    @staticmethod
    def shape(shapes, attrs):
        shape, target = shapes[0], attrs["shape"]
        if not _concrete(shape) or isinstance(target, Param):
            return None
        size = 1
        for n in shape:
            size *= n
        known = 1
        for n in target:
            if n != -1:
                known *= n
        if list(target).count(-1) > 1:
            raise ShapeError(f"reshape: only one dimension can be inferred, got {target}")
        if -1 in target:
            if known == 0 or size % known:
                raise ShapeError(f"reshape: shape {tuple(target)} is invalid for input of size {size}")
            target = tuple(size // known if n == -1 else n for n in target)
        elif known != size:
            raise ShapeError(f"reshape: shape {tuple(target)} is invalid for input of size {size}")
        return tuple(target)

    @staticmethod
    def numpy(node, a, p):
        if isinstance(node.shape, tuple):
            return f"numpy.reshape({a[0]}, {node.shape!r})"
        return f"numpy.reshape({a[0]}, {p.param(node, 'shape')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("reshape_like", (g, x))]


@register
class ReshapeLike(Structural):
    op = "reshape_like"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.reshape({a[0]}, {p.shape_of(node.args[1])})"

    @staticmethod
    def vjp(node, g, args):
        u, _ = args
        return [g.tracer.structural("reshape_like", (g, u)), None]


@register
class Permute(Structural):
    op = "permute"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]) or isinstance(attrs["dims"], Param):
            return None
        if attrs["dims"] is None:
            return tuple(reversed(shapes[0]))
        return tuple(shapes[0][d] for d in attrs["dims"])

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.transpose({a[0]}, {p.param(node, 'dims')})"

    @staticmethod
    def vjp(node, g, args):
        dims = node.attr("dims")
        if dims is None:        # a full reversal (x.T) is its own inverse
            return [g.tracer.structural("permute", (g,), dims=None)]
        if isinstance(dims, Param):
            return [g.tracer.structural("permute_back", (g,), dims=dims)]
        inverse = tuple(sorted(range(len(dims)), key=lambda i: dims[i]))
        return [g.tracer.structural("permute", (g,), dims=inverse)]


@register
class SwapAxes(Structural):
    """transpose(dim0, dim1) of a shape-generic trace; its own inverse."""

    op = "swapaxes"

    @staticmethod
    def shape(shapes, attrs):
        return None

    @staticmethod
    def numpy(node, a, p):
        d0, d1 = node.attr("dims")
        return f"numpy.swapaxes({a[0]}, {d0!r}, {d1!r})"

    @staticmethod
    def vjp(node, g, args):
        return [g.tracer.structural("swapaxes", (g,), dims=node.attr("dims"))]


@register
class PermuteBack(Structural):
    op = "permute_back"

    @staticmethod
    def shape(shapes, attrs):
        return None

    @staticmethod
    def numpy(node, a, p):
        dims = node.attr("dims")
        if isinstance(dims, (tuple, list)):   # the inverse permutation as a literal: Dask's
            inverse = tuple(sorted(range(len(dims)), key=list(dims).__getitem__))  # transpose
            return f"numpy.transpose({a[0]}, {inverse!r})"                  # takes no array
        return f"numpy.transpose({a[0]}, numpy.argsort({p.param(node, 'dims')}))"

    @staticmethod
    def vjp(node, g, args):
        return [g.tracer.structural("permute", (g,), dims=node.attr("dims"))]


@register
class Squeeze(Structural):
    op = "squeeze"

    @staticmethod
    def shape(shapes, attrs):
        return None

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.squeeze({a[0]}, axis={p.param(node, 'dim')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("reshape_like", (g, x))]


@register
class Unsqueeze(Squeeze):
    op = "unsqueeze"

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.expand_dims({a[0]}, {p.param(node, 'dim')})"


@register
class GetItem(Structural):
    op = "getitem"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]) or isinstance(attrs["index"], Param):
            return None
        import numpy

        try:
            return numpy.empty(shapes[0], dtype=numpy.bool_)[attrs["index"]].shape
        except IndexError as exc:
            raise ShapeError(f"indexing a tensor of shape {shapes[0]} with "
                             f"{attrs['index']!r}: {exc}") from None

    @staticmethod
    def numpy(node, a, p):
        return f"{a[0]}[{p.param(node, 'index')}]"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("index_put_zeros", (g, x), index=node.attr("index"))]


@register
class IndexPutZeros(Structural):
    """Adjoint of basic indexing: zeros of the operand's shape with g at the index."""

    op = "index_put_zeros"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return f"_index_put_zeros({a[0]}, {p.shape_of(node.args[1])}, {p.param(node, 'index')})"

    @staticmethod
    def vjp(node, g, args):
        return [g.tracer.structural("getitem", (g,), index=node.attr("index")), None]


@register
class Cat(Structural):
    """torch.cat: operands joined along `dim`; the adjoint slices g back into pieces."""

    op = "cat"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(*shapes):
            return None
        d = attrs["dim"]
        first = shapes[0]
        return first[:d] + (sum(s[d] for s in shapes),) + first[d + 1:]

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.concatenate(({', '.join(a)},), axis={p.param(node, 'dim')})"

    @staticmethod
    def vjp(node, g, args):
        d = node.attr("dim")
        if not _concrete(*(n.shape for n in node.args)):
            raise CompileError("cat needs known shapes to differentiate")
        out, start = [], 0
        for n in node.args:
            stop = start + n.shape[d]
            index = (slice(None),) * d + (slice(start, stop),)
            out.append(g.tracer.structural("getitem", (g,), index=index))
            start = stop
        return out


@register
class Cumsum(Structural):
    """torch.cumsum along `dim` (`reverse`: from the end, the adjoint of the forward sum)."""

    op = "cumsum"

    @staticmethod
    def numpy(node, a, p):
        d = p.param(node, "dim")
        if node.attr("reverse"):
            return f"numpy.flip(numpy.cumsum(numpy.flip({a[0]}, {d}), axis={d}), {d})"
        return f"numpy.cumsum({a[0]}, axis={d})"

    @staticmethod
    def vjp(node, g, args):
        return [g.tracer.structural("cumsum", (g,), dim=node.attr("dim"),
                                    reverse=not node.attr("reverse"))]


@register
class Flip(Structural):
    """torch.flip: reverse the order along `dims`; its own adjoint."""

    op = "flip"

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.flip({a[0]}, {p.param(node, 'dims')})"

    @staticmethod
    def vjp(node, g, args):
        return [g.tracer.structural("flip", (g,), dims=node.attr("dims"))]


@register
class ZerosLike(Structural):
    """The gradient of an input that the output does not depend on."""

    op = "zeros_like"
    differentiable = False

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.zeros_like({a[0]})"

    @staticmethod
    def vjp(node, g, args):
        return [None]


@register
class StopGradient(Structural):
    """detach(): the value passes, the gradient does not."""

    op = "stop_gradient"
    differentiable = False

    @staticmethod
    def numpy(node, a, p):
        return a[0]

    @staticmethod
    def vjp(node, g, args):
        return [None]


# --------------------------------------------------------------------------- more movement
# Each op below is linear in its differentiable operand (or, for argsort, not differentiable),
# and its adjoint is again one of these ops, so derivatives of every order stay exact.
def _tile_shapes(shape, reps):
    """(shape, reps), both padded on the left with 1s to one rank (torch.tile / repeat)."""
    n = max(len(shape), len(reps))
    return (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + tuple(reps)


@register
class Roll(Structural):
    """torch.roll: shift along `dims` (None: the flattened tensor, shape kept); the adjoint
    rolls back."""

    op = "roll"

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.roll({a[0]}, {p.param(node, 'shifts')}, axis={p.param(node, 'dims')})"

    @staticmethod
    def vjp(node, g, args):
        shifts = node.attr("shifts")
        back = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
        return [g.tracer.structural("roll", (g,), shifts=back, dims=node.attr("dims"))]


@register
class Tile(Structural):
    """torch.tile / Tensor.repeat: copies of the operand laid side by side; the adjoint sums
    the copies (untile)."""

    op = "tile"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]):
            return None
        shape, reps = _tile_shapes(shapes[0], attrs["reps"])
        return tuple(n * r for n, r in zip(shape, reps))

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.tile({a[0]}, {p.param(node, 'reps')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("untile", (g, x), reps=node.attr("reps"))]


@register
class Untile(Structural):
    """Adjoint of tile: the sum of the copies, in the operand's shape."""

    op = "untile"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return f"_untile({a[0]}, {p.shape_of(node.args[1])}, {p.param(node, 'reps')})"

    @staticmethod
    def vjp(node, h, args):
        return [h.tracer.structural("tile", (h,), reps=node.attr("reps")), None]


@register
class RepeatInterleave(Structural):
    """torch.repeat_interleave with an int count: each element `repeats` times along `dim`
    (None: of the flattened tensor); the adjoint sums each run of copies."""

    op = "repeat_interleave"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]):
            return None
        shape, r, d = shapes[0], attrs["repeats"], attrs["dim"]
        if d is None:
            size = 1
            for n in shape:
                size *= n
            return (size * r,)
        return shape[:d] + (shape[d] * r,) + shape[d + 1:]

    @staticmethod
    def numpy(node, a, p):
        return f"numpy.repeat({a[0]}, {p.param(node, 'repeats')}, axis={p.param(node, 'dim')})"

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("repeat_interleave_sum", (g, x), repeats=node.attr("repeats"),
                                    dim=node.attr("dim"))]


@register
class RepeatInterleaveSum(Structural):
    """Adjoint of repeat_interleave: each run of `repeats` copies summed, in the operand's
    shape."""

    op = "repeat_interleave_sum"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return (f"_repeat_interleave_sum({a[0]}, {p.shape_of(node.args[1])}, "
                f"{p.param(node, 'repeats')}, {p.param(node, 'dim')})")

    @staticmethod
    def vjp(node, h, args):
        return [h.tracer.structural("repeat_interleave", (h,), repeats=node.attr("repeats"),
                                    dim=node.attr("dim")), None]


@register
class Tril(Structural):
    """torch.tril: the lower triangle of the last two dims (on and below `diagonal`), zeros
    elsewhere; a mask, so its own adjoint."""

    op = "tril"
    fn = "tril"

    @classmethod
    def numpy(cls, node, a, p):
        return f"numpy.{cls.fn}({a[0]}, {p.param(node, 'diagonal')})"

    @classmethod
    def vjp(cls, node, g, args):
        return [g.tracer.structural(cls.op, (g,), diagonal=node.attr("diagonal"))]


@register
class Triu(Tril):
    op = "triu"
    fn = "triu"


@register
class ArgSort(Structural):
    """The indices that sort along `dim` (stable; `descending`: largest first, ties in their
    order, NaN first as in torch); no gradient."""

    op = "argsort"
    out_dtype = "int"
    differentiable = False

    @staticmethod
    def numpy(node, a, p):
        return f"_argsort({a[0]}, {p.param(node, 'dim')}, {p.param(node, 'descending')})"

    @staticmethod
    def vjp(node, g, args):
        return [None]


@register
class Gather(Structural):
    """torch.gather / take_along_dim: x at `index` along `dim`, over the other dims
    either the leading block of x of the index's sizes (`sliced`, torch.gather) or x and the
    index broadcast together (take_along_dim). The adjoint scatter-adds g back (gather_back),
    whose adjoint is this op again."""

    op = "gather"
    constant_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        x, idx = shapes
        if not _concrete(x, idx):
            return None
        d = attrs["dim"]
        if attrs["sliced"]:
            return tuple(idx)
        return tuple(idx[i] if i == d else max(x[i], idx[i]) for i in range(len(x)))

    @staticmethod
    def numpy(node, a, p):
        what = node.attr("what") + (f" (at {node.site})" if node.site else "")
        return (f"_gather({a[0]}, {a[1]}, {p.param(node, 'dim')}, {p.param(node, 'sliced')}, "
                f"{what!r})")

    @staticmethod
    def vjp(node, g, args):
        x, idx = args
        return [g.tracer.structural("gather_back", (g, idx, x), dim=node.attr("dim"),
                                    sliced=node.attr("sliced"), what=node.attr("what")), None]


@register
class GatherBack(Structural):
    """Adjoint of gather: zeros of the operand's shape with g added at the gathered places
    (repeated indices accumulate)."""

    op = "gather_back"
    constant_args = (1,)
    shape_args = (2,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[2]

    @staticmethod
    def numpy(node, a, p):
        return (f"_gather_back({a[0]}, {a[1]}, {p.shape_of(node.args[2])}, "
                f"{p.param(node, 'dim')})")

    @staticmethod
    def vjp(node, h, args):
        _, idx, _ = args
        # <h, back(g)> = <gather(h), g>: h (of x's shape) read as the forward read x
        return [h.tracer.structural("gather", (h, idx), dim=node.attr("dim"),
                                    sliced=node.attr("sliced"), what=node.attr("what")),
                None, None]


@register
class Diagonal(Structural):
    """torch.diagonal: the diagonal of dims (dim1, dim2) at `offset`, as a last dim."""

    op = "diagonal"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]):
            return None
        shape, k = shapes[0], attrs["offset"]
        d1, d2 = attrs["dim1"], attrs["dim2"]
        n = max(0, min(shape[d1] + min(k, 0), shape[d2] - max(k, 0)))
        return tuple(s for i, s in enumerate(shape) if i not in (d1, d2)) + (n,)

    @staticmethod
    def numpy(node, a, p):
        return (f"numpy.diagonal({a[0]}, {p.param(node, 'offset')}, {p.param(node, 'dim1')}, "
                f"{p.param(node, 'dim2')})")

    @staticmethod
    def vjp(node, g, args):
        x, = args
        return [g.tracer.structural("diagonal_back", (g, x), offset=node.attr("offset"),
                                    dim1=node.attr("dim1"), dim2=node.attr("dim2"))]


@register
class DiagonalBack(Structural):
    """Adjoint of diagonal: zeros of the operand's shape with g on that diagonal."""

    op = "diagonal_back"
    shape_args = (1,)

    @staticmethod
    def shape(shapes, attrs):
        return shapes[1]

    @staticmethod
    def numpy(node, a, p):
        return (f"_diagonal_back({a[0]}, {p.shape_of(node.args[1])}, {p.param(node, 'offset')}, "
                f"{p.param(node, 'dim1')}, {p.param(node, 'dim2')})")

    @staticmethod
    def vjp(node, h, args):
        return [h.tracer.structural("diagonal", (h,), offset=node.attr("offset"),
                                    dim1=node.attr("dim1"), dim2=node.attr("dim2")), None]


@register
class DiagEmbed(Structural):
    """torch.diag_embed: the last dim put on the diagonal (at `offset`) of new dims
    (dim1, dim2) of the output; the adjoint takes that diagonal."""

    op = "diag_embed"

    @staticmethod
    def shape(shapes, attrs):
        if not _concrete(shapes[0]):
            return None
        shape, k = shapes[0], attrs["offset"]
        n = shape[-1] + abs(k)
        out = list(shape[:-1])
        d1, d2 = sorted((attrs["dim1"], attrs["dim2"]))
        out.insert(d1, n)
        out.insert(d2, n)
        return tuple(out)

    @staticmethod
    def numpy(node, a, p):
        return (f"_diag_embed({a[0]}, {p.param(node, 'offset')}, {p.param(node, 'dim1')}, "
                f"{p.param(node, 'dim2')})")

    @staticmethod
    def vjp(node, g, args):
        return [g.tracer.structural("diagonal", (g,), offset=node.attr("offset"),
                                    dim1=node.attr("dim1"), dim2=node.attr("dim2"))]


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


from . import linalg as _linalg  # noqa: E402,F401  (registers the linear-algebra ops)
