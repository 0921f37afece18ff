"""Property-based: random elementwise expression trees, differentiated by symgrad, agree with
central finite differences of their own forward (float64), at first and second order."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symgrad as sg
from gradcheck_util import numeric_vjp

# smooth ops on a domain where they are well defined and moderate
UNARY = {
    "exp": lambda a: (a * 0.3).exp(),
    "tanh": lambda a: a.tanh(),
    "sin": lambda a: a.sin(),
    "cos": lambda a: a.cos(),
    "sigmoid": lambda a: a.sigmoid(),
    "softplus": lambda a: a.softplus(),
    "log1p_sq": lambda a: (a * a).log1p(),
    "sqrt_shift": lambda a: (a * a + 1).sqrt(),
    "erf": lambda a: a.erf(),
    "square": lambda a: a * a,
    "neg": lambda a: -a,
    "atan": lambda a: a.atan(),
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1),
    "pow": lambda a, b: (a * a + 0.5) ** (b.tanh()),
    "hypot": lambda a, b: (a * a + b * b + 0.1).sqrt(),
}


def trees(depth):
    leaf = st.sampled_from(["x", "y", "z", "c"])
    if depth == 0:
        return leaf
    sub = trees(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(sorted(UNARY)), sub),
        st.tuples(st.sampled_from(sorted(BINARY)), sub, sub),
    )


def build(tree, env):
    if isinstance(tree, str):
        return 0.75 if tree == "c" else env[tree]
    if len(tree) == 2:
        arg = build(tree[1], env)
        if not hasattr(arg, "tracer"):
            return arg
        return UNARY[tree[0]](arg)
    a, b = build(tree[1], env), build(tree[2], env)
    if not hasattr(a, "tracer") or not hasattr(b, "tracer"):
        return a * b + b if hasattr(a, "tracer") or hasattr(b, "tracer") else a + b
    return BINARY[tree[0]](a, b)


def forward_of(tree):
    def forward(x, y, z):
        out = build(tree, {"x": x, "y": y, "z": z})
        return out + 0 * x if not hasattr(out, "tracer") else out + 0 * x
    return forward


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees(3), seed=st.integers(0, 2 ** 16))
def test_random_trees_match_finite_differences(tree, seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-1.2, 1.2, 4) for _ in range(3)]
    mod = sg.compile(forward_of(tree), *inputs, cache_ok=False)
    gout = rng.standard_normal(4)
    grads = mod.backward(gout, *inputs)
    expected = numeric_vjp(mod.forward, inputs, [gout], eps=1e-6)
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-6, err_msg=str(tree))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees(2), seed=st.integers(0, 2 ** 16))
def test_random_trees_second_order(tree, seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-1.2, 1.2, 3) for _ in range(3)]
    mod = sg.compile(forward_of(tree), *inputs, cache_ok=False).grad_module()
    gout = rng.standard_normal(3)
    first = mod.forward(gout, *inputs)
    cot = [rng.standard_normal(3) for _ in first]
    second = mod.backward(*cot, gout, *inputs)
    expected = numeric_vjp(lambda *a: mod.forward(*a), [gout, *inputs], cot, eps=1e-5)
    for g, e in zip(second, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=str(tree))
