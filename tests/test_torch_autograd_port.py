"""torch's TestAutograd (tests/torch_port/autograd_suite.py), run against torch and symgrad.

The same generated module is imported twice: once with the real torch (skipped when torch is
not installed: that run is the proof that the port and the harness are right), once with
``sys.modules`` aliased by tests/torch_alias so that every ``torch`` name is symgrad's.
Tests that fail on symgrad are marked xfail(strict=True) with the deliberate difference they
hit (SYMGRAD_XFAIL below; docs/torch-conformance.md lists them with the counts).
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
SUITE = os.path.join(HERE, "torch_port", "autograd_suite.py")


def _load(module_name, aliases):
    """Import SUITE as `module_name` with sys.modules[k] = v for aliases while it loads."""
    saved = {k: sys.modules.get(k) for k in aliases}
    sys.modules.update(aliases)
    try:
        spec = importlib.util.spec_from_file_location(module_name, SUITE)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


# ------------------------------------------------------------------ deliberate differences
# key -> the documented difference (docs/torch-conformance.md, README "Deliberate differences")
REASONS = {
}

# test name -> REASONS key
SYMGRAD_XFAIL = {
}

# tests too slow for CI on one backend or both (> ~5 s): marked slow
SLOW = set()


def _mark(cls, xfails=()):
    for name in dir(cls):
        if not name.startswith("test"):
            continue
        fn = getattr(cls, name)
        marks = []
        if name in xfails:
            marks.append(pytest.mark.xfail(strict=True, reason=REASONS[xfails[name]]))
        if name in SLOW:
            marks.append(pytest.mark.slow)
        for m in marks:
            fn = m(fn)
        if marks:
            setattr(cls, name, fn)
    return cls


try:
    import torch as _torch  # noqa: F401
    _HAVE_TORCH = True
except ImportError:
    _HAVE_TORCH = False

if _HAVE_TORCH:
    _torch_suite = _load("torch_port_autograd_torch", {})

    @_mark
    class TestAutogradOnTorch(_torch_suite.TestAutograd):
        """torch's TestAutograd on torch itself."""
else:
    @pytest.mark.skip(reason="torch is not installed (the symgrad run below needs none)")
    def test_torch_side_needs_torch():
        pass

from torch_alias import modules as _alias_modules  # noqa: E402

_symgrad_suite = _load("torch_port_autograd_symgrad", _alias_modules())


class TestAutogradOnSymgrad(_symgrad_suite.TestAutograd):
    """torch's TestAutograd with every torch name mapped to symgrad."""


_mark(TestAutogradOnSymgrad, SYMGRAD_XFAIL)
