"""Generate tests/torch_port/autograd_suite.py from torch's test/test_autograd.py.

    python tools/torch_port/generate_autograd_suite.py PATH/TO/test_autograd.py

Takes class ``TestAutograd`` and keeps, verbatim, every test method that uses only public API
(the groups left out are the RULES below, each matched on the method's source text, decorators
included) plus the class's helpers; tests that fail on the installed torch itself (the file
is torch v2.6.0's, torch here is newer) are left out through TORCH_DRIFT. The output is a
generated file: change this script, not the output.
"""
import ast
import re
import sys
import textwrap
from collections import OrderedDict

SOURCE = ("pytorch/pytorch test/test_autograd.py at release tag v2.6.0 (the file as shipped in the\n"
          "v2.6.0 source release, 14273 lines, sha256 " + "{sha}" + ")")

RULES = [
    ("private torch names (torch._C, torch.autograd._*, torch._subclasses, ...)",
     r"torch\._|\._C\b|autograd\._|_functions\.|\bfrom torch\._|_internal|_version_counter|"
     r"\._(backward_hooks|execution_engine|is_view|register_hook_dict|grad_fn|current_level|"
     r"backward_cls)\b|autograd\.torch\b"),
    ("sparse / mkldnn / complex / nested / quantized / meta tensors",
     r"sparse|mkldnn|complex|cfloat|cdouble|\.nested|nested_tensor|to_padded|quantize|qint|"
     r"[\"']meta[\"']|device=.meta|\d+j\b"),
    ("CUDA-only or another device", r"cuda|TEST_CUDA|\bmps\b|xpu|deviceCountAtLeast"),
    ("torch.nn modules / optim", r"\bnn\.|optim"),
    ("vmap / functorch", r"vmap|functorch|jacrev|jacfwd"),
    ("dispatch / function-mode subclasses", r"__torch_dispatch__|__torch_function__|"
     r"TorchDispatchMode|no_dispatch|_make_subclass|FlopCounterMode|TorchFunctionMode"),
    ("torch.utils.checkpoint (outside torch.autograd)", r"checkpoint"),
    ("autograd profiler (issue 21 item 2, another suite)",
     r"profile|record_function|emit_nvtx|emit_itt|kineto"),
    ("TorchScript / torch.compile / torch.library / C++ extensions",
     r"torch\.jit|torch\.compile|torch\.library|load_inline|cpp_extension|torch\.fx|"
     r"torch\.ops|custom_op|dynamo"),
    ("subprocesses", r"subprocess|multiprocessing"),
    ("assertExpected snapshot files (not shipped)", r"assertExpected\("),
]

# Tests that fail on torch 2.13 itself: torch changed since v2.6.0 (name -> what changed).
TORCH_DRIFT = {
    "test_autograd_multiple_views_python": "the view+inplace error names the Function "
                                           "(ComplexView), not ComplexViewBackward",
    "test_grad_empty_inputs": "autograd.grad(y, []) raises '`inputs` argument to `grad()` "
                              "cannot be empty.'",
    "test_lobpcg": "gradcheck of lobpcg's second output fails (and takes a minute)",
    "test_naughty_anomaly_access": "an expectedFailure that torch 2.13 passes",
    "test_naughty_autograd_function_stashing_ctx": "ctx.saved_tensors of a freed graph no "
                                                   "longer raises",
    "test_not_implemented_grad": "nextafter has a derivative",
}

