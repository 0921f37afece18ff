from harness import sc

def F(t): return t.autograd.functional
def D(t, *v): return t.tensor(list(v), dtype=t.float64)
def M(t): return t.tensor([[1., 2.], [3., 4.]], dtype=t.float64)

def f_sq(x): return x ** 2
def f_sum3(x): return (x ** 3).sum()
def f_two(x, y): return x * y + y.exp()
def f_tuple_out(x): return (x.sin(), x.cos() * 2)

@sc
def jac_single(t): return F(t).jacobian(f_sq, D(t, 1., 2.))
@sc
def jac_tuple_in(t): return F(t).jacobian(f_two, (D(t, 1., 2.), D(t, 3., 4.)))
@sc
def jac_tuple_out(t): return F(t).jacobian(f_tuple_out, D(t, 1., 2.))
@sc
def jac_tuple_in_out(t): return F(t).jacobian(lambda x, y: (x * y, x + y), (D(t, 1., 2.), D(t, 3., 4.)))
@sc
def jac_one_tuple(t): return F(t).jacobian(f_sq, (D(t, 1., 2.),))
@sc
def jac_scalar_in_out(t): return F(t).jacobian(lambda x: x * x, t.tensor(3., dtype=t.float64))
@sc
def jac_matrix(t): return F(t).jacobian(lambda x: x @ x, M(t))
@sc
def jac_create_graph(t):
    j = F(t).jacobian(f_sq, D(t, 1., 2.), create_graph=True)
    return j
@sc
def jac_create_graph_rg_input(t):
    x = D(t, 1., 2.).requires_grad_()
    j = F(t).jacobian(f_sq, x, create_graph=True)
    j.sum().backward()
    return j, x.grad
@sc
def jac_indep_output(t): return F(t).jacobian(lambda x: t.ones(2, dtype=t.float64), D(t, 1., 2.))
@sc
def jac_indep_output_strict(t): return F(t).jacobian(lambda x: t.ones(2, dtype=t.float64), D(t, 1., 2.), strict=True)
@sc
def jac_indep_input_strict(t): return F(t).jacobian(lambda x, y: x * 2, (D(t, 1., 2.), D(t, 3.)), strict=True)
@sc
def jac_indep_input(t): return F(t).jacobian(lambda x, y: x * 2, (D(t, 1., 2.), D(t, 3.)))
@sc
def jac_strict_vectorize(t): return F(t).jacobian(f_sq, D(t, 1., 2.), strict=True, vectorize=True)
@sc
def jac_vectorize(t): return F(t).jacobian(f_two, (D(t, 1., 2.), D(t, 3., 4.)), vectorize=True)
@sc
def jac_forward_mode_no_vectorize(t): return F(t).jacobian(f_sq, D(t, 1., 2.), strategy="forward-mode")
@sc
def jac_forward_mode(t): return F(t).jacobian(f_two, (D(t, 1., 2.), D(t, 3., 4.)), strategy="forward-mode", vectorize=True)
@sc
def jac_bad_strategy(t): return F(t).jacobian(f_sq, D(t, 1., 2.), strategy="foo")
@sc
def jac_forward_create_graph(t): return F(t).jacobian(f_sq, D(t, 1., 2.), strategy="forward-mode", vectorize=True, create_graph=True)
@sc
def jac_nontensor_output(t): return F(t).jacobian(lambda x: 3.0, D(t, 1., 2.))
@sc
def jac_nontensor_input(t): return F(t).jacobian(f_sq, 3.0)
@sc
def jac_list_input(t): return F(t).jacobian(f_two, [D(t, 1., 2.), D(t, 3., 4.)])
@sc
def jac_list_output(t): return F(t).jacobian(lambda x: [x * 2, x * 3], D(t, 1., 2.))
@sc
def jac_int_input(t): return F(t).jacobian(lambda x: x * 2, t.tensor([1, 2]))
@sc
def jac_float32(t): return F(t).jacobian(lambda x: x * 2, t.tensor([1., 2.]))
@sc
def jac_input_flags_unchanged(t):
    x = D(t, 1., 2.)
    F(t).jacobian(f_sq, x)
    return x.requires_grad, x.grad
