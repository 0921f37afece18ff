"""Never worse than torch (issue 26): maximum / minimum of two expressions of one operand,
torch's in-place correctness checks for every in-place op, and the gradient argument's type.
Each behaviour is compared with torch (float64), which is installed as the oracle."""
from __future__ import annotations

import numpy
import pytest
import torch

import symgrad as sg
from symgrad import nn as sg_nn

# ------------------------------------------------------------------ maximum / minimum
Q = 0.3


def _pinball(ns, pred, target):
    d = target - ns.tanh(pred)
    return ns.maximum(Q * d, (Q - 1) * d).mean()


def _pinball_min(ns, pred, target):
    d = target - ns.tanh(pred)
    return -ns.minimum(-Q * d, (1 - Q) * d).mean()


def _where_form(ns, pred, target):
    d = target - ns.tanh(pred)
    return ns.where(Q * d > (Q - 1) * d, Q * d, (Q - 1) * d).sum()


def _same_operand(ns, x, y):
    return (ns.maximum(0.3 * x, -0.7 * x) + ns.minimum(2.5 * x, -x * 0.5) * y).sum()


@pytest.mark.parametrize("fn", [_pinball, _pinball_min, _where_form, _same_operand])
def test_max_min_of_two_expressions_of_one_operand_match_torch(fn):
    """Was CompileError: maximum has no derivative with respect to argument 1: maximum
    recursion depth exceeded (SymPy's canonical form of 0.3*d > -0.7*d oscillates)."""
    rng = numpy.random.default_rng(5)
    pred = rng.normal(size=12)
    target = rng.normal(size=12) * 0.5
    target[2] = numpy.tanh(pred[2])   # d == 0 exactly: a tie, half the gradient to each side
    pred[3] = 0.0
    target[3] = 0.0
    mod = sg.compile(lambda a, b: fn(sg, a, b), pred, target, cache_ok=False)
    value = mod.forward(pred, target)
    grads = mod.backward(numpy.asarray(1.0), pred, target)
    pt = torch.tensor(pred, requires_grad=True)
    tt = torch.tensor(target, requires_grad=True)
    out = fn(torch, pt, tt)
    out.backward()
    numpy.testing.assert_allclose(numpy.asarray(value).ravel()[0], out.item(), rtol=1e-14)
    numpy.testing.assert_allclose(grads[0], pt.grad.numpy(), rtol=1e-13, atol=1e-16)
    numpy.testing.assert_allclose(grads[1], tt.grad.numpy(), rtol=1e-13, atol=1e-16)


def test_pinball_loss_second_order_and_runtime_path():
    """The pinball loss through a forward-only Function (autograd.grad, create_graph), as a new
    user writes it, and its Hessian-vector product (0: piecewise linear in d)."""
    rng = numpy.random.default_rng(1)
    pred = rng.normal(size=8)
    target = rng.normal(size=8) * 0.5

    class Pinball(sg.autograd.Function):
        @staticmethod
        def forward(ctx, p, t):
            return _pinball(sg, p, t)

    p = sg.tensor(pred, requires_grad=True)
    t = sg.tensor(target)
    loss = Pinball.apply(p, t)
    (g,) = sg.autograd.grad(loss, p, create_graph=True)
    pt = torch.tensor(pred, requires_grad=True)
    (gt,) = torch.autograd.grad(_pinball(torch, pt, torch.tensor(target)), pt, create_graph=True)
    numpy.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-13)
    (h,) = sg.autograd.grad(g.sum(), p)
    (ht,) = torch.autograd.grad(gt.sum(), pt)
    numpy.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-12, atol=1e-15)


def test_relation_helper_is_stable_under_piecewise():
    import sympy

    from symgrad.ops.elementwise import relation

    x, y = sympy.symbols("x y", real=True)
    d = y - sympy.tanh(x)
    rel = relation(sympy.StrictGreaterThan, sympy.Float(0.3) * d, sympy.Float(-0.7) * d)
    assert sympy.Piecewise((1, rel), (0, True)).args[0].cond.free_symbols == {x, y}
    # an ordinary relation is kept as written (generated code unchanged)
    assert relation(sympy.StrictGreaterThan, x, y) == (x > y)
    assert relation(sympy.StrictGreaterThan, x, x) is sympy.false


