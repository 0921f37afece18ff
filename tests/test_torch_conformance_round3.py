"""torch.autograd conformance, round 3: scenarios a differential sweep (the same code run with
``torch`` and with ``symgrad``) found to disagree. torch 2.13's observed results are written
here as literal expected values, so this file needs no torch."""
import threading
import warnings

import numpy as np
import pytest

import symgrad as sg

GradcheckError = sg.autograd.GradcheckError


def _d(*v):
    return sg.tensor(list(v), dtype=sg.float64, requires_grad=True)


def _fn(fwd, bwd, **attrs):
    ns = {"forward": staticmethod(fwd), "backward": staticmethod(bwd)}
    ns.update({k: staticmethod(v) if callable(v) else v for k, v in attrs.items()})
    return type("MyFn", (sg.autograd.Function,), ns)


# ------------------------------------------------------------------------------ gradcheck
def test_gradcheck_needs_one_of_forward_or_backward_ad():
    with pytest.raises(AssertionError, match="Expected at least one of check_forward_ad or "
                                             "check_backward_ad to be True"):
        sg.autograd.gradcheck(lambda x: x.sin(), (_d(1.0),), check_backward_ad=False)
    with pytest.raises(AssertionError, match="Setting check_batched_grad=True requires "
                                             "check_backward_ad to be True"):
        sg.autograd.gradcheck(lambda x: x * 2, (_d(1.0),), check_batched_grad=True,
                              check_backward_ad=False, check_forward_ad=True)
    with pytest.raises(AssertionError, match="Expected at least one of check_fwd_over_rev or "
                                             "check_rev_over_rev to be True"):
        sg.autograd.gradgradcheck(lambda x: x.sin(), (_d(1.0),), check_rev_over_rev=False)
    with pytest.raises(AssertionError, match="Setting check_undefined_grad=True requires "
                                             "check_rev_over_rev to be True"):
        sg.autograd.gradgradcheck(lambda x: x * 2, (_d(1.0),), check_rev_over_rev=False,
                                  check_fwd_over_rev=True)


@pytest.mark.parametrize("out", [3, 3.0, None])
def test_gradcheck_output_that_is_not_a_tensor_raises_attribute_error(out):
    with pytest.raises(AttributeError, match="has no attribute 'requires_grad'"):
        sg.autograd.gradcheck(lambda x: (x.sin(), out) if out == 3 else out, (_d(1.0, 2.0),))


def test_gradcheck_integer_and_non_differentiable_outputs():
    # an integer output is not differentiated (torch: True)
    assert sg.autograd.gradcheck(lambda x: (x * 2, (x > 1).long()), (_d(1.0, 2.0),))
    assert sg.autograd.gradcheck(lambda x: (x * 2).long(), (_d(1.0, 2.0),))
    # a detached output beside a differentiable one is not checked (torch: True)
    assert sg.autograd.gradcheck(lambda x: ((x * 2).detach(), x * 3), (_d(1.0, 2.0),))
    # with no differentiable output, the numerical gradient must be zero: torch's message
    with pytest.raises(GradcheckError) as info:
        sg.autograd.gradcheck(lambda x: (x * 2).detach(), (_d(1.0, 2.0),))
    assert str(info.value) == "Numerical gradient for function expected to be zero"


def test_gradcheck_backward_must_multiply_by_grad_output():
    F = _fn(lambda ctx, x: x * 2, lambda ctx, g: sg.ones_like(g) * 2)
    with pytest.raises(GradcheckError) as info:
        sg.autograd.gradcheck(F.apply, (_d(3.0),))
    assert str(info.value) == "backward not multiplied by grad_output"
    G = _fn(lambda ctx, x: (x * 2, x * 3), lambda ctx, g, h: g * 2 + h * 3 + 1)
    assert sg.autograd.gradcheck(G.apply, (_d(3.0),), raise_exception=False) is False


def test_gradcheck_mismatch_indexes_differentiable_inputs_and_outputs():
    F = _fn(lambda ctx, k, x: x * 2 + k, lambda ctx, g: (None, g * 3))
    with pytest.raises(GradcheckError) as info:
        sg.autograd.gradcheck(F.apply, (sg.ones(2, dtype=sg.float64), _d(1.0, 2.0)))
    assert str(info.value).startswith("Jacobian mismatch for output 0 with respect to input 0,\n")
    G = _fn(lambda ctx, x: (x * 2, x * 3), lambda ctx, g, h: g * 2 + h * 4)
    with pytest.raises(GradcheckError) as info:
        sg.autograd.gradcheck(G.apply, (_d(1.0, 2.0),))
    assert str(info.value).startswith("Jacobian mismatch for output 1 with respect to input 0,\n")


