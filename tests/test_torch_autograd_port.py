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
    "saved-inputs": "deliberate: a built-in op's node keeps its inputs for its generated "
                    "backward, not torch's per-formula SavedVariables: no _saved_result, no "
                    "SavedTensor objects (_raw_saved_*, register_hooks), saved leaves are "
                    "unpacked copies, no detached-saved-tensor check",
    "legacy-call": "deliberate (README): Fn()(x) works, torch raises for a non-static forward",
    "generated-backward": "deliberate (README): a Function without backward gets a generated "
                          "one instead of the 'must implement either the backward' error",
    "node-type-names": "deliberate (README): type(grad_fn).__name__ is the node's class "
                       "(ModuleFunction, RuntimeNode; name() is torch's), and a copy into "
                       ".grad is one node with one edge (torch: CopyBackwards(None, ...))",
    "index-saves-no-tensor": "deliberate: an index node keeps its indices as NumPy arrays, so "
                             "a graph that saved no tensor runs backward twice (torch: "
                             "'Specify retain_graph=True')",
}

# test name -> REASONS key
SYMGRAD_XFAIL = {
    "test_backward_twice_with_saved_values": "index-saves-no-tensor",
    "test_custom_function_error": "generated-backward",
    "test_legacy_function_deprecation_exception": "legacy-call",
    "test_once_differentiable": "node-type-names",
    "test_no_unnecessary_unwrapping": "saved-inputs",
    "test_pack_hook_with_inplace_modification_should_fail": "saved-inputs",
    "test_saved_tensor_hooks_extra_exit_during_bw_no_crash": "saved-inputs",
    "test_saved_variable_packing_unpacking_did_not_save_original_with_default_hooks":
        "saved-inputs",
    "test_saved_variable_packing_unpacking_did_not_save_original_with_hooks": "saved-inputs",
    "test_saved_variable_saved_original_inplace_detach": "saved-inputs",
}

# tests that take more than ~5 s on one backend or both (deep graphs, gc stress): slow
SLOW = {
    "test_free_deep_graph", "test_free_deep_graph_complicated",
    "test_free_deep_graph_pyfunction", "test_gc_in_destructor",
}


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

_ALIASES = _alias_modules()
_symgrad_suite = _load("torch_port_autograd_symgrad", _ALIASES)


class TestAutogradOnSymgrad(_symgrad_suite.TestAutograd):
    """torch's TestAutograd with every torch name mapped to symgrad."""

    def setUp(self):
        # a test body's own `from torch.autograd.gradcheck import ...` must see symgrad too
        saved = {k: sys.modules.get(k) for k in _ALIASES}
        sys.modules.update(_ALIASES)

        def restore():
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.addCleanup(restore)
        super().setUp()


_mark(TestAutogradOnSymgrad, SYMGRAD_XFAIL)
