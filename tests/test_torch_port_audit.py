"""Torch-port audit: torch.autograd scenarios that must behave as under torch 2.13.

Each test is a scenario that was run under torch and symgrad and compared: values, result
types, exception classes and messages (torch's wording, with ``torch.`` spelled ``symgrad.``
where the message names a symgrad object). The expected values are torch's, hard-coded here
so that the tests do not need torch. The first part pins differences the audit found and
fixed; the second part keeps a representative set of scenarios that already agreed.
"""
import re
import threading
import warnings

import numpy as np
import pytest

import symgrad as sg
from symgrad.autograd.graph import GradientEdge, get_gradient_edge, register_multi_grad_hook


def leaf(*values, dtype=None):
    return sg.tensor(list(values) if values else [1.0, 2.0, 3.0], dtype=dtype,
                     requires_grad=True)


def raises(exc, message, fn, *args, **kwargs):
    """fn(*args) raises exactly ``exc`` with exactly ``message``."""
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    assert type(info.value) is exc
    assert str(info.value) == message
    return info.value


def close(t, expected):
    np.testing.assert_allclose(np.asarray(t.detach().numpy() if isinstance(t, sg.Tensor) else t),
                               np.asarray(expected, dtype=float), rtol=1e-6, atol=1e-6)


CUSTOM_VIEW = (
    "This view was created inside a custom Function (or because an input was returned as-is) "
    "and the autograd logic to handle view+inplace would override the custom backward "
    "associated with the custom Function, leading to incorrect gradients. This behavior is "
    "forbidden. You can fix this by cloning the output of the custom Function.")
MULTI_VIEW = (
    "This view is the output of a function that returns multiple views. Such functions do not "
    "allow the output views to be modified inplace. You should replace the inplace operation by "
    "an out-of-place one.")


# ============================================================ fixed: engine entry points
def test_backward_with_empty_inputs_message():
    x = leaf()
    raises(RuntimeError, "`inputs` argument to `backward()` cannot be empty.",
           (x * x).sum().backward, inputs=[])


def test_backward_inputs_leaf_without_grad_is_refused_by_retain_grad():
    x = leaf()
    raises(RuntimeError, "can't retain_grad on Tensor that has requires_grad=False",
           (x * x).sum().backward, inputs=[sg.ones(3)])


def test_grad_only_inputs_false_warns_and_is_ignored():
    x = leaf()
    with pytest.warns(FutureWarning, match=r"^only_inputs argument is deprecated and is ignored "
                      r"now \(defaults to True\)\. To accumulate gradient for other parts of "
                      r"the graph, please use symgrad\.autograd\.backward\.$"):
        (g,) = sg.autograd.grad((x * x).sum(), x, only_inputs=False)
    close(g, [2, 4, 6])
    assert x.grad is None


def test_backward_inputs_may_be_a_dict_of_tensors():
    import types

    x, y = leaf(), leaf()
    (x * y).sum().backward(inputs={"x": x})
    close(x.grad, [1, 2, 3])
    assert y.grad is None
    raises(TypeError, "`inputs` argument to `backward()` must be a dict, not mappingproxy. "
           "Other Mapping types are not supported.", (x * x).sum().backward,
           inputs=types.MappingProxyType({"x": x}))
    raises(RuntimeError, "`inputs` argument to `backward()` cannot be empty.",
           (x * x).sum().backward, inputs={})


def test_grad_inputs_may_be_a_dict_and_give_a_dict():
    import types

    x, y = leaf(), leaf()
    r = sg.autograd.grad((x * y * 2).sum(), {"a": x, "b": y})
    assert type(r) is dict and list(r) == ["a", "b"]
    close(r["a"], [2, 4, 6])
    r = sg.autograd.grad(x * x, {"x": x}, grad_outputs=sg.eye(3), is_grads_batched=True)
    close(r["x"], np.diag([2.0, 4.0, 6.0]))
    raises(TypeError, "`inputs` argument to `grad()` must be a dict, not mappingproxy. Other "
           "Mapping types are not supported.", sg.autograd.grad, (x * x).sum(),
           types.MappingProxyType({"x": x}))
    raises(RuntimeError, "`inputs` argument to `grad()` cannot be empty.", sg.autograd.grad,
           (x * x).sum(), {})


def test_grad_variables_is_deprecated_with_torch_wording():
    x = leaf()
    with pytest.warns(FutureWarning, match=r"^`grad_variables` is deprecated\. Use "
                      r"`grad_tensors` instead\.$"):
        sg.autograd.backward(x * 2, grad_variables=[sg.ones(3)])
        raises(RuntimeError, "`grad_tensors` and `grad_variables` (deprecated) arguments both "
               "passed to `backward()`. Please only use `grad_tensors`.", sg.autograd.backward,
               x * 2, grad_tensors=[sg.ones(3)], grad_variables=[sg.ones(3)])
    close(x.grad, [2, 2, 2])


# ========================================================= fixed: in-place version errors
def _version_message(shape, op, version=1):
    return (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [symgrad.FloatTensor {shape}], which is output 0 of {op}, is at version "
        f"{version}; expected version 0 instead. Hint: enable anomaly detection to find the "
        "operation that failed to compute its gradient, with "
        "symgrad.autograd.set_detect_anomaly(True, check_nan=False).")