# ------------------------------------------------------------------ in-place checks
def _inplace_ops(lib):
    """Every in-place op, as a function of (tensor, lib). F.relu(inplace=True) and the others
    with inplace= go through copy_."""
    F = torch.nn.functional if lib is torch else sg_nn.functional

    def setitem_basic(t):
        t[0] = 7.0

    def setitem_advanced(t):
        t[[0, 1]] = 7.0

    def iadd(t):
        t += 1.0

    def isub(t):
        t -= 1.0

    def imul(t):
        t *= 2.0

    def idiv(t):
        t /= 2.0

    return {
        "add_": lambda t: t.add_(1.0),
        "sub_": lambda t: t.sub_(1.0, alpha=2),
        "mul_": lambda t: t.mul_(2.0),
        "div_": lambda t: t.div_(2.0),
        "pow_": lambda t: t.pow_(2.0),
        "clamp_": lambda t: t.clamp_(0.0, 1.5),
        "clip_": lambda t: t.clip_(min=0.0),
        "exp_": lambda t: t.exp_(),
        "relu_": lambda t: t.relu_(),
        "sigmoid_": lambda t: t.sigmoid_(),
        "tanh_": lambda t: t.tanh_(),
        "neg_": lambda t: t.neg_(),
        "copy_": lambda t: t.copy_(lib.tensor([5.0, 6.0, 7.0], dtype=lib.float64)),
        "fill_": lambda t: t.fill_(3.0),
        "fill_tensor": lambda t: t.fill_(lib.tensor(3.0, dtype=lib.float64)),
        "zero_": lambda t: t.zero_(),
        "uniform_": lambda t: t.uniform_(),
        "normal_": lambda t: t.normal_(),
        "setitem": setitem_basic,
        "setitem_advanced": setitem_advanced,
        "+=": iadd,
        "-=": isub,
        "*=": imul,
        "/=": idiv,
        "F.relu(inplace)": lambda t: F.relu(t, inplace=True),
        "F.elu(inplace)": lambda t: F.elu(t, inplace=True),
        "view.fill_": lambda t: t[1:].fill_(2.0),
        "view.zero_": lambda t: t[:1].zero_(),
        "view.copy_": lambda t: t[1:].copy_(lib.tensor([1.0, 2.0], dtype=lib.float64)),
    }


