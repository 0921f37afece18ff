"""The runtime's fast paths keep torch.autograd semantics.

* Modules that expose ``forward_saving`` / ``backward_saved`` (forward also returns
  intermediates that the backward reads instead of recomputing them) are used by the runtime,
  and their saved values are freed, version-checked and copied-on-write like saved inputs.
* The engine's fast path (every node runs, no capture) runs nodes in the order of the general
  ready-queue engine.
* Module entry points decorated with ``numpy.errstate(all="ignore")`` are called under the same
  error state without the decorator, and the user's error state is left alone.
"""
import warnings

import numpy as np
import pytest

import symgrad as sg
from symgrad.autograd import engine as _engine
from symgrad.autograd import function as _function


class SavingModule:
    """f(x, y) = x * exp(y), with forward_saving saving exp(y); counts its calls."""

    differentiable_outputs = (True,)
    returns_tuple = False

    def __init__(self, alias_output=False):
        self.calls = []
        self.alias_output = alias_output

    def forward(self, x, y):
        self.calls.append("forward")
        return (x * np.exp(y),)

    def backward(self, g, x, y):
        self.calls.append("backward")
        e = np.exp(y)
        return (g * e, g * x * e)

    def forward_saving(self, x, y):
        self.calls.append("forward_saving")
        e = np.exp(y)
        out = x * e
        # alias_output: the saved value is the output array itself
        return (out,), ((out,) if self.alias_output else (e,))

    def backward_saved(self, g, s, x, y):
        self.calls.append("backward_saved")
        e = s / x if self.alias_output else s
        return (g * e, g * x * e)

    def grad_module(self):
        return _GradModule()


class _GradModule:
    """The gradient module of SavingModule: forward is its backward."""

    differentiable_outputs = (True, True)
    returns_tuple = True

    def forward(self, g, x, y):
        e = np.exp(y)
        return (g * e, g * x * e)

    def backward(self, gg1, gg2, g, x, y):
        e = np.exp(y)
        return (gg1 * e + gg2 * x * e, gg2 * g * e, gg1 * g * e + gg2 * g * x * e)


def _inputs():
    x = sg.tensor([0.5, 1.0, 2.0], dtype=sg.float64, requires_grad=True)
    y = sg.tensor([0.1, -0.3, 0.7], dtype=sg.float64, requires_grad=True)
    return x, y


def _apply(mod, x, y, spec=_function.SAVE_ALL):
    return _function.apply_module(mod, [x, y], [x._data, y._data], {}, "XExpBackward", spec)[0]


def test_forward_saving_and_backward_saved_are_used_with_right_gradients():
    mod = SavingModule()
    x, y = _inputs()
    out = _apply(mod, x, y)
    assert mod.calls == ["forward_saving"]
    assert out.grad_fn._extra is not None
    out.sum().backward()
    assert mod.calls == ["forward_saving", "backward_saved"]
    e = np.exp(y.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), e)
    np.testing.assert_allclose(y.grad.numpy(), x.detach().numpy() * e)
    assert out.grad_fn._extra is None  # freed with the rest of what the node saved


def test_plain_forward_without_a_graph():
    mod = SavingModule()
    x, y = _inputs()
    with sg.no_grad():
        out = _apply(mod, x, y)
    assert mod.calls == ["forward"]
    assert out.grad_fn is None


def test_saved_values_are_freed_and_a_second_backward_raises():
    mod = SavingModule()
    x, y = _inputs()
    loss = _apply(mod, x, y).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_retain_graph_keeps_saved_values():
    mod = SavingModule()
    x, y = _inputs()
    loss = _apply(mod, x, y).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert mod.calls == ["forward_saving", "backward_saved", "backward_saved"]
    e = np.exp(y.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), 2 * e)


def test_node_that_saves_nothing_for_torch_recomputes_after_release():
    # a SAVE_NONE node may run backward twice without retain_graph: once its intermediates
    # are freed it recomputes them through the plain backward
    mod = SavingModule()
    x, y = _inputs()
    out = _apply(mod, x, y, _function.SAVE_NONE)
    loss = out.sum()
    loss.backward()
    loss.backward()
    assert mod.calls == ["forward_saving", "backward_saved", "backward"]
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(y.detach().numpy()))