def test_modified_saved_output_names_the_forward_op():
    x = leaf()
    z = (x * 1).exp()
    z.add_(1)
    raises(RuntimeError, _version_message("[3]", "Exp"), z.sum().backward)


def test_modified_saved_input_names_its_current_grad_fn_forward_op():
    x = sg.ones(2, 3, requires_grad=True)
    y = x.clone()
    z = y.sin()
    y.mul_(3)   # y's grad_fn is now MulBackward0: torch names "Mul"
    raises(RuntimeError, _version_message("[2, 3]", "Mul"), z.sum().backward)


def test_modified_saved_output_of_a_custom_function_names_the_function():
    class MyFn(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x * 2
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r

    y = MyFn.apply(leaf())
    y.add_(1)
    raises(RuntimeError, _version_message("[3]", "MyFn"), y.sum().backward)


def test_forward_op_name_strips_only_a_backward_suffix():
    name = sg.autograd.engine.forward_op_name
    assert name("ExpBackward0") == "Exp"
    assert name("MyFnBackward") == "MyFn"
    assert name("torch::autograd::CopySlices") == "torch::autograd::CopySlices"
    assert name("BackwardX") == "BackwardX"


# ================================================================ fixed: leaf metadata
def test_grad_dtype_defaults_to_dtype_and_is_leaf_only():
    x = leaf()
    assert x.grad_dtype is sg.float32
    y = x * 2
    raises(RuntimeError, "grad_dtype can only be accessed on leaf tensors.",
           lambda: y.grad_dtype)

    def set_on_non_leaf():
        y.grad_dtype = sg.float64
    raises(RuntimeError, "grad_dtype can only be set on leaf tensors.", set_on_non_leaf)


def test_grad_dtype_sets_the_accumulated_dtype():
    x = leaf()
    x.grad_dtype = sg.float64
    (x * x).sum().backward()
    assert x.grad.dtype is sg.float64 and x.grad_dtype is sg.float64
    close(x.grad, [2, 4, 6])


def test_grad_dtype_none_allows_any_grad_dtype():
    x = sg.ones(3, requires_grad=True)
    x.grad_dtype = None
    x.grad = sg.ones(3, dtype=sg.float16)
    (x * x).sum().backward()
    assert x.grad.dtype is sg.float16 and x.grad_dtype is None
    close(x.grad, [3, 3, 3])


def test_grad_assignment_dtype_error_uses_torch_type_names():
    x = leaf()

    def assign(value):
        x.grad = value
    tail = (". The gradient must match the tensor's grad_dtype (defaults to the tensor's dtype)."
            " You can set the tensor's grad_dtype attribute with a specific dtype, or None to "
            "allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and "
            "its gradient may break downstream systems that assume they match.")
    raises(RuntimeError, "attempting to assign a gradient with dtype 'double' to a tensor with "
           "grad_dtype 'Float'" + tail, assign, sg.ones(3, dtype=sg.float64))
    raises(RuntimeError, "attempting to assign a gradient with dtype 'long int' to a tensor "
           "with grad_dtype 'Float'" + tail, assign, sg.ones(3, dtype=sg.int64))
    raises(RuntimeError, "can't assign Variable as its own grad", assign, x)
    raises(RuntimeError, "attempting to assign a gradient of size '[4]' to a tensor of size "
           "'[3]'. Please ensure that the gradient and the tensor are the same size",
           assign, sg.ones(4))
    assign(x.detach())   # an alias of the data is fine
    assert x.grad is not None


def test_factories_refuse_requires_grad_for_integer_dtypes_with_torch_wording():
    msg = "Only Tensors of floating point and complex dtype can require gradients"
    raises(RuntimeError, msg, sg.tensor, [1, 2], requires_grad=True)
    raises(RuntimeError, msg, sg.ones, 3, dtype=sg.int64, requires_grad=True)
    raises(RuntimeError, msg, sg.arange, 3, requires_grad=True)
    raises(RuntimeError, msg, sg.full, (2,), 1, requires_grad=True)
    # the method keeps its own (lower-case) wording, as torch's
    raises(RuntimeError, "only Tensors of floating point dtype can require gradients",
           sg.tensor([1, 2]).requires_grad_)


def test_data_setter_checks_type_and_dtype():
    x = leaf()

    def set_data(value):
        x.data = value
    raises(RuntimeError, "data set to a tensor that requires gradients must be floating point "
           "or complex dtype", set_data, sg.tensor([5, 6]))
    raises(TypeError, "Variable data has to be a tensor, but got list", set_data, [1.0])
    set_data(sg.ones(2, 2, dtype=sg.float64))
    assert x.shape == (2, 2) and x.dtype is sg.float64 and x.requires_grad
    y = sg.ones(3)
    y.data = sg.tensor([5, 6])
    assert y.dtype is sg.int64


def test_tensor_class_constructor():
    t = sg.Tensor([1.0, 2.0])
    assert t.dtype is sg.float32 and t.tolist() == [1.0, 2.0] and not t.requires_grad


def test_float_of_a_tensor_that_requires_grad_warns():
    x = leaf()
    with pytest.warns(UserWarning, match="^Converting a tensor with requires_grad=True to a "
                      "scalar may lead to unexpected behavior.\nConsider using "
                      r"tensor.detach\(\) first.$"):
        assert float(x.sum()) == 6.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert int(x.sum()) == 6 and x.sum().item() == 6.0 and float(x.detach().sum()) == 6.0


def test_variable_returns_a_detached_alias():
    x = sg.ones(2)
    with pytest.warns(DeprecationWarning):
        v = sg.autograd.Variable(x)
    assert v is not x and v.data_ptr() == x.data_ptr()
    y = leaf() * 2
    with pytest.warns(DeprecationWarning):
        w = sg.autograd.Variable(y, requires_grad=True)
    assert w.grad_fn is None and w.is_leaf and w.requires_grad
    with pytest.warns(DeprecationWarning):
        assert sg.autograd.Variable(y).requires_grad is False
        raises(TypeError, "Variable data has to be a tensor, but got list",
               sg.autograd.Variable, [1.0])
        with pytest.warns(UserWarning, match="^volatile was removed and now has no effect"):
            sg.autograd.Variable(x, volatile=True)


# ================================================================ fixed: custom Function
def test_vjp_is_backwards_other_name_and_both_is_an_error():
    class A(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def vjp(ctx, g):
            return g * 7

    class B(A):
        @staticmethod
        def backward(ctx, g):
            return g * 8

    x = leaf()
    A.apply(x).sum().backward()
    close(x.grad, [7, 7, 7])
    raises(RuntimeError, "Implementing both 'backward' and 'vjp' for a custom Function is not "
           "allowed. You should only implement one of them.", B.apply(x).sum().backward)


def test_non_differentiable_outputs_get_zero_gradients():
    seen = {}

    class Two(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            b = x * 3
            ctx.mark_non_differentiable(b)
            return x * 2, b, sg.tensor([1, 2]), 5

        @staticmethod
        def backward(ctx, ga, gb, gi, gn):
            seen.update(gb=gb, gi=gi, gn=gn)
            return ga * 2

    x = leaf()
    a, b, i, n = Two.apply(x)
    a.sum().backward()
    close(x.grad, [2, 2, 2])
    assert not b.requires_grad and n == 5
    close(seen["gb"], [0, 0, 0])
    assert seen["gi"].dtype is sg.int64 and seen["gi"].tolist() == [0, 0]
    assert seen["gn"] is None


def test_set_materialize_grads_false_leaves_them_none():
    seen = {}

    class C(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, sg.tensor([1, 2])

        @staticmethod
        def backward(ctx, g, gi):
            seen["gi"] = gi
            return g

    C.apply(leaf())[0].sum().backward()
    assert seen == {"gi": None}


def test_a_non_tensor_gradient_is_refused():
    class Bad(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return 1.0

    raises(RuntimeError, "expected Variable or None (got float)",
           Bad.apply(leaf()).sum().backward)


def test_needs_input_grad_ignores_grad_mode():
    seen = []

    class F(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            seen.append(ctx.needs_input_grad)
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g, g

    x = leaf()
    with sg.no_grad():
        F.apply(x, sg.ones(3))
    F.apply(x, 2.0)
    assert seen == [(True, False), (True, False)]


def test_dirty_tensors_must_be_returned():
    class Inc(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    msg = ("Some elements marked as dirty during the forward method were not returned as "
           "output. The inputs that are modified inplace must all be outputs of the Function.")
    raises(RuntimeError, msg, Inc.apply, leaf() * 1)
    with sg.no_grad():
        raises(RuntimeError, msg, Inc.apply, sg.ones(3))


def test_marking_a_non_input_dirty_warns():
    class D(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            t = x * 2
            ctx.mark_dirty(t)
            return t

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.warns(UserWarning, match=r"^ctx\.mark_dirty\(\) received a tensor that was not "
                      r"an input\. Only input Tensors that have been mutated should be passed "
                      r"to ctx\.mark_dirty\(\)\.$"):
        y = D.apply(leaf())
    assert y.grad_fn.name() == "DBackward"


def test_a_dirty_view_rebases_its_base_through_the_function():
    class Double(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = leaf()
    h = x * 1
    y = Double.apply(h[1:])
    h.sum().backward()
    close(h, [1, 4, 6])
    close(x.grad, [1, 2, 2])   # was [1, 1, 1]: the base's gradient skipped the Function
    assert y._version == 2


def test_a_dirty_view_with_several_outputs_is_refused():
    class D2(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x, x * 2

        @staticmethod
        def backward(ctx, g, g2):
            return g

    with pytest.raises(RuntimeError, match="^If your Function modifies inplace an input that is "
                       "a view of another Tensor, your Function cannot return more than one "
                       "Tensor."):
        D2.apply((leaf() * 1)[1:])


class Id(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 5


class Tail(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[1:]

    @staticmethod
    def backward(ctx, g):
        return sg.cat([sg.zeros(1), g * 5])


def test_an_input_returned_as_is_becomes_a_view_of_it():
    x = leaf()
    y = Id.apply(x)
    assert y is not x and y._base is x and not y.is_leaf and y.grad_fn.name() == "IdBackward"
    (y * y).sum().backward()
    close(x.grad, [10, 20, 30])
    p = sg.ones(3)
    q = Id.apply(p)   # not requiring grad: still a view, writes show through
    q.add_(1)
    assert q._base is p and p.tolist() == [2.0, 2.0, 2.0]
    with sg.no_grad():
        r = Id.apply(x)   # requires grad but not differentiable here: a detached alias
    assert r is not x and r._base is None and not r.requires_grad


def test_an_input_returned_as_is_but_non_differentiable_is_detached():
    class Id2(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_non_differentiable(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = leaf()
    y = Id2.apply(x)
    assert y is not x and y._base is None and not y.requires_grad and y.is_leaf


def test_views_returned_by_a_function_refuse_in_place_writes():
    x = leaf()
    y = Id.apply(x)
    raises(RuntimeError, f"Output 0 of Id is a view and is being modified inplace. {CUSTOM_VIEW}",
           y.add_, 1)
    raises(RuntimeError, f"Output 0 of Slice is a view and is being modified inplace. "
           f"{CUSTOM_VIEW}", y[1:].add_, 1)
    h = x * 1
    t = Tail.apply(h)
    assert t._base is h
    raises(RuntimeError, f"Output 0 of Tail is a view and is being modified inplace. "
           f"{CUSTOM_VIEW}", t.mul_, 2)
    h.mul_(2)
    raises(RuntimeError, "Output 0 of Tail is a view and its base or another view of its base "
           f"has been modified inplace. {CUSTOM_VIEW}", lambda: t.grad_fn)


# ================================================================= fixed: grad modes
def test_inference_mode_false_enables_grad_mode():
    x = leaf()
    with sg.no_grad():
        with sg.inference_mode(False):
            assert sg.is_grad_enabled() and not sg.is_inference_mode_enabled()
            y = x * 2
        assert not sg.is_grad_enabled()
    with sg.inference_mode():
        with sg.inference_mode(False):
            z = x * 2
            assert sg.is_grad_enabled()
        assert sg.is_inference_mode_enabled() and not sg.is_grad_enabled()
    assert y.requires_grad and z.requires_grad and not z.is_inference()


def test_enable_grad_inside_inference_mode_reports_grad_mode_but_records_nothing():
    x = leaf()
    with sg.inference_mode():
        with sg.enable_grad():
            assert sg.is_grad_enabled() and sg.is_inference_mode_enabled()
            y = x * 2
        assert not sg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_inference()
    assert sg.is_grad_enabled() and (x * 2).requires_grad


def test_gradcheck_without_differentiable_inputs_message():
    raises(ValueError, "gradcheck expects at least one input tensor to require gradient, but "
           "none of them have requires_grad=True.", sg.autograd.gradcheck, lambda t: t * 2,
           (sg.tensor([0.5, 1.0], dtype=sg.float64),))


# ==================================================== fixed: autograd.graph edges and hooks
def test_gradient_edges_stand_for_tensors_in_grad_and_backward():
    x = leaf()
    h = x * 2
    y = (h * h).sum()
    e = get_gradient_edge(h)
    assert isinstance(e, GradientEdge) and e.node is h.grad_fn and e.output_nr == 0
    close(sg.autograd.grad(y, e, retain_graph=True)[0], [4, 8, 12])
    gh, gx = sg.autograd.grad(y, [e, x], retain_graph=True)
    close(gh, [4, 8, 12])
    close(gx, [8, 16, 24])
    close(sg.autograd.grad(y, get_gradient_edge(x), retain_graph=True)[0], [8, 16, 24])
    close(sg.autograd.grad(e, x, grad_outputs=sg.ones(3), retain_graph=True)[0], [2, 2, 2])
    y.backward(inputs=[get_gradient_edge(x)], retain_graph=True)
    close(x.grad, [8, 16, 24])
    sg.autograd.backward(y, inputs=[e])   # a non-leaf edge: nothing accumulates
    close(x.grad, [8, 16, 24])
    assert not h.retains_grad


def test_gradient_edge_errors():
    raises(RuntimeError, "It is not possible to get the gradient edge for a Tensor that does "
           "not require gradients", get_gradient_edge, sg.ones(2))
    x, z = leaf(), leaf()
    y = (x * 2).sum()
    ez = get_gradient_edge(z)
    raises(RuntimeError, "The differentiated Tensor at index 0 appears to not have been used "
           "in the graph. Set allow_unused=True if this is the desired behavior.",
           sg.autograd.grad, y, [ez], retain_graph=True)
    assert sg.autograd.grad(y, [ez], retain_graph=True, allow_unused=True) == (None,)
    raises(RuntimeError, "materialize_grads cannot be used when the given input is a "
           "GradientEdge", sg.autograd.grad, y, [ez], materialize_grads=True)


def test_multi_grad_hook_all_waits_for_the_gradients_the_backward_computes():
    a, b = leaf(), leaf()
    c, d = a * b, a * b
    log = []
    register_multi_grad_hook((a, b, c, d), lambda gs: log.append([g is not None for g in gs]))
    c.sum().backward(retain_graph=True)
    c.sum().backward(inputs=(a,), retain_graph=True)
    (c + d).sum().backward()
    assert log == [[True, True, True, False], [True, False, True, False],
                   [True, True, True, True]]


def test_multi_grad_hook_values_any_mode_and_removal():
    a, b = leaf(), leaf()
    got = []
    register_multi_grad_hook((a, b), got.append)
    (a * 2 + b * 3).sum().backward()
    close(got[0][0], [2, 2, 2])
    close(got[0][1], [3, 3, 3])
    firsts = []
    register_multi_grad_hook((a, b), firsts.append, mode="any")
    (a * 2 + b * 3).sum().backward()
    (a * 2 + b * 3).sum().backward()
    assert len(firsts) == 2
    removed = []
    register_multi_grad_hook((a, b), removed.append).remove()
    (a * b).sum().backward()
    assert removed == []
    raises(ValueError, "Expects mode to be one of ('all', 'any') but got some",
           register_multi_grad_hook, (a,), print, mode="some")


@pytest.mark.parametrize("hook, exc, message", [
    (lambda gi, go: gi[0] * 2, TypeError, "expected tuple, but hook returned 'Tensor'"),
    (lambda gi, go: (gi[0], gi[0]), RuntimeError,
     "hook '<lambda>' has returned an incorrect number of values (got 2, but expected 1)"),
    (lambda gi, go: (1.0,), TypeError, "expected Variable, but hook returned 'float'"),
    (lambda gi, go: (gi[0][:2],), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda gi, go: (gi[0].double(),), RuntimeError, "hook '<lambda>' has changed the type of "
     "value (was symgrad.FloatTensor got symgrad.DoubleTensor)"),
])
def test_node_hook_results_are_checked(hook, exc, message):
    x = leaf()
    y = x.exp()
    y.grad_fn.register_hook(hook)
    raises(exc, message, y.sum().backward)


def test_node_prehook_results_are_checked_and_none_entries_allowed():
    x = leaf()
    y = x.exp()
    y.grad_fn.register_prehook(lambda go: [go[0] * 2])
    raises(TypeError, "expected tuple, but hook returned 'list'", y.sum().backward)
    x = leaf()
    y = x.exp()
    y.grad_fn.register_hook(lambda gi, go: (None,))
    y.sum().backward()
    assert x.grad is None


# ======================================================= fixed: node names, new ops
def test_grad_fn_names_of_composite_and_movement_ops():
    x = sg.tensor([[0.1, 0.5, 0.3], [0.4, 0.2, 0.6]], requires_grad=True)
    v = leaf()
    names = {
        "sinh": x.sinh(), "cumsum": x.cumsum(1), "amax": x.amax(0), "softmax": x.softmax(1),
        "log_softmax": x.log_softmax(1), "logsumexp": x.logsumexp(1), "norm": x.norm(),
        "var": x.var(), "index_select": x.index_select(1, sg.tensor([0, 2])),
        "gather": x.gather(1, sg.tensor([[0], [1]])), "floor": x.floor(), "t2": x.t(),
        "t1": v.t(), "stack": sg.stack([v, v]), "square": v.square(), "sg.square": sg.square(v),
        "movedim": x.movedim(0, 1), "narrow": x.narrow(1, 0, 2), "outer": v.outer(v),
    }
    assert {k: t.grad_fn.name() for k, t in names.items()} == {
        "sinh": "SinhBackward0", "cumsum": "CumsumBackward0", "amax": "AmaxBackward0",
        "softmax": "SoftmaxBackward0", "log_softmax": "LogSoftmaxBackward0",
        "logsumexp": "LogsumexpBackward0", "norm": "LinalgVectorNormBackward0",
        "var": "VarBackward0", "index_select": "IndexSelectBackward0",
        "gather": "GatherBackward0", "floor": "FloorBackward0", "t2": "TBackward0",
        "t1": "TBackward0", "stack": "StackBackward0", "square": "PowBackward0",
        "sg.square": "PowBackward0", "movedim": "PermuteBackward0", "narrow": "SliceBackward0",
        "outer": "MulBackward0",
    }
    y = sg.zeros(3)
    y.copy_(v * 2)
    assert y.grad_fn.name() == "torch::autograd::CopyBackwards"


def test_t_of_a_vector_is_a_view_node():
    v = leaf(1.0, 2.0)
    y = v.t()
    assert y is not v and y._base is v
    (y * 3).sum().backward()
    close(v.grad, [3, 3])
    raises(RuntimeError, "t() expects a tensor with <= 2 dimensions, but self is 3D",
           sg.ones(2, 2, 2).t)


def test_stack_is_one_node_with_torch_errors_and_higher_order():
    a, b = leaf(1.0, 2.0), leaf(3.0, 4.0)
    s = sg.stack([a, b], dim=1)
    assert len(s.grad_fn.next_functions) == 2
    (g,) = sg.autograd.grad((s ** 3).sum(), a, create_graph=True)
    (h,) = sg.autograd.grad(g.sum(), a)
    close(g, [3, 12])
    close(h, [6, 12])
    (s * sg.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    close(a.grad, [1, 3])
    close(b.grad, [2, 4])
    raises(RuntimeError, "stack expects each tensor to be equal size, but got [2] at entry 0 "
           "and [3] at entry 1", sg.stack, [sg.ones(2), sg.ones(3)])
    raises(RuntimeError, "stack expects a non-empty TensorList", sg.stack, [])


@pytest.mark.parametrize("a, b, expected", [
    ("float32", "int64", "float32"), ("int32", "float32", "float32"),
    ("float16", "int64", "float16"), ("int16", "float16", "float16"),
    ("float32", "float64", "float64"), ("int8", "uint8", "int16"), ("bool", "int32", "int32"),
])
def test_type_promotion_between_dimensioned_tensors(a, b, expected):
    x = sg.ones(2, dtype=getattr(sg, a))
    y = sg.ones(2, dtype=getattr(sg, b))
    for r in (x + y, x * y, sg.maximum(x, y), sg.cat([x, y]), sg.stack([x, y])):
        assert r.dtype is getattr(sg, expected)


def test_float_leaf_times_integer_tensor_keeps_the_float_dtype():
    x = leaf()
    y = x * sg.tensor([1, 2, 3])
    assert y.dtype is sg.float32
    y.sum().backward()
    close(x.grad, [1, 2, 3])


def test_split_chunk_unbind_shapes_names_and_errors():
    x = sg.arange(7.0).requires_grad_()
    assert [t.shape for t in x.split(3)] == [(3,), (3,), (1,)]
    assert [t.shape for t in x.split([2, 5])] == [(2,), (5,)]
    assert [t.shape for t in x.chunk(3)] == [(3,), (3,), (1,)]
    assert [t.shape for t in sg.ones(6).chunk(4)] == [(2,), (2,), (2,)]
    assert [t.shape for t in sg.split(x, 2)] == [(2,), (2,), (2,), (1,)]
    assert [t.shape for t in sg.unbind(sg.ones(2, 3), 1)] == [(2,), (2,), (2,)]
    assert [t.shape for t in sg.ones(3).split(5)] == [(3,)]
    assert [t.shape for t in sg.ones(0).split(2)] == [(0,)]
    assert (x.split(3)[0].grad_fn.name(), x.split([2, 5])[0].grad_fn.name(),
            x.chunk(3)[0].grad_fn.name(), x.unbind()[0].grad_fn.name()) == (
        "SplitBackward0", "SplitWithSizesBackward0", "SplitBackward0", "UnbindBackward0")
    raises(RuntimeError, "split_size can only be 0 if dimension size is 0, but got dimension "
           "size of 3", sg.ones(3).split, 0)
    raises(RuntimeError, "split expects split_size be non-negative, but got split_size=-1",
           sg.ones(3).split, -1)
    raises(RuntimeError, "split_with_sizes expects split_sizes to sum exactly to 3 (input "
           "tensor's size at dimension 0), but got split_sizes=[1, 1]", sg.ones(3).split, [1, 1])
    raises(RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0", sg.ones(3).chunk, 0)
    raises(IndexError, "Dimension specified as 0 but tensor has no dimensions",
           sg.tensor(1.0).unbind)
    raises(RuntimeError, "split expects at least a 1-dimensional tensor", sg.tensor(1.0).split, 1)


def test_split_and_unbind_gradients_views_and_higher_order():
    x = sg.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], requires_grad=True)
    a, b = x.split([1, 2], dim=1)
    (b * 3).sum().backward()
    close(x.grad, [[0, 3, 3], [0, 3, 3]])
    assert a._base is x
    v = leaf()
    p, q, r = v.unbind()
    (g,) = sg.autograd.grad(p * q * r, v, create_graph=True)
    (h,) = sg.autograd.grad(g.sum(), v)
    close(g, [6, 3, 2])
    close(h, [5, 4, 3])
    z = sg.zeros(3)
    first = z.unbind()[0]
    first.add_(5)   # 0-d views write through
    assert z.tolist() == [5.0, 0.0, 0.0] and first.shape == ()


def test_outputs_of_multi_view_ops_refuse_in_place_writes():
    x = leaf(1.0, 2.0, 3.0, 4.0)
    h = x * 1
    a, b = h.split(2)
    raises(RuntimeError, f"Output 1 of Split is a view and is being modified inplace. "
           f"{MULTI_VIEW}", b.mul_, 2)
    raises(RuntimeError, f"Output 0 of Slice is a view and is being modified inplace. "
           f"{MULTI_VIEW}", a[0:1].mul_, 2)
    raises(RuntimeError, f"Output 0 of Unbind is a view and is being modified inplace. "
           f"{MULTI_VIEW}", h.unbind()[0].mul_, 2)
    with sg.no_grad():
        a.mul_(2)   # allowed; the node's outputs are stale from now on
    raises(RuntimeError, "Output 0 of Split is a view and its base or another view of its base "
           f"has been modified inplace. {MULTI_VIEW}", lambda: a.grad_fn)
    p, _ = sg.ones(3).split(2)
    raises(RuntimeError, "A view was created in no_grad mode and is being modified inplace "
           f"with grad mode enabled. {MULTI_VIEW}", p.mul_, sg.ones(2, requires_grad=True))


# ============================================================ already agreeing scenarios
def test_allow_unused_and_materialize_grads():
    x, y = leaf(), leaf()
    out = (x * 2).sum()
    assert sg.autograd.grad(out, [x, y], allow_unused=True, retain_graph=True)[1] is None
    g = sg.autograd.grad(out, [x, y], materialize_grads=True, retain_graph=True)
    close(g[1], [0, 0, 0])
    assert not g[1].requires_grad
    raises(RuntimeError, "The differentiated Tensor at index 1 appears to not have been used in "
           "the graph. Set allow_unused=True if this is the desired behavior.",
           sg.autograd.grad, out, [x, y], retain_graph=True)
    raises(ValueError, "Expected allow_unused to be True or not passed when "
           "materialize_grads=True, but got: allow_unused=False.", sg.autograd.grad, out,
           [x, y], allow_unused=False, materialize_grads=True)


def test_grad_argument_errors():
    x = leaf()
    raises(RuntimeError, "grad can be implicitly created only for scalar outputs",
           sg.autograd.grad, x * 2, x)
    raises(RuntimeError, "Mismatch in shape: grad_output[0] has a shape of symgrad.Size([4]) "
           "and output[0] has a shape of symgrad.Size([3]).", sg.autograd.grad, x * 2, x,
           grad_outputs=sg.ones(4))
    raises(RuntimeError, "got 2 tensors and 1 gradients", sg.autograd.grad, [x * 2, x * 3], x,
           grad_outputs=[sg.ones(3)])
    raises(RuntimeError, "element 0 of tensors does not require grad and does not have a "
           "grad_fn", sg.ones(2).sum().backward)
    raises(RuntimeError, "One of the differentiated Tensors does not require grad",
           sg.autograd.grad, (x * 2).sum(), [x, sg.ones(3)])


def test_grad_inputs_that_are_views_and_duplicates():
    x = leaf(1.0, 2.0, 3.0, 4.0)
    y = x * 1
    v = y[1:3]
    gv, gy = sg.autograd.grad((v * v).sum(), [v, y])
    close(gv, [4, 6])
    close(gy, [0, 4, 6, 0])
    a, b = sg.autograd.grad((x * x).sum(), [x, x])
    close(a, [2, 4, 6, 8])
    close(b, [2, 4, 6, 8])


def test_is_grads_batched_with_unused_input():
    x, z = leaf(), leaf()
    gx, gz = sg.autograd.grad(x * x, [x, z], grad_outputs=sg.eye(3), is_grads_batched=True,
                              allow_unused=True)
    close(gx, np.diag([2.0, 4.0, 6.0]))
    assert gz is None


def test_retain_graph_semantics():
    x = leaf()
    a = x.exp()
    b, c = a.sin(), a.cos()
    b.sum().backward()
    with pytest.raises(RuntimeError, match=r"^Trying to backward through the graph a second "
                       r"time \(or directly access saved tensors after they have already been "
                       r"freed\)\."):
        c.sum().backward()
    x = leaf()
    y = ((x + 1) - 2).sum()   # no saved tensors: a second backward is fine
    y.backward()
    y.backward()
    close(x.grad, [2, 2, 2])
    y = (x * 2).sum()   # mul saves its scalar operand: freed
    y.backward()
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second"):
        y.backward()
    x = leaf()
    y = (x ** 3).sum()
    (g,) = sg.autograd.grad(y, x, create_graph=True)   # create_graph retains the graph
    y.backward()
    (h,) = sg.autograd.grad(g.sum(), x)
    close(h, [6, 12, 18])


def test_leaf_and_non_leaf_metadata():
    x = leaf()
    y = x * 2
    with pytest.warns(UserWarning, match="^The .grad attribute of a Tensor that is not a leaf "
                      "Tensor is being accessed."):
        assert y.grad is None
    y.retain_grad()
    (y * y).sum().backward()
    close(y.grad, [4, 8, 12])
    assert y.retains_grad and not x.retains_grad and not y.is_leaf
    raises(RuntimeError, "you can only change requires_grad flags of leaf variables. If you want "
           "to use a computed variable in a subgraph that doesn't require differentiation use "
           "var_no_grad = var.detach().", y.requires_grad_, False)
    with pytest.raises(RuntimeError, match=r"^Can't detach views in-place\. Use detach\(\) "
                       r"instead\."):
        (x * 2)[1:].detach_()
    with sg.no_grad():
        w = x * 2
    assert w.is_leaf and not w.requires_grad and x.detach().is_leaf


def test_in_place_rules_on_leaves():
    x = leaf()
    raises(RuntimeError, "a leaf Variable that requires grad is being used in an in-place "
           "operation.", x.add_, 1)
    raises(RuntimeError, "a view of a leaf Variable that requires grad is being used in an "
           "in-place operation.", x[1:].mul_, 2)
    with sg.no_grad():
        x.mul_(2)
        x[0] = 7.0
    (x * x).sum().backward()
    close(x.grad, [14, 8, 12])
    assert x._version == 2 and x.is_leaf


def test_grad_layout_follows_a_transposed_leaf():
    x = sg.ones(3, 4).t().requires_grad_()
    (x * 2).sum().backward()
    assert x.grad.stride() == x.stride() == (1, 4)
    y = sg.ones(4, 6)[:, ::2].detach().requires_grad_()
    (y * 2).sum().backward()
    assert y.grad.stride() == (3, 1)


def test_retain_grad_sees_the_gradient_after_the_tensor_hooks():
    x = leaf()
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 10)
    (y * y).sum().backward()
    close(y.grad, [40, 80, 120])   # retain_grad runs after the tensor's hooks, wherever
    close(x.grad, [80, 160, 240])  # it was registered
    x = leaf()
    y = x * 2
    y.register_hook(lambda g: g * 10)
    y.retain_grad()
    (y * y).sum().backward()
    close(y.grad, [40, 80, 120])


def test_custom_function_error_messages():
    class Bad(sg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    class BadShape(sg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return sg.ones(4)

    class Saver(sg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a, 3)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g

    x = leaf()
    raises(RuntimeError, "function BadBackward returned an incorrect number of gradients "
           "(expected 2, got 1)", Bad.apply(x, leaf()).sum().backward)
    raises(RuntimeError, "Function BadShapeBackward returned an invalid gradient at index 0 - "
           "got [4] but expected shape compatible with [3]", BadShape.apply(x).sum().backward)
    raises(TypeError, "save_for_backward can only save variables, but argument 1 is of type int",
           Saver.apply, x)


def test_once_differentiable_under_create_graph():
    class Sq(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @sg.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = leaf()
    (g,) = sg.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
    close(g, [2, 4, 6])
    assert not g.requires_grad


def test_grad_modes_as_decorators_functions_and_per_thread():
    @sg.no_grad()
    def gen(t):
        for i in range(2):
            yield sg.is_grad_enabled(), (t * i).requires_grad

    x = leaf()
    assert [(v, sg.is_grad_enabled()) for v in gen(x)] == [((False, False), True)] * 2
    sg.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        sg.set_grad_enabled(True)
    seen = {}

    def worker():
        seen["in thread"] = sg.is_grad_enabled()

    with sg.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == {"in thread": True}
    raises(TypeError, "set_grad_enabled(): argument 'enabled' (position 1) must be bool, not "
           "int", sg.set_grad_enabled, 1)


def test_anomaly_mode_names_the_node_that_returned_nan():
    x = sg.tensor([0.0, 1.0], requires_grad=True)
    enabled = "^Anomaly Detection has been enabled. This mode will increase the runtime"
    with pytest.warns(UserWarning, match=enabled):
        with sg.autograd.detect_anomaly():
            with pytest.warns(UserWarning, match="^Error detected in MulBackward0"):
                raises(RuntimeError, "Function 'MulBackward0' returned nan values in its 0th "
                       "output.", (x * 0).sqrt().sum().backward)
    with pytest.warns(UserWarning, match=enabled):
        with sg.autograd.detect_anomaly(check_nan=False):
            assert sg.is_anomaly_enabled() and not sg.is_anomaly_check_nan_enabled()
    assert not sg.is_anomaly_enabled()


def test_gradcheck_failure_modes():
    class Bad(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    x = sg.tensor([0.5, 1.0, 1.5], dtype=sg.float64, requires_grad=True)
    assert sg.autograd.gradcheck(Bad.apply, (x,), raise_exception=False) is False
    assert sg.autograd.gradcheck(Bad.apply, (x,), atol=10.0, raise_exception=False) is True
    with pytest.raises(sg.autograd.GradcheckError,
                       match=r"^Jacobian mismatch for output 0 with respect to input 0,"):
        sg.autograd.gradcheck(Bad.apply, (x,))
    assert issubclass(sg.autograd.GradcheckError, RuntimeError)


def test_functional_api_errors():
    F = sg.autograd.functional
    x = sg.tensor([0.5, 1.0, 1.5], dtype=sg.float64)
    raises(RuntimeError, "The vector v can only be None if the user-provided function returns a "
           "single Tensor with a single element.", F.vjp, lambda t: t ** 2, x)
    raises(RuntimeError, "Output 0 of the user-provided function is independent of input 1. "
           "This is not allowed in strict mode.", F.jacobian, lambda a, b: a * 2, (x, x),
           strict=True)
    raises(RuntimeError, "The Tensor returned by the function given to hessian should contain "
           "a single element", F.hessian, lambda t: t ** 3, x)
    j = F.jacobian(lambda a, b: (a * b, (a + b).sum()), (x, x))
    assert [[t.shape for t in row] for row in j] == [[(3, 3), (3, 3)], [(3,), (3,)]]
    close(F.hvp(lambda t: (t ** 3).sum(), x, sg.ones(3, dtype=sg.float64))[1], [3, 6, 9])


def test_sgd_loop_in_no_grad_updates_the_leaf_in_place():
    w = sg.tensor([1.0, -2.0, 0.5], requires_grad=True)
    X = sg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    target = sg.tensor([1.0, 2.0])
    for _ in range(3):
        loss = ((X @ w - target) ** 2).mean()
        loss.backward()
        with sg.no_grad():
            w -= 0.01 * w.grad
        w.grad.zero_()
    close(w, [1.2442900, -1.6690551, 0.9176000])
    assert w.is_leaf and w.requires_grad and w._version == 3
    assert re.match(r"tensor\(\[.*\], requires_grad=True\)", repr(w))
