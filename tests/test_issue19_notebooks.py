"""Issue 19, items 1 and 2: a Function defined where there is no source file (exec,
`python -c`, the REPL, IPython) compiles, and the cache key follows what the forward means
(its code, constants and helpers), not the bytes of its whole file."""
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import symgrad as sg
from symgrad import compiler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BODY = textwrap.dedent('''
    import numpy as np, symgrad as sg

    def helper(x):
        return x.sin() * x

    class F(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return helper(x).sum()

    x = sg.tensor(np.linspace(0.0, 1.0, 5), requires_grad=True)
    F.apply(x).backward()
    print([float(v) for v in x.grad.numpy()])
    m = sg.compile(F, np.zeros(5))
    print(m.stats["cache"])
''')


def _expected():
    x = np.linspace(0.0, 1.0, 5)
    return list(np.cos(x) * x + np.sin(x))


def _env(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, SYMGRAD_CACHE_DIR=str(tmp_path / "cache"))
    return env


def _grads(out):
    line = out.strip().splitlines()[-2]
    return [float(v) for v in line.strip("[]").split(",")]


def test_function_defined_in_exec_compiles_and_is_right():
    # a module without a file, as IPython's and Jupyter's user module
    module = types.ModuleType("symgrad_test_cell")
    sys.modules[module.__name__] = module
    try:
        exec(compile(BODY.replace("print(m.stats", "#"), "<string>", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    np.testing.assert_allclose(module.x.grad.numpy(), _expected(), rtol=1e-12)
    assert compiler._source_identity(module.F) is not None   # cached by its code


def test_function_defined_with_python_c_compiles(tmp_path):
    env = _env(tmp_path)
    first = subprocess.run([sys.executable, "-c", BODY], env=env, capture_output=True,
                           text=True, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    np.testing.assert_allclose(_grads(first.stdout), _expected(), rtol=1e-9)
    # the second process reuses the disk entry: the key is the code, not a file
    second = subprocess.run([sys.executable, "-c", BODY], env=env, capture_output=True,
                            text=True, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip().splitlines()[-1] == "disk"


def test_function_defined_in_the_plain_repl(tmp_path):
    out = subprocess.run([sys.executable, "-i", "-q"], input=BODY + "\n", env=_env(tmp_path),
                         capture_output=True, text=True, cwd=tmp_path)
    assert "Error" not in out.stderr, out.stderr
    np.testing.assert_allclose(_grads(out.stdout), _expected(), rtol=1e-9)


CELLS = BODY + textwrap.dedent('''

    def helper(x):
        return x * x

    x = sg.tensor(np.arange(5.0), requires_grad=True)   # the same shape: only the helper changed
    F.apply(x).backward()
    print([float(v) for v in x.grad.numpy()])
    exit()
''')


def test_function_defined_in_interactive_ipython(tmp_path):
    """Cells typed into IPython (what a notebook runs): the user module has no file; main
    raised OSError: source code not available. Re-running a helper's cell recompiles."""
    pytest.importorskip("IPython")
    out = subprocess.run([sys.executable, "-m", "IPython", "--simple-prompt", "--quick",
                          "--no-banner", "--colors=NoColor"], input=CELLS, env=_env(tmp_path),
                         capture_output=True, text=True, cwd=tmp_path)
    text = out.stdout + out.stderr
    assert "Error" not in text, text
    lists = [l.split(": ", 1)[1] for l in out.stdout.splitlines() if ": [" in l]
    grads = [[float(v) for v in l.strip("[]").split(",")] for l in lists]
    np.testing.assert_allclose(grads[0], _expected(), rtol=1e-9)
    np.testing.assert_allclose(grads[1], [0.0, 2.0, 4.0, 6.0, 8.0])   # the new helper's


def test_exec_edit_of_a_helper_changes_the_key():
    src = "def helper(x):\n    return x * x\n\ndef f(x):\n    return helper(x).sum()\n"
    a, b = {}, {}
    exec(compile(src, "<string>", "exec"), a)
    exec(compile(src.replace("x * x\n", "x * x * x\n"), "<string>", "exec"), b)
    ka = compiler._source_identity(a["f"])
    assert ka is not None and ka != compiler._source_identity(b["f"])
    c = {}
    exec(compile(src, "<string>", "exec"), c)
    assert compiler._source_identity(c["f"]) == ka   # same code: same key


# --------------------------------------------------------------------------- item 2
USER = '''\
import numpy as np
import symgrad as sg

SCALE = 2.0


def helper(x):
    return x.tanh() * SCALE


class Model(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return (helper(x) * x).sum()


def training_loop():
    pass
'''

RUN = '''
import sys, numpy as np
sys.path.insert(0, ".")
import symgrad as sg, user_model
m = sg.compile(user_model.Model, np.ones(4))
print(m.stats["cache"], float(m.backward(np.float64(1.0), np.full(4, 0.5))[0][0]))
'''


def _run(tmp_path):
    out = subprocess.run([sys.executable, "-c", RUN], env=_env(tmp_path), capture_output=True,
                         text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    state, value = out.stdout.split()
    return state, float(value)


def _grad(scale, power=1):
    x = 0.5
    t = np.tanh(x)
    if power == 1:
        return scale * (t + x * (1 - t * t))
    return scale * (t ** 2 + x * 2 * t * (1 - t * t))


@pytest.mark.slow
def test_edit_below_the_forward_keeps_the_hit_and_edits_inside_miss(tmp_path):
    path = tmp_path / "user_model.py"
    path.write_text(USER)
    assert _run(tmp_path) == ("miss", pytest.approx(_grad(2.0)))
    # a comment and code under the training loop: the same module, from the disk
    path.write_text(USER + "\n# tried lr=1e-3\nEPOCHS = 10\n")
    assert _run(tmp_path) == ("disk", pytest.approx(_grad(2.0)))
    # an edit inside the forward misses
    path.write_text(USER.replace("(helper(x) * x)", "(helper(x) * x * 1.0)"))
    assert _run(tmp_path)[0] == "miss"
    # an edit inside the helper it calls misses, and the values follow it
    path.write_text(USER.replace("x.tanh() * SCALE", "x.tanh() ** 2 * SCALE"))
    assert _run(tmp_path) == ("miss", pytest.approx(_grad(2.0, power=2)))
    # a constant the helper reads misses
    path.write_text(USER.replace("SCALE = 2.0", "SCALE = 3.0"))
    assert _run(tmp_path) == ("miss", pytest.approx(_grad(3.0)))


def test_key_ignores_the_rest_of_the_file_but_not_the_forward(tmp_path):
    def load(text, name):
        p = tmp_path / f"{name}.py"
        p.write_text(text)
        ns = {"__name__": name}
        exec(compile(text, str(p), "exec"), ns)
        return compiler._source_identity(ns["Model"])

    base = load(USER, "m0")
    assert load(USER + "\nx = 1  # unrelated\n", "m0") == base
    assert load(USER.replace("return (helper", "return 1.0 * (helper"), "m0") != base
    assert load(USER.replace("x.tanh()", "x.sin()"), "m0") != base
    # an edit above the forward moves its lines (the generated comments cite them): a miss
    assert load("# header\n" + USER, "m0") != base


def test_a_global_array_the_forward_reads_keys_the_module(tmp_path):
    src = "import numpy as np\nW = np.arange(2000.0)\ndef f(x):\n    return (x * W).sum()\n"
    a, b = {}, {}
    exec(compile(src, "<string>", "exec"), a)
    exec(compile(src, "<string>", "exec"), b)
    b["W"][1000] = -1.0    # a middle element, which the array's repr elides
    ka, kb = compiler._source_identity(a["f"]), compiler._source_identity(b["f"])
    assert ka is not None and ka != kb


def test_an_object_without_a_stable_repr_is_not_cached_on_disk():
    class Holder:
        scale = 2.0
    src = "def f(x):\n    return (x * H.scale).sum()\n"
    ns = {"H": Holder()}
    exec(compile(src, "<string>", "exec"), ns)
    assert compiler._source_identity(ns["f"]) is None
    m = sg.compile(ns["f"], np.ones(3))
    np.testing.assert_allclose(m.backward(np.float64(1.0), np.ones(3))[0], [2.0] * 3)


def test_example_inputs_reading_a_generator_keeps_the_disk_key(tmp_path):
    src = textwrap.dedent('''\
        import numpy as np
        import symgrad as sg
        RNG = np.random.default_rng(0)

        class G(sg.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return (x * x).sum()

            @staticmethod
            def example_inputs():
                return (RNG.standard_normal(3),)
    ''')
    ns = {"__name__": "g_mod"}
    exec(compile(src, "<string>", "exec"), ns)
    assert compiler._source_identity(ns["G"]) is not None
    # the forward itself reading one is no disk key (its value is unknown to the key)
    ns2 = {"__name__": "g_mod2"}
    exec(compile(src.replace("(x * x).sum()", "(x * RNG.random()).sum()"), "<string>", "exec"),
         ns2)
    assert compiler._source_identity(ns2["G"]) is None
