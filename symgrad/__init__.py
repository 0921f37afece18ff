"""symgrad: write the forward, get the backward as readable generated code.

The pipeline (each stage a module): trace -> differentiate -> optimize -> emit -> run.
`import symgrad` stays light: SymPy is imported only when something is traced or compiled
(the built-in ops run from generated modules checked in under `symgrad/_generated/`).
"""
from ._version import __version__  # noqa: F401  (defined in the bottom layer)


def _source_checkout_layout() -> None:
    """templates/ and cli/ are installed as symgrad.templates and symgrad.cli (pip install . and
    -e . alike). In a source checkout they sit beside symgrad/: when that is where this package
    was imported from, those are the ones to use (also without installing, or when an editable
    install points at another checkout or worktree)."""
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if (os.path.isfile(os.path.join(root, "templates", "numpy", "module.py.jinja"))
            and os.path.isfile(os.path.join(root, "cli", "__init__.py"))):
        __path__.append(root)


_source_checkout_layout()

from . import _allocator  # noqa: E402

_allocator.tune()   # glibc keeps NumPy-sized temporaries for reuse (see symgrad/_allocator.py)

from . import autograd  # noqa: E402  (binds the runtime: Tensor, engine, Function)
from ._runtime_ops import *  # noqa: E402,F401,F403
from ._runtime_ops import __all__ as _ops_all  # noqa: E402
from ._runtime_ops import OUT_OPS as _OUT_OPS, with_out as _with_out  # noqa: E402

for _name in _OUT_OPS:   # sg.mul(a, b, out=c), as torch.mul
    globals()[_name] = _with_out(globals()[_name])
from .autograd import (  # noqa: E402,F401
    Function, detect_anomaly, enable_grad, inference_mode, is_anomaly_check_nan_enabled,
    is_anomaly_enabled, is_grad_enabled, is_inference_mode_enabled, no_grad, set_detect_anomaly,
    set_grad_enabled,
)
from .autograd.function import get_cpu_target, set_cpu_target  # noqa: E402,F401
from .errors import CompileError, ShapeError, SymgradError, TraceError  # noqa: E402,F401
from .tensor import *  # noqa: E402,F401,F403
from .tensor import __all__ as _tensor_all  # noqa: E402
from ._composite_ops import install as _install_composites  # noqa: E402
from ._functions import *  # noqa: E402,F401,F403
from . import linalg  # noqa: E402,F401  (torch.linalg; docs/linear-algebra.md)
from .linalg import (  # noqa: E402,F401  (torch's top-level spellings)
    cholesky_solve, det, logdet, matrix_exp, matrix_power, slogdet)
from .linalg import inv as inverse, pinv as pinverse  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401
from ._functions import __all__ as _functions_all  # noqa: E402
from .ops.table import public_functions as _public_functions  # noqa: E402
from ._spellings import _method  # noqa: E402  (sg.<name> is x.<name>(...))

_install_composites(Tensor)  # noqa: F405  (torch's remaining op names; generated on first use)
from ._functions import install as _install_functions  # noqa: E402

_install_functions(Tensor)  # noqa: F405  (addmm, masked_fill, nansum, ... as methods)
from . import nn, special  # noqa: E402,F401  (torch.nn.functional's and torch.special's names)
from ._scan import fori_loop, scan  # noqa: E402,F401  (loops compiled once: docs/loops.md)

import sys as _sys  # noqa: E402

tensor = _sys.modules[__name__ + ".tensor"]   # the factory, callable; also the module


def compile(fn, *example_inputs, target="numpy", dtype=None, **options):
    """Compile a forward into a module with forward and backward. See `symgrad.compiler`."""
    from .compiler import compile as _compile

    return _compile(fn, *example_inputs, target=target, dtype=dtype, **options)


def wait_for_builds(timeout=None):
    """Wait for the C modules the tiered CPU target builds in the background (see
    `symgrad.set_cpu_target`); True when none is pending."""
    from ._tiers import wait_for_builds as _wait

    return _wait(timeout)


def to_torch(F, double_backward=None, compile=False, target=None):
    """F (a forward-only Function, a plain function or a compiled module) as a
    torch.autograd.Function running symgrad's generated code (the fused C module on CPU
    tensors, the torch target elsewhere; target="torch" / "c" pins it). See
    `symgrad.frameworks`."""
    from .frameworks import to_torch as _to_torch

    return _to_torch(F, double_backward, compile, target)


def to_jax(F):
    """F as a jax.custom_vjp function running symgrad's generated code. See
    `symgrad.frameworks`."""
    from .frameworks import to_jax as _to_jax

    return _to_jax(F)


def trace(fn, *example_inputs, **kwargs):
    """Trace a forward into a `Graph` of SymPy expressions. See `symgrad.trace`.

    `sg.trace(x)` of a tensor (or a traced value) is torch.trace: the sum of its diagonal."""
    if isinstance(fn, Tensor) or hasattr(fn, "tracer"):  # noqa: F405
        return fn.trace()
    from .trace import trace as _trace

    return _trace(fn, *example_inputs, **kwargs)


from numbers import Number as _Number  # noqa: E402  (sg.float / sg.int are dtypes)


# the same spelling in a traced forward and on runtime tensors (torch's function names): every
# public spelling of the op table (symgrad/ops/table.py); those with a runtime function of their
# own, such as sg.exp, keep it; and sgn (symgrad.ops.table.EXCEPTIONS)
def _install_functions_of_table():
    """sg.<name> for every spelling of the op table that has none yet (a test adds an entry);
    returns the spellings."""
    names = (*_public_functions(), "sgn")
    for name in names:
        if name not in globals():
            globals()[name] = _method(name)
    return names


_METHODS = _install_functions_of_table()
del _name


def polygamma(n, input):
    """torch.polygamma(n, input): the n-th derivative of digamma (n a non-negative int)."""
    return input.polygamma(n)


__all__ = sorted(set(_ops_all) | set(_tensor_all) | set(_functions_all) | {
    "Function", "autograd", "compile", "trace", "to_torch", "to_jax", "linalg", "nn", "special", "no_grad", "enable_grad", "set_grad_enabled",
    "is_grad_enabled", "inference_mode", "detect_anomaly", "set_detect_anomaly",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "set_cpu_target", "get_cpu_target",
    *_METHODS, "polygamma", "cholesky_solve", "det", "logdet", "matrix_exp", "matrix_power",
    "slogdet", "inverse", "pinverse", "save", "load", "scan", "fori_loop",
    "TraceError", "ShapeError", "CompileError", "SymgradError", "__version__",
})


class _NoAttribute(AttributeError):
    """sg.<name> that does not exist; its message (computed when shown: hasattr(sg, ...)
    pays nothing for it) suggests the close names, as x.sigmiod() does on a traced value."""

    def __str__(self):
        import difflib

        name = self.args[0]
        close = difflib.get_close_matches(name, [n for n in globals() if not n.startswith("_")],
                                          n=3, cutoff=0.75)
        hint = f" Did you mean {' or '.join(f'sg.{c}' for c in close)}?" if close else ""
        return f"module 'symgrad' has no attribute '{name}'.{hint}"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(f"module 'symgrad' has no attribute '{name}'")
    raise _NoAttribute(name)


# shown as the AttributeError it is (not symgrad._NoAttribute) in a traceback
_NoAttribute.__module__, _NoAttribute.__qualname__ = "builtins", "AttributeError"
