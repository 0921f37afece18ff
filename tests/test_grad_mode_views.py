"""Views made in no_grad / inference mode (torch's CreationMeta) and inference tensors, checked
against the behaviour of torch 2.x recorded here (and against torch itself when installed)."""
import numpy as np
import pytest

import symgrad as sg

NO_GRAD_INPLACE = "A view was created in no_grad mode and is being modified inplace"
NO_GRAD_BASE = "A view was created in no_grad mode and its base or another view of its base"


def _libs():
    libs = [sg]
    try:
        import torch
        libs.append(torch)
    except ImportError:
        pass
    return libs


@pytest.fixture(params=_libs(), ids=lambda m: m.__name__)
def lib(request):
    return request.param


def test_view_of_leaf_requires_grad_but_has_no_history(lib):
    x = lib.ones(3, requires_grad=True)
    with lib.no_grad():
        v = x[0:2]
        t = x.reshape(3, 1).T
        u = x[1]
    for view in (v, t, u):
        assert view.requires_grad and view.is_leaf and view.grad_fn is None
    # gradient reaching it is dropped, neither accumulated into it nor into its base
    (v * 2).sum().backward()
    assert v.grad is None and x.grad is None


def test_view_of_non_requiring_base_is_plain(lib):
    z = lib.ones(3)
    with lib.no_grad():
        zv = z[0:2]
    assert not zv.requires_grad
    zv.mul_(2)   # nothing to track: allowed
    assert z.tolist() == [2.0, 2.0, 1.0]
    x = lib.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=NO_GRAD_INPLACE):
        zv.mul_(x[0:2])   # the write would need history: refused


def test_inplace_with_grad_mode_on_is_refused(lib):
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    with lib.no_grad():
        w = y[0:2]
    assert w.requires_grad and w.is_leaf
    with pytest.raises(RuntimeError, match=NO_GRAD_INPLACE + ".*moving both the view and"):
        w.add_(1)
    with lib.no_grad():
        w.add_(1)   # both in no_grad: allowed, untracked
    assert y.detach().numpy().tolist() == [3.0, 3.0, 2.0]


def test_view_of_such_a_view_has_history_but_refuses_inplace(lib):
    x = lib.ones(3, requires_grad=True)
    with lib.no_grad():
        a = x[0:2]
    b = a[0:1]
    assert b.requires_grad and not b.is_leaf
    with pytest.raises(RuntimeError, match="Output 0 of Slice is a view of a view which was "
                                           "created in no_grad mode"):
        b.mul_(2)


@pytest.mark.parametrize("write_in_no_grad", [False, True])
def test_base_written_in_place_invalidates_the_view(lib, write_in_no_grad):
    x = lib.ones(3, requires_grad=True)
    c = x.clone()
    with lib.no_grad():
        cv = c[0:2]
        other = c[1:3]
    if write_in_no_grad:
        with lib.no_grad():
            other.mul_(2)
    else:
        c.mul_(2)
    with pytest.raises(RuntimeError, match=NO_GRAD_BASE):
        cv.grad_fn
    with pytest.raises(RuntimeError, match=NO_GRAD_BASE):
        cv * 1
    assert cv.requires_grad


def test_views_made_with_grad_mode_on_are_unaffected(lib):
    x = lib.ones(3, requires_grad=True)
    c = x.clone()
    v = c[0:2]
    v.mul_(3)
    c.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 1.0])


# ------------------------------------------------------------------ inference tensors
def test_inference_tensors_are_marked(lib):
    x = lib.ones(3, requires_grad=True)
    w = lib.ones(3)
    with lib.inference_mode():
        y = w * 2
        f = lib.ones(2)
        v = x[0:2]       # a view of a normal tensor stays normal
        yv = y[0:1]
    assert y.is_inference() and f.is_inference() and yv.is_inference()
    assert not x.is_inference() and not v.is_inference() and v.requires_grad
    assert y[0:1].is_inference() and y.detach().is_inference()
    assert not y.clone().is_inference() and not lib.exp(y).is_inference()
    with pytest.raises(RuntimeError, match="Inference tensors do not track version counter"):
        y._version


def test_inference_tensor_cannot_be_saved_for_backward(lib):
    x = lib.ones(3, requires_grad=True)
    with lib.inference_mode():
        y = lib.ones(3) * 2
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        y * x            # mul saves y for x's gradient
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        lib.exp(x) * y
    s = (y + x).sum()    # add saves nothing: allowed
    s.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 1.0])
    assert (lib.ones(3) * y).sum().item() == 6.0   # nothing tracked: allowed
    x.grad = None
    (y.clone() * x).sum().backward()               # a clone is a normal tensor
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_inference_tensor_in_place_and_requires_grad_only_inside(lib):
    with lib.inference_mode():
        y = lib.ones(3) * 2
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside"):
        y.mul_(2)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside"):
        y[0] = 5.0
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor"):
        y.requires_grad_()
    before = y.detach().numpy().copy()
    if lib is sg:   # a refused write leaves the tensor as it was (torch 2.13 writes, then raises)
        np.testing.assert_array_equal(before, [2.0, 2.0, 2.0])
    with lib.inference_mode():
        y.mul_(3)
        y.requires_grad_()
    assert y.requires_grad
    np.testing.assert_array_equal(y.detach().numpy(), before * 3)


def test_view_made_in_inference_mode_refuses_in_place_outside(lib):
    x = lib.ones(3, requires_grad=True)
    with lib.inference_mode():
        v = x[0:2]
    with pytest.raises(RuntimeError, match="A view was created in inference mode and is being "
                                           "modified inplace in normal mode"):
        v.mul_(2)
