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


def _method(name):
    def op(input, *args, **kwargs):   # torch's parameter name: sg.softmax(input=x, dim=1)
        if isinstance(input, _Number):   # sg.atan2(1.0, y): a number first, a tensor after
            other = next((a for a in args if hasattr(a, name)), None)
            if other is not None and hasattr(other, "tracer"):
                input = other.tracer.lift(input)
            elif other is not None:
                input = tensor.tensor(input, dtype=other.dtype)
        return getattr(input, name)(*args, **kwargs)
    op.__name__ = op.__qualname__ = name   # a cache key names a captured sg.<op> by it
    op.__doc__ = f"sg.{name}(x, ...) is x.{name}(...)."
    op.__module__ = "symgrad"   # as when it was made in symgrad/__init__.py (cache keys)
    return op
