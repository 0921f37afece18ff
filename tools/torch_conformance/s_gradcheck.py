from harness import sc
import numpy as np


def D(t, *v, rg=True):
    return t.tensor(list(v), dtype=t.float64, requires_grad=rg)


def gc(t, f, inputs, **kw):
    return t.autograd.gradcheck(f, inputs, **kw)


def ggc(t, f, inputs, **kw):
    return t.autograd.gradgradcheck(f, inputs, **kw)


@sc
def gc_basic(t): return gc(t, lambda x: x.sin(), (D(t, 1., 2.),))
@sc
def gc_single_tensor_input(t): return gc(t, lambda x: x.exp(), D(t, 1., 2.))
@sc
def gc_list_input(t): return gc(t, lambda x, y: x * y, [D(t, 1., 2.), D(t, 3., 4.)])
@sc
def gc_eps(t): return gc(t, lambda x: x ** 3, (D(t, 1., 2.),), eps=1e-3)
@sc
def gc_eps_big_fails(t): return gc(t, lambda x: x ** 3, (D(t, 1., 2.),), eps=0.5, raise_exception=False)
@sc
def gc_eps_big_raises(t): return gc(t, lambda x: x ** 3, (D(t, 1., 2.),), eps=0.5)
@sc
def gc_atol_loose(t): return gc(t, lambda x: x ** 3, (D(t, 1., 2.),), eps=0.1, atol=1.0)
@sc
def gc_rtol_loose(t): return gc(t, lambda x: x ** 3, (D(t, 1., 2.),), eps=0.1, rtol=0.5)
@sc
def gc_float32_warns(t): return gc(t, lambda x: x * 2, (t.tensor([1., 2.], requires_grad=True),), atol=1e-2, rtol=1e-2)
@sc
def gc_float32_nonrg_no_warn(t): return gc(t, lambda x, y: x * y, (D(t, 1., 2.), t.tensor([1., 2.])))
@sc
def gc_none_require_grad(t): return gc(t, lambda x: x * 2, (D(t, 1., rg=False),))
@sc
def gc_nontensor_arg(t): return gc(t, lambda x, k: x * k, (D(t, 1., 2.), 3.0))
@sc
def gc_nontensor_arg_int(t): return gc(t, lambda x, k: x ** k, (D(t, 1., 2.), 2))
@sc
def gc_tuple_output(t): return gc(t, lambda x: (x.sin(), x.cos()), (D(t, 1., 2.),))
@sc
def gc_list_output(t): return gc(t, lambda x: [x.sin(), x * 2], (D(t, 1., 2.),))
@sc
def gc_output_nontensor_mixed(t): return gc(t, lambda x: (x.sin(), 3), (D(t, 1., 2.),))
@sc
def gc_output_float(t): return gc(t, lambda x: 3.0, (D(t, 1., 2.),))
@sc
def gc_output_none(t): return gc(t, lambda x: None, (D(t, 1., 2.),))
@sc
def gc_output_not_requiring_grad(t): return gc(t, lambda x: x.detach() * 2, (D(t, 1., 2.),), raise_exception=False)
@sc
def gc_output_not_requiring_grad_raise(t): return gc(t, lambda x: x.detach() * 2, (D(t, 1., 2.),))
@sc
def gc_output_const_detached(t): return gc(t, lambda x: t.ones(2, dtype=t.float64), (D(t, 1., 2.),))
@sc
def gc_output_int(t): return gc(t, lambda x: (x > 1), (D(t, 1., 2.),))
@sc
def gc_wrong_backward(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return g * 3
    return gc(t, F.apply, (D(t, 1., 2.),), raise_exception=False)
@sc
def gc_wrong_backward_raises(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return g * 3
    return gc(t, F.apply, (D(t, 1., 2.),))
@sc
def gc_error_is_runtimeerror(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return g * 3
    try:
        gc(t, F.apply, (D(t, 1., 2.),))
    except RuntimeError as e:
        return (type(e).__name__, isinstance(e, t.autograd.GradcheckError), "Jacobian mismatch for output 0 with respect to input 0" in str(e))
@sc
def gc_fast_mode(t): return gc(t, lambda x: x.sin() * x, (D(t, 1., 2., 3.),), fast_mode=True)
@sc
def gc_fast_mode_fail(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return g * 3
    return gc(t, F.apply, (D(t, 1., 2.),), fast_mode=True, raise_exception=False)
@sc
def gc_check_undefined_grad_false(t): return gc(t, lambda x: x.sin(), (D(t, 1., 2.),), check_undefined_grad=False)
@sc
def gc_check_grad_dtypes(t): return gc(t, lambda x: x.sin(), (D(t, 1., 2.),), check_grad_dtypes=True)
@sc
def gc_check_grad_dtypes_wrong(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return (g * 2).float()
    return gc(t, F.apply, (D(t, 1., 2.),), check_grad_dtypes=True, raise_exception=False)
@sc
def gc_check_batched_grad(t): return gc(t, lambda x: x.sin(), (D(t, 1., 2.),), check_batched_grad=True)
@sc
def gc_check_forward_ad(t): return gc(t, lambda x: x.sin() * x, (D(t, 1., 2.),), check_forward_ad=True)
@sc
def gc_check_backward_ad_false(t): return gc(t, lambda x: x.sin(), (D(t, 1., 2.),), check_backward_ad=False, check_forward_ad=True)
@sc
def gc_both_false(t): return gc(t, lambda x: x.sin(), (D(t, 1., 2.),), check_backward_ad=False, check_forward_ad=False, check_undefined_grad=False)
@sc
def gc_nondet_tol(t): return gc(t, lambda x: x.sin(), (D(t, 1., 2.),), nondet_tol=1e-10)
@sc
def gc_nondet_fails(t):
    cnt = [0]
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g):
            cnt[0] += 1
            return g * 2 + (1e-7 if cnt[0] % 2 else 0)
    return gc(t, F.apply, (D(t, 1., 2.),), raise_exception=False)
@sc
def gc_nondet_tol_ok(t):
    cnt = [0]
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g):
            cnt[0] += 1
            return g * 2 + (1e-7 if cnt[0] % 2 else 0)
    return gc(t, F.apply, (D(t, 1., 2.),), nondet_tol=1e-5)
@sc
def gc_undefined_grad_bad(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return t.ones_like(g)  # ignores g
    return gc(t, F.apply, (D(t, 1., 2.),), raise_exception=False, atol=10, rtol=10)
@sc
def gc_masked_kw(t): return gc(t, lambda x: x.sin(), (D(t, 1., 2.),), masked=False)
@sc
def gc_positional_eps_error(t): return t.autograd.gradcheck(lambda x: x.sin(), (D(t, 1., 2.),), 1e-6)
@sc
def gc_2d(t): return gc(t, lambda x: (x @ x).sum(1), (t.tensor([[1., 2.], [3., 4.]], dtype=t.float64, requires_grad=True),))
@sc
def gc_zero_dim(t): return gc(t, lambda x: x * x, (t.tensor(2., dtype=t.float64, requires_grad=True),))
@sc
def gc_empty_input(t): return gc(t, lambda x: x * 2, (t.zeros(0, dtype=t.float64, requires_grad=True),))
@sc
def gc_two_inputs_one_unused(t): return gc(t, lambda x, y: x * 2, (D(t, 1., 2.), D(t, 3., 4.)))
@sc
def gc_noncontig_input(t):
    x = t.tensor([[1., 2.], [3., 4.]], dtype=t.float64).t().requires_grad_()
    return gc(t, lambda x: x.exp(), (x,))
@sc
def gc_return_input(t): return gc(t, lambda x: x, (D(t, 1., 2.),))
@sc
def gc_return_view(t): return gc(t, lambda x: x[1:], (D(t, 1., 2., 3.),))
@sc
def ggc_basic(t): return ggc(t, lambda x: x.sin() * x, (D(t, 1., 2.),))
@sc
def ggc_grad_outputs(t): return ggc(t, lambda x: x ** 3, (D(t, 1., 2.),), (D(t, 1., 1.),))
@sc
def ggc_grad_outputs_tensor(t): return ggc(t, lambda x: x ** 3, (D(t, 1., 2.),), D(t, 1., 1.))
@sc
def ggc_linear(t): return ggc(t, lambda x: x * 3, (D(t, 1., 2.),))
@sc
def ggc_fail(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2
        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x.detach()
    return ggc(t, F.apply, (D(t, 1., 2.),), raise_exception=False)
@sc
def ggc_fail_raise(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2
        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x * 1.5
    return ggc(t, F.apply, (D(t, 1., 2.),))
@sc
def ggc_gen_noncontig(t): return ggc(t, lambda x: x.exp(), (D(t, 1., 2.),), gen_non_contig_grad_outputs=True)
@sc
def ggc_check_fwd_over_rev(t): return ggc(t, lambda x: x.exp() * x, (D(t, 1., 2.),), check_fwd_over_rev=True)
@sc
def ggc_rev_false(t): return ggc(t, lambda x: x.exp(), (D(t, 1., 2.),), check_rev_over_rev=False)
@sc
def ggc_float32(t): return ggc(t, lambda x: x * x, (t.tensor([1., 2.], requires_grad=True),), atol=1e-2, rtol=1e-2)
@sc
def ggc_tuple_outputs(t): return ggc(t, lambda x: (x.sin(), x * x), (D(t, 1., 2.),))
@sc
def ggc_eps_atol(t): return ggc(t, lambda x: x ** 4, (D(t, 1., 2.),), eps=1e-4, atol=1e-3)
@sc
def gc_fn_raises(t):
    def f(x): raise ValueError("boom")
    return gc(t, f, (D(t, 1.),))
@sc
def gc_complex_warn_2inputs(t): return gc(t, lambda x, y: x * y, (t.tensor([1.], requires_grad=True), D(t, 2.)), atol=1e-2, rtol=1e-2)
@sc
def gc_raise_false_returns(t):
    return gc(t, lambda x: x.detach() + x * 0 + x.detach() ** 2, (D(t, 1., 2.),), raise_exception=False)
@sc
def gc_attr(t): return hasattr(t.autograd.gradcheck, "__call__") and issubclass(t.autograd.GradcheckError, RuntimeError)
@sc
def gc_import_from_module(t):
    import importlib
    m = importlib.import_module(t.__name__ + ".autograd.gradcheck")
    return (hasattr(m, "gradcheck"), hasattr(m, "gradgradcheck"), hasattr(m, "GradcheckError"))
@sc
def gc_output_int_dtype(t): return gc(t, lambda x: x.long() if hasattr(x, 'long') else x, (D(t, 1., 2.),))
@sc
def gc_inplace_in_fn(t):
    def f(x):
        y = x.clone()
        y.mul_(2)
        return y
    return gc(t, f, (D(t, 1., 2.),))
@sc
def gc_batched_fail_custom(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return g * 2
    return gc(t, F.apply, (D(t, 1., 2.),), check_batched_grad=True)
@sc
def gc_mixed_outputs_nondiff_nonzero(t): return gc(t, lambda x: ((x * 2).detach(), x * 3), (D(t, 1., 2.),))
@sc
def gc_nondiff_input_first_mismatch(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, k, x): return x * 2 + k
        @staticmethod
        def backward(ctx, g): return None, g * 3
    return gc(t, F.apply, (t.ones(2, dtype=t.float64), D(t, 1., 2.)))
@sc
def gc_second_output_mismatch(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2, x * 3
        @staticmethod
        def backward(ctx, g, h): return g * 2 + h * 4
    return gc(t, F.apply, (D(t, 1., 2.),))
@sc
def gc_stride0_input(t): return gc(t, lambda x: x * 2, (t.ones(1, dtype=t.float64).expand(3).requires_grad_(),))
@sc
def gc_batched_requires_backward(t): return gc(t, lambda x: x * 2, (D(t, 1.),), check_batched_grad=True, check_backward_ad=False, check_forward_ad=True)
@sc
def ggc_undefined_requires_rev(t): return ggc(t, lambda x: x * 2, (D(t, 1.),), check_rev_over_rev=False, check_fwd_over_rev=True)
@sc
def ggc_batched_requires_rev(t): return ggc(t, lambda x: x * 2, (D(t, 1.),), check_rev_over_rev=False, check_fwd_over_rev=True, check_undefined_grad=False, check_batched_grad=True)
@sc
def gc_fast_mode_message(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return g * 3
    try:
        gc(t, F.apply, (D(t, 1., 2.),), fast_mode=True)
    except Exception as e:
        s = str(e); return s.split("\n")[0], "fast mode" in s, "The max per-element difference (slow mode) is: 1.0" in s
@sc
def gc_ignores_grad_output(t):
    class G(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return t.ones_like(g) * 2
    return gc(t, G.apply, (D(t, 3.),))
@sc
def gc_ignores_grad_output_two_outputs(t):
    class G(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2, x * 3
        @staticmethod
        def backward(ctx, g, h): return g * 2 + h * 3 + 0 * t.ones_like(g)
    return gc(t, G.apply, (D(t, 3.),))
@sc
def gc_int_output_skipped(t): return gc(t, lambda x: (x * 2, (x > 1).long() if hasattr(x, "long") else None), (D(t, 1., 2.),))
@sc
def gc_detached_zero_output(t): return gc(t, lambda x: (x * 0).detach(), (D(t, 1., 2.),))
@sc
def gc_undefined_warns(t):
    class G(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2, x * 3
        @staticmethod
        def backward(ctx, g, h): return g * 2 + h * 3 + 1
    return gc(t, G.apply, (D(t, 3.),), raise_exception=False)
@sc
def gc_wrong_grad_dtype_check(t):
    class G(t.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return (g * 2).float()
    return gc(t, G.apply, (D(t, 3.),), check_grad_dtypes=True)
@sc
def gc_float32_input_nondouble_warning_idx(t):
    return gc(t, lambda a, x: x * a, (D(t, 1.), t.tensor([2.], requires_grad=True)), atol=1e-2, rtol=1e-2)