def test_gradcheck_fast_mode_message_and_nondeterminism_note():
    F = _fn(lambda ctx, x: x * 2, lambda ctx, g: g * 3)
    with pytest.raises(GradcheckError) as info:
        sg.autograd.gradcheck(F.apply, (_d(1.0, 2.0),), fast_mode=True)
    msg = str(info.value)
    assert msg.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
    assert "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876" in msg
    assert "The max per-element difference (slow mode) is: 1.0" in msg
    count = [0]

    def bwd(ctx, g):
        count[0] += 1
        return g * (2 + 1e-9 * count[0])
    G = _fn(lambda ctx, x: x * 2, bwd)
    with pytest.raises(GradcheckError) as info:
        sg.autograd.gradcheck(G.apply, (_d(1.0, 2.0),))
    assert str(info.value).startswith("Backward is not reentrant")
    assert "NOTE: If your op relies on non-deterministic operations" in str(info.value)
    assert sg.autograd.gradcheck(G.apply, (_d(1.0, 2.0),), nondet_tol=1e-5)


def test_gradcheck_refuses_overlapping_inputs():
    x = sg.ones(1, dtype=sg.float64).expand(3).requires_grad_()
    with pytest.raises(RuntimeError, match="The 0th input has a dimension with stride 0. "
                                           "gradcheck only supports inputs that are "
                                           "non-overlapping"):
        sg.autograd.gradcheck(lambda x: x * 2, (x,))


def test_gradgradcheck_passes_its_options_on():
    # check_batched_grad reaches gradcheck (it runs the batched backward) and passes
    assert sg.autograd.gradgradcheck(lambda x: x.exp() * x, (_d(1.0, 2.0),),
                                     check_batched_grad=True, check_fwd_over_rev=True)
    assert sg.autograd.gradcheck(lambda x: x.sin(), (_d(1.0, 2.0),), check_batched_grad=True)


# ---------------------------------------------------------------------------------- hooks
def test_post_accumulate_grad_hook_must_return_none():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda p: 5)
    with pytest.raises(TypeError, match="expected Variable, but hook returned 'int'"):
        (x * 2).sum().backward()
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda p: sg.ones(2))
    with pytest.raises(RuntimeError, match="Tensor post accumulate grad hooks should return None."):
        (x * 2).sum().backward()


def test_node_hooks_cannot_replace_a_none_gradient():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2      # MulBackward0's second input (the 2) gets a None gradient
    y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="can't replace a None gradient with a non-None value"):
        y.sum().backward()
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    a, b = x.split(1)   # the prehook sees None for b's gradient
    a.grad_fn.register_prehook(lambda go: tuple(sg.ones(1) if g is None else g for g in go))
    with pytest.raises(RuntimeError, match="can't replace a None gradient with a non-None value"):
        a.sum().backward()


# ------------------------------------------------------------------ backward / grad arguments
@pytest.mark.parametrize("bad, name", [(3, "int"), (None, "NoneType")])
def test_grad_inputs_must_be_tensors_or_gradient_edges(bad, name):
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    msg = f"all inputs have to be Tensors or GradientEdges, but got {name}"
    with pytest.raises(RuntimeError, match=msg):
        sg.autograd.grad((x * 2).sum(), [x, bad])
    with pytest.raises(RuntimeError, match=msg):
        sg.autograd.backward((x * 2).sum(), inputs=[bad])


def test_requires_grad_of_integer_tensors_wording():
    with pytest.raises(RuntimeError, match="^only Tensors of floating point and complex dtype "
                                           "can require gradients$"):
        sg.tensor([1, 2]).requires_grad = True
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require "
                                           "gradients$"):
        sg.tensor([1, 2]).requires_grad_()


def test_leaf_that_stopped_requiring_grad_gets_no_gradient():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    x.requires_grad = False
    y.sum().backward()        # torch: AccumulateGrad does nothing
    assert x.grad is None


# ----------------------------------------------------------------------- tensor semantics
def test_mean_of_empty_is_nan_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = sg.zeros(0, requires_grad=True)
        y = x.mean()
        y.backward()
        assert np.isnan(y.item()) and x.grad.shape == (0,)
        z = sg.zeros(0, 3, requires_grad=True).mean(0)
        assert np.isnan(z.detach().numpy()).all() and z.shape == (3,)


def test_subtracting_bool_tensors_is_torchs_runtime_error():
    msg = "Subtraction, the `-` operator, with two bool tensors is not supported."
    with pytest.raises(RuntimeError, match=msg):
        sg.tensor([True]) - sg.tensor([False])
    with pytest.raises(RuntimeError, match=msg):
        sg.tensor([True]) - True


