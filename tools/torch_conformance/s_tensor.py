from harness import sc

def L(t, *v): return t.tensor(list(v) or [1., 2.], requires_grad=True)

@sc
def ts_inplace_leaf(t): x = L(t); x.add_(1)
@sc
def ts_inplace_leaf_mul(t): x = L(t); x.mul_(2)
@sc
def ts_inplace_leaf_setitem(t): x = L(t); x[0] = 5.
@sc
def ts_inplace_leaf_zero(t): x = L(t); x.zero_()
@sc
def ts_inplace_leaf_no_grad(t):
    x = L(t)
    with t.no_grad():
        x.add_(1)
    return x, x.is_leaf, x.requires_grad
@sc
def ts_inplace_view_of_leaf(t): x = L(t); v = x[0:1]; v.add_(1)
@sc
def ts_inplace_view_of_leaf_view(t): x = L(t); v = x.view(2); v.mul_(2)
@sc
def ts_inplace_view_of_nonleaf(t):
    x = L(t); h = x * 1; v = h[0:1]; v.mul_(3); h.sum().backward(); return x.grad, type(h.grad_fn).__name__
@sc
def ts_inplace_nonleaf_saved(t):
    x = L(t); h = x * 1; y = h * h; h.add_(1); y.sum().backward()
@sc
def ts_inplace_nonleaf_exp_saved(t):
    x = L(t); h = x.exp(); h.add_(1); h.sum().backward()
@sc
def ts_inplace_nonleaf_grad_fn_name(t):
    x = L(t); h = x * 1; h.add_(1); return type(h.grad_fn).__name__, h._version
@sc
def ts_inplace_sigmoid_output(t):
    x = L(t); h = x.sigmoid(); h.mul_(2); h.sum().backward()
@sc
def ts_version_counter(t):
    x = t.tensor([1., 2.]); v0 = x._version; x.add_(1); v1 = x._version; x[0] = 3.; return v0, v1, x._version
@sc
def ts_detach_shares_storage(t):
    x = L(t); d = x.detach(); d.add_(1); return x, d.requires_grad, d.is_leaf, x._version, d._version
@sc
def ts_detach_version_error(t):
    x = L(t); y = x.exp(); d = y.detach(); d.zero_(); y.sum().backward()
@sc
def ts_data_mutation_no_error(t):
    x = L(t); y = x * x; x.data.mul_(2); y.sum().backward(); return x.grad, x._version
@sc
def ts_data_assign(t):
    x = L(t); x.data = t.tensor([5., 6.]); return x, x.requires_grad, x.is_leaf
@sc
def ts_data_flags(t):
    x = L(t); d = x.data; return d.requires_grad, d.is_leaf, d.grad_fn is None
@sc
def ts_requires_grad_nonleaf_error(t):
    x = L(t); h = x * 2; h.requires_grad_(False)
@sc
def ts_nonleaf_grad_warning(t):
    x = L(t); h = x * 2; h.sum().backward(); return h.grad
@sc
def ts_leaf_no_rg_grad_no_warning(t):
    x = t.tensor([1.]); return x.grad
@sc
def ts_retain_grad_leaf_noop(t):
    x = L(t); x.retain_grad(); return x.retains_grad
@sc
def ts_retains_grad_nonleaf(t):
    x = L(t); h = x * 2; a = h.retains_grad; h.retain_grad(); return a, h.retains_grad
@sc
def ts_int_requires_grad_tensor(t): return t.tensor([1, 2], requires_grad=True)
@sc
def ts_int_requires_grad_zeros(t): return t.zeros(2, dtype=t.int64, requires_grad=True)
@sc
def ts_int_requires_grad_arange(t): return t.arange(3, requires_grad=True)
@sc
def ts_int_requires_grad_setattr(t):
    x = t.tensor([1, 2]); x.requires_grad = True
