"""Fixes found by torch's TestAutograd port (tests/test_torch_autograd_port.py) that its
ported tests do not pin on their own (those marked xfail for another difference, and the
parts beyond torch's test)."""
import io
import os
import pickle

import numpy as np
import pytest

import symgrad as sg
from symgrad.autograd.function import once_differentiable


class _Square(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_once_differentiable_under_create_graph_raises_on_second_backward():
    x = sg.tensor([3.0], requires_grad=True)
    go = sg.ones(1, requires_grad=True)
    (g,) = sg.autograd.grad(_Square.apply(x), x, go, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [6.0])
    assert g.grad_fn is not None and g.grad_fn.name() == "Error"
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was "
                                           "marked with @once_differentiable"):
        g.sum().backward()


def test_once_differentiable_without_graph_is_plain():
    x = sg.tensor([3.0], requires_grad=True)
    _Square.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0])


def test_save_load_round_trip(tmp_path):
    state = {"w": sg.tensor([[1.0, 2.0]], requires_grad=True), "step": 3,
             "i": sg.tensor([1, 2], dtype=sg.int32)}
    path = os.path.join(tmp_path, "state.sg")
    sg.save(state, path)
    back = sg.load(path)
    assert back["step"] == 3 and back["w"].requires_grad and back["i"].dtype == sg.int32
    np.testing.assert_array_equal(back["w"].detach().numpy(), [[1.0, 2.0]])
    buf = io.BytesIO()
    sg.save(sg.arange(3.0), buf)
    buf.seek(0)
    np.testing.assert_array_equal(sg.load(buf).numpy(), [0.0, 1.0, 2.0])


def test_load_refuses_arbitrary_globals_by_default():
    buf = io.BytesIO()
    pickle.dump({"f": os.getcwd}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed: unsupported "
                                                     "global"):
        sg.load(buf)
    buf.seek(0)
    assert sg.load(buf, weights_only=False)["f"] is os.getcwd


def test_var_mean_is_one_node_with_both_gradients():
    x = sg.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    var, mean = sg.var_mean(x, dim=0)
    assert var.grad_fn is mean.grad_fn and var.grad_fn.name() == "VarMeanBackward0"
    seen = []
    mean.grad_fn.register_prehook(lambda gs: seen.append(tuple(g is not None for g in gs)))
    (var + mean).sum().backward()
    assert seen == [(True, True)]
    ref = sg.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    (ref.var(0) + ref.mean(0)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy())


def test_write_through_expanded_element_and_refusal_of_overlap():
    g = sg.ones(1).clone().expand(4)
    g[0] = 0.0
    np.testing.assert_array_equal(g.numpy(), [0.0] * 4)   # one memory location, as torch
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        g.add_(1)


def test_output_hook_of_unused_output_sees_none():
    x = sg.randn(3, requires_grad=True)
    parts = x.unbind()
    seen = []
    parts[0].register_hook(lambda g: seen.append(g))
    parts[1].backward()
    assert seen == [None]
    parts[0].register_hook(lambda g: sg.ones(()))
    with pytest.raises(RuntimeError, match="can't replace a None gradient"):
        parts[2].backward()


def test_out_keyword_writes_result_and_refuses_gradients():
    a = sg.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = sg.tensor([[2.0, 0.5], [1.0, -1.0]])
    out = sg.zeros(2, 2)
    assert sg.mul(a, b, out=out) is out
    np.testing.assert_array_equal(out.numpy(), [[2.0, 1.0], [3.0, -4.0]])
    v = out._version
    sg.add(a, b, out=out)
    assert out._version == v + 1          # an in-place write: the version counter moves
    empty = sg.empty(0)
    sg.cat([a, b], out=empty)             # an empty out= is resized silently
    assert tuple(empty.shape) == (4, 2)
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        sg.sum(a, 0, out=sg.zeros(3))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        sg.mul(a, b, out=sg.zeros(2, 2, dtype=sg.int64))
    w = sg.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"mul\(\): functions with out=\.\.\. arguments don't "
                                           "support automatic differentiation"):
        sg.mul(w, b, out=out)
    with sg.no_grad():
        sg.mul(w, b, out=out)
    np.testing.assert_array_equal(out.numpy(), b.numpy())
