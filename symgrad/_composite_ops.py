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

# name -> torch's grad_fn class name (what `y.grad_fn` shows)
COMPOSITE = {
    "sinh": "SinhBackward0", "cosh": "CoshBackward0", "asinh": "AsinhBackward0",
    "acosh": "AcoshBackward0", "atanh": "AtanhBackward0", "asin": "AsinBackward0",
    "acos": "AcosBackward0", "atan": "AtanBackward0", "atan2": "Atan2Backward0",
    "log2": "Log2Backward0", "log10": "Log10Backward0", "exp2": "Exp2Backward0",
    "erfc": "ErfcBackward0", "logit": "LogitBackward0", "hypot": "HypotBackward0",
    "fmod": "FmodBackward0", "remainder": "RemainderBackward0", "xlogy": "XlogyBackward0",
    "lerp": "LerpBackward0", "floor": "FloorBackward0", "ceil": "CeilBackward0",
    "round": "RoundBackward0", "trunc": "TruncBackward0", "frac": "FracBackward0",
    "floor_divide": "FloorDivideBackward0",
    "cumsum": "CumsumBackward0", "flip": "FlipBackward0", "amax": "AmaxBackward0",
    "amin": "AminBackward0", "var": "VarBackward0", "std": "StdBackward0",
    "norm": "NormBackward1", "clamp_min": "ClampMinBackward0", "clamp_max": "ClampMaxBackward0",
    "reciprocal": "ReciprocalBackward0", "softplus": "SoftplusBackward0",
    "log_sigmoid": "LogSigmoidBackward0", "logsumexp": "LogsumexpBackward0",
    "softmax": "SoftmaxBackward0", "log_softmax": "LogSoftmaxBackward0",
}
# numpy-style aliases of the same ops
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
           "arccosh": "acosh", "arctanh": "atanh", "arctan2": "atan2", "fix": "trunc"}

_FUNCTIONS: dict[str, type] = {}


def composite(name: str) -> type:
    """The forward-only Function of op `name` (created once)."""
    cls = _FUNCTIONS.get(name)
    if cls is None:
        def forward(ctx, x, *args, **kwargs):
            return getattr(x, name)(*args, **kwargs)

        forward.__qualname__ = f"{name}.forward"
        backward_name = COMPOSITE[name]
        cls = type(backward_name[:-len("Backward0")] if backward_name.endswith("Backward0")
                   else name, (Function,),
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