@sc
def ts_int_requires_grad_(t): t.tensor([1, 2]).requires_grad_(True)
@sc
def ts_int_requires_grad_false_ok(t): x = t.tensor([1, 2]); x.requires_grad_(False); return x.requires_grad
@sc
def ts_bool_requires_grad(t): t.tensor([True]).requires_grad_()
@sc
def ts_float16_requires_grad(t): return t.tensor([1.], dtype=t.float16, requires_grad=True)
@sc
def ts_sum_empty(t): x = t.zeros(0, requires_grad=True); y = x.sum(); y.backward(); return y, x.grad
@sc
def ts_mean_empty_value(t): x = t.zeros(0, requires_grad=True); return x.mean()
@sc
def ts_mean_empty_2d_dim(t): x = t.zeros(0, 3, requires_grad=True); y = x.mean(0); y.sum().backward(); return y, x.grad
@sc
def ts_sum_empty_2d_dim(t): x = t.zeros(3, 0, requires_grad=True); y = x.sum(1); y.sum().backward(); return y, x.grad
@sc
def ts_broadcast_grad_reduce(t):
    x = t.ones(3, 1, requires_grad=True); y = t.ones(1, 4, requires_grad=True); (x * y).sum().backward(); return x.grad, y.grad
@sc
def ts_broadcast_grad_reduce_leading(t):
    x = t.ones(4, requires_grad=True); y = t.ones(2, 3, 4); (x * y).sum().backward(); return x.grad
@sc
def ts_f32_leaf_f64_gradtensor(t):
    x = L(t); y = x * 2; y.backward(t.ones(2, dtype=t.float64)); return x.grad
@sc
def ts_f64_leaf_f32_result(t):
    x = t.tensor([1., 2.], dtype=t.float64, requires_grad=True); y = x.float() * 2; y.sum().backward(); return x.grad
@sc
def ts_f32_f64_mul_grad_dtypes(t):
    x = L(t); y = t.tensor([1., 2.], dtype=t.float64, requires_grad=True); (x * y).sum().backward(); return x.grad, y.grad
@sc
def ts_python_scalar_keeps_f32(t):
    x = L(t); y = x * 2.5; return y.dtype
@sc
def ts_f32_times_f64_0dim(t):
    x = L(t); y = t.tensor(2., dtype=t.float64, requires_grad=True); z = x * y; z.sum().backward(); return z.dtype, x.grad, y.grad
@sc
def ts_grad_transposed_leaf_strides(t):
    x = t.randn(2, 3).t().detach().requires_grad_() if False else t.tensor([[1., 2., 3.], [4., 5., 6.]]).t().detach().requires_grad_()
    x.exp().sum().backward(); return x.grad.stride(), x.grad.shape
@sc
def ts_grad_permuted_leaf_strides(t):
    x = t.arange(24.).reshape(2, 3, 4).permute(2, 0, 1).detach().requires_grad_()
    (x * 2).sum().backward(); return x.grad.stride()
@sc
def ts_grad_contig_leaf_strides(t):
    x = t.ones(2, 3, requires_grad=True); (x.t() * 2).sum().backward(); return x.grad.stride()
@sc
def ts_grad_cg_new_object(t):
    x = L(t); (x * x).sum().backward(create_graph=True); g1 = x.grad
    (x * x).sum().backward(create_graph=True); return g1 is x.grad, g1, x.grad
@sc
def ts_grad_nocg_inplace_object(t):
    x = L(t); (x * x).sum().backward(); g1 = x.grad; g1c = g1.clone()
    (x * x).sum().backward(); return g1 is x.grad, g1c, x.grad
@sc
def ts_grad_stolen_layout(t):
    x = t.tensor([[1., 2.], [3., 4.]]).t().detach().requires_grad_()
    x.sum().backward(); return x.grad.stride()
@sc
def ts_clone_grad(t):
    x = L(t); y = x.clone(); y.sum().backward(); return x.grad, y.is_leaf, y.requires_grad
@sc
def ts_detach_inplace(t):
    x = L(t); h = x * 2; h.detach_(); return h.requires_grad, h.is_leaf, h.grad_fn is None
@sc
def ts_detach_inplace_view(t):
    x = L(t); h = x * 2; v = h[:1]; v.detach_()
@sc
def ts_view_requires_grad(t):
    x = L(t); v = x[0]; return v.requires_grad, v.is_leaf, v.grad_fn is None
@sc
def ts_view_no_grad(t):
    x = L(t)
    with t.no_grad():
        v = x[0:1]
    return v.requires_grad, v.is_leaf, v.grad_fn is None
@sc
def ts_view_no_grad_inplace(t):
    x = L(t); h = x * 1
    with t.no_grad():
        v = h[0:1]
    v.mul_(2)
@sc
def ts_setitem_nonleaf_grad(t):
    x = L(t, 1., 2., 3.); h = x * 1; h[1] = 0.; h.sum().backward(); return x.grad
