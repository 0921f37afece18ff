"""The command line on forward files written the way different users write them.

Each test writes a forward file into a temporary cwd, runs `python -m symgrad.cli` on it in a
subprocess (with this checkout first on PYTHONPATH, so the code under test is this one), and
checks the written module's numbers in a fresh interpreter that imports nothing of symgrad,
or the one-line error a bad input gets.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               SYMGRAD_CACHE_DIR=str(cwd / ".sgcache"))
    return subprocess.run([sys.executable, "-m", "symgrad.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def write(tmp_path, name, text):
    (tmp_path / name).write_text(textwrap.dedent(text))


def one_line_error(proc, *fragments, status=None):
    assert proc.returncode != 0, (proc.stdout, proc.stderr)
    if status is not None:
        assert proc.returncode == status, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("symgrad: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


RUNNER = """\
import importlib.util, json, sys
import numpy as np
spec = importlib.util.spec_from_file_location("gen", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
xs = [np.asarray(x, dtype=sys.argv[3]) for x in json.loads(sys.argv[2])]
outs = m.forward(*xs)
gos = [np.ones(np.shape(o), dtype=sys.argv[3]) for o in outs]
grads = m.backward(*gos, *xs)
foreign = sorted(k for k in sys.modules if k.split(".")[0] in ("symgrad", "sympy", "torch"))
print(json.dumps({"out": [np.asarray(o, float).tolist() for o in outs],
                  "grad": [np.asarray(g, float).tolist() for g in grads],
                  "dtypes": [str(np.asarray(o).dtype) for o in outs], "foreign": foreign}))
"""


def run_module(path, inputs, dtype="float64"):
    """forward(*inputs) and backward(ones, *inputs) of a written module, in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(path),
                           json.dumps([np.asarray(x).tolist() for x in inputs]), dtype],
                          capture_output=True, text=True, timeout=120, cwd=path.parent,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["foreign"] == [], res["foreign"]          # standalone: numpy only
    return res