HEADER = '''"""torch's own TestAutograd, ported as a conformance suite.  GENERATED, do not edit:
tools/torch_port/generate_autograd_suite.py writes this file from torch's source.

Source: {source}.
Licence: BSD-3-Clause, (c) the PyTorch contributors; the test bodies below are torch's,
unchanged. The helpers they call (assertEqual with torch's tolerances, assertRaisesRegex,
assertWarnsRegex, parametrize, gradcheck, ...) are re-implemented once over NumPy in
tests/torch_port/harness.py, so torch and symgrad get the same checks.
tests/test_torch_autograd_port.py runs this module twice: against torch (when installed) and
against symgrad through tests/torch_alias (`torch`, `torch.autograd`, ... mapped to symgrad).

Private names kept: `Tensor._version`, `Tensor._base` and a node's `_saved_*` / `_raw_saved_*`
attributes (torch's autograd notes document them); every other private name is left out.
`gradcheck` / `gradgradcheck` are torch.autograd's public ones (torch's test-internal wrappers
turn on check_batched_grad, which needs vmap, left out below).

Of TestAutograd's {total} test methods, {kept} are ported. Left out, by group (a method is
listed under the first group it matches):
{left_out}
"""
import collections  # noqa: F401
import contextlib  # noqa: F401
import functools  # noqa: F401
import gc  # noqa: F401
import io  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import os  # noqa: F401
import pickle  # noqa: F401
import random  # noqa: F401
import sys  # noqa: F401
import tempfile  # noqa: F401
import threading  # noqa: F401
import time  # noqa: F401
import unittest  # noqa: F401
import uuid  # noqa: F401
import warnings  # noqa: F401
import weakref  # noqa: F401
from collections import OrderedDict  # noqa: F401
from copy import deepcopy  # noqa: F401
from functools import partial, reduce  # noqa: F401
from itertools import product  # noqa: F401
from operator import mul  # noqa: F401

import torch

from torch_port.harness import (  # noqa: F401
    IS_MACOS, IS_WINDOWS, TestCase, disable_gc, instantiate_parametrized_tests, parametrize,
    public_name, skipIfMPS, skipIfNoLapack, skipIfTorchDynamo,
    skipIfWindows, slowTest, xfailIfS390X,
)

fwAD = public_name("torch.autograd.forward_ad")
inf = public_name("torch", "inf")
nan = public_name("torch", "nan")
Function = public_name("torch.autograd", "Function")
Variable = public_name("torch.autograd", "Variable")
detect_anomaly = public_name("torch.autograd", "detect_anomaly")
InplaceFunction = public_name("torch.autograd.function", "InplaceFunction")
once_differentiable = public_name("torch.autograd.function", "once_differentiable")
GradientEdge = public_name("torch.autograd.graph", "GradientEdge")
gradcheck = public_name("torch.autograd.gradcheck", "gradcheck")
gradgradcheck = public_name("torch.autograd.gradcheck", "gradgradcheck")


@contextlib.contextmanager
def set_warn_always_context(new_val):
    """common_utils.set_warn_always_context, for a backend that has torch.set_warn_always."""
    if not hasattr(torch, "set_warn_always"):
        yield
        return
    old = torch.is_warn_always_enabled()
    torch.set_warn_always(new_val)
    try:
        yield
    finally:
        torch.set_warn_always(old)
'''


def main(path, out):
    import hashlib
    raw = open(path, "rb").read()
    src = raw.decode("utf-8")
    sha = hashlib.sha256(raw).hexdigest()[:16]
    lines = src.splitlines()
    tree = ast.parse(src)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TestAutograd")
    graph_desc = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                      and n.name == "graph_desc")
    left = OrderedDict((name, []) for name, _ in RULES)
    drift = "fails on torch 2.13 itself (torch changed since v2.6.0)"
    left[drift] = []
    body, total, kept = [], 0, 0
    bad_helpers = {}          # helper name -> the group its own source falls in
    for n in cls.body:
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("test"):
            start = n.decorator_list[0].lineno if n.decorator_list else n.lineno
            text = "\n".join(lines[start - 1:n.end_lineno])
            why = next((name for name, pat in RULES if re.search(pat, text)), None)
            if why is not None:
                bad_helpers[n.name] = why
    for n in cls.body:
        start = n.decorator_list[0].lineno if getattr(n, "decorator_list", None) else n.lineno
        text = "\n".join(lines[start - 1:n.end_lineno])
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test"):
            total += 1
            why = next((name for name, pat in RULES if re.search(pat, text)), None)
            if why is None:   # a test calling a helper that needs a left-out feature
                why = next((w for h, w in bad_helpers.items() if f"self.{h}(" in text), None)
            if why is None and n.name in TORCH_DRIFT:
                why = drift
            if why is not None:
                left[why].append(n.name)
                continue
            kept += 1
        elif isinstance(n, ast.FunctionDef) and n.name in ("tearDown", "setUp"):
            continue          # torch's tearDown resets a private flag
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            # helpers are kept unless they need a left-out feature at class-creation time
            if any(re.search(pat, "\n".join(lines[start - 1:n.lineno])) for _, pat in RULES):
                continue
        body.append(text)
    listing = []
    for name, tests in left.items():
        if not tests:
            continue
        listing.append(f"- {name}: {len(tests)}")
        if name == drift:
            listing.extend(f"    {t}: {TORCH_DRIFT[t]}" for t in tests)
            continue
        listing.extend(textwrap.wrap(", ".join(tests), 94, initial_indent="    ",
                                     subsequent_indent="    "))
    header = HEADER.format(source=SOURCE.format(sha=sha), total=total, kept=kept, left_out="\n".join(listing))
    gd = "\n".join(lines[graph_desc.lineno - 1:graph_desc.end_lineno])
    text = (header + "\n\n" + gd + "\n\n\nclass TestAutograd(TestCase):\n"
            + "\n\n".join(body) + "\n\n\ninstantiate_parametrized_tests(TestAutograd)\n")
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{kept} of {total} TestAutograd tests -> {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "tests/torch_port/autograd_suite.py")
