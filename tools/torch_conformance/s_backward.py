from harness import sc

def L(t, *v): return t.tensor(list(v) or [1., 2.], requires_grad=True)

@sc
def bw_grad_tensors_shape_mismatch(t):
    x = L(t); (x * 2).backward(t.ones(3))
@sc
def bw_grad_tensors_shape_mismatch_2d(t):
    x = L(t); (x * 2).backward(t.ones(1, 2))
@sc
def bw_grad_tensors_scalar_for_vector(t):
    x = L(t); (x * 2).backward(t.tensor(1.))
@sc
def bw_grad_tensors_dtype_double(t):
    x = L(t); (x * 2).backward(t.ones(2, dtype=t.float64)); return x.grad
@sc
def bw_grad_tensors_dtype_int(t):
    x = L(t); (x * 2).backward(t.ones(2, dtype=t.int64)); return x.grad
@sc
def bw_grad_tensors_bool(t):
    x = L(t); (x * 2).backward(t.ones(2, dtype=t.bool)); return x.grad
@sc
def bw_implicit_nonscalar(t):
    x = L(t); (x * 2).backward()
@sc
def bw_implicit_one_elem_1d(t):
    x = L(t, 3.); (x * 2).backward(); return x.grad
@sc
def bw_implicit_one_elem_2d(t):
    x = t.tensor([[3.]], requires_grad=True); (x * 2).backward(); return x.grad
@sc
def bw_no_rg_output(t):
    x = t.tensor([1., 2.]); x.sum().backward()
@sc
def bw_no_rg_grad_api(t):
    x = L(t); y = t.tensor([1.]); t.autograd.grad(y.sum(), x)
@sc
def bw_grad_input_not_rg(t):
    x = L(t); z = t.tensor([1., 2.]); t.autograd.grad((x * z).sum(), z)
@sc
def bw_grad_input_unused(t):
    x = L(t); y = L(t); t.autograd.grad((x * 2).sum(), y)
@sc
def bw_grad_input_unused_allow(t):
    x = L(t); y = L(t); return t.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)
@sc
def bw_grad_materialize(t):
    x = L(t); y = L(t); return t.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True)
@sc
def bw_grad_materialize_allow_false(t):
    x = L(t); y = L(t); return t.autograd.grad((x * 2).sum(), [x, y], allow_unused=False, materialize_grads=True)
@sc
def bw_grad_materialize_cg(t):
    x = L(t); y = L(t); return t.autograd.grad((x * x).sum(), [x, y], materialize_grads=True, create_graph=True)
@sc
def bw_grad_materialize_dtype(t):
    x = L(t); y = t.tensor([1., 2.], dtype=t.float64, requires_grad=True)
    return t.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True)
@sc
def bw_grad_single_tensor_input(t):
    x = L(t); return t.autograd.grad((x * x).sum(), x)
@sc
def bw_grad_list_outputs(t):
    x = L(t); return t.autograd.grad([(x * x).sum(), x.sum()], [x])
@sc
def bw_grad_outputs_none_for_scalar(t):
    x = L(t); return t.autograd.grad([(x * x).sum()], [x], [None])
@sc
def bw_grad_outputs_none_for_nonscalar(t):
    x = L(t); return t.autograd.grad([x * x], [x], [None])
@sc
def bw_grad_outputs_len_mismatch(t):
    x = L(t); return t.autograd.grad([x * x, x * 2], [x], [t.ones(2)])
@sc
def bw_backward_grad_tensors_len_mismatch(t):
    x = L(t); t.autograd.backward([x * x, x * 2], [t.ones(2)])
@sc
def bw_grad_outputs_wrong_shape(t):
    x = L(t); return t.autograd.grad(x * x, x, t.ones(3))
@sc
def bw_grad_outputs_python_float(t):
    x = L(t); return t.autograd.grad((x * x).sum(), x, 2.0)
@sc
def bw_grad_outputs_list_float(t):
    x = L(t); return t.autograd.grad((x * x).sum(), x, [2.0])
@sc
def bw_is_grads_batched(t):
    x = L(t); return t.autograd.grad(x * x, x, t.eye(2), is_grads_batched=True)
@sc
def bw_is_grads_batched_wrong(t):
    x = L(t); return t.autograd.grad(x * x, x, t.ones(2), is_grads_batched=True)
@sc
def bw_is_grads_batched_cg(t):
    x = L(t); g, = t.autograd.grad(x * x, x, t.eye(2), is_grads_batched=True, create_graph=True); return g