@sc
def ts_setitem_with_rg_value(t):
    x = L(t, 1., 2., 3.); w = t.tensor(5., requires_grad=True); h = x * 1; h[1] = w * 2; h.sum().backward(); return x.grad, w.grad
@sc
def ts_setitem_no_rg_into_nonrg_with_rg_value(t):
    w = t.tensor(5., requires_grad=True); h = t.zeros(3); h[1] = w; return h.requires_grad, h.is_leaf, type(h.grad_fn).__name__
@sc
def ts_copy_into_leaf(t):
    x = L(t); x.copy_(t.tensor([3., 4.]))
@sc
def ts_copy_into_nonrg(t):
    w = L(t); h = t.zeros(2); h.copy_(w * 2); h.sum().backward(); return w.grad, h.is_leaf
@sc
def ts_item_rg(t):
    x = L(t, 3.); return x.item()
@sc
def ts_numpy_rg_error(t):
    x = L(t); x.numpy()
@sc
def ts_tolist_rg(t):
    x = L(t); return x.tolist()
@sc
def ts_grad_of_expand(t):
    x = L(t, 2.); y = x.expand(3); y.sum().backward(); return x.grad
@sc
def ts_expand_inplace_error(t):
    x = L(t, 2.); y = (x * 1).expand(3); y.add_(1)
@sc
def ts_unsqueeze_view_grad(t):
    x = L(t); y = x.unsqueeze(0); (y * t.tensor([[1., 2.]])).sum().backward(); return x.grad
@sc
def ts_reshape_view_inplace(t):
    x = L(t, 1., 2., 3., 4.); h = x * 1; r = h.view(2, 2); r.mul_(2); h.sum().backward(); return x.grad
@sc
def ts_base_modified_view_used(t):
    x = L(t); h = x * 1; v = h[:1]; h.mul_(2); v.sum().backward(); return x.grad
@sc
def ts_version_error_message(t):
    x = L(t); h = x * 1; y = h.exp(); y.add_(1); y.sum().backward()
@sc
def ts_bool_sub(t):
    return t.tensor([True]) - t.tensor([False])
@sc
def ts_neg_bool(t):
    return -t.tensor([True])
@sc
def ts_int_div_grad_dtype(t):
    x = L(t); y = x / t.tensor([2, 4]); y.sum().backward(); return y.dtype, x.grad
@sc
def ts_zero_dim_grad(t):
    x = t.tensor(3., requires_grad=True); (x * x).backward(); return x.grad, x.grad.shape
@sc
def ts_grad_accumulate_zero_dim_broadcast(t):
    x = t.tensor(3., requires_grad=True); (x * t.ones(3)).sum().backward(); return x.grad
@sc
def ts_requires_grad_leaf_toggle_grad_kept(t):
    x = L(t); (x * 2).sum().backward(); x.requires_grad_(False); return x.grad, x.requires_grad
@sc
def ts_is_leaf_no_rg_result(t):
    x = t.tensor([1.]); y = x * 2; return y.is_leaf, y.requires_grad
@sc
def ts_grad_fn_of_detached(t):
    x = L(t); return (x * 2).detach().grad_fn
@sc
def ts_output_nr(t):
    x = L(t); a, b = x.split(1); return a.output_nr if hasattr(a, "output_nr") else None, b.output_nr if hasattr(b, "output_nr") else None
@sc
def ts_inplace_on_leaf_view_in_no_grad(t):
    x = L(t)
    with t.no_grad():
        x[0] = 5.
    return x, x.requires_grad, x.is_leaf, x._version
@sc
def ts_inplace_requires_grad_after(t):
    x = t.tensor([1., 2.]); w = L(t); x.mul_(w); return x.requires_grad, x.is_leaf, type(x.grad_fn).__name__
@sc
def ts_grad_after_inplace_from_rg(t):
    x = t.tensor([1., 2.]); w = L(t); x.mul_(w); x.sum().backward(); return w.grad
@sc
def ts_new_tensor_from_rg(t):
    x = L(t); y = t.tensor(x.detach().numpy()); return y.requires_grad
@sc
def ts_zeros_like_rg(t):
    x = L(t); z = t.zeros_like(x); return z.requires_grad, z.dtype
@sc
def ts_ones_like_requires_grad_kw(t):
    x = L(t); z = t.ones_like(x, requires_grad=True); return z.requires_grad, z.is_leaf
@sc
def ts_pow_zero_grad(t):
    x = t.tensor([0., 1.], requires_grad=True); (x ** 0.5).sum().backward(); return x.grad
