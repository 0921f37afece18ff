from harness import sc

def L(t, *v): return t.tensor(list(v) or [1., 2.], requires_grad=True)

def mk(t, fwd, bwd, setup=None, **attrs):
    ns = {"forward": staticmethod(fwd), "backward": staticmethod(bwd)}
    if setup is not None:
        ns["setup_context"] = staticmethod(setup)
    ns.update(attrs)
    return type("MyFn", (t.autograd.Function,), ns)

@sc
def fn_needs_input_grad(t):
    seen = []
    def f(ctx, a, b, k): seen.append(ctx.needs_input_grad); return a * b * k
    def b(ctx, g): return g, g, None
    F = mk(t, f, b); F.apply(L(t), t.tensor([1., 2.]), 2.0); return seen
@sc
def fn_needs_input_grad_in_backward(t):
    seen = []
    def f(ctx, a, b): return a * b
    def b(ctx, g): seen.append(ctx.needs_input_grad); return g, g
    F = mk(t, f, b); F.apply(L(t), L(t)).sum().backward(); return seen
@sc
def fn_mark_non_diff(t):
    def f(ctx, a):
        o = a * 2; idx = a > 1; ctx.mark_non_differentiable(idx); return o, idx
    def b(ctx, g, gi): return g * 2
    F = mk(t, f, b); o, i = F.apply(L(t)); return o, i
@sc
def fn_mark_non_diff_float(t):
    def f(ctx, a):
        o = a * 2; o2 = a * 3; ctx.mark_non_differentiable(o2); return o, o2
    def b(ctx, g, g2): return g * 2 + g2
    F = mk(t, f, b); o, o2 = F.apply(L(t)); (o + o2).sum().backward()
    return o2.requires_grad, o2.grad_fn is None
@sc
def fn_mark_non_diff_backward_grad(t):
    seen = []
    def f(ctx, a):
        o = a * 2; o2 = a * 3; ctx.mark_non_differentiable(o2); return o, o2
    def b(ctx, g, g2): seen.append(g2); return g * 2
    F = mk(t, f, b); x = L(t); o, o2 = F.apply(x); o.sum().backward(); return seen, x.grad
@sc
def fn_mark_non_diff_only_output_backward(t):
    def f(ctx, a):
        o = a * 2; ctx.mark_non_differentiable(o); return o
    def b(ctx, g): return g
    F = mk(t, f, b); o = F.apply(L(t)); o.sum().backward()
@sc
def fn_set_materialize_false(t):
    seen = []
    def f(ctx, a):
        ctx.set_materialize_grads(False); return a * 2, a * 3
    def b(ctx, g1, g2): seen.append((g1 is None, g2 is None)); return g1 * 2 if g1 is not None else None
    F = mk(t, f, b); x = L(t); o1, o2 = F.apply(x); o1.sum().backward(); return seen, x.grad
@sc
def fn_materialize_default_zero(t):
    seen = []
    def f(ctx, a): return a * 2, a * 3
    def b(ctx, g1, g2): seen.append(g2.clone()); return g1 * 2 + g2 * 3
    F = mk(t, f, b); x = L(t); o1, o2 = F.apply(x); o1.sum().backward(); return seen, x.grad