@sc
def jac_output_empty(t): return F(t).jacobian(lambda x: x[:0], D(t, 1., 2.))
@sc
def jac_output_no_grad_fn_strict(t): return F(t).jacobian(lambda x: x.detach(), D(t, 1., 2.), strict=True)
@sc
def jac_output_input_itself(t): return F(t).jacobian(lambda x: x, D(t, 1., 2.))
@sc
def jac_output_input_itself_strict(t): return F(t).jacobian(lambda x: x, D(t, 1., 2.), strict=True)
@sc
def hess_basic(t): return F(t).hessian(f_sum3, D(t, 1., 2.))
@sc
def hess_tuple(t): return F(t).hessian(lambda x, y: (x * y).sum() + (x ** 2).sum(), (D(t, 1., 2.), D(t, 3., 4.)))
@sc
def hess_nonscalar(t): return F(t).hessian(f_sq, D(t, 1., 2.))
@sc
def hess_tuple_output(t): return F(t).hessian(lambda x: (x.sum(),), D(t, 1., 2.))
@sc
def hess_strict_linear(t): return F(t).hessian(lambda x: x.sum() * 3, D(t, 1., 2.), strict=True)
@sc
def hess_linear(t): return F(t).hessian(lambda x: x.sum() * 3, D(t, 1., 2.))
@sc
def hess_create_graph(t): return F(t).hessian(f_sum3, D(t, 1., 2.), create_graph=True)
@sc
def hess_vectorize(t): return F(t).hessian(f_sum3, D(t, 1., 2.), vectorize=True)
@sc
def hess_outer_fwd(t): return F(t).hessian(f_sum3, D(t, 1., 2.), vectorize=True, outer_jacobian_strategy="forward-mode")
@sc
def hess_outer_fwd_novec(t): return F(t).hessian(f_sum3, D(t, 1., 2.), outer_jacobian_strategy="forward-mode")
@sc
def hess_bad_outer(t): return F(t).hessian(f_sum3, D(t, 1., 2.), outer_jacobian_strategy="foo")
@sc
def hess_strict_vectorize(t): return F(t).hessian(f_sum3, D(t, 1., 2.), strict=True, vectorize=True)
@sc
def hess_scalar_in(t): return F(t).hessian(lambda x: x ** 3, t.tensor(2., dtype=t.float64))
@sc
def hess_nontensor_out(t): return F(t).hessian(lambda x: 1.0, D(t, 1., 2.))
@sc
def hess_one_elem_1d_output(t): return F(t).hessian(lambda x: (x ** 3).sum().reshape(1), D(t, 1., 2.))
@sc
def vjp_basic(t): return F(t).vjp(f_sq, D(t, 1., 2.), D(t, 1., 1.))
@sc
def vjp_no_v_scalar(t): return F(t).vjp(f_sum3, D(t, 1., 2.))
@sc
def vjp_no_v_nonscalar(t): return F(t).vjp(f_sq, D(t, 1., 2.))
@sc
def vjp_one_elem_no_v(t): return F(t).vjp(lambda x: x * 2, D(t, 1.))
@sc
def vjp_v_wrong_shape(t): return F(t).vjp(f_sq, D(t, 1., 2.), D(t, 1., 1., 1.))
@sc
def vjp_v_wrong_len(t): return F(t).vjp(f_tuple_out, D(t, 1., 2.), (D(t, 1., 1.),))
@sc
def vjp_v_tuple_for_single(t): return F(t).vjp(f_sq, D(t, 1., 2.), (D(t, 1., 1.), D(t, 1., 1.)))
@sc
def vjp_v_single_in_tuple(t): return F(t).vjp(f_sq, D(t, 1., 2.), (D(t, 1., 1.),))
@sc
def vjp_tuple(t): return F(t).vjp(f_tuple_out, D(t, 1., 2.), (D(t, 1., 1.), D(t, 2., 2.)))
@sc
def vjp_tuple_inputs(t): return F(t).vjp(f_two, (D(t, 1., 2.), D(t, 3., 4.)), D(t, 1., 1.))
@sc
def vjp_strict_indep(t): return F(t).vjp(lambda x: t.ones(2, dtype=t.float64), D(t, 1., 2.), D(t, 1., 1.), strict=True)
@sc
def vjp_strict_unused_input(t): return F(t).vjp(lambda x, y: x * 2, (D(t, 1., 2.), D(t, 3.)), D(t, 1., 1.), strict=True)
@sc
def vjp_unused_input(t): return F(t).vjp(lambda x, y: x * 2, (D(t, 1., 2.), D(t, 3.)), D(t, 1., 1.))
@sc
def vjp_create_graph(t): return F(t).vjp(f_sq, D(t, 1., 2.), D(t, 1., 1.), create_graph=True)
@sc
def vjp_create_graph_v_rg(t):
    v = D(t, 1., 1.).requires_grad_()
    o, g = F(t).vjp(f_sq, D(t, 1., 2.), v, create_graph=True)
    return o, g
