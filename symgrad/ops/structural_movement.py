"""Structural ops, movement: reshape, permute, transpose, squeeze/unsqueeze, indexing, cat,
cumsum, flip, zeros_like, stop_gradient, and roll, tile, repeat_interleave, tril/triu, argsort,
gather, diagonal, diag_embed with the ops their adjoints are written with."""
from __future__ import annotations

from ..errors import CompileError, ShapeError
from . import Param
from .structural_base import Structural, _concrete, register


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