@sc
def bw_retain_second_backward(t):
    x = L(t); y = (x.exp()).sum(); y.backward(); y.backward()
@sc
def bw_retain_second_backward_add(t):
    x = L(t); y = (x + 1).sum(); y.backward(); y.backward(); return x.grad
@sc
def bw_retain_second_backward_mul_scalar(t):
    x = L(t); y = (x * 2).sum(); y.backward(); y.backward(); return x.grad
@sc
def bw_retain_second_grad(t):
    x = L(t); y = (x * x).sum(); t.autograd.grad(y, x); t.autograd.grad(y, x)
@sc
def bw_retain_true(t):
    x = L(t); y = (x * x).sum(); y.backward(retain_graph=True); y.backward(); return x.grad
@sc
def bw_leaf_backward(t):
    x = L(t); x.backward(t.ones(2)); return x.grad
@sc
def bw_leaf_backward_scalar(t):
    x = t.tensor(2., requires_grad=True); x.backward(); return x.grad
@sc
def bw_leaf_backward_twice(t):
    x = t.tensor(2., requires_grad=True); x.backward(); x.backward(); return x.grad
@sc
def bw_grad_of_leaf_wrt_itself(t):
    x = L(t); return t.autograd.grad(x, x, t.ones(2))
@sc
def bw_inputs_nonleaf(t):
    x = L(t); h = x * 2; y = (h * h).sum(); y.backward(inputs=[h]); return h.grad, x.grad
@sc
def bw_inputs_tensor_not_list(t):
    x = L(t); w = L(t); (x * w).sum().backward(inputs=x); return x.grad, w.grad
@sc
def bw_inputs_unused(t):
    x = L(t); w = L(t); (x * 2).sum().backward(inputs=[w]); return x.grad, w.grad
@sc
def bw_inputs_not_rg(t):
    x = L(t); w = t.tensor([1., 2.]); (x * w).sum().backward(inputs=[w])
@sc
def bw_inputs_empty(t):
    x = L(t); (x * 2).sum().backward(inputs=[])
@sc
def bw_grad_nontensor_input(t):
    x = L(t); t.autograd.grad((x * 2).sum(), [x, 3])
@sc
def bw_grad_nontensor_output(t):
    x = L(t); t.autograd.grad(3.0, x)
@sc
def bw_backward_nontensor(t):
    t.autograd.backward(3.0)
@sc
def bw_grad_create_graph_flags(t):
    x = L(t); g, = t.autograd.grad((x * x).sum(), x, create_graph=True)
    return g.requires_grad, g.is_leaf, g.grad_fn is None
@sc
def bw_grad_create_graph_linear_flags(t):
    x = L(t); g, = t.autograd.grad((x * 3).sum(), x, create_graph=True)
    return g.requires_grad, g.is_leaf, g.grad_fn is None
@sc
def bw_grad_no_cg_flags(t):
    x = L(t); g, = t.autograd.grad((x * x).sum(), x)
    return g.requires_grad, g.is_leaf
@sc
def bw_grad_does_not_touch_grad(t):
    x = L(t); t.autograd.grad((x * x).sum(), x); return x.grad
@sc
def bw_grad_with_retain_then_backward(t):
    x = L(t); y = (x * x).sum(); g, = t.autograd.grad(y, x, retain_graph=True); y.backward(); return g, x.grad
@sc
def bw_sum_empty(t):
    x = t.zeros(0, requires_grad=True); y = x.sum(); y.backward(); return y, x.grad
@sc
def bw_mean_empty(t):
    x = t.zeros(0, requires_grad=True); y = x.mean(); y.backward(); return y, x.grad
@sc
def bw_prod_empty(t):
    x = t.zeros(0, requires_grad=True); y = x.prod(); y.backward(); return y, x.grad
@sc
def bw_sum_dim_empty(t):
    x = t.zeros(2, 0, requires_grad=True); y = x.sum(1); y.sum().backward(); return y, x.grad
@sc
def bw_max_empty(t):
    x = t.zeros(0, requires_grad=True); x.max()
@sc
def bw_broadcast_reduce(t):
    x = t.tensor([[1.], [2.]], requires_grad=True); y = t.tensor([1., 2., 3.], requires_grad=True)
    (x * y).sum().backward(); return x.grad, y.grad
