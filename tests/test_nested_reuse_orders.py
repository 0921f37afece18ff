"""A small program with nested reuse, at every derivative order (issue #18: "the backward is at
most a constant factor larger than the forward, for every target and every derivative order").

`x = r*x*(1 - x)` repeated (a logistic map) stays under DISSOLVE_MAX, so its forward keeps one
whole formula; but each step reads x twice, so its derivative as a tree grows ~4x per step and
its second derivative ~16x: through the runtime (create_graph=True) a 6-step map's second order
took 12 s of CPU, an 8-step one 287 s, walking SymPy trees whose shared sub-expressions were
visited once per path (xreplace, free_symbols, preorder_traversal, count_ops). Now the walks on
whole formulas visit each distinct sub-expression once, and a derivative past DERIVATIVE_MAX
keeps its bindings (6 steps: 1.3 s, 8 steps: 3.3 s).
"""
import importlib

import numpy as np
import pytest
import sympy

import symgrad as sg
from symgrad import _fastsym

T = importlib.import_module("symgrad.trace")
D = importlib.import_module("symgrad.differentiate")
try:
    import torch
except ImportError:  # pragma: no cover - torch is an optional oracle
    torch = None


def _logistic(steps, M):
    def forward(r, x):
        for _ in range(steps):
            x = r * x * (1 - x)
        return x
    return forward


def _nested(depth):
    """An expression whose tree holds 2**depth copies of x (each level reads the last twice)."""
    x, y = sympy.symbols("x y", real=True)
    e = x
    for k in range(depth):
        e = sympy.sin(e) * e + k
    return e, x, y


def test_xreplace_over_shared_subexpressions_equals_sympys():
    e, x, y = _nested(8)
    assert _fastsym.xreplace(e, {x: y + 1}, {}) == e.xreplace({x: y + 1})
    assert _fastsym.xreplace(e, {sympy.sin(x): y}, {}) == e.xreplace({sympy.sin(x): y})
    assert _fastsym.xreplace(e, {}, {}) is e
    # an untouched formula comes back as the object itself, as SymPy's, even where the memo
    # holds an equal sub-expression that is another object (a worker's SymPy cache differs)
    a = x * sympy.sin(x)
    sympy.core.cache.clear_cache()
    b = sympy.cos(x * sympy.sin(x) + 1)
    memo: dict = {}
    _fastsym.xreplace(a + y, {}, memo)
    assert _fastsym.xreplace(b, {}, memo) is b


def test_walks_visit_each_distinct_subexpression_once():
    """At depth 60 the tree has 2**60 copies of x: a walk per path would never end."""
    e, x, y = _nested(60)
    subs = _fastsym.subexpressions([e])
    assert len(subs) == len(set(subs)) < 4 * 60 + 4
    out = _fastsym.xreplace(e, {x: y}, {})
    assert T.free_symbols(out) == {y}     # (SymPy's free_symbols walks each path)


def test_a_derivative_past_its_budget_keeps_its_bindings():
    r, x0 = np.full(3, 3.7), np.array([0.1, 0.5, 0.8])
    graph = T.trace(_logistic(8, sg), r, x0)
    assert not graph.dag                  # the forward: one formula (3 * 2**8 operations)
    first = D.differentiate(graph)
    assert not first.dag                  # one formula per gradient (no binding to keep)
    second = D.differentiate(first)
    assert second.dag                     # inlined, it would be ~10**6 operations
    assert importlib.import_module("symgrad._tracer").DERIVATIVE_MAX < 10 ** 6
    shallow = T.trace(_logistic(3, sg), r, x0)
    assert not D.differentiate(D.differentiate(shallow)).dag   # whole formulas, as before


@pytest.mark.parametrize("steps", [6, 8])
def test_logistic_map_second_order_matches_torch(steps):
    """d/d(r, x0) of sum(grad(sum(y**2))**2) through the runtime (create_graph=True), against
    torch's double backward; 8 steps compiled in 287 s before (now a few seconds)."""
    if torch is None:
        pytest.skip("torch is the oracle for second order")
    fwd = _logistic(steps, sg)

    class Logistic(sg.Function):
        @staticmethod
        def forward(ctx, r, x):
            return fwd(r, x)

    r0, x0 = np.array([3.7, 3.2, 2.5, 3.9]), np.array([0.1, 0.4, 0.6, 0.95])
    rs = sg.tensor(r0, dtype=sg.float64, requires_grad=True)
    xs = sg.tensor(x0, dtype=sg.float64, requires_grad=True)
    y = Logistic.apply(rs, xs)
    g = sg.autograd.grad((y * y).sum(), [rs, xs], create_graph=True)
    gg = sg.autograd.grad(sum((v * v).sum() for v in g), [rs, xs])

    tr = torch.tensor(r0, requires_grad=True)
    tx = torch.tensor(x0, requires_grad=True)
    ty = _logistic(steps, torch)(tr, tx)
    tg = torch.autograd.grad((ty * ty).sum(), [tr, tx], create_graph=True)
    tgg = torch.autograd.grad(sum((v * v).sum() for v in tg), [tr, tx])
    for ours, ref in zip(g, tg):
        np.testing.assert_allclose(ours.detach().numpy(), ref.detach().numpy(), rtol=1e-10)
    for ours, ref in zip(gg, tgg):
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-9)


def test_third_order_module_of_nested_reuse_matches_torch():
    """The module whose forward is the second-order VJP of a 5-step logistic map (compiling it
    differentiates a third time: 12.6 s before its substitutions walked each distinct
    sub-expression once, 6 steps over 10 minutes; now about 2 s and 6 s)."""
    if torch is None:
        pytest.skip("torch is the oracle")
    r0, x0 = np.array([3.7, 3.2, 2.5]), np.array([0.1, 0.5, 0.8])
    module = sg.compile(_logistic(5, sg), r0, x0, cache_ok=False)
    second = module.grad_module().grad_module()
    g, gg_r, gg_x = np.array([1.0, -0.5, 2.0]), np.array([0.3, 1.0, -1.0]), np.ones(3)
    ours = second.forward(gg_r, gg_x, g, r0, x0)

    tr = torch.tensor(r0, requires_grad=True)
    tx = torch.tensor(x0, requires_grad=True)
    tg = torch.tensor(g, requires_grad=True)
    first = torch.autograd.grad(_logistic(5, torch)(tr, tx), [tr, tx], tg, create_graph=True)
    ref = torch.autograd.grad(first, [tg, tr, tx], [torch.tensor(gg_r), torch.tensor(gg_x)])
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-10)
