"""The checked-in modules of the built-in ops are exactly what the compiler generates."""
import os
import subprocess
import sys

import pytest

from symgrad import _builtins

GENERATED = os.path.join(os.path.dirname(_builtins.__file__), "_generated")


def test_regenerating_builtin_modules_is_byte_identical(tmp_path):
    _builtins.regenerate(str(tmp_path))
    names = sorted(os.listdir(tmp_path))
    checked_in = sorted(f for f in os.listdir(GENERATED) if f.endswith(".py"))
    assert names == checked_in, "run: python -m symgrad._builtins"
    for name in names:
        with open(tmp_path / name, encoding="utf-8") as f:
            fresh = f.read()
        with open(os.path.join(GENERATED, name), encoding="utf-8") as f:
            assert f.read() == fresh, f"{name} is stale: run python -m symgrad._builtins"


def test_builtin_modules_import_only_numpy():
    code = ("import sys, importlib; from symgrad._generated import OPS\n"
            "[importlib.import_module('symgrad._generated.' + op) for op in OPS]\n"
            "print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
