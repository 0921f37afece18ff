"""With create_graph=True a gradient requires grad only when what its formula depends on does,
as in torch: the gradient of 3*x + w is a plain tensor, x's gradient of x*x*w depends on both.

Each case runs the same code on torch and on symgrad and compares requires_grad, which
gradients are None, and values; order 2 and 3 come from repeated create_graph. The
dependence tables themselves (BACKWARD_DEPENDS, Graph.dependencies) are checked in closed form.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
A3 = RNG.random(3) * 0.5 + 0.7     # away from the kinks at 1.0 used below
B3 = RNG.random(3) * 0.5 + 0.2
A23 = RNG.random((2, 3)) + 0.5
B3b = RNG.random(3) + 0.5


def _t(m, a, rg=True):
    return torch.tensor(a, requires_grad=rg) if m is torch else sg.tensor(a, requires_grad=rg)


def _flags(gs):
    return [None if g is None else g.requires_grad for g in gs]


def _np(g):
    return None if g is None else np.array((g.detach() + 0).numpy())


# ----------------------------------------------------------- first order, built-in ops
BUILTIN = {
    "add": lambda m, x, w: x + w,
    "sub": lambda m, x, w: x - w,
    "mul": lambda m, x, w: x * w,
    "div": lambda m, x, w: x / w,
    "div_const": lambda m, x, w: x / 2.0 + w,
    "rdiv": lambda m, x, w: 2.0 / x + w,
    "pow": lambda m, x, w: x ** w,
    "neg": lambda m, x, w: -x + w,
    "exp": lambda m, x, w: m.exp(x) + w,
    "relu": lambda m, x, w: m.relu(x - 1.0) + w,
    "abs": lambda m, x, w: m.abs(x - 1.0) + w,
    "maximum": lambda m, x, w: m.maximum(x, w),
    "minimum": lambda m, x, w: m.minimum(x, w),
    "where": lambda m, x, w: m.where(x > 0.9, x, w),
    "clamp": lambda m, x, w: m.clamp(x, 0.8, 1.0) + w,
    "clamp_tensor": lambda m, x, w: m.clamp(x, w * 0.5, w),
    "matmul": lambda m, x, w: x.reshape(3, 1) @ w.reshape(1, 3),
    "sum": lambda m, x, w: x.sum() + w,
    "mean": lambda m, x, w: x.mean() + w,
    "prod": lambda m, x, w: x.prod() + w,
    "max": lambda m, x, w: x.max() + w,
    "max_dim": lambda m, x, w: x.reshape(1, 3).max(1)[0] + w,
    "amax": lambda m, x, w: m.amax(x.reshape(1, 3), 1) + w,
    "reshape": lambda m, x, w: x.reshape(3, 1) + w,
    "getitem": lambda m, x, w: x[1:] + w[:2],
    "expand": lambda m, x, w: x.reshape(3, 1).expand(3, 3) + w,
    "transpose": lambda m, x, w: x.reshape(3, 1).T + w,
    "cat": lambda m, x, w: m.cat([x, w]),
    "cumsum": lambda m, x, w: m.cumsum(x, 0) + w,
    "softmax": lambda m, x, w: m.softmax(x, 0) * w,
    "floor": lambda m, x, w: m.floor(x) + w,
    "sign": lambda m, x, w: m.sign(x - 1.0) * w,
    "square": lambda m, x, w: x * x + w,
    "sigmoid": lambda m, x, w: m.sigmoid(x) * w,
}


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)],
                         ids=["both", "x", "w"])
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_gradients_require_grad_as_torch(name, needs):
    f = BUILTIN[name]
    got = []
    for m in (torch, sg):
        x, w = _t(m, A3, needs[0]), _t(m, B3, needs[1])
        inputs = [t for t in (x, w) if t.requires_grad]
        out = f(m, x, w)
        if not out.requires_grad:
            got.append("no graph")
            continue
        gs = m.autograd.grad(out.sum(), inputs, create_graph=True, allow_unused=True)
        got.append((_flags(gs), [g is None or g.grad_fn is None for g in gs]))
    assert got[1] == got[0]


def test_linear_gradients_are_plain_tensors():
    # the example: torch gives requires_grad [False, False]
    x, w = sg.tensor(A3, requires_grad=True), sg.tensor(B3, requires_grad=True)
    gx, gw = sg.autograd.grad((3.0 * x + w).sum(), (x, w), create_graph=True)
    assert (gx.requires_grad, gw.requires_grad) == (False, False)
    assert gx.grad_fn is None and gw.grad_fn is None
    np.testing.assert_allclose(gx.numpy(), 3.0)
    np.testing.assert_allclose(gw.numpy(), 1.0)


class Lin(sg.Function):
    @staticmethod
    def forward(ctx, x, w):
        return 3.0 * x + w


class Cubic(sg.Function):
    @staticmethod
    def forward(ctx, x, w):
        return x * x * w


class Mixed(sg.Function):
    @staticmethod
    def forward(ctx, x, w):
        return x * x + 5.0 * w


class OnlyW(sg.Function):
    @staticmethod
    def forward(ctx, x, w):
        return 2.0 * x + w * w


USER = {   # symgrad Function, the same forward in torch ops
    "lin": (Lin, lambda x, w: 3.0 * x + w),
    "cubic": (Cubic, lambda x, w: x * x * w),
    "mixed": (Mixed, lambda x, w: x * x + 5.0 * w),
    "only_w": (OnlyW, lambda x, w: 2.0 * x + w * w),
}


@pytest.mark.parametrize("go_requires_grad", [False, True], ids=["plain_v", "v_requires_grad"])
@pytest.mark.parametrize("name", sorted(USER))
@pytest.mark.parametrize("kind", ["ops", "Function"])
def test_user_function_and_ops_gradients_as_torch(kind, name, go_requires_grad):
    cls, torch_f = USER[name]
    v = RNG.random(3) + 0.5
    xt, wt = _t(torch, A3), _t(torch, B3)
    want = torch.autograd.grad(torch_f(xt, wt), (xt, wt),
                               grad_outputs=_t(torch, v, go_requires_grad), create_graph=True)
    xs, ws = _t(sg, A3), _t(sg, B3)
    y = cls.apply(xs, ws) if kind == "Function" else torch_f(xs, ws)
    got = sg.autograd.grad(y, (xs, ws), grad_outputs=_t(sg, v, go_requires_grad),
                           create_graph=True)
    assert _flags(got) == _flags(want)
    for g, t in zip(got, want):
        np.testing.assert_allclose(_np(g), _np(t), rtol=1e-12)
        if not t.requires_grad:
            assert g.grad_fn is None
            continue
        # differentiated again: the same values, and None where torch has no path
        ss = sg.autograd.grad(g.sum(), (xs, ws), allow_unused=True)
        tt = torch.autograd.grad(t.sum(), (xt, wt), allow_unused=True)
        assert [a is None for a in ss] == [b is None for b in tt]
        for a, b in zip(ss, tt):
            if b is not None:
                np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12)


def test_user_function_second_derivative_values_and_none_as_torch():
    # x*x*w: d(gx)/dw = 2x, d(gw)/dw has no path to w (None in torch)
    x, w = _t(torch, A3), _t(torch, B3)
    tgx, tgw = torch.autograd.grad((x * x * w).sum(), (x, w), create_graph=True)
    want = [torch.autograd.grad(g.sum(), (x, w), allow_unused=True) for g in (tgx, tgw)]
    x, w = _t(sg, A3), _t(sg, B3)
    gx, gw = sg.autograd.grad(Cubic.apply(x, w).sum(), (x, w), create_graph=True)
    got = [sg.autograd.grad(g.sum(), (x, w), allow_unused=True) for g in (gx, gw)]
    for gs, ts in zip(got, want):
        assert [g is None for g in gs] == [t is None for t in ts]
        for g, t in zip(gs, ts):
            if t is not None:
                np.testing.assert_allclose(_np(g), _np(t), rtol=1e-12)


# ------------------------------------------------------------- higher orders
CHAINS = {
    "cube": lambda m, x, w: (x * x * x * w).sum(),
    "exp": lambda m, x, w: (m.exp(x) * w).sum(),
    "relu": lambda m, x, w: (m.relu(x - 1.0) * x * w).sum(),
    "sigmoid": lambda m, x, w: m.sigmoid(x * w).sum(),
    "matmul": lambda m, x, w: (x.reshape(3, 2)[:2] @ w.reshape(3, 2)[1:].T).pow(2).sum(),
    "maximum": lambda m, x, w: (m.maximum(x, w) * x).sum(),
    "square_plus_linear": lambda m, x, w: (x * x + 3.0 * w).sum(),
    "clamp": lambda m, x, w: (m.clamp(x, 0.8, 1.2) * w * w).sum(),
    "mean": lambda m, x, w: (x.mean() * w * w * w).sum(),
    "tanh": lambda m, x, w: m.tanh(x * w).pow(3).sum(),
    "minimum_prod": lambda m, x, w: (m.minimum(x, w) * x * w).sum(),
    "where": lambda m, x, w: m.where(x > 1.0, x * w, w).sum(),
    "log_softmax": lambda m, x, w: (m.log_softmax(x * w, 0) * w).sum(),
    "relu_only": lambda m, x, w: m.relu(x - 1.0).sum() + w.sum(),
}


def _chain(m, f, a, b, orders=3):
    """Per order, the flags and values of every derivative of every previous one."""
    x, w = _t(m, a), _t(m, b)
    out, cur = [], [f(m, x, w)]
    for _ in range(orders):
        nxt = []
        for c in cur:
            if c is None or not c.requires_grad:
                nxt += [None, None]
                continue
            nxt += list(m.autograd.grad(c.sum(), (x, w), create_graph=True, allow_unused=True))
        out.append((_flags(nxt), [_np(g) for g in nxt]))
        cur = nxt
    return out


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_repeated_create_graph_as_torch(name):
    a, b = RNG.random(6) + 0.5, RNG.random(6) + 0.5
    want = _chain(torch, CHAINS[name], a, b)
    got = _chain(sg, CHAINS[name], a, b)
    for order, ((tf, tv), (sf, sv)) in enumerate(zip(want, got), 1):
        assert sf == tf, f"order {order}"
        for t, s in zip(tv, sv):
            if t is not None:
                np.testing.assert_allclose(s, t, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------- functional, strict mode
def _outcome(fn):
    try:
        fn()
    except RuntimeError as exc:
        return str(exc)
    return "ok"


STRICT = {
    "hessian_linear": lambda F, m: F.hessian(lambda a: (3.0 * a).sum(), _t(m, A3, False),
                                             strict=True),
    "hessian_linear_two_inputs": lambda F, m: F.hessian(
        lambda a, b: (a * a + b).sum(), (_t(m, A3, False), _t(m, B3, False)), strict=True),
    "hessian_where": lambda F, m: F.hessian(lambda a: m.where(a > 1.0, a, 2.0 * a).sum(),
                                            _t(m, A3, False), strict=True),
    "hessian_relu": lambda F, m: F.hessian(lambda a: m.relu(a - 1.0).sum(), _t(m, A3, False),
                                           strict=True),
    "hessian_cube": lambda F, m: F.hessian(lambda a: (a * a * a).sum(), _t(m, A3, False),
                                           strict=True),
    "hessian_square_create_graph": lambda F, m: F.hessian(
        lambda a: (a * a).sum(), _t(m, A3, False), strict=True, create_graph=True),
    "hessian_relu_create_graph": lambda F, m: F.hessian(
        lambda a: (m.relu(a - 1.0) * a).sum(), _t(m, A3, False), strict=True,
        create_graph=True),
    "jacobian_linear_create_graph": lambda F, m: F.jacobian(
        lambda a: 3.0 * a, _t(m, A3, False), create_graph=True, strict=True),
    "jacobian_square_create_graph": lambda F, m: F.jacobian(
        lambda a: a * a, _t(m, A3, False), create_graph=True, strict=True),
    "vhp_linear": lambda F, m: F.vhp(lambda a: (3.0 * a).sum(), _t(m, A3, False),
                                     _t(m, B3, False), strict=True),
    "hvp_linear": lambda F, m: F.hvp(lambda a: (3.0 * a).sum(), _t(m, A3, False),
                                     _t(m, B3, False), strict=True),
    "vhp_square_create_graph": lambda F, m: F.vhp(
        lambda a: (a * a).sum(), _t(m, A3, False), _t(m, B3, False), strict=True,
        create_graph=True),
    "hvp_square_create_graph": lambda F, m: F.hvp(
        lambda a: (a * a).sum(), _t(m, A3, False), _t(m, B3, False), strict=True,
        create_graph=True),
    "vhp_cube_create_graph": lambda F, m: F.vhp(
        lambda a: (a * a * a).sum(), _t(m, A3, False), _t(m, B3, False), strict=True,
        create_graph=True),
    "jvp_linear_create_graph": lambda F, m: F.jvp(
        lambda a: 3.0 * a, _t(m, A3, False), _t(m, B3, False), strict=True, create_graph=True),
    "vjp_linear_create_graph": lambda F, m: F.vjp(
        lambda a: 3.0 * a, _t(m, A3, False), _t(m, B3, False), strict=True, create_graph=True),
}


@pytest.mark.parametrize("name", sorted(STRICT))
def test_strict_mode_raises_where_torch_does(name):
    want = _outcome(lambda: STRICT[name](torch.autograd.functional, torch))
    got = _outcome(lambda: STRICT[name](sg.autograd.functional, sg))
    assert got == want


def test_hessian_strict_of_linear_user_function_raises():
    with pytest.raises(RuntimeError, match="independent of the input"):
        sg.autograd.functional.hessian(lambda a: Lin.apply(a, a).sum(), sg.tensor(A3),
                                       strict=True)
    # and not strict: zeros, as torch
    h = sg.autograd.functional.hessian(lambda a: Lin.apply(a, a).sum(), sg.tensor(A3))
    np.testing.assert_array_equal(h.numpy(), np.zeros((3, 3)))


# ------------------------------------------------------------- the tables
def test_backward_depends_of_generated_modules():
    from symgrad._generated import matmul, max_dim, mul, relu, sign, where

    assert mul.BACKWARD_DEPENDS == (((0, 2),), ((0, 1),))       # g*b, g*a
    assert matmul.BACKWARD_DEPENDS == (((0, 2),), ((0, 1),))    # a, b: read for shapes only
    assert where.BACKWARD_DEPENDS == (None, ((0,),), ((0,),))   # the condition masks
    assert relu.BACKWARD_DEPENDS == (((0, 1),),)                # torch: threshold_backward
    assert max_dim.BACKWARD_DEPENDS == (((0,), None),)          # indices get no gradient
    assert sign.BACKWARD_DEPENDS == ((None,),)                  # zeros


def test_gradient_module_tables_split_by_grad_output():
    """mul's gradient module computes gg_a*b + gg_b*a for g: the a-term only with gg_b."""
    from symgrad._builtins import builtin_compiled

    gm = builtin_compiled("mul").grad_module()     # backward(gg_a, gg_b, g, a, b)
    assert gm.backward_depends == (((0, 4), (1, 3)), (None, (1, 2)), ((0, 2), None))


