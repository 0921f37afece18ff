"""Deprecated ``Variable``: ``Variable(t)`` returns a detached alias of t (and warns)."""

import warnings

from symgrad import tensor as _tm

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, _tm.Tensor)


class Variable(metaclass=_VariableMeta):
    """Deprecated: Tensors are Variables. ``Variable(tensor, requires_grad=False)`` returns a
    detached alias of ``tensor`` (same data, no history), as torch's does."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        warnings.warn(
            "The Variable API is deprecated: Variable(tensor) returns a detached alias of the "
            "tensor; use tensors directly and set requires_grad on them.",
            DeprecationWarning,
            stacklevel=2,
        )
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "symgrad.no_grad():` instead.", UserWarning, stacklevel=2)
        if data is None:
            return _tm.empty(0, requires_grad=requires_grad)
        if not isinstance(data, _tm.Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        t = data.detach()
        if requires_grad:
            t.requires_grad_(True)
        return t
