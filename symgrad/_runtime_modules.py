"""The built-in ops' generated modules, by name (``_module("exp")`` imports
``symgrad._generated.exp`` once), and a module's gradient module (``grad_module``: compiled on
demand for create_graph / higher order). Moved verbatim from _runtime_ops.py, which re-exports
every name; it imports no module of the runtime, so autograd's module node
(autograd/_module_nodes.py) and the op layer's rooms import it at module level.
"""

import importlib


# --------------------------------------------------------------------- modules
_MODULES = {}


def _module(name):
    """The generated module of built-in op ``name`` (``symgrad/_generated/<name>.py``)."""
    mod = _MODULES.get(name)
    if mod is None:
        mod = _MODULES[name] = importlib.import_module(f"symgrad._generated.{name}")
    return mod


def grad_module(mod, needed=None):
    """Module whose forward is ``mod.backward`` (for create_graph / higher order); `needed`:
    per input, whether its gradient is wanted (None: all)."""
    from symgrad.compiler import grad_module as compiler_grad_module

    return compiler_grad_module(mod, needed)
