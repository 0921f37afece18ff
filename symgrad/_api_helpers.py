"""The helpers the public API's function modules share, below all three (`_functions.py`,
`nn/functional.py`, `special.py`): torch's `out=` (`with_out`), whether a value is traced,
`where`, and `_run`: an op run in a traced forward as it is, on runtime tensors as a
forward-only Function of one autograd node with torch's name (nn.functional's and special's).
torch.xlog1py and torch.special.xlog1py are one function here (`_xlog1py_op`).

Importing this module imports no SymPy.
"""
from __future__ import annotations

import functools


def with_out(fn):
    """torch's `out=` on a function: the result is written into `out` (of the result's shape)
    and `out` returned; as in torch, not while an argument requires grad."""
    @functools.wraps(fn)
    def op(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        if out is None:
            return result
        from .autograd.grad_mode import is_grad_enabled

        if is_grad_enabled() and (getattr(result, "requires_grad", False) or out.requires_grad):
            raise RuntimeError(f"{fn.__name__}(): functions with out=... arguments don't "
                               "support automatic differentiation, but one of the arguments "
                               "requires grad.")
        if tuple(out.shape) != tuple(result.shape):
            raise RuntimeError(f"{fn.__name__}(): out= has shape {tuple(out.shape)}, the "
                               f"result {tuple(result.shape)}")
        out.copy_(result)
        return out
    return op


def _is_traced(x):
    return hasattr(x, "tracer") and hasattr(x, "expr")


def _where(cond, a, b):
    from . import _runtime_ops

    return _runtime_ops.where(cond, a, b)


# ------------------------------------------------------------------- forward-only Functions
_FUNCTIONS: dict[tuple, type] = {}


# torch's backward of these is differentiable in its mask's operand (leaky_relu_backward(grad,
# self), ...): their first gradient requires grad when the input does (torch's grad of it is
# zeros, not an error; see Graph.mask_orders)
MASK_DIFFERENTIABLE = {"leaky_relu", "hardtanh", "threshold", "softshrink", "hardshrink", "nll_loss"}


def _function(name, node, body):
    # keyed by the node name too: one op's node can depend on its reduction (l1_loss's
    # AbsBackward0 / MeanBackward0 / SumBackward0), and the first call's must not stick
    cls = _FUNCTIONS.get((name, node))
    if cls is None:
        from .autograd.function import Function

        def forward(ctx, *args):
            return body(*args)

        forward.__qualname__ = f"{name}.forward"
        # named nn.functional's, as when it was made there: a generated module's SOURCE and
        # the cache keys name a Function by its module (symgrad/nn/functional.py:Silu)
        camel = "".join(part.capitalize() for part in name.split("_"))
        cls = type(camel, (Function,),
                   {"forward": staticmethod(forward), "__module__": "symgrad.nn.functional",
                    "_node_name": node, "_mask_orders": int(name in MASK_DIFFERENTIABLE),
                    "__doc__": f"torch.nn.functional.{name} as a forward-only Function."})
        _FUNCTIONS[name, node] = cls
    return cls


def _run(name, node, body, *args):
    """body(*args) in a traced forward; on runtime tensors the forward-only Function `name`
    (one node named `node`) whose forward is body."""
    if any(_is_traced(a) for a in args):
        return body(*args)
    from .tensor import Tensor

    if not any(isinstance(a, Tensor) for a in args):
        raise TypeError(f"{name}(): argument 'input' must be a Tensor, not "
                        f"{type(args[0]).__name__}")
    return _function(name, node, body).apply(*args)


def _xlog1py(x, y):
    # 0 where x == 0 and y is not NaN (torch); x * log1p(y) otherwise
    return _where((x == 0) & ~y.isnan(), 0.0, x * y.log1p())


def _xlog1py_op(input, other):
    """input * log1p(other), 0 where input is 0 (other not NaN): the body of torch.xlog1py
    (`_functions.py`) and torch.special.xlog1py (`special.py`), each adding `out=`."""
    from .tensor import Tensor, tensor

    if not _is_traced(input) and not _is_traced(other):
        if not isinstance(input, Tensor):
            input = tensor(input, dtype=other.dtype)
        if not isinstance(other, Tensor):
            other = tensor(other, dtype=input.dtype)
    return _run("xlog1py", "SpecialXlog1PyBackward0", _xlog1py, input, other)