def _saved_graphs(lib):
    """(what was saved, builder): a builder returns (tensor to modify, output to backward)."""

    class Keep(lib.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            ctx.save_for_backward(i)
            return i * 2

        @staticmethod
        def backward(ctx, g):
            (i,) = ctx.saved_tensors
            return g * i

    def saved_input(x):
        a = x * 1
        return a, (a * a).sum()

    def saved_output(x):
        y = (x * 1).exp()
        return y, y.sum()

    def sin_input(x):
        a = x * 1
        return a, a.sin().sum()

    def function_saved(x):
        a = x * 1
        return a, Keep.apply(a).sum()

    return {"saved_input": saved_input, "saved_output": saved_output, "sin_input": sin_input,
            "function_saved": function_saved}


def _run(lib, op, graph):
    x = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
    victim, out = _saved_graphs(lib)[graph](x)
    _inplace_ops(lib)[op](victim)
    try:
        out.backward()
    except RuntimeError as exc:
        msg = str(exc).replace("torch.DoubleTensor", "symgrad.DoubleTensor").replace(
            "torch.autograd.set_detect", "symgrad.autograd.set_detect")
        return "RuntimeError", msg
    return "ok", x.grad.numpy().tolist()


@pytest.mark.parametrize("graph", ["saved_input", "saved_output", "sin_input", "function_saved"])
@pytest.mark.parametrize("op", list(_inplace_ops(torch)))
def test_every_inplace_op_on_a_saved_tensor_is_torchs_error(op, graph):
    """torch: "if you're using in-place functions and not seeing any errors, you can be sure
    that the computed gradients are correct". copy_, fill_ and zero_ of a saved output were
    not detected (their backward gave the overwritten tensor no gradient, so the node that
    saved it never ran its check)."""
    expected = _run(torch, op, graph)
    assert expected[0] == "RuntimeError"
    got = _run(sg, op, graph)
    assert got == expected


@pytest.mark.parametrize("op", ["copy_", "fill_", "fill_tensor", "zero_", "view.fill_",
                                "view.zero_", "view.copy_"])
def test_overwrite_gives_zero_gradient_and_torchs_node(op):
    """Nothing saved: the overwritten values get a zero gradient (torch's zeros_like(grad)),
    not None, and the node has torch's name."""
    res = {}
    for lib in (torch, sg):
        x = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        a = x * 2
        _inplace_ops(lib)[op](a)
        name = a.grad_fn.name()
        (a * 3).sum().backward()
        res[lib.__name__] = (name, x.grad.numpy().tolist())
    assert res["symgrad"] == res["torch"]


def test_random_fills_are_torchs_nodes_and_refuse_a_leaf():
    for lib in (torch, sg):
        x = lib.ones(3, dtype=lib.float64, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            x.uniform_()
        a = x * 2
        a.normal_()
        assert a.grad_fn.name() == "NormalBackward0"
        a.sum().backward()
        assert x.grad.numpy().tolist() == [0.0, 0.0, 0.0]
        with lib.no_grad():
            x.uniform_(2.0, 3.0)
        assert x._version == 1 and bool(((x >= 2) & (x < 3)).all())


def test_fill_with_a_tensor_value_gets_the_summed_gradient():
    res = {}
    for lib in (torch, sg):
        x = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        v = lib.tensor(2.0, dtype=lib.float64, requires_grad=True)
        a = x * 2
        a.fill_(v)
        (a * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum().backward()
        res[lib.__name__] = (a.grad_fn.name(), x.grad.numpy().tolist(), v.grad.item())
    assert res["symgrad"] == res["torch"] == ("FillBackward3", [0.0, 0.0, 0.0], 6.0)


# ------------------------------------------------------------------ gradient argument types
@pytest.mark.parametrize("gradient, error", [
    ([1.0, 2.0], TypeError),
    ((1, 2), TypeError),
    (3.0, TypeError),
    ([None, None], RuntimeError),
    (["a"], TypeError),
])
def test_backward_gradient_of_the_wrong_type_is_torchs_error(gradient, error):
    msgs = []
    for lib in (torch, sg):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        y = x * x
        with pytest.raises(error) as info:
            y.backward(gradient)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def test_grad_outputs_of_the_wrong_type_is_torchs_error():
    msgs = []
    for lib in (torch, sg):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        with pytest.raises(TypeError) as info:
            lib.autograd.grad(x * x, x, [1.0, 2.0])
        msgs.append(str(info.value))
    assert msgs == ["gradients can be either Tensors or None, but got float"] * 2


@pytest.mark.parametrize("name", ["relu", "elu", "silu", "hardtanh", "leaky_relu", "relu6",
                                  "selu", "celu", "mish", "hardswish", "threshold"])
def test_functional_inplace_is_torchs_inplace_node(name):
    """F.elu(a, inplace=True) then backward raised a false in-place error (the op saved its
    input, which the copy_ back then overwrote); a.grad_fn was CopyBackwards (torch's
    EluBackward1). Also on a view of a non-leaf (CopySlices)."""
    res = {}
    for lib in (torch, sg):
        F = torch.nn.functional if lib is torch else sg_nn.functional
        fn = getattr(F, name)
        args = (0.1, 20.0) if name == "threshold" else ()
        x = lib.tensor([-1.0, 0.5, 2.0, 7.0], dtype=lib.float64, requires_grad=True)
        a = x * 1
        assert fn(a, *args, inplace=True) is a
        node = a.grad_fn.name()
        (a * a).sum().backward()
        g1 = x.grad.numpy().copy()
        x.grad = None
        b = x * 1
        fn(b[1:], *args, inplace=True)
        (b * b).sum().backward()
        res[lib.__name__] = (node, g1, x.grad.numpy().copy())
    assert res["symgrad"][0] == res["torch"][0]
    numpy.testing.assert_allclose(res["symgrad"][1], res["torch"][1], rtol=1e-12)
    numpy.testing.assert_allclose(res["symgrad"][2], res["torch"][2], rtol=1e-12)
