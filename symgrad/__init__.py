"""symgrad: write the forward, get the backward as readable generated code.

The pipeline (each stage a module): trace -> differentiate -> optimize -> emit -> run.
`import symgrad` stays light: SymPy is imported only when something is traced or compiled
(the built-in ops run from generated modules checked in under `symgrad/_generated/`).
"""
__version__ = "0.1.0"

from . import autograd  # noqa: E402  (binds the runtime: Tensor, engine, Function)
from ._runtime_ops import *  # noqa: E402,F401,F403
from ._runtime_ops import __all__ as _ops_all  # noqa: E402
from .autograd import (  # noqa: E402,F401
    Function, detect_anomaly, enable_grad, inference_mode, is_anomaly_enabled,
    is_grad_enabled, no_grad, set_detect_anomaly, set_grad_enabled,
)
from .errors import CompileError, ShapeError, SymgradError, TraceError  # noqa: E402,F401
from .tensor import *  # noqa: E402,F401,F403
from .tensor import __all__ as _tensor_all  # noqa: E402

import sys as _sys  # noqa: E402

tensor = _sys.modules[__name__ + ".tensor"]   # the factory, callable; also the module


def compile(fn, *example_inputs, target="numpy", dtype=None, **options):
    """Compile a forward into a module with forward and backward. See `symgrad.compiler`."""
    from .compiler import compile as _compile

    return _compile(fn, *example_inputs, target=target, dtype=dtype, **options)


def trace(fn, *example_inputs, **kwargs):
    """Trace a forward into a `Graph` of SymPy expressions. See `symgrad.trace`."""
    from .trace import trace as _trace

    return _trace(fn, *example_inputs, **kwargs)


def _method(name):
    def op(x, *args, **kwargs):
        return getattr(x, name)(*args, **kwargs)
    op.__name__ = name
    op.__doc__ = f"sg.{name}(x, ...) is x.{name}(...)."
    return op


# stable compositions: the same spelling in a traced forward and on runtime tensors
softplus = _method("softplus")
log_sigmoid = _method("log_sigmoid")
logsumexp = _method("logsumexp")
log_softmax = _method("log_softmax")
softmax = _method("softmax")

__all__ = sorted(set(_ops_all) | set(_tensor_all) | {
    "Function", "autograd", "compile", "trace", "no_grad", "enable_grad", "set_grad_enabled",
    "is_grad_enabled", "inference_mode", "detect_anomaly", "set_detect_anomaly",
    "is_anomaly_enabled", "softplus", "log_sigmoid", "logsumexp", "log_softmax", "softmax",
    "TraceError", "ShapeError", "CompileError", "SymgradError", "__version__",
})
