"""Deprecated ``Variable``: ``Variable(t)`` returns a Tensor (and warns)."""

import warnings

from symgrad import tensor as _tm

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, _tm.Tensor)


class Variable(metaclass=_VariableMeta):
    """Deprecated: Tensors are Variables. ``Variable(data, requires_grad=False)`` returns a Tensor."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        warnings.warn(
            "The Variable API is deprecated: Variable(tensor) returns the tensor itself; use "
            "tensors directly and set requires_grad on them.",
            DeprecationWarning,
            stacklevel=2,
        )
        if data is None:
            return _tm.empty(0, requires_grad=requires_grad)
        t = data if isinstance(data, _tm.Tensor) else _tm.tensor(data)
        if requires_grad:
            t = t if t.is_leaf else t.detach()
            t.requires_grad_(True)
        return t
