"""Every Function in examples/ compiled and gradchecked, and the review samples up to date.

The review samples in examples/generated/ are the generated modules of three examples,
checked in so that a change to the generated code shows up in review as a diff. Refresh them
with `pytest tests/test_examples.py --update-golden` (or, from the repository root,
`python -m symgrad compile examples/softplus.py:Softplus -o examples/generated/`).
"""
from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

import symgrad as sg
from symgrad.cli.gradcheck import gradcheck, gradgradcheck
from symgrad.cli.load import example_inputs, resolve

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "examples", "*.py")))
NAMES = [os.path.splitext(os.path.basename(p))[0] for p in EXAMPLES]

# (example, its Function, the review sample's file name)
REVIEW_SAMPLES = [
    ("examples/softplus.py", "Softplus", "softplus_grad.py"),
    ("examples/lennard_jones.py", "LennardJones", "lennard_jones_grad.py"),
    ("examples/layer_norm.py", "LayerNorm", "layer_norm_grad.py"),
]

pytestmark = pytest.mark.skipif(not hasattr(sg, "Function"),
                                reason="examples subclass sg.Function (runtime not there yet)")


def test_there_are_at_least_eight_examples():
    assert len(EXAMPLES) >= 8, EXAMPLES


def _function_classes(path):
    tree = ast.parse(open(os.path.join(REPO, path), encoding="utf-8").read())
    return tree, [n for n in tree.body if isinstance(n, ast.ClassDef)
                  and any(ast.unparse(b) == "sg.Function" for b in n.bases)]


@pytest.mark.parametrize("path", EXAMPLES, ids=NAMES)
def test_example_is_literate(path):
    """One Function per file, a docstring, example_inputs and a runnable main block."""
    tree, classes = _function_classes(path)
    assert ast.get_docstring(tree), f"{path} needs a module docstring saying what it shows"
    assert len(classes) == 1, f"{path}: one sg.Function per file"
    members = {n.name for n in classes[0].body if hasattr(n, "name")}
    members |= {t.id for n in classes[0].body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    assert "forward" in members and "example_inputs" in members
    assert "backward" not in members, "examples show that only the forward is written"
    assert 'if __name__ == "__main__":' in open(os.path.join(REPO, path)).read()


@pytest.mark.parametrize("path", EXAMPLES, ids=NAMES)
def test_example_gradcheck(path, monkeypatch, tmp_path):
    """Compiled from float64 examples; first and second order against central differences."""
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path))
    _, classes = _function_classes(path)
    fn, _, _ = resolve(f"{os.path.join(REPO, path)}:{classes[0].name}")
    inputs = example_inputs(fn)
    arrays = [np.asarray(a, dtype=np.float64) for a in inputs if hasattr(a, "shape")]
    assert arrays, "example_inputs must contain arrays"
    module = sg.compile(fn, *inputs)
    rng = np.random.default_rng(0)
    points = [arrays] + [[a * (1 + 0.1 * rng.uniform(-1, 1, a.shape)) for a in arrays]
                         for _ in range(2)]
    first = gradcheck(module, points)
    assert first.ok, first.failures
    assert first.points == len(points)         # the forward is finite at every example point
    second = gradgradcheck(module, points[:2])
    assert second.ok, second.failures


@pytest.mark.parametrize("path", EXAMPLES, ids=NAMES)
def test_example_runs_as_a_script(path, tmp_path):
    if "dask" in os.path.basename(path):
        pytest.importorskip("dask.distributed")    # the [dask] extra
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, path], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "gradcheck: ok" in proc.stdout


@pytest.mark.parametrize("path, name, sample", REVIEW_SAMPLES, ids=[s[2] for s in REVIEW_SAMPLES])
def test_review_samples_are_up_to_date(path, name, sample, tmp_path, golden):
    """Regenerate with the CLI from the repository root (so the header names examples/...)."""
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(tmp_path / "cache"))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "symgrad", "compile", f"{path}:{name}",
                           "-o", str(out)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = (out / sample).read_text(encoding="utf-8")
    assert f"from {path}:{name}" in text
    golden.check(sample, text, root=os.path.join(REPO, "examples", "generated"))


def test_notebook_reprs():
    """CompiledModule and Graph render as Markdown and LaTeX in notebooks."""
    fn, _, _ = resolve(os.path.join(REPO, "examples", "softplus.py") + ":Softplus")
    module = sg.compile(fn, *example_inputs(fn), cache_ok=False)
    assert "log1p(exp(x))" in module._repr_markdown_()
    assert module._repr_latex_().startswith("$$")
    graph = sg.trace(fn, *example_inputs(fn))
    assert "**Softplus**" in graph._repr_markdown_() and "out = log1p(exp(x))" in graph._repr_markdown_()
    assert r"\mathrm{out}" in graph._repr_latex_()
