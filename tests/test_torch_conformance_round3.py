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