def test_inplace_write_to_an_input_is_caught():
    mod = SavingModule()
    x, y = _inputs()
    a = x * 1.0
    out = _apply(mod, a, y)
    with sg.no_grad():
        a.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_saved_value_aliasing_the_output_is_version_checked():
    mod = SavingModule(alias_output=True)
    x, y = _inputs()
    out = _apply(mod, x, y)
    out.sum().backward(retain_graph=True)
    e = np.exp(y.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), e)
    with sg.no_grad():
        out.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_saved_value_aliasing_an_unchecked_input_is_copied_on_write():
    class AliasInput(SavingModule):
        def forward_saving(self, x, y):
            self.calls.append("forward_saving")
            return (x * np.exp(y),), (y,)   # saves the input array itself

        def backward_saved(self, g, s, x, y):
            self.calls.append("backward_saved")
            e = np.exp(s)
            return (g * e, g * x * e)

    mod = AliasInput()
    x, y = _inputs()
    y0 = y.detach().numpy().copy()
    b = y * 1.0
    # SAVE_NONE: no input is version-checked, so the runtime must protect the alias
    out = _apply(mod, x, b, _function.SAVE_NONE)
    with sg.no_grad():
        b.add_(5.0)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(y0))


def test_create_graph_uses_the_grad_module_with_the_original_inputs():
    mod = SavingModule()
    x, y = _inputs()
    out = _apply(mod, x, y)
    (gx, gy) = sg.autograd.grad(out.sum(), (x, y), create_graph=True)
    assert "backward_saved" not in mod.calls
    e = np.exp(y.detach().numpy())
    np.testing.assert_allclose(gx.detach().numpy(), e)
    (ggy,) = sg.autograd.grad(gy.sum(), (y,))
    np.testing.assert_allclose(ggy.numpy(), x.detach().numpy() * e)


def test_function_apply_uses_a_compiled_module_with_saving(monkeypatch):
    mod = SavingModule()
    # _compile_function returns (module, the tiered target's background job or None)
    from symgrad.autograd import _compiled_functions as compiled   # where apply looks them up
    monkeypatch.setattr(compiled, "_compile_function",
                        lambda cls, args, kwargs=None, tier_key=None: (mod, None))
    monkeypatch.setattr(compiled, "_COMPILED", {})

    class XExp(sg.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * sg.exp(y)

    x, y = _inputs()
    out = XExp.apply(x, y)
    assert out.grad_fn.name() == "XExpBackward"
    out.sum().backward()
    assert mod.calls == ["forward_saving", "backward_saved"]
    e = np.exp(y.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), e)
    np.testing.assert_allclose(y.grad.numpy(), x.detach().numpy() * e)


def test_builtin_op_with_saving_matches_torch_semantics():
    # tanh/exp builtins may expose forward_saving: the result is checked like torch's
    x = sg.tensor([0.3, -1.2, 2.0], dtype=sg.float64, requires_grad=True)
    y = sg.tanh(x)
    y.sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh(x.detach().numpy()) ** 2)
    with sg.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# ------------------------------------------------------------------ engine ordering
def _run_order(anomaly):
    order = []
    a = sg.tensor([1.0, 2.0], requires_grad=True)
    b = sg.tensor([3.0, 4.0], requires_grad=True)
    u = a * b
    v = sg.exp(a)
    w = u + v
    z = (w * u).sum() + v.sum()
    nodes = []
    stack = [z.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in nodes:
            continue
        nodes.append(n)
        stack.extend(fn for fn, _ in n.next_functions)
    for n in nodes:
        n.register_prehook(lambda g, n=n: order.append(n.name() if not isinstance(
            n, _engine.AccumulateGrad) else ("acc", id(n.variable) == id(a))))
    a.register_hook(lambda g: order.append("hook a"))
    b.register_hook(lambda g: order.append("hook b"))
    if anomaly:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with sg.autograd.set_detect_anomaly(True):
                z.backward()
    else:
        z.backward()
    return order, a.grad.numpy().copy(), b.grad.numpy().copy()


def test_fast_engine_runs_nodes_in_the_general_engines_order():
    fast = _run_order(False)
    general = _run_order(True)   # anomaly mode takes the general (ready-queue) engine
    assert fast[0] == general[0]
    np.testing.assert_allclose(fast[1], general[1])
    np.testing.assert_allclose(fast[2], general[2])


def test_graph_breaking_the_sequence_order_falls_back_to_the_general_engine():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y * 3
    # a node created before its input (never made by the runtime, but allowed by the engine)
    z.grad_fn._sequence_nr, y.grad_fn._sequence_nr = y.grad_fn._sequence_nr, z.grad_fn._sequence_nr
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])


