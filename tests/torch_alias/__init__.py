"""`torch` spelled as symgrad: the module objects a ported torch test file sees in sys.modules.

tests/test_torch_autograd_port.py loads torch's test file with ``sys.modules`` patched by
`modules()`, so ``import torch``, ``torch.autograd.grad``, ``from torch.autograd.function import
once_differentiable`` ... resolve to symgrad.  The mapping is names only: a torch name symgrad
lacks stays missing (an AttributeError when a test uses it), nothing is implemented here.
"""
from __future__ import annotations

import importlib
import math
import types

# torch submodule -> symgrad module of the same role
SUBMODULES = {
    "torch.autograd": "symgrad.autograd",
    "torch.autograd.function": "symgrad.autograd.function",
    "torch.autograd.graph": "symgrad.autograd.graph",
    "torch.autograd.gradcheck": "symgrad.autograd.gradcheck",
    "torch.autograd.functional": "symgrad.autograd.functional",
    "torch.autograd.forward_ad": "symgrad.autograd.forward_ad",
    "torch.autograd.grad_mode": "symgrad.autograd.grad_mode",
    "torch.autograd.anomaly_mode": "symgrad.autograd.anomaly_mode",
    "torch.autograd.variable": "symgrad.autograd.variable",
    "torch.nn": "symgrad.nn",
    "torch.nn.functional": "symgrad.nn.functional",
    "torch.linalg": "symgrad.linalg",
    "torch.special": "symgrad.special",
}

# torch top-level names whose symgrad spelling differs (constants torch re-exports from math)
RENAMES = {"inf": math.inf, "nan": math.nan}


def modules() -> dict:
    """{module name: module} to put in sys.modules while a ported file is imported."""
    import symgrad

    torch = types.ModuleType("torch", "symgrad, under torch's name (tests/torch_alias)")

    def __getattr__(name):
        if name in RENAMES:
            return RENAMES[name]
        try:
            return getattr(symgrad, name)
        except AttributeError:
            raise AttributeError(f"module 'torch' (symgrad) has no attribute '{name}'") from None

    torch.__getattr__ = __getattr__
    torch.__path__ = []          # a package: `import torch.autograd` looks in sys.modules
    out = {"torch": torch}
    for alias, real in SUBMODULES.items():
        try:
            out[alias] = importlib.import_module(real)
        except ImportError:
            continue
    torch.autograd = out["torch.autograd"]
    return out