@sc
def bw_broadcast_scalar_tensor(t):
    x = t.tensor(2., requires_grad=True); y = t.tensor([1., 2., 3.], requires_grad=True)
    (x * y).sum().backward(); return x.grad, y.grad
@sc
def bw_broadcast_keep1(t):
    x = t.ones(1, 3, requires_grad=True); y = t.ones(2, 1, 3)
    (x + y).sum().backward(); return x.grad
@sc
def bw_dtype_promotion_f32_f64(t):
    x = L(t); y = t.tensor([1., 2.], dtype=t.float64, requires_grad=True)
    z = x * y; z.sum().backward(); return z.dtype, x.grad, y.grad
@sc
def bw_grad_tensor_f64_for_f32(t):
    x = L(t); y = x * 2; g, = t.autograd.grad(y, x, t.ones(2, dtype=t.float64)); return g
@sc
def bw_grad_layout_transposed(t):
    x = t.tensor([[1., 2., 3.], [4., 5., 6.]]).t().requires_grad_()
    (x * 2).sum().backward(); return x.grad.stride(), x.grad.is_contiguous(), x.stride()
@sc
def bw_grad_layout_slice_leaf(t):
    base = t.arange(6.).reshape(2, 3)
    x = base[:, ::2].detach().requires_grad_()
    (x * 2).sum().backward(); return x.grad.stride(), x.stride()
@sc
def bw_grad_layout_expanded_leaf(t):
    x = t.ones(3, 1).expand(3, 4).requires_grad_() if False else t.ones(1, 4).expand(3, 4).detach().requires_grad_()
    (x * 2).sum().backward(); return x.grad.stride(), x.stride()
@sc
def bw_grad_accum_inplace(t):
    x = L(t); (x * 2).sum().backward(); g0 = x.grad; (x * 3).sum().backward(); return g0 is x.grad, x.grad
@sc
def bw_grad_accum_cg_new(t):
    x = L(t); (x * 2).sum().backward(); g0 = x.grad
    (x * x).sum().backward(create_graph=True); return g0 is x.grad, x.grad.requires_grad, g0
@sc
def bw_grad_set_none_then_accumulate(t):
    x = L(t); (x * 2).sum().backward(); x.grad = None; (x * 3).sum().backward(); return x.grad
@sc
def bw_grad_assign_wrong_shape(t):
    x = L(t); x.grad = t.ones(3)
@sc
def bw_grad_assign_wrong_dtype(t):
    x = L(t); x.grad = t.ones(2, dtype=t.float64)
@sc
def bw_grad_assign_nontensor(t):
    x = L(t); x.grad = [1., 2.]
@sc
def bw_grad_assign_then_accumulate(t):
    x = L(t); g = t.ones(2); x.grad = g; (x * 2).sum().backward(); return x.grad is g, x.grad, g
@sc
def bw_grad_zero_(t):
    x = L(t); (x * 2).sum().backward(); x.grad.zero_(); (x * 3).sum().backward(); return x.grad
@sc
def bw_backward_returns_none(t):
    x = L(t); return (x * 2).sum().backward()
@sc
def bw_grad_returns_tuple(t):
    x = L(t); r = t.autograd.grad((x * 2).sum(), [x]); return type(r).__name__
@sc
def bw_backward_in_no_grad(t):
    x = L(t); y = (x * x).sum()
    with t.no_grad():
        y.backward()
    return x.grad
@sc
def bw_cg_in_no_grad(t):
    x = L(t); y = (x * x).sum()
    with t.no_grad():
        g, = t.autograd.grad(y, x, create_graph=True)
    return g
@sc
def bw_grad_outputs_requires_grad(t):
    x = L(t); v = t.tensor([1., 1.], requires_grad=True)
    g, = t.autograd.grad(x * x, x, v, create_graph=True); return g
@sc
def bw_grad_outputs_rg_no_cg(t):
    x = L(t); v = t.tensor([1., 1.], requires_grad=True)
    g, = t.autograd.grad(x * x, x, v); return g
@sc
def bw_retain_graph_false_cg_true(t):
    x = L(t); y = (x * x).sum(); y.backward(create_graph=True, retain_graph=False); y.backward()
@sc
def bw_backward_gradient_kw(t):
    x = L(t); (x * 2).backward(gradient=t.tensor([1., 3.])); return x.grad
@sc
def bw_grad_tensors_kw(t):
    x = L(t); t.autograd.backward(x * 2, grad_tensors=t.tensor([1., 3.])); return x.grad
