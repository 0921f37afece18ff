"""One op, one place: the elementwise math ops' entries in symgrad/ops/table.py are where the
tracer's methods, the built-in generated modules, the optimizer's costs and the runtime's numpy
aliases come from. Adding such an op is one entry there; these tests fail when a list is kept
by hand again beside the table, or when an entry does not reach every spelling."""
from __future__ import annotations

import os

import numpy as np
import pytest
import sympy

import symgrad as sg
from symgrad import _builtins, _composite_ops, optimize
from symgrad.ops import elementwise as ew
from symgrad.ops.table import ELEMENTWISE, builtin_names, costs, traced_formulas
from symgrad.trace import SymbolicTensor

NAMES = [op.name for op in ELEMENTWISE]
SPELLINGS = [(op.name, s) for op in ELEMENTWISE for s in (op.name, *op.aliases)]


def test_entries_are_unique():
    spellings = [s for _, s in SPELLINGS]
    assert len(spellings) == len(set(spellings))


def test_builtin_modules_are_the_tables():
    assert _builtins.UNARY == builtin_names()
    root = os.path.dirname(sg.__file__)
    for name in builtin_names():
        assert os.path.isfile(os.path.join(root, "_generated", f"{name}.py")), name


def test_costs_are_the_tables():
    for key, cost in costs().items():
        assert optimize.OP_COST[key] == cost


def test_numpy_aliases_are_the_tables():
    for name, spelling in SPELLINGS:
        if spelling != name:
            assert _composite_ops.ALIASES[spelling] == name


@pytest.mark.parametrize("name,spelling", SPELLINGS)
def test_every_spelling_exists_everywhere(name, spelling):
    # the traced value, the runtime Tensor and the public function all have every spelling
    assert callable(getattr(SymbolicTensor, spelling))
    assert callable(getattr(sg.Tensor, spelling))
    assert callable(getattr(sg, spelling)) and spelling in sg.__all__


@pytest.mark.parametrize("spelling", sorted(traced_formulas()))
def test_traced_method_is_the_table_formula(spelling):
    module, function = traced_formulas()[spelling]
    fn = getattr({"sympy": sympy, "ew": ew}[module], function)
    graph = sg.trace(lambda x: getattr(x, spelling)(), np.array([0.25, 0.5]))
    (out,) = graph.outputs
    (leaf,) = out.args
    assert out.expr == fn(sympy.Symbol(leaf.name, real=True))


def test_no_unary_method_outside_the_table():
    # a `_unary(...)` method of the traced value is an elementwise op: it needs its entry
    made = {n for n, f in vars(SymbolicTensor).items()
            if getattr(f, "__qualname__", "") == "_unary.<locals>.method"}
    assert made - {"__abs__"} <= {s for _, s in SPELLINGS}


@pytest.mark.parametrize("name,reference,x", [
    ("sinh", np.sinh, [-2.0, 0.5, 3.0]),
    ("arcsinh", np.arcsinh, [-2.0, 0.5, 3.0]),
    ("fix", np.trunc, [-2.5, 0.5, 3.7]),
])
def test_table_made_ops_compute(name, reference, x):
    # values and gradients of table-made spellings, runtime and compiled, against NumPy
    x = np.array(x)
    t = sg.tensor(x, requires_grad=True)
    y = getattr(t, name)()
    np.testing.assert_allclose(y.detach().numpy(), reference(x), rtol=1e-12)
    y.sum().backward()
    h = 1e-6
    fd = (reference(x + h) - reference(x - h)) / (2 * h)
    np.testing.assert_allclose(t.grad.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_runtime_fast_paths_are_table_ops():
    # the runtime's fast-path unary ops (torch node name, saved values) run the table's
    # built-in generated modules: a fast path needs the op's entry (and its module) first
    from symgrad import _runtime_ops

    assert set(_runtime_ops._UNARY) <= set(builtin_names())