@sc
def vjp_strict_create_graph(t): return F(t).vjp(f_sq, D(t, 1., 2.), D(t, 1., 1.), create_graph=True, strict=True)
@sc
def vjp_strict_create_graph_linear(t): return F(t).vjp(lambda x: x * 2, D(t, 1., 2.), D(t, 1., 1.), create_graph=True, strict=True)
@sc
def vjp_nontensor_out(t): return F(t).vjp(lambda x: 2.0, D(t, 1., 2.))
@sc
def vjp_nontensor_v(t): return F(t).vjp(f_sq, D(t, 1., 2.), [1., 1.])
@sc
def vjp_v_none_explicit(t): return F(t).vjp(f_sum3, D(t, 1., 2.), None)
@sc
def vjp_list_inputs(t): return F(t).vjp(f_two, [D(t, 1., 2.), D(t, 3., 4.)], D(t, 1., 1.))
@sc
def vjp_output_detached(t): return F(t).vjp(lambda x: x.detach() * 2, D(t, 1., 2.), D(t, 1., 1.))
@sc
def jvp_basic(t): return F(t).jvp(f_sq, D(t, 1., 2.), D(t, 1., 0.))
@sc
def jvp_no_v_scalar_input(t): return F(t).jvp(lambda x: x * 3, t.tensor(2., dtype=t.float64))
@sc
def jvp_no_v_nonscalar(t): return F(t).jvp(f_sq, D(t, 1., 2.))
@sc
def jvp_one_elem_no_v(t): return F(t).jvp(f_sq, D(t, 2.))
@sc
def jvp_v_wrong_shape(t): return F(t).jvp(f_sq, D(t, 1., 2.), D(t, 1.))
@sc
def jvp_tuple(t): return F(t).jvp(f_two, (D(t, 1., 2.), D(t, 3., 4.)), (D(t, 1., 0.), D(t, 0., 1.)))
@sc
def jvp_tuple_out(t): return F(t).jvp(f_tuple_out, D(t, 1., 2.), D(t, 1., 1.))
@sc
def jvp_strict_indep(t): return F(t).jvp(lambda x: t.ones(2, dtype=t.float64), D(t, 1., 2.), D(t, 1., 1.), strict=True)
@sc
def jvp_indep(t): return F(t).jvp(lambda x: t.ones(2, dtype=t.float64), D(t, 1., 2.), D(t, 1., 1.))
@sc
def jvp_strict_unused(t): return F(t).jvp(lambda x, y: x * 2, (D(t, 1., 2.), D(t, 3.)), (D(t, 1., 1.), D(t, 1.)), strict=True)
@sc
def jvp_create_graph(t): return F(t).jvp(f_sq, D(t, 1., 2.), D(t, 1., 0.), create_graph=True)
@sc
def jvp_strict_create_graph(t): return F(t).jvp(f_sq, D(t, 1., 2.), D(t, 1., 0.), create_graph=True, strict=True)
@sc
def jvp_v_len(t): return F(t).jvp(f_two, (D(t, 1., 2.), D(t, 3., 4.)), (D(t, 1., 0.),))
@sc
def hvp_basic(t): return F(t).hvp(f_sum3, D(t, 1., 2.), D(t, 1., 1.))
@sc
def hvp_nonscalar(t): return F(t).hvp(f_sq, D(t, 1., 2.), D(t, 1., 1.))
@sc
def hvp_no_v(t): return F(t).hvp(f_sum3, D(t, 1., 2.))
@sc
def hvp_no_v_scalar(t): return F(t).hvp(lambda x: x ** 3, t.tensor(2., dtype=t.float64))
@sc
def hvp_tuple(t): return F(t).hvp(lambda x, y: (x * y).sum() ** 2, (D(t, 1., 2.), D(t, 3., 4.)), (D(t, 1., 0.), D(t, 0., 1.)))
@sc
def hvp_strict_linear(t): return F(t).hvp(lambda x: x.sum(), D(t, 1., 2.), D(t, 1., 1.), strict=True)
@sc
def hvp_linear(t): return F(t).hvp(lambda x: x.sum(), D(t, 1., 2.), D(t, 1., 1.))
@sc
def hvp_create_graph(t): return F(t).hvp(f_sum3, D(t, 1., 2.), D(t, 1., 1.), create_graph=True)
@sc
def hvp_v_shape(t): return F(t).hvp(f_sum3, D(t, 1., 2.), D(t, 1.))
@sc
def hvp_tuple_output(t): return F(t).hvp(lambda x: (x.sum() ** 2,), D(t, 1., 2.), D(t, 1., 1.))
@sc
def vhp_basic(t): return F(t).vhp(f_sum3, D(t, 1., 2.), D(t, 1., 1.))
@sc
def vhp_strict_linear(t): return F(t).vhp(lambda x: x.sum(), D(t, 1., 2.), D(t, 1., 1.), strict=True)
@sc
def vhp_strict_const(t): return F(t).vhp(lambda x: t.tensor(1., dtype=t.float64), D(t, 1., 2.), D(t, 1., 1.), strict=True)
@sc
def vhp_create_graph(t): return F(t).vhp(f_sum3, D(t, 1., 2.), D(t, 1., 1.), create_graph=True)
@sc
def vhp_nonscalar(t): return F(t).vhp(f_sq, D(t, 1., 2.), D(t, 1., 1.))
@sc
def vhp_no_v(t): return F(t).vhp(f_sum3, D(t, 1., 2.))
@sc
def vhp_tuple(t): return F(t).vhp(lambda x, y: (x * y).sum() ** 2, (D(t, 1., 2.), D(t, 3., 4.)), (D(t, 1., 0.), D(t, 0., 1.)))
@sc
def vhp_constant(t): return F(t).vhp(lambda x: t.tensor(1., dtype=t.float64), D(t, 1., 2.), D(t, 1., 1.))
@sc
def func_inside_no_grad(t):
    with t.no_grad():
        return F(t).jacobian(f_sq, D(t, 1., 2.))
