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


@pytest.mark.parametrize("op", ["exp", "mul", "sum", "where", "max_dim"])
def test_a_builtin_graph_traced_from_a_users_file_cites_no_user_line(op):
    # built-in ops are traced in symgrad/_builtin_graphs.py (trace.py's user sites stop there):
    # traced on demand (a higher order) from this file, no node is attributed to its lines
    from symgrad._builtin_graphs import builtin_graph

    graph = builtin_graph(op)
    assert graph.source == f"symgrad/_builtins.py:{op}"   # the generated modules' SOURCE
    assert [n.site for n in graph.nodes() if n.site is not None] == []


def test_the_builtins_driver_keeps_its_names():
    # _builtins.py drives the compiler (above it); its tables and graphs are
    # _builtin_graphs.py's (below it), and builtin_compiled is the compiler's
    from symgrad import _builtin_graphs, compiler

    assert _builtins.UNARY is _builtin_graphs.UNARY and _builtins.OPS is _builtin_graphs.OPS
    assert _builtins.builtin_graph is _builtin_graphs.builtin_graph
    assert _builtins.builtin_compiled is compiler.builtin_compiled
