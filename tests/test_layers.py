"""The package's layers (docs/contributing.md, "Architecture"): the import-linter contracts of
pyproject.toml hold, and tools/import_graph.py (which also reads function-level imports, the
CLI in cli/, and prints cycles) agrees with them about which imports point up."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)["tool"]["importlinter"]


def _graph():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "import_graph.py"), "--json"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return json.loads(out)


def test_import_contracts_hold():
    pytest.importorskip("importlinter")
    # a fresh interpreter: once symgrad is imported, a source checkout's symgrad.__path__ also
    # holds the checkout's root (cli/ and templates/ are symgrad.cli and symgrad.templates),
    # and import-linter would walk that whole tree as the package
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_every_upward_import_is_a_listed_exception():
    # the tool's upward imports (function-level included) are exactly the ignore_imports of the
    # layers contract: nothing points up unlisted, and no listed exception is stale
    layers = next(c for c in _config()["contracts"] if c["type"] == "layers")
    listed = {tuple(s.split(" -> ")) for s in layers.get("ignore_imports", [])}
    upward = {(a, b) for a, b, _line, _where in _graph()["with function-level"]["upward"]
              if not a.startswith("symgrad.cli")}
    assert upward == listed


def test_the_tool_finds_a_planted_cycle_and_upward_import(tmp_path):
    # a cycle through a function-level import, and an import from ops up into the compiler
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import import_graph as ig
    finally:
        sys.path.pop(0)
    pkg = tmp_path / "symgrad"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "ops" / "x.py").write_text("def f():\n    from symgrad.compiler import g\n")
    (pkg / "compiler.py").write_text("from .ops import x\n\ndef g():\n    pass\n")
    old = ig.ROOT
    ig.ROOT = str(tmp_path)
    try:
        _edges, cycles, upward = ig.report({"module", "function"})
        _edges, cycles_module_level, _ = ig.report({"module"})
    finally:
        ig.ROOT = old
    assert cycles == [["symgrad.compiler", "symgrad.ops.x"]]
    assert cycles_module_level == []
    assert [(a, b, where) for a, b, _line, where in upward] == [
        ("symgrad.ops.x", "symgrad.compiler", "function")]


_MOVED_OUT_OF_TRACE = ("_trace_elementwise", "_trace_functions", "_trace_movement",
                       "_trace_reductions", "_trace_shapes", "_tracer", "_linalg_trace")


def test_the_modules_split_out_of_trace_see_its_names():
    # trace.py binds the names the moved code calls (SymbolicTensor, user_site, ...) once it
    # defines them: each is trace's own object, none left at its placeholder None
    import symgrad.trace as T

    for name in _MOVED_OUT_OF_TRACE:
        module = sys.modules["symgrad." + name]
        assert module._FROM_TRACE
        for attr in module._FROM_TRACE:
            assert getattr(module, attr) is getattr(T, attr), (name, attr)


def test_the_modules_split_out_of_runtime_ops_see_its_names():
    # the same for _runtime_ops.py's: `sum` and `min` there are the runtime's, not the builtins
    import symgrad._runtime_ops as R

    for name in ("_runtime_nodes", "_runtime_views", "_runtime_reductions"):
        module = sys.modules["symgrad." + name]
        assert module._FROM_RUNTIME_OPS
        for attr in module._FROM_RUNTIME_OPS:
            assert getattr(module, attr) is getattr(R, attr), (name, attr)
    assert sys.modules["symgrad._runtime_nodes"].sum is R.sum
    assert sys.modules["symgrad._runtime_views"].min is R.min
    assert sys.modules["symgrad._runtime_reductions"].maximum is R.maximum
    # the public functions moved to _runtime_reductions.py keep the op layer's name
    for name in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "matmul", "mm"):
        assert getattr(R, name).__module__ == "symgrad._runtime_ops", name


def test_the_mixins_methods_are_named_as_symbolic_tensors():
    # Python's TypeErrors quote a method's __qualname__: a mixin's must read SymbolicTensor.<name>
    import symgrad.trace as T

    mixins = T.SymbolicTensor.__mro__[1:-1]
    assert {m.__name__ for m in mixins} == {"_ElementwiseMethods", "_ReductionMethods",
                                            "_MovementMethods"}
    for mixin in mixins:
        for name, value in vars(mixin).items():
            if callable(value) and getattr(value, "__qualname__", "").startswith(mixin.__name__):
                raise AssertionError(f"{value.__qualname__} keeps its mixin's name")
    assert T.SymbolicTensor.reshape.__qualname__ == "SymbolicTensor.reshape"
    assert T.SymbolicTensor.sum.__qualname__ == "SymbolicTensor.sum"   # _keyword_aliases's wrapper


# The function-level imports that still hold an import cycle, by (importer, imported), each
# cycle with why it is left (docs/contributing.md, "Import cycles"). Any other import inside a
# function that closes a cycle must say in a comment that it is lazy for start-up time.
_CYCLES_LEFT = {
    # the runtime: tensor, _runtime_ops/_views/_nodes and autograd also import each other at
    # module level (a Tensor's methods are the runtime's ops, which record autograd's nodes)
    ("symgrad.autograd.engine", "symgrad._runtime_ops"),
    ("symgrad.autograd._grad_calls", "symgrad._runtime_ops"),   # moved out of engine.py
    ("symgrad.autograd.engine", "symgrad.autograd.graph"),
    ("symgrad.autograd.forward_ad", "symgrad._runtime_ops"),
    ("symgrad.autograd.function", "symgrad._runtime_ops"),
    ("symgrad.autograd._module_nodes", "symgrad._runtime_ops"),
    ("symgrad.autograd.graph", "symgrad.tensor"),
    ("symgrad.autograd.graph", "symgrad.autograd.function"),
}


def _import_graph_tool():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import import_graph
    finally:
        sys.path.pop(0)
    return import_graph


def test_no_function_level_import_hides_a_cycle():
    # an import inside a function that closes a cycle either says it is lazy for start-up time
    # or is one of the cycles left above; a cycle broken since must leave the list too
    held = {(a, b) for a, b, _line, start_up in _import_graph_tool().cycle_held_imports()
            if not start_up}
    assert held - _CYCLES_LEFT == set(), "a function-level import hides a cycle"
    assert _CYCLES_LEFT - held == set(), "a cycle left is gone: take it off _CYCLES_LEFT"


def test_the_tool_finds_a_planted_cycle_held_by_a_function_level_import(tmp_path):
    ig = _import_graph_tool()
    pkg = tmp_path / "symgrad"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "ops" / "a.py").write_text("from . import b\n")
    (pkg / "ops" / "c.py").write_text("import os\n")
    old = ig.ROOT
    ig.ROOT = str(tmp_path)
    try:
        # b imports a inside a function: a cycle held by it, no comment
        (pkg / "ops" / "b.py").write_text("def f():\n    from . import a\n")
        assert ig.cycle_held_imports() == [("symgrad.ops.b", "symgrad.ops.a", 2, False)]
        # the same import saying it is lazy for start-up time
        (pkg / "ops" / "b.py").write_text(
            "def f():\n    # lazy for start-up time: a imports SymPy\n    from . import a\n")
        assert ig.cycle_held_imports() == [("symgrad.ops.b", "symgrad.ops.a", 3, True)]
        # an import inside a function of a module already imported at module level holds
        # nothing; one that makes no cycle is not listed
        (pkg / "ops" / "b.py").write_text("from . import a\n\ndef f():\n    from . import a\n"
                                          "    from . import c\n")
        assert ig.cycle_held_imports() == []
    finally:
        ig.ROOT = old


def test_trace_reexports_the_rooms_below_it():
    # _trace_sites.py (the user's line) and _trace_forward.py (the forward being traced) were
    # moved out of trace.py verbatim: every name they define is trace's too, the same object,
    # and they need nothing bound from trace (no _FROM_TRACE)
    import symgrad.trace as T

    for name in ("_trace_sites", "_trace_forward"):
        module = sys.modules["symgrad." + name]
        assert not hasattr(module, "_FROM_TRACE")
        own = [k for k, v in vars(module).items()
               if getattr(v, "__module__", None) == module.__name__]
        assert own, name
        for attr in own:
            assert getattr(T, attr) is getattr(module, attr), (name, attr)
    assert T._BUILTINS_FILE.endswith("_builtin_graphs.py") and T.user_site.__module__ == \
        "symgrad._trace_sites"
