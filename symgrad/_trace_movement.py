"""SymbolicTensor's movement, indexing and shape methods (reshape, permute, expand, split,
roll, sort, gather, diagonal, cumsum, diff, ...): a mixin of `trace.SymbolicTensor`, moved verbatim
from trace.py. Each records a structural node through the tracer.
"""
from __future__ import annotations

import math
import numbers

from .errors import DimensionError, ShapeError, TraceError
from .graph import Param


# Names of trace.py used below. trace.py imports this module before it defines them, so it
# binds them here once it has (trace._bind_moved_names).
_FROM_TRACE = ("SymbolicTensor", "_LETTERS", "_MinMax", "_advanced_getitem", "_at", "_dims",
    "_is_tensor_like", "_keyword_only_shape", "broadcast_shapes", "cat", "einsum", "full_like",
    "user_site", "zeros_like",)
(SymbolicTensor, _LETTERS, _MinMax, _advanced_getitem, _at, _dims, _is_tensor_like,
    _keyword_only_shape, broadcast_shapes, cat, einsum, full_like, user_site,
    zeros_like,) = (None,) * len(_FROM_TRACE)


class _MovementMethods:
    """SymbolicTensor's movement methods (see the module docstring)."""

    # ---- movement
    def reshape(self, *shape, **size):
        site = user_site()
        shape = _keyword_only_shape("reshape", shape, size, ("shape", "size"), site)
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list, Param)) else shape
        if not isinstance(shape, Param):
            shape = tuple(int(n) for n in shape)
        return self.tracer.structural("reshape", (self,), site=site, shape=shape)

    view = reshape

    def ravel(self):
        """torch's Tensor.ravel(): the elements as a 1-D tensor (reshape(-1))."""
        return self.reshape(-1)

    def flatten(self, start_dim=0, end_dim=-1):
        if not isinstance(self.shape, tuple) and start_dim == 0 and end_dim == -1:
            return self.reshape(-1)
        shape = self.size()
        if not shape:
            return self.reshape(1)
        site = user_site()
        (s,), (e,) = (_dims(d, len(shape), "flatten", site) for d in (start_dim, end_dim))
        if s > e:
            raise ShapeError(f"flatten() has invalid args: start_dim ({start_dim}) cannot come "
                             f"after end_dim ({end_dim}){_at(site)}")
        return self.reshape(*shape[:s], math.prod(shape[s:e + 1]), *shape[e + 1:])

    def permute(self, *dims, **named):
        site = user_site()
        dims = _keyword_only_shape("permute", dims, named, ("dims",), site)
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list, Param)) else dims
        if not isinstance(dims, Param):
            ndim = len(self.shape) if isinstance(self.shape, tuple) else len(dims)
            dims = tuple(_dims(d, ndim, "permute", site)[0] for d in dims)
            if sorted(dims) != list(range(ndim)):
                raise ShapeError(f"permute: {dims} is not a permutation of the {ndim} dims{_at(site)}")
        return self.tracer.structural("permute", (self,), site=site, dims=dims)

    def transpose(self, dim0, dim1):
        if not isinstance(self.shape, tuple):   # shape-generic: no rank needed
            return self.tracer.structural("swapaxes", (self,), site=user_site(),
                                          dims=(dim0, dim1))
        n = self.ndim
        site = user_site()
        d0, d1 = (_dims(d, n, "transpose", site)[0] for d in (dim0, dim1))
        dims = list(range(n))
        dims[d0], dims[d1] = dims[d1], dims[d0]
        return self.permute(*dims)

    swapaxes = transpose

    @property
    def T(self):
        if not isinstance(self.shape, tuple):   # shape-generic: reverse all axes
            return self.tracer.structural("permute", (self,), site=user_site(), dims=None)
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def t(self):
        return self.T

    def squeeze(self, dim=None):
        if not isinstance(self.shape, tuple):
            return self.tracer.structural("squeeze", (self,), site=user_site(), dim=dim)
        shape = self.size()
        if dim is None:
            new = tuple(n for n in shape if n != 1)
        else:
            dims = _dims(dim, len(shape), "squeeze", user_site())
            new = tuple(n for i, n in enumerate(shape) if not (i in dims and n == 1))
        return self.reshape(new)

    def unsqueeze(self, dim):
        if not isinstance(self.shape, tuple):
            return self.tracer.structural("unsqueeze", (self,), site=user_site(), dim=dim)
        shape = list(self.size())
        (dim,) = _dims(dim, len(shape) + 1, "unsqueeze", user_site())
        shape.insert(dim, 1)
        return self.reshape(tuple(shape))

    def expand(self, *sizes, **size):
        site = user_site()
        sizes = _keyword_only_shape("expand", sizes, size, ("size",), site)
        sizes = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, Param)) else sizes
        if not isinstance(sizes, Param):
            sizes = tuple(int(n) for n in sizes)
        return self.tracer.structural("expand", (self,), site=site, sizes=sizes)

    def expand_as(self, other):
        return self.expand(other.size())

    def broadcast_to(self, shape):
        return self.expand(shape)

    def cumsum(self, dim):
        site = user_site()
        (d,) = _dims(dim, self.ndim if isinstance(self.shape, tuple) else None, "cumsum", site)
        return self.tracer.structural("cumsum", (self,), site=site, dim=d, reverse=False)

    def flip(self, *dims, **named):
        site = user_site()
        dims = _keyword_only_shape("flip", dims, named, ("dims",), site)
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        dims = _dims(tuple(dims), self.ndim if isinstance(self.shape, tuple) else None,
                     "flip", site)
        return self.tracer.structural("flip", (self,), site=site, dims=dims)

    def __getitem__(self, index):
        site = user_site()
        if not isinstance(index, tuple):
            index = (index,)
        for part in index:
            if isinstance(part, SymbolicTensor) or _is_tensor_like(part) or isinstance(part, list):
                return _advanced_getitem(self, index, site)
        return self.tracer.structural("getitem", (self,), site=site, index=index)

    def masked_fill(self, mask, value):
        self.tracer._check_condition(mask, user_site(), "masked_fill")
        return self.tracer.where(mask, value, self)

    def type_as(self, other):
        return self.to(other)

    def view_as(self, other):
        return self.reshape(other.size())

    reshape_as = view_as

    def _along(self, dim, what):
        """(normalised dim, its size, index prefix) for slicing along `dim`."""
        site = user_site()
        (d,) = _dims(dim, self.ndim, what, site)
        return d, self.size()[d] if self.ndim else 1, (slice(None),) * d

    def split(self, split_size_or_sections, dim=0):
        d, n, pre = self._along(dim, "split")
        if isinstance(split_size_or_sections, numbers.Integral):
            step = int(split_size_or_sections)
            if step <= 0:
                raise ShapeError(f"split: split_size must be positive, got {step}"
                                 f"{_at(user_site())}")
            sizes = [min(step, n - a) for a in range(0, n, step)] or [0]
        else:
            sizes = [int(k) for k in split_size_or_sections]
            if sum(sizes) != n:
                raise ShapeError(f"split: split sizes {sizes} do not add up to the size {n} "
                                 f"of dimension {d}{_at(user_site())}")
        out, a = [], 0
        for k in sizes:
            out.append(self[pre + (slice(a, a + k),)])
            a += k
        return tuple(out)

    def chunk(self, chunks, dim=0):
        d, n, _ = self._along(dim, "chunk")
        if int(chunks) <= 0:
            raise ShapeError(f"chunk: chunks must be positive, got {chunks}{_at(user_site())}")
        return self.split(max(-(-n // int(chunks)), 1), d)

    def unbind(self, dim=0):
        d, n, pre = self._along(dim, "unbind")
        return tuple(self[pre + (i,)] for i in range(n))

    # ---- more movement: roll, repeat / tile, triangles, sorting, gathering, diagonals
    def _rank(self):
        return len(self.shape) if isinstance(self.shape, tuple) else None

    def _dim(self, dim, op, site, extra=0):
        """One dim normalised against the rank (+ extra new dims); as given when generic."""
        rank = self._rank()
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
            raise TraceError(f"{op}: dim must be an int, got {dim!r}{_at(site)}")
        if rank is None:
            return int(dim)
        n = max(rank + extra, 1)
        if not -n <= dim < n:
            raise DimensionError(f"{op}: dimension out of range (expected to be in range of "
                             f"[{-n}, {n - 1}], but got {dim}){_at(site)}")
        return int(dim) % n

    def _along_index(self, d, part):
        """An index selecting `part` (a slice or int) along dim d (negative d works without
        the rank: Ellipsis first)."""
        if d < 0:
            return (Ellipsis, part) + (slice(None),) * (-d - 1)
        return (slice(None),) * d + (part,)

    def roll(self, shifts, dims=None):
        site = user_site()
        shift = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
        if not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in shift):
            raise TraceError(f"roll: shifts must be an int or a tuple of ints, got {shifts!r}"
                             f"{_at(site)}")
        shift = tuple(int(s) for s in shift)
        if dims is None:
            if len(shift) != 1:
                raise ShapeError(f"roll: shifts and dims must have the same length: "
                                 f"shifts={shifts!r} has {len(shift)}, and dims is None "
                                 f"(which takes one shift){_at(site)}")
            return self.tracer.structural("roll", (self,), site=site, shifts=shift[0], dims=None)
        dim = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
        if len(dim) != len(shift):
            raise ShapeError(f"roll: shifts and dims must have the same length: "
                             f"shifts={shifts!r} has {len(shift)}, dims={dims!r} has "
                             f"{len(dim)}{_at(site)}")
        dim = tuple(self._dim(d, "roll", site) for d in dim)
        return self.tracer.structural("roll", (self,), site=site, shifts=shift, dims=dim)

    def _reps(self, op, sizes, named, names, site):
        sizes = _keyword_only_shape(op, sizes, named, names, site)
        sizes = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
        if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in sizes):
            raise TraceError(f"{op}: the repeats must be ints, got {tuple(sizes)!r}{_at(site)}")
        sizes = tuple(int(n) for n in sizes)
        if any(n < 0 for n in sizes):
            raise ShapeError(f"{op}: the repeats must be non-negative, got {sizes}{_at(site)}")
        return sizes

    def repeat(self, *sizes, **named):
        site = user_site()
        reps = self._reps("repeat", sizes, named, ("repeats",), site)
        rank = self._rank()
        if rank is not None and len(reps) < rank:
            raise ShapeError(f"repeat: the number of repeats ({len(reps)}) can not be smaller "
                             f"than the number of dimensions of the tensor ({rank}){_at(site)}")
        return self.tracer.structural("tile", (self,), site=site, reps=reps)

    def tile(self, *dims, **named):
        site = user_site()
        reps = self._reps("tile", dims, named, ("dims",), site)
        return self.tracer.structural("tile", (self,), site=site, reps=reps)

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        site = user_site()
        if isinstance(repeats, SymbolicTensor) or _is_tensor_like(repeats) or not isinstance(
                repeats, numbers.Integral) or isinstance(repeats, bool):
            raise TraceError(f"repeat_interleave: repeats must be a Python int in a traced "
                             f"forward (a tensor of counts gives a shape that depends on the "
                             f"data), got {type(repeats).__name__}{_at(site)}")
        if repeats < 0:
            raise ShapeError(f"repeat_interleave: repeats must be non-negative, got {repeats}"
                             f"{_at(site)}")
        d = None if dim is None else self._dim(dim, "repeat_interleave", site)
        return self.tracer.structural("repeat_interleave", (self,), site=site,
                                      repeats=int(repeats), dim=d)

    def _triangle(self, op, diagonal):
        site = user_site()
        if not isinstance(diagonal, numbers.Integral) or isinstance(diagonal, bool):
            raise TraceError(f"{op}: diagonal must be an int, got {diagonal!r}{_at(site)}")
        rank = self._rank()
        if rank is not None and rank < 2:
            raise ShapeError(f"{op}: input tensor must have at least 2 dimensions, got shape "
                             f"{self.shape}{_at(site)}")
        return self.tracer.structural(op, (self,), site=site, diagonal=int(diagonal))

    def tril(self, diagonal=0):
        return self._triangle("tril", diagonal)

    def triu(self, diagonal=0):
        return self._triangle("triu", diagonal)

    def argsort(self, dim=-1, descending=False, stable=False):
        site = user_site()
        d = self._dim(dim, "argsort", site)
        return self.tracer.structural("argsort", (self,), site=site, dim=d,
                                      descending=bool(descending))

    def sort(self, dim=-1, descending=False, stable=False):
        site = user_site()
        d = self._dim(dim, "sort", site)
        idx = self.tracer.structural("argsort", (self,), site=site, dim=d,
                                     descending=bool(descending))
        return _MinMax(self._gather(d, idx, True, "sort", site), idx)

    def msort(self):
        return self.sort(0).values

    def topk(self, k, dim=-1, largest=True, sorted=True):
        site = user_site()
        d = self._dim(dim, "topk", site)
        if not isinstance(k, numbers.Integral) or isinstance(k, bool):
            raise TraceError(f"topk: k must be an int, got {k!r}{_at(site)}")
        size = self.shape[d] if self._rank() else 1 if self._rank() == 0 else None
        if k < 0 or size is not None and k > size:
            raise ShapeError(f"topk: k ({k}) is out of range for dimension {d} of size {size}"
                             f"{_at(site)}")
        order = self.tracer.structural("argsort", (self,), site=site, dim=d,
                                       descending=bool(largest))
        idx = order if self._rank() == 0 else order[self._along_index(d, slice(0, int(k)))]
        return _MinMax(self._gather(d, idx, True, "topk", site), idx)

    def kthvalue(self, k, dim=-1, keepdim=False):
        site = user_site()
        d = self._dim(dim, "kthvalue", site)
        size = self.shape[d] if self._rank() else 1 if self._rank() == 0 else None
        if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1 or (
                size is not None and k > size):
            raise ShapeError(f"kthvalue: k ({k!r}) is out of range for dimension {d} of size "
                             f"{size}{_at(site)}")
        order = self.tracer.structural("argsort", (self,), site=site, dim=d, descending=False)
        idx = order if self._rank() == 0 else order[self._along_index(d, slice(k - 1, k))]
        values = self._gather(d, idx, True, "kthvalue", site)
        if not keepdim and self._rank() != 0:
            values, idx = values.squeeze(d), idx.squeeze(d)
        return _MinMax(values, idx)

    def _gather(self, d, index, sliced, op, site):
        return self.tracer.structural("gather", (self, index), site=site, dim=d, sliced=sliced,
                                      what=op)

    def _index_arg(self, index, op, site):
        """A traced integer index tensor (the forward's own input or a traced value)."""
        if isinstance(index, SymbolicTensor):
            if index.tracer is not self.tracer:
                raise TraceError(f"{op}: the index is a traced value from another trace"
                                 f"{_at(site)}")
            if index.dtype != "int":
                how = (" (a shape-generic trace has only float inputs: give an integer "
                       "example, e.g. an int64 array in example_inputs)"
                       if self.tracer.generic or index.node is not None
                       and index.node.op == "input" else "")
                raise TraceError(f"{op}: index must be an integer tensor (int64), got a "
                                 f"{index.dtype} tensor{_at(site)}{how}")
            return index
        if (_is_tensor_like(index) or isinstance(index, (list, tuple))) \
                and self.tracer.captured is not None:
            import numpy

            arr = numpy.asarray(getattr(index, "_data", index))
            if arr.dtype.kind in "iu" or arr.size == 0:
                # a constant index (captured, or built in the forward): a constant input
                return self.tracer.capture(arr.astype(numpy.int64, copy=False) if
                                           arr.dtype != numpy.int64 else arr, site)
        if _is_tensor_like(index) or isinstance(index, (list, tuple)):
            raise TraceError(f"{op}: the index must be an integer tensor, an input of the "
                             f"forward or an integer array, not {type(index).__name__}"
                             f"{_at(site)}")
        raise TraceError(f"{op}: index must be an integer tensor, got "
                         f"{type(index).__name__}{_at(site)}")

    def gather(self, dim, index, *, sparse_grad=False):
        site = user_site()
        index = self._index_arg(index, "gather", site)
        d = self._dim(dim, "gather", site)
        if self._rank() is not None and index._rank() is not None:
            if index._rank() != self._rank():
                raise ShapeError(f"gather: index tensor must have the same number of "
                                 f"dimensions as input tensor: index has shape {index.shape}, "
                                 f"input {self.shape}{_at(site)}")
            if any(k > n for i, (k, n) in enumerate(zip(index.shape, self.shape)) if i != d):
                raise ShapeError(f"gather: size does not match at a dimension other than {d}: "
                                 f"expected index {list(index.shape)} to be smaller than self "
                                 f"{list(self.shape)} apart from dimension {d}{_at(site)}")
        return self._gather(d, index, True, "gather", site)

    def take_along_dim(self, indices, dim=None):
        site = user_site()
        indices = self._index_arg(indices, "take_along_dim", site)
        if dim is None:
            return self.reshape(-1)._gather(0, indices.reshape(-1), False, "take_along_dim",
                                            site)
        d = self._dim(dim, "take_along_dim", site)
        if self._rank() is not None and indices._rank() is not None:
            if indices._rank() != self._rank():
                raise ShapeError(f"take_along_dim: input and indices should have the same "
                                 f"number of dimensions, but got {self._rank()} dimensions "
                                 f"for input, and {indices._rank()} dimensions for indices"
                                 f"{_at(site)}")
            rest = [s[:d] + s[d + 1:] for s in (self.shape, indices.shape)]
            broadcast_shapes(rest[0], rest[1], "take_along_dim", site)
        return self._gather(d, indices, False, "take_along_dim", site)

    def index_select(self, dim, index):
        site = user_site()
        index = self._index_arg(index, "index_select", site)
        rank = self.ndim
        d = self._dim(dim, "index_select", site)
        if index._rank() is not None and index._rank() > 1:
            raise ShapeError(f"index_select: index should have 1 dimension (or 0), got shape "
                             f"{index.shape}{_at(site)}")
        if rank == 0:
            return self._gather(0, index.reshape(1), False, "index_select", site).reshape(())
        shape = [1] * rank
        shape[d] = -1
        return self._gather(d, index.reshape(shape), False, "index_select", site)

    def diagonal(self, offset=0, dim1=0, dim2=1):
        site = user_site()
        rank = self._rank()
        if rank is not None and rank < 2:
            raise ShapeError(f"diagonal: input needs at least 2 dimensions, got shape "
                             f"{self.shape}{_at(site)}")
        d1, d2 = self._dim(dim1, "diagonal", site), self._dim(dim2, "diagonal", site)
        if d1 == d2:
            raise ShapeError(f"diagonal: diagonal dimensions cannot be identical {dim1}, {dim2}"
                             f"{_at(site)}")
        return self.tracer.structural("diagonal", (self,), site=site, offset=int(offset),
                                      dim1=d1, dim2=d2)

    def diag_embed(self, offset=0, dim1=-2, dim2=-1):
        site = user_site()
        d1 = self._dim(dim1, "diag_embed", site, extra=1)
        d2 = self._dim(dim2, "diag_embed", site, extra=1)
        if self._rank() is None and (d1 < 0) != (d2 < 0):
            raise TraceError(f"diag_embed: give example inputs for dims of mixed sign in a "
                             f"shape-generic trace{_at(site)}")
        if d1 == d2:
            raise ShapeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, "
                             f"{dim2}{_at(site)}")
        return self.tracer.structural("diag_embed", (self,), site=site, offset=int(offset),
                                      dim1=d1, dim2=d2)

    def diag(self, diagonal=0):
        site = user_site()
        rank = self.ndim
        if rank == 1:
            return self.diag_embed(diagonal, 0, 1)
        if rank == 2:
            return self.diagonal(diagonal)
        raise ShapeError(f"diag: expected a 1-D or 2-D tensor, got shape {self.shape}"
                         f"{_at(site)}")

    def trace(self):
        site = user_site()
        if self.ndim != 2:
            raise ShapeError(f"trace: expected a matrix (2-D), got shape {self.shape}"
                             f"{_at(site)}")
        return self.diagonal().sum()

    def outer(self, vec2):
        site = user_site()
        vec2 = self.tracer.lift(vec2, site)
        for name, v in (("input", self), ("vec2", vec2)):
            if v._rank() is not None and v._rank() != 1:
                raise ShapeError(f"outer: {name} must be 1-D, got shape {v.shape}{_at(site)}")
        return self.unsqueeze(-1) * vec2

    ger = outer

    def dot(self, other):
        site = user_site()
        other = self.tracer.lift(other, site)
        if (self._rank(), other._rank()) != (1, 1) and None not in (self._rank(), other._rank()):
            raise ShapeError(f"dot: 1D tensors expected, but got {self._rank()}D and "
                             f"{other._rank()}D tensors{_at(site)}")
        if isinstance(self.shape, tuple) and isinstance(other.shape, tuple) \
                and self.shape != other.shape:
            raise ShapeError(f"dot: inconsistent tensor size, expected tensor {self.shape} and "
                             f"src {other.shape} to have the same number of elements"
                             f"{_at(site)}")
        return self.tracer.structural("matmul", (self, other), site=site)

    vdot = dot

    def inner(self, other):
        site = user_site()
        other = self.tracer.lift(other, site)
        if self.ndim == 0 or other.ndim == 0:
            return self * other
        a = "".join(_LETTERS[i] for i in range(self.ndim - 1))
        b = "".join(_LETTERS[self.ndim + i] for i in range(other.ndim - 1))
        return einsum(f"{a}z,{b}z->{a}{b}", self, other)

    def cross(self, other, dim=None):
        site = user_site()
        other = self.tracer.lift(other, site)
        shape = broadcast_shapes(self.shape, other.shape, "cross", site)
        if dim is None:
            if not isinstance(shape, tuple):
                raise TraceError(f"cross: give dim= in a shape-generic trace{_at(site)}")
            dim = next((i for i, n in enumerate(shape) if n == 3), None)
            if dim is None:
                raise ShapeError(f"cross: no dimension of size 3 in input, shape {shape}"
                                 f"{_at(site)}")
        if isinstance(shape, tuple):
            (d,) = _dims(dim, len(shape), "cross", site)
            for name, v in (("input", self), ("other", other)):
                if len(v.shape) != len(shape) or v.shape[d] != 3:
                    raise ShapeError(f"cross: {name} must have size 3 in dimension {dim} and "
                                     f"the same rank as the other, got shape {v.shape}"
                                     f"{_at(site)}")
        else:
            d = dim
        a1, a2 = self.roll(-1, d), self.roll(-2, d)
        b1, b2 = other.roll(-1, d), other.roll(-2, d)
        return a1 * b2 - a2 * b1

    def kron(self, other):
        site = user_site()
        other = self.tracer.lift(other, site)
        n = max(self.ndim, other.ndim)
        a = (1,) * (n - self.ndim) + tuple(self.shape)
        b = (1,) * (n - other.ndim) + tuple(other.shape)
        left = self.reshape(tuple(k for m in a for k in (m, 1)))
        right = other.reshape(tuple(k for m in b for k in (1, m)))
        return (left * right).reshape(tuple(p * q for p, q in zip(a, b)))

    def _last(self, d, site, op):
        """(self with dim d moved last, a function moving such a value's last dim back)."""
        rank = self._rank()
        if d == -1 or rank is not None and d == rank - 1:
            return self, lambda v: v
        return self.transpose(d, -1), lambda v: v.transpose(d, -1)

    def _lower_mask(self, square):
        """A bool tensor of `square`'s shape (..., n, n): True on and below the diagonal."""
        return full_like(square, 1.0).tril() != 0

    def cumprod(self, dim, *, dtype=None):
        # out_j = prod over i <= j of x_i, as one prod over the last axis of an (n, n) table:
        # prod's derivatives are exact with zeros, to every order (no division by x)
        site = user_site()
        d = self._dim(dim, "cumprod", site)
        if self._rank() == 0:
            return self * 1
        x, back = self._last(d, site, "cumprod")
        rows = x.unsqueeze(-2) + zeros_like(x.unsqueeze(-1))   # rows[..., j, i] = x_i
        table = (rows - 1).tril() + 1                          # 1 where i > j
        return back(table.prod(-1))

    def logcumsumexp(self, dim):
        site = user_site()
        d = self._dim(dim, "logcumsumexp", site)
        if self._rank() == 0:
            return self * 1
        x, back = self._last(d, site, "logcumsumexp")
        rows, cols = x.unsqueeze(-2), x.unsqueeze(-1)
        mask = self._lower_mask(rows + zeros_like(cols))
        seen = self.tracer.where(mask, rows, cols)    # x_i for i <= j, else x_j (in the set)
        top = seen._exp_shift(-1)                     # max over i <= j (0 if infinite)
        total = self.tracer.where(mask, (seen - top).exp(), 0.0).sum(-1)
        return back(top.squeeze(-1) + total.log())

    def _cumextreme(self, kind, dim):
        # torch's indices: the last position of the running max (min) so far, or of the last
        # NaN (which propagates), as an argmax over an (n, n) table of the prefix's hits (1
        # where x_i is the running max or NaN, 0 after the prefix: a table of values could not
        # put the later positions below a prefix of -inf); the values gathered there, so the
        # gradient goes to that position as in torch
        op = f"cum{kind}"
        site = user_site()
        rank = self.ndim
        d = self._dim(dim, op, site)
        if rank == 0:
            values, indices = self.reshape(1)._cumextreme(kind, 0)
            return _MinMax(values.reshape(()), indices.reshape(()))
        x, back = self._last(d, site, op)
        n = x.shape[-1]
        y = x if kind == "max" else -x
        rows = y.unsqueeze(-2) + zeros_like(y.unsqueeze(-1))   # rows[..., j, i] = y_i
        mask = self._lower_mask(rows)
        first = y[..., :1].unsqueeze(-1)                        # in every prefix
        top = self.tracer.where(mask, rows, first).amax(-1, keepdim=True).detach()
        hits = self.tracer.where(mask & ((rows == top) | rows._isnan()), 1.0, 0.0)
        indices = back((n - 1) - hits.flip(-1).argmax(-1))
        return _MinMax(self._gather(d, indices, True, op, site), indices)

    def cummax(self, dim):
        return self._cumextreme("max", dim)

    def cummin(self, dim):
        return self._cumextreme("min", dim)

    def narrow(self, dim, start, length):
        site = user_site()
        d, n, pre = self._along(dim, "narrow")
        for name, v in (("start", start), ("length", length)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise TraceError(f"narrow: {name} must be an int, got {v!r}{_at(site)}")
        start = start + n if start < 0 else start
        if not 0 <= start <= n or length < 0 or start + length > n:
            raise ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension "
                             f"size ({n}) of dimension {d}{_at(site)}")
        return self[pre + (slice(start, start + length),)]

    def unflatten(self, dim, sizes):
        site = user_site()
        d = self._dim(dim, "unflatten", site)
        shape = self.size()
        sizes = tuple(int(n) for n in sizes)
        known = math.prod(n for n in sizes if n != -1)
        if sizes.count(-1) > 1 or (-1 not in sizes and known != shape[d]) or (
                -1 in sizes and (known == 0 or shape[d] % known)):
            raise ShapeError(f"unflatten: provided sizes {list(sizes)} don't multiply up to the "
                             f"size of dim {dim} ({shape[d]}) in the input tensor{_at(site)}")
        sizes = tuple(shape[d] // known if n == -1 else n for n in sizes)
        return self.reshape(shape[:d] + sizes + shape[d + 1:])

    def movedim(self, source, destination):
        site = user_site()
        rank = self.ndim
        src = tuple(source) if isinstance(source, (tuple, list)) else (source,)
        dst = tuple(destination) if isinstance(destination, (tuple, list)) else (destination,)
        if len(src) != len(dst):
            raise ShapeError(f"movedim: Invalid source or destination dims: source ({list(src)}"
                             f" dims) should contain the same number of dims as destination "
                             f"({list(dst)} dims){_at(site)}")
        src = [self._dim(s, "movedim", site) for s in src]
        dst = [self._dim(s, "movedim", site) for s in dst]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise ShapeError(f"movedim: repeated dim in source {source!r} or destination "
                             f"{destination!r}{_at(site)}")
        order = [None] * rank
        for s, t in zip(src, dst):
            order[t] = s
        rest = iter(i for i in range(rank) if i not in src)
        order = [next(rest) if o is None else o for o in order]
        return self.permute(*order)

    moveaxis = movedim

    def diff(self, n=1, dim=-1, prepend=None, append=None):
        site = user_site()
        d = self._dim(dim, "diff", site)
        x = self
        if prepend is not None or append is not None:
            parts = [p for p in (prepend, self, append) if p is not None]
            x = cat(parts, d)
        for _ in range(int(n)):
            x = x[self._along_index(d, slice(1, None))] - x[self._along_index(d, slice(None, -1))]
        return x