@pytest.mark.parametrize("call, name", [
    (lambda x: x.std(), "std"), (lambda x: x.var(), "var"),
    (lambda x: sg.var_mean(x), "var_mean"), (lambda x: sg.std_mean(x), "std_mean"),
    (lambda x: x.var(correction=5), "var"),
])
def test_var_std_without_degrees_of_freedom_warn(call, name):
    x = sg.tensor([1.0], requires_grad=True)
    with pytest.warns(UserWarning, match=rf"^{name}\(\): degrees of freedom is <= 0. Correction "
                                         "should be strictly less than the reduction factor"):
        call(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sg.tensor([1.0, 2.0]).var()
        sg.tensor([1.0]).var(False)


def test_var_std_take_unbiased_positionally():
    x = sg.tensor([1.0, 2.0, 4.0])
    assert x.var(False).item() == pytest.approx(1.5555556)   # torch's values
    assert x.std(False).item() == pytest.approx(1.2472191)


# ------------------------------------------------------------------------------- grad mode
def test_set_multithreading_enabled():
    assert sg.autograd.is_multithreading_enabled() is True
    with sg.autograd.set_multithreading_enabled(False):
        assert sg.autograd.is_multithreading_enabled() is False
    assert sg.autograd.is_multithreading_enabled() is True
    assert sg.autograd.grad_mode.set_multithreading_enabled is sg.autograd.set_multithreading_enabled


# -------------------------------------------------------------------------------- Function
def test_function_vmap_attributes():
    assert sg.autograd.Function.generate_vmap_rule is False
    with pytest.raises(NotImplementedError, match="To use autograd.Function with vmap, you must "
                                                  "either override the vmap staticmethod or set "
                                                  "generate_vmap_rule=True."):
        sg.autograd.Function.vmap(None, (0,), sg.ones(1))


def test_setup_context_function_binds_keyword_and_default_arguments():
    seen = []

    def forward(a, k=2.0):
        return a * k

    def setup_context(ctx, inputs, output):
        seen.append((len(inputs), inputs[1], ctx.needs_input_grad))
        ctx.k = inputs[1]

    F = _fn(forward, lambda ctx, g: (g * ctx.k, None), setup_context=setup_context)
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    y = F.apply(x, k=3.0)
    y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), [3.0, 6.0])
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])
    F.apply(x)
    assert seen == [(2, 3.0, (True, False)), (2, 2.0, (True, False))]


def test_grad_fn_apply_calls_the_user_backward():
    F = _fn(lambda ctx, a: a * 2, lambda ctx, g: g * 5)
    y = F.apply(sg.tensor([1.0, 2.0], requires_grad=True))
    np.testing.assert_allclose(y.grad_fn.apply(sg.ones(2)).numpy(), [5.0, 5.0])


# ------------------------------------------------------------------------------ functional
def test_forward_mode_jacobian_containers_are_torchs_lists():
    jac = sg.autograd.functional.jacobian
    x, y = sg.tensor([1.0, 2.0]), sg.tensor([3.0, 4.0])
    r = jac(lambda a, b: a * b, (x, y), strategy="forward-mode", vectorize=True)
    assert type(r) is list and len(r) == 2
    np.testing.assert_allclose(r[0].numpy(), [[3.0, 0.0], [0.0, 4.0]])
    r = jac(lambda a, b: (a * b, a + b), (x, y), strategy="forward-mode", vectorize=True)
    assert type(r) is list and all(type(row) is list for row in r)
    r = jac(lambda a: (a * 2, a * 3), x, strategy="forward-mode", vectorize=True)
    assert type(r) is tuple


def test_is_grads_batched_shape_mismatch_message():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^If `is_grads_batched=True`, we interpret the first "
                                           r"dimension of each grad_output as the batch "
                                           r"dimension\..*but a mismatch was detected: "
                                           r"grad_output\[0\] has a shape of symgrad.Size\(\[3\]\) "
                                           r"and output\[0\] has a shape of symgrad.Size\(\[2\]\)"):
        sg.autograd.grad(x * x, x, sg.ones(3, 3), is_grads_batched=True)


def test_saved_tensor_attributes_of_builtin_nodes():
    """torch's y.grad_fn._saved_self / _saved_other / _saved_exponent (autograd mechanics,
    "saved tensors"): the leaf itself for a leaf input, the tensor with its grad_fn otherwise;
    after a backward without retain_graph, torch's freed-graph RuntimeError. They were an
    AttributeError."""
    x = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = sg.tensor([0.5, 0.5, 0.5])
    y = x * w
    assert y.grad_fn._saved_self is x
    assert y.grad_fn._saved_other.tolist() == [0.5, 0.5, 0.5]
    h = x + 1
    z = h * x
    assert z.grad_fn._saved_self.tolist() == [2.0, 3.0, 4.0]
    assert z.grad_fn._saved_self.grad_fn is h.grad_fn
    y = x.pow(2)
    assert y.grad_fn._saved_self is x
    y.sum().backward()
    with pytest.raises(RuntimeError, match="directly access saved tensors after they have"):
        y.grad_fn._saved_self
    with pytest.raises(AttributeError):
        x.sin().grad_fn._saved_other
