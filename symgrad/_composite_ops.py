"""Tensor ops without a checked-in generated module, as forward-only Functions.

Each op here is a `Function` whose forward is the traced method of the same name
(`x.sinh()`, `x.cumsum(dim)`, `x.logsumexp(dim)`, ...). Its backward is therefore generated,
on first use per signature (shapes, dtypes, constants), by the same compiler as any user
Function, and cached in memory and on disk; gradients of every order follow. The built-in
ops of `symgrad/_generated/` are the fast path (no SymPy, shape-generic); these fill in
torch's remaining names so that torch code ports.

`install()` adds the methods to `Tensor` (where it has none of that name); `symgrad`'s
function spellings (`sg.sinh(x)`) call the methods.
"""
from __future__ import annotations

from .autograd.function import Function

# torch's names of the ops (`y.grad_fn` shows e.g. SinhBackward, LogSoftmaxBackward)
COMPOSITE = (
    "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan", "atan2", "log2", "log10",
    "exp2", "erfc", "logit", "hypot", "fmod", "remainder", "xlogy", "lerp", "floor", "ceil",
    "round", "trunc", "frac", "floor_divide", "cumsum", "flip", "amax", "amin", "var", "std",
    "norm", "clamp_min", "clamp_max", "reciprocal", "softplus", "log_sigmoid", "logsumexp",
    "softmax", "log_softmax",
)
# numpy-style aliases of the same ops
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
           "arccosh": "acosh", "arctanh": "atanh", "arctan2": "atan2", "fix": "trunc"}

_FUNCTIONS: dict[str, type] = {}


def composite(name: str) -> type:
    """The forward-only Function of op `name` (created once)."""
    cls = _FUNCTIONS.get(name)
    if cls is None:
        def forward(ctx, x, *args, **kwargs):
            try:
                return getattr(x, name)(*args, **kwargs)
            except TypeError as exc:   # name the Tensor op, not the traced method
                raise TypeError(str(exc).replace("SymbolicTensor.", "Tensor.")) from None

        forward.__qualname__ = f"{name}.forward"
        cls = type("".join(part.capitalize() for part in name.split("_")), (Function,),
                   {"forward": staticmethod(forward), "__module__": __name__,
                    "__doc__": f"torch.{name} as a forward-only Function (generated backward)."})
        _FUNCTIONS[name] = cls
    return cls


def _method(name):
    def method(self, *args, **kwargs):
        return composite(name).apply(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = (f"x.{name}(...) as in torch; its backward is generated on first use "
                      f"per signature and cached.")
    return method


def _reflected(name):
    def method(self, other):
        from . import tensor as _tm

        lhs = other if isinstance(other, _tm.Tensor) else _tm.tensor(other, dtype=self.dtype)
        return composite(name).apply(lhs, self)

    return method


def install(tensor_cls) -> None:
    """Add every composite op as a method of `tensor_cls` where it has none of that name."""
    for name in COMPOSITE:
        if not hasattr(tensor_cls, name):
            setattr(tensor_cls, name, _method(name))
    for alias, name in ALIASES.items():
        if not hasattr(tensor_cls, alias):
            setattr(tensor_cls, alias, getattr(tensor_cls, name))
    operators = {"__mod__": _method("remainder"), "__rmod__": _reflected("remainder"),
                 "__floordiv__": _method("floor_divide"),
                 "__rfloordiv__": _reflected("floor_divide")}
    for dunder, method in operators.items():
        if dunder not in vars(tensor_cls):
            setattr(tensor_cls, dunder, method)