# ------------------------------------------------------------------ error state
def test_module_calls_ignore_floating_point_warnings_and_keep_the_users_state():
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = sg.tensor([1000.0, 0.0], requires_grad=True)
        y = sg.exp(x)
        y.sum().backward()
        assert np.isinf(y.detach().numpy()[0])
    assert np.geterr() == before
    with np.errstate(over="raise"):
        # the user's state applies outside module calls and is restored after them
        sg.exp(sg.tensor([1000.0]))
        assert np.geterr()["over"] == "raise"


def test_errstate_shortcut_only_for_an_ignore_all_decorator():
    @np.errstate(all="ignore")
    def ignored(a):
        return a

    @np.errstate(over="raise")
    def raising(a):
        return a

    def plain(a):
        return a

    assert _function._raw(ignored) is ignored.__wrapped__
    assert _function._raw(raising) is None
    assert _function._raw(plain) is None


# ------------------------------------------------------------------ op-level shortcuts
@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)),
                                    ((2, 3, 4), (4, 5)), ((4,), (4,))])
@pytest.mark.parametrize("const", ["a", "b", None])
def test_matmul_with_a_constant_operand_matches_torch(shapes, const):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    na, nb = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    sa = sg.tensor(na, requires_grad=const != "a")
    sb = sg.tensor(nb, requires_grad=const != "b")
    ta = torch.tensor(na, requires_grad=const != "a")
    tb = torch.tensor(nb, requires_grad=const != "b")
    (sa @ sb).sum().backward()
    (ta @ tb).sum().backward()
    for s, t in ((sa, ta), (sb, tb)):
        if t.grad is None:
            assert s.grad is None
        else:
            np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_matmul_with_a_constant_operand_differentiates_twice():
    x = sg.tensor(np.arange(6.0).reshape(2, 3))
    w = sg.tensor(np.ones((3, 2)) / 3, requires_grad=True)
    (gw,) = sg.autograd.grad(((x @ w) ** 2).sum(), (w,), create_graph=True)
    (ggw,) = sg.autograd.grad(gw.sum(), (w,))
    xn = x.numpy()
    np.testing.assert_allclose(gw.detach().numpy(), 2 * xn.T @ (xn @ w.detach().numpy()))
    np.testing.assert_allclose(ggw.numpy(), 2 * xn.T @ xn @ np.ones((3, 2)))


def test_full_sum_gradient_is_dense_and_matches():
    x = sg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    (x.sum() * 3).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 3.0))
    y = sg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y.sum(keepdim=True).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), np.ones((2, 3)))
    (g,) = sg.autograd.grad((y * y).sum(), (y,), create_graph=True)
    (gg,) = sg.autograd.grad(g.sum(), (y,))
    np.testing.assert_allclose(gg.numpy(), np.full((2, 3), 2.0))


def test_apply_watch_check_is_compiler_stale_negated():
    """apply's fast path checks the globals a forward reads with one generated expression
    (_fresh_check): true exactly when compiler.stale is false — a name rebound to an equal
    but other object, deleted, or in a namespace that is not a plain dict."""
    from symgrad._compile_keys import stale
    from symgrad.autograd._compiled_functions import _fresh_check

    assert _fresh_check(()) is None
    ns1 = {"scale": float("1.5"), "helper": len, "it's": 3}
    ns2 = {"b": object()}
    watch = tuple((ns, k, ns[k]) for ns, k in
                  ((ns1, "scale"), (ns2, "b"), (ns1, "helper"), (ns1, "it's")))
    fresh = _fresh_check(watch)
    assert fresh() and not stale(watch)
    ns1["scale"] = float("1.5")   # equal, not the same object: eager code reads the new one
    assert not fresh() and stale(watch)
    ns1["scale"] = watch[0][2]
    assert fresh()
    del ns2["b"]
    assert not fresh() and stale(watch)
    ns2["b"] = watch[1][2]
    assert fresh()

    class Holder:
        value = 1.0

    proxy = ((vars(Holder), "value", 1.0),)   # a mappingproxy: the loop
    check = _fresh_check(proxy)
    assert check() == (not stale(proxy))
    Holder.value = 2.0
    assert check() is False and stale(proxy)
