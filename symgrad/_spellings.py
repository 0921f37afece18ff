"""sg.<name> for a spelling of the op table without a function of its own: `_method(name)`
calls ``x.<name>(...)`` (a number first: made a tensor, or lifted into the trace, like the
other argument). symgrad/__init__.py installs one per spelling (`_METHODS`); special.py makes
torch.special.xlogy's from it at module level (it took sg.xlogy from the package inside the
function: an import cycle). A made function's ``__module__`` is ``symgrad``, as before (a
cache key names a captured sg.<op> by it)."""
import sys as _sys
from numbers import Number as _Number

from . import tensor as _factory  # noqa: F401  (imports symgrad.tensor; the package's name
                                  # `tensor` is its factory while symgrad/__init__.py runs)

tensor = _sys.modules[__package__ + ".tensor"]   # the module, as symgrad/__init__.py's

from . import _runtime_ops  # noqa: E402
from .ops import table as _table  # noqa: E402


_REFLECTED = {"remainder": "__rmod__", "floor_divide": "__rfloordiv__"}


def _method(name):
    tensors = _table.tensor_operands().get(name, ())

    def op(input, *args, **kwargs):   # torch's parameter name: sg.softmax(input=x, dim=1)
        if tensors:   # torch.atan2(x, 2.0): a TypeError, as torch's (the op table's `tensors`)
            values = (input, *args, *(kwargs[p] for p in tensors[1 + len(args):] if p in kwargs))
            error = _table.number_operand_error(name, tensors, values)
            if error is not None:
                raise error
        if isinstance(input, _Number):   # sg.pow(2.0, y): a number first, a tensor after
            other = next((a for a in args if hasattr(a, name)), None)
            if other is not None and hasattr(other, "tracer"):
                reflected = _REFLECTED.get(name)
                if reflected is not None and len(args) == 1 and not kwargs:
                    # 2 % x: the traced value's reflected op, which keeps an int number int
                    return getattr(other, reflected)(input)
                input = other.tracer.lift(input)
            elif other is not None:
                # torch's promotion of a Python number with the tensor (2.5 % int_tensor is
                # float32, True // int_tensor int64): a wrapped number, not other's dtype
                input = tensor.tensor(input, dtype=tensor._sg_dtype(
                    _runtime_ops._result_dtype((input, other))))
        return getattr(input, name)(*args, **kwargs)
    op.__name__ = op.__qualname__ = name   # a cache key names a captured sg.<op> by it
    op.__doc__ = f"sg.{name}(x, ...) is x.{name}(...)."
    op.__module__ = "symgrad"   # as when it was made in symgrad/__init__.py (cache keys)
    return op
