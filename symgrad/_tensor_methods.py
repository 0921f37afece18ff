"""The op methods of the runtime's ``Tensor`` (a mixin: ``symgrad.tensor.Tensor`` is its subclass).

Operators (``x + y``, ``x[i]``, comparisons), the differentiable ops as methods (``add``, ``sum``,
``reshape``, ``transpose``, ...) and the in-place ops (``add_``, ``clamp_``, ...): each forwards to
the op layer, ``symgrad._runtime_ops``, which records autograd's nodes. The hottest operators and
the op table's fast-path ops are set on ``Tensor`` itself at the end of ``symgrad/tensor.py`` (the op
layer's functions, one Python frame less). ``view`` (which takes a dtype) and the random fills stay
in ``tensor.py`` with the dtypes and the generator. This module must not import SymPy.
"""

import numpy as np

from symgrad._tensor_args import _SUM_NAMES, _keyword_shape, _np_aliases

_builtin_bool = bool

# the op layer imports symgrad.tensor, which subclasses this class: symgrad/tensor.py binds it
# here once Tensor exists (with its own _ops)
_ops = None


class _TensorOps:
    """Tensor's operators and op methods, each calling the op layer (``_runtime_ops``)."""

    __slots__ = ()

    # -------------------------------------------------------------- operators
    def __add__(self, other):
        return _ops.add(self, other)

    def __radd__(self, other):
        return _ops.add(other, self)

    def __sub__(self, other):
        return _ops.sub(self, other)

    def __rsub__(self, other):
        return _ops.sub(other, self)

    def __mul__(self, other):
        return _ops.mul(self, other)

    def __rmul__(self, other):
        return _ops.mul(other, self)

    def __truediv__(self, other):
        return _ops.div(self, other)

    def __rtruediv__(self, other):
        return _ops.div(other, self)

    def __pow__(self, other):
        return _ops.pow(self, other)

    def __rpow__(self, other):
        return _ops.pow(other, self)

    def __matmul__(self, other):
        return _ops.matmul(self, other)

    def __rmatmul__(self, other):
        return _ops.matmul(other, self)

    def __neg__(self):
        return _ops.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _ops.abs(self)

    def __iadd__(self, other):
        return _ops.inplace(self, "add", other)

    def __isub__(self, other):
        return _ops.inplace(self, "sub", other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    def __eq__(self, other):
        return _ops.compare("eq", self, other)

    def __ne__(self, other):
        return _ops.compare("ne", self, other)

    def __lt__(self, other):
        return _ops.compare("lt", self, other)

    def __le__(self, other):
        return _ops.compare("le", self, other)

    def __gt__(self, other):
        return _ops.compare("gt", self, other)

    def __ge__(self, other):
        return _ops.compare("ge", self, other)

    def __invert__(self):
        return _ops.logical_not(self)

    def __and__(self, other):
        return _ops.compare("and", self, other)

    def __or__(self, other):
        return _ops.compare("or", self, other)

    def __xor__(self, other):
        return _ops.compare("xor", self, other)

    # torch's logical_*: any dtype (nonzero is True), a bool result
    def logical_not(self):
        return _ops.logical("not", self)

    def logical_and(self, other):
        return _ops.logical("and", self, other)

    def logical_or(self, other):
        return _ops.logical("or", self, other)

    def logical_xor(self, other):
        return _ops.logical("xor", self, other)

    eq = __eq__
    ne = __ne__
    lt = __lt__
    le = __le__
    gt = __gt__
    ge = __ge__

    def __getitem__(self, index):
        return _ops.getitem(self, index)

    def __setitem__(self, index, value):
        _ops.setitem(self, index, value)

    # -------------------------------------------------------------- differentiable ops
    # (abs, exp, ..., maximum, minimum: made from the op table at the end of this module)
    def add(self, other, alpha=1):
        return _ops.add(self, other, alpha=alpha)

    def sub(self, other, alpha=1):
        return _ops.sub(self, other, alpha=alpha)

    def mul(self, other):
        return _ops.mul(self, other)

    def div(self, other, *, rounding_mode=None):
        return _ops.div(self, other, rounding_mode=rounding_mode)

    def pow(self, exponent):
        return _ops.pow(self, exponent)

    def square(self):
        return _ops.square(self)

    def clamp(self, min=None, max=None):
        return _ops.clamp(self, min, max)

    clip = clamp

    def where(self, condition, other):
        return _ops.where(condition, self, other)

    def sum(self, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
        # NumPy's spellings, as torch takes them (plain parameters: keyword-only ones cost
        # a dict lookup per call for their defaults)
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("sum", dim, keepdim, axis, keepdims)
        if dim is None and dtype is None and not keepdim and self._data.dtype.kind == "f":
            return _ops._sum_all(self)
        return _ops._reduce("sum", self, dim, keepdim, _SUM_NAMES, dtype)

    def mean(self, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("mean", dim, keepdim, axis, keepdims)
        return _ops.mean(self, dim, keepdim, dtype=dtype)

    def max(self, dim=None, keepdim=False, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("max", dim, keepdim, axis, keepdims)
        return _ops.max(self, dim, keepdim)

    def min(self, dim=None, keepdim=False, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("min", dim, keepdim, axis, keepdims)
        return _ops.min(self, dim, keepdim)

    def prod(self, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("prod", dim, keepdim, axis, keepdims)
        return _ops.prod(self, dim, keepdim, dtype=dtype)

    def matmul(self, other):
        return _ops.matmul(self, other)

    def mm(self, other):
        return _ops.matmul(self, other)

    def reshape(self, *shape, **size):
        if size:   # torch's keyword spelling: x.reshape(shape=(2, 3))
            shape = _keyword_shape("reshape", shape, size, "shape")
        return _ops.reshape(self, *shape)

    def view_as(self, other):
        return _ops.view(self, other.shape)

    def reshape_as(self, other):
        return _ops.reshape(self, other.shape)

    def ravel(self):
        """torch's Tensor.ravel(): the elements as a 1-D tensor (reshape(-1))."""
        return self.reshape(-1)

    def flatten(self, start_dim=0, end_dim=-1):
        return _ops.flatten(self, start_dim, end_dim)

    def transpose(self, dim0, dim1):
        return _ops.transpose(self, dim0, dim1)

    swapaxes = transpose
    swapdims = transpose

    def t(self):
        return _ops.t(self)

    def as_strided(self, size, stride, storage_offset=None):
        """torch's ``x.as_strided(size, stride, storage_offset)``: a view of ``x``'s memory
        (strides in elements; the offset from the start of the array ``x`` views)."""
        return _ops.as_strided(self, size, stride, storage_offset)

    # torch's in-place view ops: `x` itself becomes the view (same base, same history rules)
    def as_strided_(self, size, stride, storage_offset=None):
        return _ops.inplace_view(self, "as_strided",
                                 lambda v: _ops.as_strided(v, size, stride, storage_offset))

    def transpose_(self, dim0, dim1):
        return _ops.inplace_view(self, "transpose", lambda v: _ops.transpose(v, dim0, dim1))

    swapaxes_ = transpose_
    swapdims_ = transpose_

    def t_(self):
        return _ops.inplace_view(self, "t", _ops.t)

    def squeeze_(self, dim=None):
        return _ops.inplace_view(self, "squeeze" if dim is None else "squeeze_dim",
                                 lambda v: _ops.squeeze(v, dim))

    def unsqueeze_(self, dim):
        return _ops.inplace_view(self, "unsqueeze", lambda v: _ops.unsqueeze(v, dim))

    @property
    def T(self):
        nd = self._data.ndim
        if nd != 2:
            import warnings

            if nd == 0:
                warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the "
                              "identity in these cases.", UserWarning, stacklevel=2)
            else:
                warnings.warn(
                    "The use of `x.T` on tensors of dimension other than 2 to reverse their "
                    "shape is deprecated and it will throw an error in a future release. "
                    "Consider `x.mT` to transpose batches of matrices or "
                    "`x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions "
                    "of a tensor.", UserWarning, stacklevel=2)
        return _ops.permute(self, *range(nd - 1, -1, -1))

    @property
    def mT(self):
        return _ops.transpose(self, -2, -1)

    def permute(self, *dims, **named):
        if named:
            dims = _keyword_shape("permute", dims, named, "dims")
        return _ops.permute(self, *dims)

    def squeeze(self, dim=None):
        return _ops.squeeze(self, dim)

    def split(self, split_size, dim=0):
        return _ops.split(self, split_size, dim)

    def chunk(self, chunks, dim=0):
        return _ops.chunk(self, chunks, dim)

    def unbind(self, dim=0):
        return _ops.unbind(self, dim)

    def unsqueeze(self, dim):
        return _ops.unsqueeze(self, dim)

    def expand(self, *sizes, **size):
        if size:
            sizes = _keyword_shape("expand", sizes, size, "size")
        return _ops.expand(self, *sizes)

    def expand_as(self, other):
        return _ops.expand(self, other.shape)

    def argmax(self, dim=None, keepdim=False, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("argmax", dim, keepdim, axis, keepdims)
        return _ops.argreduce("argmax", self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("argmin", dim, keepdim, axis, keepdims)
        return _ops.argreduce("argmin", self, dim, keepdim)

    def all(self, dim=None, keepdim=False, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("all", dim, keepdim, axis, keepdims)
        return _ops.logical_reduce("all", self, dim, keepdim)

    def any(self, dim=None, keepdim=False, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:
            dim, keepdim = _np_aliases("any", dim, keepdim, axis, keepdims)
        return _ops.logical_reduce("any", self, dim, keepdim)

    def isnan(self):
        return _ops.predicate(np.isnan, self)

    def isfinite(self):
        return _ops.predicate(np.isfinite, self)

    def isinf(self):
        return _ops.predicate(np.isinf, self)

    def isposinf(self):
        return _ops.predicate(np.isposinf, self)

    def isneginf(self):
        return _ops.predicate(np.isneginf, self)

    def sign(self):
        return _ops.sign(self)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return _builtin_bool(np.allclose(self._data, _ops._array_of(other), rtol, atol, equal_nan))

    def equal(self, other):
        return self.shape == other.shape and _builtin_bool((self._data == other._data).all())

    # -------------------------------------------------------------- in-place ops
    def add_(self, other, alpha=1):
        return _ops.inplace(self, "add", other, alpha=alpha)

    def sub_(self, other, alpha=1):
        return _ops.inplace(self, "sub", other, alpha=alpha)

    def mul_(self, other):
        return _ops.inplace(self, "mul", other)

    def igamma(self, other):
        """torch's ``a.igamma(x)``: the regularized lower incomplete gamma P(a, x)."""
        return _ops.igamma(self, other)

    def igammac(self, other):
        """torch's ``a.igammac(x)``: the regularized upper incomplete gamma Q(a, x)."""
        return _ops.igammac(self, other)

    def igamma_(self, other):
        return _ops.inplace(self, "igamma", other)

    def igammac_(self, other):
        return _ops.inplace(self, "igammac", other)

    def div_(self, other):
        return _ops.inplace(self, "div", other)

    def pow_(self, other):
        return _ops.inplace(self, "pow", other)

    def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
        return _ops.inplace(self, "apply", lambda s: s.nan_to_num(nan, posinf, neginf))

    def clamp_(self, min=None, max=None):
        return _ops.inplace(self, "clamp", min, max)

    clip_ = clamp_

    def exp_(self):
        return _ops.inplace(self, "exp")

    def relu_(self):
        return _ops.inplace(self, "relu")

    def sigmoid_(self):
        return _ops.inplace(self, "sigmoid")

    def tanh_(self):
        return _ops.inplace(self, "tanh")

    def neg_(self):
        return _ops.inplace(self, "neg")

    def copy_(self, src, non_blocking=False):
        return _ops.inplace(self, "copy", src)

    def fill_(self, value):
        return _ops.inplace(self, "fill", value)

    def zero_(self):
        return _ops.inplace(self, "zero")