def test_dependencies_of_a_traced_graph():
    from symgrad.differentiate import differentiate

    def f(x, w, v):
        return sg.where(x > 0, x * w, 2.0 * v) + sg.sign(v) * w + sg.relu(v)

    vjp = differentiate(sg.trace(f, np.ones(3), np.ones(3), np.ones(3)))
    # backward(g, x, w, v): x's gradient g*w where x > 0; w's g*sign(v) + g*x where x > 0
    # (sign is differentiable, as torch's sgn); v's 2g or 0 and g where v > 0: masks only
    assert vjp.dependencies(1) == (((0, 2),), ((0, 1, 3),), ((0,),))
    assert vjp.dependencies() == ((0, 2), (0, 1, 3), (0,))


def test_create_graph_without_a_graph_to_build_needs_no_gradient_module():
    """The gradients of 3*x + w need no graph: no second-order module is compiled (no SymPy)."""
    code = (
        "import sys, symgrad as sg\n"
        "x = sg.tensor([1.0, 2.0], requires_grad=True); w = sg.tensor([3.0, 4.0], "
        "requires_grad=True)\n"
        "gx, gw = sg.autograd.grad((3.0 * x + w * 2.0 - x).sum(), (x, w), create_graph=True)\n"
        "assert not gx.requires_grad and not gw.requires_grad\n"
        "assert 'sympy' not in sys.modules, 'a gradient module was compiled'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_module_without_a_table_connects_every_gradient(monkeypatch):
    """A module without BACKWARD_DEPENDS (an old cache entry) keeps the conservative rule."""
    from symgrad.autograd import function as fn

    x, w = sg.tensor(A3, requires_grad=True), sg.tensor(B3, requires_grad=True)
    Lin.apply(x, w)   # compiled
    entry = next(e for k, e in fn._COMPILED.items() if k[0] is Lin)
    monkeypatch.setattr(entry.mod, "BACKWARD_DEPENDS", None)
    gx, gw = sg.autograd.grad(Lin.apply(x, w).sum(), (x, w), create_graph=True)
    assert gx.requires_grad and gw.requires_grad
    np.testing.assert_allclose(gx.detach().numpy(), 3.0)


# ------------------------------------------------------------- freeing, engine paths
def _backward_sequence(m, seq, anomaly=False):
    """Differentiate gx / gw of x*x*w again, one after the other, without retain_graph."""
    x, w = _t(m, A3), _t(m, B3)
    gx, gw = m.autograd.grad((x * x * w).sum(), (x, w), create_graph=True)
    out = []
    for name in seq:
        g = gx if name == "gx" else gw
        try:
            if anomaly:
                with m.autograd.detect_anomaly():
                    r = m.autograd.grad(g.sum(), (x, w), allow_unused=True)
            else:
                r = m.autograd.grad(g.sum(), (x, w), allow_unused=True)
            out.append([None if a is None else np.round(_np(a), 12).tolist() for a in r])
        except RuntimeError as exc:
            out.append(str(exc)[:60])
    return out


@pytest.mark.parametrize("anomaly", [False, True], ids=["fast_engine", "general_engine"])
@pytest.mark.parametrize("seq", [("gx", "gx"), ("gw", "gw"), ("gx", "gw"), ("gw", "gx"),
                                 ("gw", "gx", "gx")], ids="-".join)
def test_each_gradient_frees_only_its_own_graph_as_torch(seq, anomaly):
    """torch computes gx = 2*x*w*g and gw = x*x*g as separate ops: a backward through one
    frees only its graph (a second one through it raises); the other still works."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # anomaly mode's warning
        assert _backward_sequence(sg, seq, anomaly) == _backward_sequence(torch, seq)


def test_unused_input_of_a_gradient_is_an_error_as_torch():
    for m in (torch, sg):
        x, w = _t(m, A3), _t(m, B3)
        _, gw = m.autograd.grad((x * x * w).sum(), (x, w), create_graph=True)
        with pytest.raises(RuntimeError, match="not have been used in the graph"):
            m.autograd.grad(gw.sum(), (x, w))


def test_hook_on_a_gradient_and_backward_inputs_as_torch():
    got = []
    for m in (torch, sg):
        x, w = _t(m, A3), _t(m, B3)
        gx, gw = m.autograd.grad((x * x * w).sum(), (x, w), create_graph=True)
        gx.register_hook(lambda g: g * 2.0)
        (gx.sum() + gw.sum()).backward(inputs=[w])
        got.append((x.grad, _np(w.grad)))
    assert got[1][0] is None and got[0][0] is None
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-12)


def test_sign_is_differentiable_with_a_zero_gradient_as_torch():
    """torch.sign of a float tensor has a grad_fn (SignBackward0) and a zero gradient; of an
    integer or bool tensor it keeps the dtype."""
    got = []
    for m in (torch, sg):
        x = _t(m, np.array([1.5, -2.0, 0.0]))
        y = m.sign(x)
        assert y.requires_grad and y.grad_fn.name() == "SignBackward0"
        y.sum().backward()
        ints = m.sign(m.tensor([3, -1, 0])), m.tensor([True, False]).sign()
        got.append((_np(x.grad).tolist(), [str(t.dtype).split(".")[-1] for t in ints],
                    [t.tolist() for t in ints]))
    assert got[1] == got[0]


@pytest.mark.parametrize("batched", [False, True], ids=["plain", "is_grads_batched"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_materialized_gradients_as_torch(create_graph, batched):
    """materialize_grads: an unused input's zeros are a leaf that requires grad under
    create_graph; with is_grads_batched they have the input's own shape (torch's rule)."""
    got = []
    for m in (torch, sg):
        x, w = _t(m, A3), _t(m, B3)
        kw = {"grad_outputs": m.eye(3, dtype=m.float64), "is_grads_batched": True} \
            if batched else {"grad_outputs": m.ones(3, dtype=m.float64)}
        gs = m.autograd.grad(x * x, (x, w), create_graph=create_graph, materialize_grads=True,
                             **kw)
        got.append([(tuple(g.shape), g.requires_grad, g.grad_fn is None, _np(g).tolist())
                    for g in gs])
    assert got[1] == got[0]


POWERS = {
    "square": lambda m, x, w: (x ** 2).sum(),
    "cube": lambda m, x, w: (x ** 3 * w).sum(),
    "cube_of_negated": lambda m, x, w: ((-w * 2.0) ** 3).sum() + x.sum(),
    "pow_method": lambda m, x, w: x.pow(2).sum() * w.sum(),
    "tensor_exponent": lambda m, x, w: (w ** x).sum(),   # positive base: both gradients
}


@pytest.mark.parametrize("name", sorted(POWERS))
def test_higher_derivatives_of_powers_of_negative_values_as_torch(name):
    """A constant exponent's gradient is not computed (torch: pow(Tensor, Scalar)): the
    gradient module of pow leaves it out, so its log(a) cannot turn the second derivative at
    a negative base into NaN (0 * nan)."""
    a = np.array([-1.5, -0.5, 2.0])
    b = np.array([0.5, 1.5, 0.25]) if name == "tensor_exponent" else np.array([-1.0, 0.5, 2.0])
    # two orders: at the third, torch's flags depend on its pow(x, 0) special case
    want = _chain(torch, POWERS[name], a, b, orders=2)
    got = _chain(sg, POWERS[name], a, b, orders=2)
    for order, ((tf, tv), (sf, sv)) in enumerate(zip(want, got), 1):
        assert sf == tf, f"order {order}"
        for t, s in zip(tv, sv):
            if t is not None:
                np.testing.assert_allclose(s, t, rtol=1e-10, atol=1e-12)


def test_hessian_of_a_square_at_negative_points():
    h = sg.autograd.functional.hessian(lambda x: (x ** 2).sum(), sg.tensor([-1.0, 2.0]))
    np.testing.assert_array_equal(h.numpy(), [[2.0, 0.0], [0.0, 2.0]])   # was NaN in column 0


def test_gradient_module_for_a_subset_of_gradients():
    from symgrad._builtins import builtin_compiled

    full = builtin_compiled("pow").grad_module()
    only_a = builtin_compiled("pow").grad_module((True, False))
    assert only_a is not full and builtin_compiled("pow").grad_module((True, True)) is full
    def forward_text(mod):
        text = mod.source
        return text[text.index("def forward("):text.index("def backward(")]

    # the forward (the first derivative) computes a's gradient only: no log(a)
    assert only_a.graph.outputs[1] is None and "log" not in forward_text(only_a)
    assert "log" in forward_text(full)