@sc
def fn_backward_returns_all_none(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return None
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_backward_returns_none_grad_api(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return None
    F = mk(t, f, b); x = L(t); return t.autograd.grad(F.apply(x).sum(), x, allow_unused=True)
@sc
def fn_backward_returns_none_grad_api_strict(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return None
    F = mk(t, f, b); x = L(t); return t.autograd.grad(F.apply(x).sum(), x)
@sc
def fn_save_inputs(t):
    def f(ctx, a, b): ctx.save_for_backward(a, b); return a * b
    def b(ctx, g): a, b = ctx.saved_tensors; return g * b, g * a
    F = mk(t, f, b); x = L(t); y = L(t, 3., 4.); F.apply(x, y).sum().backward(); return x.grad, y.grad
@sc
def fn_save_output(t):
    def f(ctx, a): o = a.exp(); ctx.save_for_backward(o); return o
    def b(ctx, g): o, = ctx.saved_tensors; return g * o
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_save_none(t):
    def f(ctx, a): ctx.save_for_backward(a, None); return a * 2
    def b(ctx, g): a, n = ctx.saved_tensors; return g * 2 if n is None else None
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_saved_twice(t):
    def f(ctx, a): ctx.save_for_backward(a); return a * 2
    def b(ctx, g): a1, = ctx.saved_tensors; a2, = ctx.saved_tensors; return g * 2
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_saved_after_free(t):
    box = []
    def f(ctx, a): ctx.save_for_backward(a); box.append(ctx); return a * 2
    def b(ctx, g): return g * 2
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return box[0].saved_tensors
@sc
def fn_saved_after_backward_retain(t):
    box = []
    def f(ctx, a): ctx.save_for_backward(a); box.append(ctx); return a * 2
    def b(ctx, g): return g * 2
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(retain_graph=True); return box[0].saved_tensors
@sc
def fn_saved_tensors_from_grad_fn(t):
    def f(ctx, a): ctx.save_for_backward(a); return a * 2
    def b(ctx, g): return g * 2
    F = mk(t, f, b); x = L(t); y = F.apply(x); s = y.grad_fn.saved_tensors; return s, s[0] is x
@sc
def fn_saved_in_forward_access(t):
    def f(ctx, a): ctx.save_for_backward(a); return ctx.saved_tensors[0] * 2
    def b(ctx, g): return g * 2
    F = mk(t, f, b); return F.apply(L(t))
@sc
def fn_wrong_num_grads_more(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return g, g
    F = mk(t, f, b); F.apply(L(t)).sum().backward()
@sc
def fn_wrong_num_grads_more_none(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return g * 2, None, None
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_wrong_num_grads_less(t):
    def f(ctx, a, b): return a * b
    def b(ctx, g): return g
    F = mk(t, f, b); F.apply(L(t), L(t)).sum().backward()
@sc
def fn_wrong_num_grads_less_nonrg(t):
    def f(ctx, a, b): return a * b
    def b(ctx, g): return g
    F = mk(t, f, b); x = L(t); F.apply(x, t.tensor([1., 2.])).sum().backward()
@sc
def fn_wrong_shape_grad(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return t.ones(3)
    F = mk(t, f, b); F.apply(L(t)).sum().backward()
@sc
def fn_broadcastable_shape_grad(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return t.ones(1)
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_expandable_shape_grad(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return t.ones(3, 2)
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_wrong_dtype_grad(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return g.double()
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_grad_for_nonrg_input(t):
    def f(ctx, a, b): return a * b
    def b(ctx, g): return g, g
    F = mk(t, f, b); x = L(t); F.apply(x, t.tensor([1., 2.])).sum().backward(); return x.grad
@sc
def fn_grad_for_nontensor_input(t):
    def f(ctx, a, k): return a * k
    def b(ctx, g): return g, g
    F = mk(t, f, b); x = L(t); F.apply(x, 2.0).sum().backward()
@sc
def fn_nontensor_grad_returned(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return 1.0
    F = mk(t, f, b); F.apply(L(t)).sum().backward()
@sc
def fn_once_diff(t):
    @t.autograd.function.once_differentiable
    def b(ctx, g): return g * 2
    def f(ctx, a): return a * 2
    F = mk(t, f, b); x = L(t); g, = t.autograd.grad(F.apply(x).sum(), x, create_graph=True)
    return g
@sc
def fn_once_diff_double_backward(t):
    @t.autograd.function.once_differentiable
    def b(ctx, g):
        a, = ctx.saved_tensors; return g * 2 * a
    def f(ctx, a): ctx.save_for_backward(a); return a * a
    F = mk(t, f, b); x = L(t); g, = t.autograd.grad(F.apply(x).sum(), x, create_graph=True)
    g.sum().backward()
@sc
def fn_apply_kwargs(t):
    def f(ctx, a, k=2.0): return a * k
    def b(ctx, g): return g * 2, None
    F = mk(t, f, b); return F.apply(L(t), k=3.0)
@sc
def fn_nontensor_output(t):
    def f(ctx, a): return a * 2, 5
    def b(ctx, g, g2): return g * 2
    F = mk(t, f, b); o, k = F.apply(L(t)); return o, k
@sc
def fn_nontensor_output_backward(t):
    def f(ctx, a): return a * 2, 5
    def b(ctx, g, g2): return g * 2
    F = mk(t, f, b); x = L(t); o, k = F.apply(x); o.sum().backward(); return x.grad
@sc
def fn_return_input(t):
    def f(ctx, a): return a
    def b(ctx, g): return g * 3
    F = mk(t, f, b); x = L(t); y = F.apply(x); y.sum().backward()
    return y is x, y.is_leaf, y.grad_fn is None, x.grad
@sc
def fn_return_input_name(t):
    def f(ctx, a): return a
    def b(ctx, g): return g * 3
    F = mk(t, f, b); x = L(t); y = F.apply(x); return type(y.grad_fn).__name__
@sc
def fn_return_input_nonrg(t):
    def f(ctx, a, b): return b
    def b(ctx, g): return None, g
    F = mk(t, f, b); x = L(t); z = t.tensor([1., 2.]); y = F.apply(x, z)
    return y is z, y.requires_grad
@sc
def fn_return_input_view(t):
    def f(ctx, a): return a.view(2)
    def b(ctx, g): return g * 3
    F = mk(t, f, b); x = L(t); y = F.apply(x); y.sum().backward(); return x.grad, y.is_leaf
@sc
def fn_generate_vmap_rule_attr(t):
    return t.autograd.Function.generate_vmap_rule
@sc
def fn_vmap_staticmethod_attr(t):
    return hasattr(t.autograd.Function, "vmap"), hasattr(t.autograd.Function, "jvp"), hasattr(t.autograd.Function, "setup_context")
@sc
def fn_setup_context(t):
    def f(a, k): return a * k
    def s(ctx, inputs, output): a, k = inputs; ctx.k = k; ctx.save_for_backward(a)
    def b(ctx, g): return g * ctx.k, None
    F = mk(t, f, b, setup=s); x = L(t); F.apply(x, 3.0).sum().backward(); return x.grad
@sc
def fn_setup_context_output(t):
    seen = []
    def f(a): return a * 2
    def s(ctx, inputs, output): seen.append((type(inputs).__name__, len(inputs), output.requires_grad))
    def b(ctx, g): return g * 2
    F = mk(t, f, b, setup=s); x = L(t); F.apply(x); return seen
@sc
def fn_setup_context_needs_input_grad(t):
    seen = []
    def f(a, b): return a * b
    def s(ctx, inputs, output): seen.append(ctx.needs_input_grad)
    def b(ctx, g): return g, g
    F = mk(t, f, b, setup=s); F.apply(L(t), t.tensor([1., 2.])); return seen
@sc
def fn_setup_context_kwargs_apply(t):
    def f(a, k=2.0): return a * k
    def s(ctx, inputs, output): ctx.k = inputs[1]
    def b(ctx, g): return g * ctx.k, None
    F = mk(t, f, b, setup=s); return F.apply(L(t), k=3.0)
@sc
def fn_setup_context_tuple_output(t):
    seen = []
    def f(a): return a * 2, a * 3
    def s(ctx, inputs, output): seen.append((type(output).__name__, len(output)))
    def b(ctx, g1, g2): return g1 * 2 + g2 * 3
    F = mk(t, f, b, setup=s); x = L(t); o1, o2 = F.apply(x); (o1 + o2).sum().backward(); return seen, x.grad
@sc
def fn_forward_with_ctx_and_setup_context(t):
    def f(ctx, a): return a * 2
    def s(ctx, inputs, output): pass
    def b(ctx, g): return g * 2
    F = mk(t, f, b, setup=s); return F.apply(L(t))
@sc
def fn_no_backward_defined_torch(t):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2
    if t.__name__ == "symgrad":
        return "skip"
    x = L(t); F.apply(x).sum().backward()
@sc
def fn_output_requires_grad(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return g * 2
    F = mk(t, f, b); y = F.apply(L(t)); return y.requires_grad, y.is_leaf, y.grad_fn is None
@sc
def fn_output_no_rg_inputs(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return g * 2
    F = mk(t, f, b); y = F.apply(t.tensor([1., 2.])); return y.requires_grad, y.grad_fn is None
@sc
def fn_output_in_no_grad(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return g * 2
    F = mk(t, f, b)
    with t.no_grad():
        y = F.apply(L(t))
    return y.requires_grad, y.grad_fn is None
@sc
def fn_forward_runs_no_grad(t):
    seen = []
    def f(ctx, a): seen.append(t.is_grad_enabled()); return a * 2
    def b(ctx, g): seen.append(t.is_grad_enabled()); return g * 2
    F = mk(t, f, b); F.apply(L(t)).sum().backward(); return seen
@sc
def fn_backward_grad_mode_create_graph(t):
    seen = []
    def f(ctx, a): return a * 2
    def b(ctx, g): seen.append(t.is_grad_enabled()); return g * 2
    F = mk(t, f, b); x = L(t); t.autograd.grad(F.apply(x).sum(), x, create_graph=True); return seen
@sc
def fn_ctx_attribute_storage(t):
    def f(ctx, a): ctx.foo = 3; return a * 2
    def b(ctx, g): return g * ctx.foo
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_mark_dirty(t):
    def f(ctx, a): a.mul_(2); ctx.mark_dirty(a); return a
    def b(ctx, g): return g * 2
    F = mk(t, f, b); x = L(t); y = x.clone(); z = F.apply(y); z.sum().backward()
    return z is y, x.grad, type(z.grad_fn).__name__
@sc
def fn_mark_dirty_leaf(t):
    def f(ctx, a): a.mul_(2); ctx.mark_dirty(a); return a
    def b(ctx, g): return g * 2
    F = mk(t, f, b); x = L(t); F.apply(x)
@sc
def fn_inplace_without_mark_dirty(t):
    def f(ctx, a): a.mul_(2); return a
    def b(ctx, g): return g * 2
    F = mk(t, f, b); x = L(t); y = x.clone(); z = F.apply(y); return z is y
@sc
def fn_save_for_backward_nontensor(t):
    def f(ctx, a): ctx.save_for_backward(a, 3); return a * 2
    def b(ctx, g): return g
    F = mk(t, f, b); F.apply(L(t))
@sc
def fn_save_intermediate(t):
    def f(ctx, a): tmp = a * 3; ctx.save_for_backward(tmp); return a * 2
    def b(ctx, g): tmp, = ctx.saved_tensors; return g * tmp
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_modified_saved_input(t):
    def f(ctx, a): ctx.save_for_backward(a); return a * 2
    def b(ctx, g): a, = ctx.saved_tensors; return g * a
    F = mk(t, f, b); x = L(t); h = x * 1; y = F.apply(h); h.add_(1); y.sum().backward()
@sc
def fn_grad_fn_name(t):
    class Foo(t.autograd.Function):
        @staticmethod
        def forward(ctx, a): return a * 2
        @staticmethod
        def backward(ctx, g): return g * 2
    y = Foo.apply(L(t)); return type(y.grad_fn).__name__, y.grad_fn.name()
@sc
def fn_grad_fn_next_functions(t):
    class Foo(t.autograd.Function):
        @staticmethod
        def forward(ctx, a, b): return a * b
        @staticmethod
        def backward(ctx, g): return g, g
    y = Foo.apply(L(t), t.tensor([1., 2.]))
    return [(type(f).__name__ if f is not None else None) for f, _ in y.grad_fn.next_functions]
@sc
def fn_backward_called_directly(t):
    class Foo(t.autograd.Function):
        @staticmethod
        def forward(ctx, a): return a * 2
        @staticmethod
        def backward(ctx, g): return g * 2
    y = Foo.apply(L(t)); return y.grad_fn.apply(t.ones(2))
@sc
def fn_forward_not_implemented(t):
    class Foo(t.autograd.Function):
        pass
    Foo.apply(L(t))
@sc
def fn_instance_forward_call(t):
    class Foo(t.autograd.Function):
        @staticmethod
        def forward(ctx, a): return a * 2
        @staticmethod
        def backward(ctx, g): return g * 2
    return Foo.forward(None, L(t))
@sc
def fn_returns_list(t):
    def f(ctx, a): return [a * 2, a * 3]
    def b(ctx, g1, g2): return g1 * 2 + g2 * 3
    F = mk(t, f, b); r = F.apply(L(t)); return type(r).__name__
@sc
def fn_returns_none_output(t):
    def f(ctx, a): return None
    def b(ctx, g): return g
    F = mk(t, f, b); return F.apply(L(t))
@sc
def fn_double_backward_custom(t):
    def f(ctx, a): ctx.save_for_backward(a); return a ** 3
    def b(ctx, g): a, = ctx.saved_tensors; return g * 3 * a * a
    F = mk(t, f, b); x = L(t); g, = t.autograd.grad(F.apply(x).sum(), x, create_graph=True)
    h, = t.autograd.grad(g.sum(), x); return g, h
@sc
def fn_needs_input_grad_tuple_type(t):
    seen = []
    def f(ctx, a): seen.append(type(ctx.needs_input_grad).__name__); return a * 2
    def b(ctx, g): return g
    F = mk(t, f, b); F.apply(L(t)); return seen
@sc
def fn_input_list_of_tensors(t):
    def f(ctx, xs): return xs[0] * 2
    def b(ctx, g): return None
    F = mk(t, f, b); y = F.apply([L(t)]); return y.requires_grad
@sc
def fn_save_for_forward_attr(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return g
    F = mk(t, f, b); seen = []
    def f2(ctx, a): seen.append(hasattr(ctx, "save_for_forward")); return a * 2
    F2 = mk(t, f2, b); F2.apply(L(t)); return seen
@sc
def fn_mark_non_diff_input_returned(t):
    def f(ctx, a): ctx.mark_non_differentiable(a); return a
    def b(ctx, g): return g
    F = mk(t, f, b); x = L(t); y = F.apply(x); return y.requires_grad, y is x
@sc
def fn_dirty_and_saved(t):
    def f(ctx, a): ctx.save_for_backward(a); a.mul_(2); ctx.mark_dirty(a); return a
    def b(ctx, g): a, = ctx.saved_tensors; return g * 2
    F = mk(t, f, b); x = L(t); y = x.clone(); z = F.apply(y); z.sum().backward(); return x.grad
@sc
def fn_vjp_alias(t):
    class Foo(t.autograd.Function):
        @staticmethod
        def forward(ctx, a): return a * 2
        @staticmethod
        def vjp(ctx, g): return g * 5
    x = L(t); Foo.apply(x).sum().backward(); return x.grad
@sc
def fn_jvp_not_implemented(t):
    class Foo(t.autograd.Function):
        @staticmethod
        def forward(ctx, a): return a * 2
        @staticmethod
        def backward(ctx, g): return g * 2
    fw = t.autograd.forward_ad
    with fw.dual_level():
        d = fw.make_dual(t.tensor([1., 2.]), t.tensor([1., 1.]))
        Foo.apply(d)
@sc
def fn_backward_returns_tuple_len1_for_one(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return (g * 2,)
    F = mk(t, f, b); x = L(t); F.apply(x).sum().backward(); return x.grad
@sc
def fn_backward_returns_list(t):
    def f(ctx, a, c): return a * c
    def b(ctx, g): return [g * 2, g]
    F = mk(t, f, b); x = L(t); F.apply(x, L(t)).sum().backward(); return x.grad
@sc
def fn_output_view_of_input_inplace(t):
    def f(ctx, a): return a[:1]
    def b(ctx, g): return t.ones(2)
    F = mk(t, f, b); x = L(t); y = F.apply(x.clone()); y.mul_(2)
@sc
def fn_apply_on_class_instance(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): return g * 2
    F = mk(t, f, b); return F.apply(L(t))
@sc
def fn_is_traceable_attrs(t):
    return hasattr(t.autograd.Function, "is_traceable"), hasattr(t.autograd.Function, "mark_dirty"), hasattr(t.autograd.Function, "apply")
@sc
def fn_ctx_needs_input_grad_no_grad(t):
    seen = []
    def f(ctx, a): seen.append(ctx.needs_input_grad); return a * 2
    def b(ctx, g): return g
    F = mk(t, f, b)
    with t.no_grad():
        F.apply(L(t))
    return seen
@sc
def fn_backward_raises(t):
    def f(ctx, a): return a * 2
    def b(ctx, g): raise ValueError("my backward error")
    F = mk(t, f, b); F.apply(L(t)).sum().backward()
@sc
def fn_forward_raises(t):
    def f(ctx, a): raise KeyError("fwd")
    def b(ctx, g): return g
    F = mk(t, f, b); F.apply(L(t))
@sc
def fn_nondiff_int_output(t):
    def f(ctx, a): return a * 2, (a > 0).long() if hasattr(a, "long") else None
    def b(ctx, g, g2): return g * 2
    F = mk(t, f, b); o, i = F.apply(L(t)); return i.requires_grad, i.dtype
@sc
def fn_materialize_false_all_none_grad_api(t):
    seen = []
    def f(ctx, a): ctx.set_materialize_grads(False); return a * 2, a * 3
    def b(ctx, g1, g2): seen.append((g1 is None, g2 is None)); return None
    F = mk(t, f, b); x = L(t); o1, o2 = F.apply(x); t.autograd.grad(o2.sum(), x, allow_unused=True); return seen
@sc
def fn_apply_no_rg_no_ctx_flags(t):
    seen = []
    def f(ctx, a): return a * 2
    def b(ctx, g): return g
    F = mk(t, f, b); y = F.apply(t.tensor([1.])); return y.is_leaf
