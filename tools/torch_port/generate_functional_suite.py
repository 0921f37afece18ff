"""Generate tests/torch_port/functional_suite.py from torch's test/autograd/test_functional.py.

    python tools/torch_port/generate_functional_suite.py PATH/TO/test_functional.py

Takes class ``TestAutogradFunctional`` (torch.autograd.functional: jacobian, hessian, vjp, jvp,
hvp, vhp with their strict / vectorize / create_graph / strategy options) and keeps, verbatim,
every test method that uses only public API, plus the class's helpers. The module-level
parametrizations are rewritten once: their ``logging_tensor`` subtests wrap every tensor in
``torch.testing._internal.logging_tensor.LoggingTensor`` (private, a ``__torch_dispatch__``
subclass), so only the ``base_tensor`` subtests are generated; the test names are torch's
(``test_jacobian_output_vectorized_base_tensor``, ...). The output is a generated file:
change this script, not the output.
"""
import ast
import re
import sys
import textwrap
from collections import OrderedDict

SOURCE = ("pytorch/pytorch test/autograd/test_functional.py at release tag v2.6.0 (the file as\n"
          "shipped in the v2.6.0 source release: Debian's pytorch_2.6.0+dfsg.orig.tar.xz,\n"
          "`apt-get source pytorch`), {lines} lines, sha256\n{sha}")

RULES = [
    ("private torch names (torch.autograd.functional._construct_standard_basis_for, ...)",
     r"torch\._|\._C\b|autogradF\._"),
    ("CUDA-only or another device", r"cuda|TEST_CUDA"),
]

HEADER = '''"""torch's own TestAutogradFunctional, ported as a conformance suite.  GENERATED, do not edit:
tools/torch_port/generate_functional_suite.py writes this file from torch's source.

Source: {source}.
Licence: BSD-3-Clause, (c) the PyTorch contributors; the test bodies below are torch's,
unchanged. The helpers they call (assertEqual with torch's tolerances, assertRaisesRegex,
parametrize / subtest, gradcheck, ...) are re-implemented once over NumPy in
tests/torch_port/harness.py (shared with the TestAutograd port), so torch and symgrad get the
same checks. tests/test_torch_functional_port.py runs this module twice: against torch (when
installed) and against symgrad through tests/torch_alias.

torch's module-level parametrizations run every test on plain tensors (`base_tensor`) and on
`LoggingTensor`s (`logging_tensor`: torch.testing._internal's __torch_dispatch__ subclass,
private); only the base_tensor subtests are generated, with torch's test names.

Of TestAutogradFunctional's {total} test methods, {kept} are ported ({instances} tests once
parametrized). Left out, by group:
{left_out}
"""
import types  # noqa: F401
import unittest  # noqa: F401
import warnings  # noqa: F401

import torch
import torch.autograd.functional as autogradF

from torch_port.harness import (  # noqa: F401
    TestCase, instantiate_parametrized_tests, parametrize, public_name, subtest,
)

gradcheck = public_name("torch.autograd.gradcheck", "gradcheck")
gradgradcheck = public_name("torch.autograd.gradcheck", "gradgradcheck")

# torch's factories the tests are parametrized over (torch's base_ctors, verbatim)
{ctors}

# torch's parametrizations, base_tensor subtests only (LoggingTensor is private)
base_and_logging_tensor = parametrize(
    "ctors",
    [
        subtest(base_ctors, name="base_tensor"),
    ],
)

FIXME_base_and_xfail_logging_tensor = base_and_logging_tensor

FIXME_xfail_vectorized_logging_tensor = parametrize(
    "vectorize,ctors",
    [
        subtest((True, base_ctors), name="vectorized_base_tensor"),
        subtest((False, base_ctors), name="base_tensor"),
    ],
)

vectorized_logging_tensor = FIXME_xfail_vectorized_logging_tensor
'''


def main(path, out):
    import hashlib
    raw = open(path, "rb").read()
    src = raw.decode("utf-8")
    sha = hashlib.sha256(raw).hexdigest()
    lines = src.splitlines()
    tree = ast.parse(src)
    cls = next(n for n in tree.body
               if isinstance(n, ast.ClassDef) and n.name == "TestAutogradFunctional")
    ctors = [n for n in tree.body if isinstance(n, ast.Assign)
             and n.targets[0].id in ("base_ctors_dict", "base_ctors")]
    ctor_text = "\n".join("\n".join(lines[n.lineno - 1:n.end_lineno]) for n in ctors)
    left = OrderedDict((name, []) for name, _ in RULES)
    bad_helpers = {}
    for n in cls.body:
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("test"):
            text = "\n".join(lines[n.lineno - 1:n.end_lineno])
            why = next((name for name, pat in RULES if re.search(pat, text)), None)
            if why is not None:
                bad_helpers[n.name] = why
    body, total, kept, instances = [], 0, 0, 0
    for n in cls.body:
        start = n.decorator_list[0].lineno if getattr(n, "decorator_list", None) else n.lineno
        text = "\n".join(lines[start - 1:n.end_lineno])
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test"):
            total += 1
            why = next((name for name, pat in RULES if re.search(pat, text)), None)
            if why is None:
                why = next((w for h, w in bad_helpers.items() if f"self.{h}(" in text), None)
            if why is not None:
                left[why].append(n.name)
                continue
            kept += 1
            count = 1
            for d in n.decorator_list:
                name = d.func.id if isinstance(d, ast.Call) else getattr(d, "id", "")
                if name == "parametrize":
                    count *= len(d.args[1].elts)
                elif "vectorized" in name:
                    count *= 2
            instances += count
        elif isinstance(n, ast.FunctionDef) and n.name in bad_helpers:
            continue
        body.append(text)
    listing = []
    for name, tests in left.items():
        if tests:
            listing.append(f"- {name}: {len(tests)}")
            listing.extend(textwrap.wrap(", ".join(tests), 94, initial_indent="    ",
                                         subsequent_indent="    "))
    header = HEADER.format(source=SOURCE.format(lines=len(lines), sha=sha), total=total,
                           kept=kept, instances=instances, left_out="\n".join(listing),
                           ctors=ctor_text)
    text = (header + "\n\nclass TestAutogradFunctional(TestCase):\n" + "\n\n".join(body)
            + "\n\n\ninstantiate_parametrized_tests(TestAutogradFunctional)\n")
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{kept} of {total} TestAutogradFunctional tests ({instances} instances) -> {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "tests/torch_port/functional_suite.py")