@sc
def ts_pow_zero_exponent2(t):
    x = t.tensor([0., 1.], requires_grad=True); (x ** 2).sum().backward(); return x.grad
@sc
def ts_abs_zero_grad(t):
    x = t.tensor([0., -1.], requires_grad=True); x.abs().sum().backward(); return x.grad
@sc
def ts_relu_zero_grad(t):
    x = t.tensor([0., -1., 2.], requires_grad=True); x.relu().sum().backward(); return x.grad
@sc
def ts_max_ties_grad(t):
    x = t.tensor([2., 2., 1.], requires_grad=True); x.max().backward(); return x.grad
@sc
def ts_max_dim_ties_grad(t):
    x = t.tensor([[2., 2., 1.]], requires_grad=True); v, i = x.max(1); v.sum().backward(); return x.grad, i
@sc
def ts_clamp_boundary_grad(t):
    x = t.tensor([0., 1., 2.], requires_grad=True); x.clamp(0., 1.).sum().backward(); return x.grad
@sc
def ts_where_grad(t):
    x = L(t); y = L(t, 3., 4.); t.where(x > 1, x, y).sum().backward(); return x.grad, y.grad
@sc
def ts_sqrt_zero(t):
    x = t.tensor([0.], requires_grad=True); x.sqrt().sum().backward(); return x.grad
@sc
def ts_std_single(t):
    x = t.tensor([1.], requires_grad=True); y = x.std(); y.backward(); return y, x.grad
@sc
def ts_norm_zero(t):
    x = t.zeros(3, requires_grad=True); x.norm().backward(); return x.grad
@sc
def ts_matmul_grad_shapes(t):
    a = t.ones(2, 3, requires_grad=True); b = t.ones(3, requires_grad=True); (a @ b).sum().backward(); return a.grad, b.grad
@sc
def ts_grad_setter_none_nonleaf(t):
    x = L(t); h = x * 2; h.grad = None; return "ok"
@sc
def ts_requires_grad_true_on_nonleaf_ok(t):
    x = L(t); h = x * 2; h.requires_grad = True; return h.requires_grad
@sc
def ts_leaf_set_requires_grad_false_after_use(t):
    x = L(t); y = x * 2; x.requires_grad = False; y.sum().backward(); return x.grad
@sc
def ts_in_place_on_input_of_mul_by_scalar(t):
    x = L(t); h = x * 1; y = h * 2; h.add_(1); y.sum().backward(); return x.grad
@sc
def ts_in_place_on_input_of_add(t):
    x = L(t); h = x * 1; y = h + h; h.add_(1); y.sum().backward(); return x.grad
@sc
def ts_in_place_on_input_of_div_den(t):
    x = L(t); h = x * 1; y = 1 / h; h.add_(1); y.sum().backward()
@sc
def ts_in_place_on_input_of_sum(t):
    x = L(t); h = x * 1; y = h.sum(); h.add_(1); y.backward(); return x.grad
@sc
def ts_in_place_on_input_of_sin(t):
    x = L(t); h = x * 1; y = h.sin(); h.add_(1); y.sum().backward()
@sc
def ts_in_place_on_input_of_relu(t):
    x = L(t); h = x * 1; y = h.relu(); h.add_(1); y.sum().backward(); return x.grad
@sc
def ts_in_place_tanh_output(t):
    x = L(t); y = x.tanh(); y.add_(1); y.sum().backward()
@sc
def ts_inplace_relu_(t):
    x = L(t, -1., 2.); h = x * 1; h.relu_(); h.sum().backward(); return x.grad
@sc
def ts_inplace_exp_(t):
    x = L(t); h = x * 1; h.exp_(); h.sum().backward(); return x.grad
@sc
def ts_inplace_twice_version(t):
    x = L(t); h = x * 1; h.mul_(2); h.mul_(3); h.sum().backward(); return x.grad, h._version
@sc
def ts_index_grad_repeated(t):
    x = L(t, 1., 2., 3.); x[t.tensor([0, 0, 2])].sum().backward(); return x.grad
@sc
def ts_bool_mask_grad(t):
    x = L(t, 1., 2., 3.); x[x > 1].sum().backward(); return x.grad
@sc
def ts_detach_then_requires_grad(t):
    x = L(t); d = x.detach().requires_grad_(); (d * 2).sum().backward(); return d.grad, x.grad