def fd_grad(f, xs, k, eps=1e-6):
    """Central differences of sum(f(*xs)) with respect to xs[k]."""
    x = np.array(xs[k], dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = [np.array(a, float) for a in xs], [np.array(a, float) for a in xs]
        up[k][i] += eps
        down[k][i] -= eps
        g[i] = (np.sum(f(*up)) - np.sum(f(*down))) / (2 * eps)
    return g


# --------------------------------------------------------------------------- numpy scalars
NPSCALAR = """\
import numpy as np
import symgrad as sg

HALF = np.float32(0.5)


def npops(x, y):
    a = np.float64(2.0) - x
    b = np.int64(3) / (1 + y * y)
    c = np.float32(1.5) ** x
    d = sg.where(np.float64(0.0) < x, x, HALF * x)
    return a * b + c + d + x * np.float16(0.25) + x ** np.int64(2)
"""


def _npops(x, y):
    return ((2.0 - x) * (3 / (1 + y * y)) + 1.5 ** x + np.where(x > 0, x, 0.5 * x)
            + 0.25 * x + x ** 2)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_numpy_scalar_constants_on_either_side(tmp_path, dtype):
    """`np.float32(0.5) * x` used to fail: the scalar's operator calls the ufunc, which
    __array_ufunc__ refused as 'numpy.multiply was called on a traced value'."""
    write(tmp_path, "npscalar.py", NPSCALAR)
    proc = cli("compile", "npscalar.py:npops", "--dtype", dtype, "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    x, y = np.array([-1.2, 0.3, 0.9, 2.0]), np.array([0.5, -0.7, 1.1, 0.0])
    res = run_module(tmp_path / "out" / "npops_grad.py", [x, y], dtype)
    assert res["dtypes"] == [dtype]
    tol = dict(rtol=1e-9) if dtype == "float64" else dict(rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(res["out"][0], _npops(x, y), **tol)
    np.testing.assert_allclose(res["grad"][0], fd_grad(_npops, [x, y], 0), rtol=1e-5 if
                               dtype == "float64" else 1e-4, atol=1e-6 if dtype == "float64"
                               else 1e-4)
    np.testing.assert_allclose(res["grad"][1], fd_grad(_npops, [x, y], 1), rtol=1e-5 if
                               dtype == "float64" else 1e-4, atol=1e-6 if dtype == "float64"
                               else 1e-4)
    proc = cli("check", "npscalar.py:npops", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- foreign ops
FOREIGN = """\
import numpy as np


def np_sum(x):
    y = x * 2
    return np.sum(y)


def np_where(x):
    return np.where(x > 0, x, 0.0)


def np_cat(x, y):
    return np.concatenate([x, y])


def np_exp(x):
    return np.exp(x + 1)


def np_array_const(x):
    return np.ones(3) * x
"""


@pytest.mark.parametrize("name, line, fragments", [
    ("np_sum", 6, ["numpy.sum was called on a traced value", "sg.sum"]),
    ("np_where", 10, ["numpy.where was called", "sg.where"]),
    ("np_cat", 14, ["numpy.concatenate was called", "sg.cat"]),
    ("np_exp", 18, ["numpy.exp was called", "sg.exp"]),
])
def test_numpy_functions_on_traced_values_name_op_and_line(tmp_path, name, line, fragments):
    """np.sum(x) used to fail with "SymbolicTensor.sum() got an unexpected keyword argument
    'axis'"; now every numpy function names itself, the user's line and the sg spelling."""
    write(tmp_path, "foreign.py", FOREIGN)
    proc = cli("compile", f"foreign.py:{name}", cwd=tmp_path)
    one_line_error(proc, *fragments, f"foreign.py:{line}", status=1)


def test_array_made_in_the_forward_compiles_as_a_constant_input(tmp_path):
    """np.ones(3) * x used to be refused ("an array that is not one of its inputs"); the
    array is now a constant input of the module (no gradient)."""
    write(tmp_path, "foreign.py", FOREIGN)
    proc = cli("compile", "foreign.py:np_array_const", "--shape", "x=3", "-o", "out",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "out" / "np_array_const_grad.py").read_text()
    assert "def forward(x, captured0)" in text


def test_torch_functions_on_traced_values_name_op_and_line(tmp_path):
    pytest.importorskip("torch")
    write(tmp_path, "tf.py", """\
        import torch
        import torch.nn.functional as F


        def t_exp(x):
            y = x * 2
            return torch.exp(y)


        def f_relu(x):
            return F.relu(x) + 1
        """)
    proc = cli("compile", "tf.py:t_exp", cwd=tmp_path)
    one_line_error(proc, "torch.exp was called on a traced value", "tf.py:7", "sg.exp",
                   status=1)
    proc = cli("show", "tf.py:f_relu", cwd=tmp_path)
    one_line_error(proc, "torch.relu was called", "tf.py:11", "sg.relu", status=1)


# --------------------------------------------------------------------------- bad forwards
BAD = """\
import numpy as np


def no_return(x):
    y = x * 2


def returns_dict(x):
    return {"y": x}


def two_args(x, y):
    return x * y


two_args.example_inputs = (np.ones(3),)


class Cls:
    @staticmethod
    def forward(ctx, x):
        return x

    example_inputs = (np.ones(3), np.ones(3))
"""


@pytest.mark.parametrize("name, fragments", [
    ("no_return", ["no_return returned None", "bad.py:4", "return"]),
    ("returns_dict", ["returns_dict: its output is a dict, not a tensor", "bad.py:8"]),
    ("two_args", ["two_args: missing argument 'y'", "given 1 input", "(x, y)"]),
    ("Cls", ["Cls.forward: too many positional arguments", "given 2 inputs", "(x)"]),
])
def test_bad_forwards_get_one_clear_line(tmp_path, name, fragments):
    """Before: 'cannot use a NoneType in a traced forward (at output 0 of no_return.forward)',
    'two_args.forward: missing argument' for a plain function, no count of what was given."""
    write(tmp_path, "bad.py", BAD)
    proc = cli("compile", f"bad.py:{name}", cwd=tmp_path)
    one_line_error(proc, *fragments, status=1)


# --------------------------------------------------------------------------- -o problems
def test_unwritable_output_is_one_line_naming_the_path(tmp_path):
    """Before: 'cannot compile f.py:f: NotADirectoryError: [Errno 20] ... (--traceback for
    details)' - a compile problem it was not."""
    write(tmp_path, "f.py", "def f(x):\n    return x * x\n")
    (tmp_path / "afile").write_text("")
    proc = cli("compile", "f.py:f", "-o", "afile/sub/", cwd=tmp_path)
    one_line_error(proc, "cannot write afile/sub/f_grad.py", "afile: not a directory",
                   status=1)
    proc = cli("compile", "f.py:f", "-o", "afile", cwd=tmp_path)
    one_line_error(proc, "cannot write afile/f_grad.py", "not a directory", status=1)
    proc = cli("compile", "f.py:f", "-o", "/proc/no/such/dir/", cwd=tmp_path)
    one_line_error(proc, "cannot write /proc/no/such/dir/f_grad.py", status=1)
    # nested directories that do not exist yet are created
    proc = cli("compile", "f.py:f", "-o", "a/b/c/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    res = run_module(tmp_path / "a" / "b" / "c" / "f_grad.py", [np.array([1.0, -3.0])])
    np.testing.assert_allclose(res["grad"][0], [2.0, -6.0])


# --------------------------------------------------------------------------- check
def test_check_skips_a_random_point_that_lands_on_a_kink(tmp_path):
    """With seed 0 the second random point has y[0] = 1.00000064: within eps of clamp's kink
    at 1. That entry used to fail gradcheck and gradgradcheck of a correct module."""
    write(tmp_path, "mix.py", """\
        import symgrad as sg


        def mix(x, y):
            return sg.where(x > 0, x, 0.1 * x) * sg.clamp(y, -1.0, 1.0) + sg.maximum(x, y)
        """)
    proc = cli("check", "mix.py:mix", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gradcheck mix.py:mix: ok" in proc.stdout
    assert "skipped (random point at a kink)" in proc.stdout


def test_kink_detection_does_not_excuse_a_wrong_gradient():
    from symgrad.cli.gradcheck import _kinks

    center, eps = 1.0, 1e-6
    # smooth (one-sided differences agree at 2.0): a wrong backward 3.0 is not a kink
    ups, downs = np.array([center + 2.0 * eps]), np.array([center - 2.0 * eps])
    assert not _kinks(np.array([3.0]), ups, downs, center, eps, 1e-5, 1e-3).any()
    # a kink (slopes 1 and 0): a backward equal to one side is; another value is not
    ups, downs = np.array([center + eps]), np.array([center])
    assert _kinks(np.array([0.0]), ups, downs, center, eps, 1e-5, 1e-3).all()
    assert not _kinks(np.array([0.7]), ups, downs, center, eps, 1e-5, 1e-3).any()


def test_check_example_point_kink_still_fails(tmp_path):
    """The example point is the user's choice: a kink there is reported, not skipped."""
    write(tmp_path, "k.py", """\
        import numpy as np


        def kink(x):
            return x.relu()


        kink.example_inputs = (np.zeros(3),)
        """)
    proc = cli("check", "k.py:kink", "--points", "0", cwd=tmp_path)
    assert proc.returncode == 1 and "FAILED" in proc.stdout, proc.stdout