@sc
def bw_grad_tensors_list_none_scalar(t):
    x = L(t); t.autograd.backward([(x * 2).sum()], [None]); return x.grad
@sc
def bw_two_outputs_shared(t):
    x = L(t); a = x * 2; b = x * 3; t.autograd.backward([a.sum(), b.sum()]); return x.grad
@sc
def bw_same_output_twice(t):
    x = L(t); a = (x * 2).sum(); t.autograd.backward([a, a]); return x.grad
@sc
def bw_grad_duplicate_inputs(t):
    x = L(t); return t.autograd.grad((x * x).sum(), [x, x])
@sc
def bw_grad_view_input(t):
    x = L(t); v = x[0]; return t.autograd.grad((x * 2).sum(), v, allow_unused=True)
@sc
def bw_grad_nonleaf_input(t):
    x = L(t); h = x * 2; return t.autograd.grad((h * h).sum(), h)
@sc
def bw_backward_output_detached(t):
    x = L(t); y = (x * 2).detach(); y.sum().backward()
@sc
def bw_zero_dim_grad_tensor_for_scalar(t):
    x = L(t); (x * 2).sum().backward(t.tensor(3.)); return x.grad
@sc
def bw_one_elem_grad_tensor_for_scalar(t):
    x = L(t); (x * 2).sum().backward(t.tensor([3.]))
@sc
def bw_int_leaf_rg(t):
    return t.tensor([1, 2], requires_grad=True)
@sc
def bw_int_leaf_requires_grad_(t):
    return t.tensor([1, 2]).requires_grad_()
@sc
def bw_bool_leaf_rg(t):
    return t.tensor([True], requires_grad=True)
@sc
def bw_int_attr_set(t):
    x = t.tensor([1, 2]); x.requires_grad = True
@sc
def bw_grad_outputs_int_dtype(t):
    x = L(t); return t.autograd.grad(x * 2, x, t.tensor([1, 1]))
@sc
def bw_grad_on_float64_result_of_f32(t):
    x = L(t); y = x.double() * 2; y.sum().backward(); return x.grad
@sc
def bw_grad_of_int_output(t):
    x = L(t); y = (x * 2).long() if hasattr(x, "long") else None; return y.requires_grad, y.grad_fn is None
@sc
def bw_retain_graph_message_nonleaf_grad(t):
    x = L(t); h = x.exp(); y = h.sum(); t.autograd.grad(y, h); y.backward()
@sc
def bw_grad_tuple_of_grad_outputs(t):
    x = L(t); return t.autograd.grad((x * 2, x * 3), (x,), (t.ones(2), t.ones(2)))
@sc
def bw_multiple_backward_cg_accumulate(t):
    x = L(t); (x * x).sum().backward(create_graph=True); (x * x).sum().backward(create_graph=True); return x.grad
@sc
def bw_second_order_via_backward(t):
    x = L(t); g, = t.autograd.grad((x ** 3).sum(), x, create_graph=True); g.sum().backward(); return x.grad
@sc
def bw_grad_rg_false_leaf_after_toggle(t):
    x = L(t); x.requires_grad_(False); return x.requires_grad, (x * 2).requires_grad
@sc
def bw_zero_grad_set_to_none_style(t):
    x = L(t); (x * 2).sum().backward(); x.grad = None; return x.grad
@sc
def bw_inputs_with_grad_api_leaf_not_in_graph(t):
    x = L(t); y = L(t); return t.autograd.grad((x * 2).sum(), [y], allow_unused=True)
@sc
def bw_allow_unused_nonleaf(t):
    x = L(t); h = x * 2; y = x * 3; return t.autograd.grad(y.sum(), [h], allow_unused=True)
@sc
def bw_grad_only_inputs_kw(t):
    x = L(t); return t.autograd.grad((x * 2).sum(), x, only_inputs=True)
@sc
def bw_grad_positional_args(t):
    x = L(t); y = (x * x).sum(); return t.autograd.grad(y, x, None, True, False)
@sc
def bw_backward_positional_args(t):
    x = L(t); y = (x * x).sum(); y.backward(None, True, False); y.backward(); return x.grad
@sc
def bw_grad_nan(t):
    x = t.tensor([0., 1.], requires_grad=True); y = x.sqrt(); y.sum().backward(); return x.grad
@sc
def bw_grad_inf_input(t):
    x = t.tensor([float("inf"), 1.], requires_grad=True); y = x.exp(); y.sum().backward(); return x.grad