@sc
def func_vjp_inside_no_grad(t):
    with t.no_grad():
        return F(t).vjp(f_sq, D(t, 1., 2.), D(t, 1., 1.))
@sc
def func_hessian_inside_no_grad(t):
    with t.no_grad():
        return F(t).hessian(f_sum3, D(t, 1., 2.))
@sc
def func_jvp_float32(t): return F(t).jvp(lambda x: x * x, t.tensor([1., 2.]), t.tensor([1., 1.]))
@sc
def func_jac_grad_mode_restored(t):
    with t.no_grad():
        F(t).jacobian(f_sq, D(t, 1., 2.))
        return t.is_grad_enabled()
@sc
def jac_output_int(t): return F(t).jacobian(lambda x: (x * 2).long() if hasattr(x, "long") else x, D(t, 1., 2.))
@sc
def jac_vectorize_strict_err(t): return F(t).jacobian(f_sq, D(t, 1., 2.), vectorize=True, strict=True)
@sc
def jac_kw_names(t):
    return F(t).jacobian(func=f_sq, inputs=D(t, 1., 2.), create_graph=False, strict=False, vectorize=False, strategy="reverse-mode")
@sc
def vjp_kw_names(t): return F(t).vjp(func=f_sq, inputs=D(t, 1., 2.), v=D(t, 1., 1.), create_graph=False, strict=False)
@sc
def hvp_kw_names(t): return F(t).hvp(func=f_sum3, inputs=D(t, 1., 2.), v=D(t, 1., 1.), create_graph=False, strict=False)
@sc
def hess_kw_names(t): return F(t).hessian(func=f_sum3, inputs=D(t, 1., 2.), create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode")
@sc
def jac_2in_2d(t): return F(t).jacobian(lambda a, b: a @ b, (M(t), M(t)))
@sc
def jvp_strict_vs_nonstrict_linear(t): return F(t).jvp(lambda x: x * 2, D(t, 1., 2.), D(t, 1., 1.), strict=True)
@sc
def jvp_strict_linear_cg(t): return F(t).jvp(lambda x: x * 2, D(t, 1., 2.), D(t, 1., 1.), strict=True, create_graph=True)
@sc
def hess_create_graph_backward(t):
    x = D(t, 1., 2.).requires_grad_()
    h = F(t).hessian(f_sum3, x, create_graph=True)
    h.sum().backward()
    return h, x.grad
@sc
def vjp_output_dtype_mismatch_v(t): return F(t).vjp(f_sq, D(t, 1., 2.), t.tensor([1., 1.]))
@sc
def jac_fwd_tuple_tuple(t): return F(t).jacobian(lambda x, y: (x * y, x + y), (D(t, 1., 2.), D(t, 3., 4.)), strategy="forward-mode", vectorize=True)
@sc
def jac_fwd_single_tuple_out(t): return F(t).jacobian(lambda x: (x * 2, x * 3), D(t, 1., 2.), strategy="forward-mode", vectorize=True)
@sc
def jac_fwd_single_single(t): return F(t).jacobian(lambda x: x * 2, D(t, 1., 2.), strategy="forward-mode", vectorize=True)
@sc
def jac_fwd_one_tuple(t): return F(t).jacobian(lambda x: x * 2, (D(t, 1., 2.),), strategy="forward-mode", vectorize=True)
@sc
def hess_fwd_tuple(t): return F(t).hessian(lambda x, y: (x * y).sum() ** 2, (D(t, 1., 2.), D(t, 3., 4.)), vectorize=True, outer_jacobian_strategy="forward-mode")
@sc
def hess_fwd_one_tuple(t): return F(t).hessian(lambda x: (x ** 3).sum(), (D(t, 1., 2.),), vectorize=True, outer_jacobian_strategy="forward-mode")
@sc
def jac_vec_tuple_tuple(t): return F(t).jacobian(lambda x, y: (x * y, x + y), (D(t, 1., 2.), D(t, 3., 4.)), vectorize=True)
@sc
def hess_vec_tuple(t): return F(t).hessian(lambda x, y: (x * y).sum() ** 2, (D(t, 1., 2.), D(t, 3., 4.)), vectorize=True)
