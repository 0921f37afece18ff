"""Issue 19, items 6 and 7: the CLI imports no SymPy for --help, --version, `cache` and a
cache hit; `cache info` lists entries and `cache clear NAME` removes one function's; -o says
which directories it created; sg.<typo> suggests the name; an unsupported op's list is
grouped."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgrad as sg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODEL = textwrap.dedent('''\
    import numpy as np


    class Energy:
        @staticmethod
        def forward(ctx, r):
            return (r.tanh() ** 2).sum()

        @staticmethod
        def example_inputs():
            return (np.linspace(-1.0, 1.0, 6),)


    def other(x):
        return (x * x).sum()
''')

# runs the command line in this process and reports whether SymPy got imported
PROBE = textwrap.dedent('''\
    import sys
    from symgrad.cli import main
    try:
        status = main(sys.argv[1:])
    except SystemExit as exc:
        status = exc.code
    print("SYMPY", "sympy" in sys.modules, "STATUS", status, file=sys.stderr)
''')


def _cli(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, SYMGRAD_CACHE_DIR=str(tmp_path / "cache"),
               SYMGRAD_NO_PROGRESS="1")
    return subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True)


def _sympy(proc):
    line = [l for l in proc.stderr.splitlines() if l.startswith("SYMPY")][-1]
    return line.split()[1] == "True"


@pytest.fixture
def work(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def test_version_help_and_cache_import_no_sympy(work):
    for args in (["--version"], ["--help"], ["compile", "--help"], ["cache", "info"],
                 ["cache", "clear"]):
        proc = _cli(work, *args)
        assert not _sympy(proc), (args, proc.stderr)
    assert sg.__version__ in _cli(work, "--version").stdout


def test_version_imports_no_sympy_by_importtime(work):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "symgrad", "--version"],
                          cwd=work, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and sg.__version__ in proc.stdout
    imported = [l.split("|")[-1].strip() for l in proc.stderr.splitlines()
                if l.startswith("import time:")]
    assert "symgrad" in imported and "sympy" not in imported


def test_a_cached_compile_imports_no_sympy(work):
    first = _cli(work, "compile", "model.py:Energy", "-o", "out")
    assert "STATUS 0" in first.stderr and _sympy(first), first.stderr
    second = _cli(work, "compile", "model.py:Energy", "-o", "out")
    assert "STATUS 0" in second.stderr and not _sympy(second), second.stderr
    assert "wrote out/energy_grad.py" in second.stdout
    # and with --shape (the inputs are specs, not arrays)
    _cli(work, "compile", "model.py:Energy", "--shape", "r=4", "-o", "out4")
    third = _cli(work, "compile", "model.py:Energy", "--shape", "r=4", "-o", "out4")
    assert "STATUS 0" in third.stderr and not _sympy(third), third.stderr


def test_cache_info_lists_entries_and_clear_name_removes_one_function(work):
    _cli(work, "compile", "model.py:Energy", "-o", "out")
    _cli(work, "compile", "model.py:Energy", "--shape", "r=3", "-o", "out3")
    _cli(work, "compile", "model.py:other", "--shape", "x=2", "-o", "out")
    info = _cli(work, "cache", "info").stdout
    assert "entries: 3" in info
    header = next(l for l in info.splitlines() if l.startswith("FUNCTION"))
    for column in ("SIGNATURE", "TARGET", "SIZE", "LAST USE"):
        assert column in header
    rows = [l for l in info.splitlines() if l.startswith("model.py:")]
    assert len(rows) == 3
    assert any("model.py:Energy" in r and "r(6,)" in r and "numpy" in r for r in rows)
    assert any("model.py:Energy" in r and "r(3,)" in r for r in rows)
    assert any("model.py:other" in r and "x(2,)" in r and "KiB" in r for r in rows)
    cleared = _cli(work, "cache", "clear", "model.py:Energy")
    assert "removed 2 entries of model.py:Energy" in cleared.stdout, cleared.stdout
    info = _cli(work, "cache", "info").stdout
    assert "entries: 1" in info and "model.py:other" in info and "Energy" not in info
    # the other function's entry still hits
    again = _cli(work, "compile", "model.py:other", "--shape", "x=2", "-o", "out")
    assert not _sympy(again)


def test_output_directories_created_are_said(work):
    proc = _cli(work, "compile", "model.py:Energy", "-o", "a/b/")
    assert "created directory a/\ncreated directory a/b/\nwrote a/b/energy_grad.py" \
        in proc.stdout, proc.stdout
    proc = _cli(work, "compile", "model.py:Energy", "-o", "a/b/")
    assert "created" not in proc.stdout


def test_module_typo_suggests_the_name():
    with pytest.raises(AttributeError, match=r"no attribute 'sigmiod'\. Did you mean "
                                             r"sg\.sigmoid\?"):
        sg.sigmiod
    assert not hasattr(sg, "no_such_thing_at_all")
    with pytest.raises(AttributeError) as err:
        sg.frobnicate
    assert "Did you mean" not in str(err.value)


def test_unsupported_op_lists_the_ops_by_group():
    from symgrad.trace import TraceError

    with pytest.raises(TraceError) as err:
        sg.compile(lambda x: x.frobnicate(), np.ones(3))
    text = str(err.value)
    for group in ("elementwise math (", "reductions and scans (", "shape and indexing (",
                  "linear algebra (", "comparison and logic ("):
        assert group in text
    assert "reductions and scans" in text and "sum" in text.split("reductions and scans")[1]
    # every supported op is in exactly one group
    from symgrad._op_groups import grouped
    from symgrad.trace import SUPPORTED
    listed = [n for _, names in grouped(SUPPORTED) for n in names]
    assert sorted(listed) == sorted(SUPPORTED)
