"""The generated module as a reviewer reads it (issue 24, part 3).

The math comes first (forward and backward, then the helpers under a marker line); the
docstring formulas read as a derivation (the user's named reductions, shared terms, a mean's
1/N, constants by their names); LaTeX typesets names and reductions as a reader expects. The
generated statements are not touched by any of this: the modules still run, with torch's numbers.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import textwrap

import numpy as np
import pytest

import symgrad as sg
from symgrad.differentiate import differentiate
from symgrad.emit.printers import _latex_name, formula_latex, formula_text

torch = pytest.importorskip("torch")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = "# ---- helpers (generated, target-independent) ----"


def _load(tmp_path, name, text):
    """Import `text` as a module from a file (the user's forward lives in a file: the
    derivation reads its source lines for the names it assigns)."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


LAYER_NORM = """
    def layer_norm(x, weight, bias, eps=1e-5):
        mu = x.mean(-1, keepdim=True)
        centered = x - mu
        var = (centered * centered).mean(-1, keepdim=True)
        return centered / (var + eps).sqrt() * weight + bias
"""


def _layer_norm_inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 5)), 1 + 0.1 * rng.standard_normal(5), rng.standard_normal(5)


@pytest.fixture
def layer_norm(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = _load(tmp_path, "h24_layer_norm", LAYER_NORM)
    return sg.compile(module.layer_norm, *_layer_norm_inputs())


def _docstring(source, routine):
    match = re.search(rf'def {routine}\(.*?\):\n    """(.*?)"""', source, re.S)
    return match.group(1)


def test_layer_norm_docstrings_read_as_a_derivation(layer_norm):
    forward = _docstring(layer_norm.source, "forward")
    backward = _docstring(layer_norm.source, "backward")
    # the user's own names for the reductions, each defined once and read by name
    assert "mu = mean(x, 1)" in forward
    assert "var = mean((x - mu)**2, 1)" in forward
    assert "out = bias + weight*(x - mu)/sqrt(var + eps)" in forward
    # eps is the forward's named argument: named in the formulas, its value given once
    assert "where eps = 1e-05" in forward
    assert "1e-05" not in forward.replace("where eps = 1e-05", "")
    # the mean's adjoint divides by its count, named N, with its value
    assert ")/N" in backward and "N = 5 (the count a mean over dim 1 averages)" in backward
    assert "mu = mean(x, 1)" in backward and "var = mean((x - mu)**2, 1)" in backward
    for text in (forward, backward):
        assert "keepdim" not in text and "dims=" not in text
    # the statements keep the literal (numerics untouched)
    assert "1e-05" in layer_norm.source.split('"""', 4)[-1]


def test_layer_norm_module_math_first_helpers_after_the_marker(layer_norm, tmp_path):
    source = layer_norm.source
    assert source.count(MARKER) == 1
    top, helpers = source.split(MARKER)
    assert "def forward(" in top and "def backward(" in top
    assert "def _" not in top                    # every helper is below the marker
    assert "def _sum(" in helpers or "def _mean(" in helpers
    assert "def _check_shapes(" in helpers
    assert top.index("def forward(") < top.index("def backward(")
    # helpers are defined after the routines that call them: still imports and runs
    path = tmp_path / "ln_grad.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ln_grad", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x, w, b = _layer_norm_inputs()
    g = np.random.default_rng(1).standard_normal((3, 5))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    out = torch.nn.functional.layer_norm(tx, (5,), tw, tb, eps=1e-5)
    out.backward(torch.tensor(g))
    np.testing.assert_allclose(module.forward(x, w, b)[0], out.detach().numpy(), rtol=1e-12)
    for mine, ref in zip(module.backward(g, x, w, b), (tx, tw, tb)):
        np.testing.assert_allclose(mine, ref.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("target", ["c", "torch", "jax", "cuda"])
def test_every_python_target_puts_the_math_first(target):
    if target == "jax":
        pytest.importorskip("jax")

    def f(x, y):
        return (x * y).exp().sum(-1)

    rng = np.random.default_rng(0)
    module = sg.compile(f, rng.standard_normal((2, 3)), rng.standard_normal((2, 3)),
                        target=target)
    py = [text for name, text in module.files.items() if name.endswith(".py")
          and MARKER in text]
    assert py, f"no {target} module carries the helpers marker"
    for text in py:
        top, rest = text.split(MARKER)
        assert "def forward(" in top and "def backward(" in top
        assert "def forward(" not in rest and "def backward(" not in rest
        compile(text, target, "exec")


def test_module_global_constants_keep_their_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = _load(tmp_path, "h24_globals", """
        R0 = 1.5
        SCALE = 0.25

        def f(r):
            return (SCALE * (r - R0) ** 2).sum()
    """)
    r = np.linspace(0.5, 2.5, 7)
    compiled = sg.compile(module.f, r)
    forward = _docstring(compiled.source, "forward")
    backward = _docstring(compiled.source, "backward")
    assert "R0" in forward and "SCALE" in forward
    assert "where SCALE = 0.25, R0 = 1.5" in forward   # in the order the code reads them
    # (the derivative's 2*(r - R0) is expanded to 2*r - 3: a folded number keeps no name)
    assert "SCALE" in backward and "where SCALE = 0.25" in backward
    (g,) = compiled.backward(np.ones(()), r)
    np.testing.assert_allclose(g, 0.5 * (r - 1.5))


def test_constants_that_share_a_value_or_are_common_numbers_stay_numbers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = _load(tmp_path, "h24_ambiguous", """
        A = 0.3
        B = 0.3

        def f(x, one=1.0):
            return A * x + B * x * x + one
    """)
    compiled = sg.compile(module.f, np.linspace(0, 1, 4))
    forward = _docstring(compiled.source, "forward")
    assert "A" not in forward.replace("Forward", "") and "B" not in forward
    assert "one" not in forward and "where" not in forward


def test_a_loop_variable_is_not_given_one_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = _load(tmp_path, "h24_loop", """
        def f(x):
            for _ in range(2):
                s = x.sum(-1, keepdim=True)
                x = x / s
            return x
    """)
    compiled = sg.compile(module.f, np.random.default_rng(0).uniform(1, 2, (2, 3)))
    forward = _docstring(compiled.source, "forward")
    assert "s = " not in forward            # two values came from that line: neither is `s`


def test_latex_names_subscripts_and_reductions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = _load(tmp_path, "h24_vae", """
        def kl(mu, log_var, x_hat, sigma_x):
            kld = -0.5 * (1 + log_var - mu * mu - log_var.exp()).sum(-1)
            rec = ((x_hat - mu) ** 2 / sigma_x).sum(1)
            return (kld + rec).mean()
    """)
    rng = np.random.default_rng(0)
    compiled = sg.compile(module.kl, *(rng.standard_normal((3, 4)) for _ in range(4)))
    latex = formula_latex(compiled.graph) + formula_latex(differentiate(compiled.graph))
    assert r"\log \mathrm{var}" in latex and "log_{var}" not in latex
    assert r"\sigma_{x}" in latex and r"\hat{x}" in latex and r"\mu" in latex
    assert r"\mathrm{grad}_{\text{out}}" in latex and r"\mathrm{grad}_{\sigma_{x}}" in latex
    assert r"\sum_{\mathrm{dim}\,1}" in latex and r"\frac{1}{N}\sum" in latex
    assert r"N &= 3" in latex
    for noise in ("keepdim", "dims=", "True", "False", r"grad\_"):
        assert noise not in latex
    # the notebook repr is the same LaTeX
    assert compiled._repr_latex_() is None or r"\hat{x}" in compiled._repr_latex_()


@pytest.mark.parametrize("name, latex", [
    ("x", "x"), ("mu", r"\mu"), ("v15", "v_{15}"), ("weight", r"\mathrm{weight}"),
    ("grad_out", r"\mathrm{grad}_{\text{out}}"), ("log_sigma", r"\log \sigma"),
    ("sigma_x", r"\sigma_{x}"), ("x_hat", r"\hat{x}"), ("eps", r"\varepsilon"),
    ("grad_log_var", r"\mathrm{grad}_{\log \text{var}}"), ("a_b_c", r"a_{b_{c}}"),
    ("odd{name}", r"\mathrm{odd\{name\}}"),
])
def test_latex_name(name, latex):
    assert _latex_name(name) == latex


def test_shared_elementwise_subterms_are_named_once():
    """Black-Scholes is one elementwise region: its derivative names the repeated d1-like
    subexpression (q1, ...) instead of repeating it in every gradient."""
    sys.path.insert(0, os.path.join(REPO, "examples"))
    try:
        from black_scholes import BlackScholesCall
    finally:
        sys.path.pop(0)
    compiled = sg.compile(BlackScholesCall, *BlackScholesCall.example_inputs())
    text = formula_text(differentiate(compiled.graph))
    lines = [line for line in text.splitlines() if not line.startswith("    ")]
    assert lines[0].startswith("q1 = ")
    assert text.count("log(S/K)") == 1          # once, in its term
    assert len(text) < 1500                     # 2 898 characters as one formula per grad


def test_latex_of_a_power_of_a_reduction():
    compiled = sg.compile(lambda x: x.sum(0) ** 2 + x.mean() ** 3, np.ones((2, 3)))
    latex = formula_latex(compiled.graph) + formula_latex(differentiate(compiled.graph))
    assert r"\left(\sum_{\mathrm{dim}\,0} {x}\right)^{2}" in latex
    assert r"\left(\frac{1}{N}\sum {x}\right)^{3}" in latex and "N &= 6" in latex
