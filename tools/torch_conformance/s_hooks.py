from harness import sc

def L(t, *v): return t.tensor(list(v) or [1., 2.], requires_grad=True)

@sc
def hk_leaf_replace(t):
    x = L(t); x.register_hook(lambda g: g * 10); (x * x).sum().backward(); return x.grad
@sc
def hk_leaf_none(t):
    x = L(t); seen = []
    x.register_hook(lambda g: seen.append(g.clone()))
    (x * 3).sum().backward(); return x.grad, seen
@sc
def hk_nonleaf_replace(t):
    x = L(t); h = x * 2; h.register_hook(lambda g: g + 1); (h * h).sum().backward(); return x.grad
@sc
def hk_two_hooks_order(t):
    x = L(t); order = []
    x.register_hook(lambda g: (order.append(1), g * 2)[1])
    x.register_hook(lambda g: (order.append(2), g + 1)[1])
    x.sum().backward(); return x.grad, order
@sc
def hk_remove(t):
    x = L(t); h = x.register_hook(lambda g: g * 100); h.remove(); x.sum().backward(); return x.grad
@sc
def hk_remove_twice(t):
    x = L(t); h = x.register_hook(lambda g: g * 100); h.remove(); h.remove(); x.sum().backward(); return x.grad
@sc
def hk_handle_type(t):
    x = L(t); h = x.register_hook(lambda g: g)
    return hasattr(h, "remove"), hasattr(h, "id")
@sc
def hk_handle_context_manager(t):
    x = L(t)
    with x.register_hook(lambda g: g * 100):
        pass
    x.sum().backward(); return x.grad
@sc
def hk_no_requires_grad(t):
    x = t.tensor([1., 2.]); return x.register_hook(lambda g: g)
@sc
def hk_retain_grad_order(t):
    x = L(t); h = x * 2; h.retain_grad(); h.register_hook(lambda g: g * 5)
    (h * 1).sum().backward(); return h.grad, x.grad
@sc
def hk_retain_grad_order2(t):
    x = L(t); h = x * 2; h.register_hook(lambda g: g * 5); h.retain_grad()
    (h * 1).sum().backward(); return h.grad, x.grad
@sc
def hk_hook_raises(t):
    x = L(t); x.register_hook(lambda g: 1 / 0); x.sum().backward()
@sc
def hk_hook_raises_nonleaf(t):
    x = L(t); h = x * 2
    def bad(g): raise ValueError("bad hook")
    h.register_hook(bad); h.sum().backward()
@sc
def hk_hook_create_graph(t):
    x = L(t); h = x * x; h.register_hook(lambda g: g * x)
    g, = t.autograd.grad(h.sum(), x, create_graph=True)
    return g
@sc
def hk_hook_grad_api(t):
    x = L(t); x.register_hook(lambda g: g * 3); g, = t.autograd.grad((x * x).sum(), x); return g, x.grad
@sc
def hk_hook_grad_api_nonleaf(t):
    x = L(t); h = x * 2; h.register_hook(lambda g: g * 3); g, = t.autograd.grad(h.sum(), x); return g
@sc
def hk_hook_called_with_grad_sees_dtype(t):
    x = L(t); seen = []
    x.register_hook(lambda g: seen.append((g.dtype, tuple(g.shape), g.requires_grad)))
    (x * 2).sum().backward(); return seen
@sc
def hk_hook_called_once_for_two_uses(t):
    x = L(t); cnt = []
    x.register_hook(lambda g: cnt.append(g.clone()))
    (x * 2 + x * 3).sum().backward(); return cnt
@sc
def hk_post_acc(t):
    x = L(t); seen = []
    x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    (x * 2).sum().backward(); (x * 2).sum().backward(); return seen
@sc
def hk_post_acc_return_value_ignored(t):
    x = L(t)
    x.register_post_accumulate_grad_hook(lambda p: 5)
    (x * 2).sum().backward(); return x.grad
@sc
def hk_post_acc_nonleaf(t):
    x = L(t); h = x * 2; return h.register_post_accumulate_grad_hook(lambda p: None)
@sc
def hk_post_acc_no_rg(t):
    x = t.tensor([1.]); return x.register_post_accumulate_grad_hook(lambda p: None)
@sc
def hk_post_acc_remove(t):
    x = L(t); seen = []
    h = x.register_post_accumulate_grad_hook(lambda p: seen.append(1)); h.remove()
    x.sum().backward(); return seen
@sc
def hk_post_acc_zero_grad(t):
    x = L(t)
    def hook(p):
        p.grad = None
    x.register_post_accumulate_grad_hook(hook)
    (x * 2).sum().backward(); return x.grad
@sc
def hk_post_acc_after_tensor_hook(t):
    x = L(t); order = []
    x.register_post_accumulate_grad_hook(lambda p: order.append("post"))
    x.register_hook(lambda g: order.append("pre"))
    x.sum().backward(); return order
@sc
def hk_post_acc_grad_api_not_called(t):
    x = L(t); seen = []
    x.register_post_accumulate_grad_hook(lambda p: seen.append(1))
    t.autograd.grad(x.sum(), x); return seen
@sc
def hk_post_acc_inputs(t):
    x = L(t); y = L(t); seen = []
    y.register_post_accumulate_grad_hook(lambda p: seen.append(1))
    (x * y).sum().backward(inputs=[x]); return seen, y.grad
@sc
def hk_node_hook(t):
    x = L(t); y = x * 2; seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append((len(gi), len(go), gi[0] is None if gi else None)))
    y.sum().backward(); return seen
@sc
def hk_node_hook_replace(t):
    x = L(t); y = x * 2
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10,))
    y.sum().backward(); return x.grad
@sc
def hk_node_prehook(t):
    x = L(t); y = x * 2
    y.grad_fn.register_prehook(lambda go: (go[0] * 3,))
    y.sum().backward(); return x.grad
@sc
def hk_node_prehook_none(t):
    x = L(t); y = x * 2
    y.grad_fn.register_prehook(lambda go: None)
    y.sum().backward(); return x.grad
@sc
def hk_node_hook_remove(t):
    x = L(t); y = x * 2
    h = y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10,)); h.remove()
    y.sum().backward(); return x.grad
@sc
def hk_node_hook_wrong_len(t):
    x = L(t); y = x * 2
    y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    y.sum().backward()
@sc
def hk_node_prehook_list(t):
    x = L(t); y = x * 2
    y.grad_fn.register_prehook(lambda go: [go[0] * 3])
    y.sum().backward(); return x.grad
@sc
def hk_node_hook_mul_two_inputs(t):
    x = L(t); w = L(t, 3., 4.); y = x * w; seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(len(gi)))
    y.sum().backward(); return seen
@sc
def hk_node_hook_one_input_not_rg(t):
    x = L(t); w = t.tensor([3., 4.]); y = x * w; seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append((len(gi), gi[0] is None, gi[1] is None)))
    y.sum().backward(); return seen
@sc
def hk_accumulate_grad_node(t):
    x = L(t); y = x * 2
    acc = y.grad_fn.next_functions[0][0]
    return type(acc).__name__, acc.name(), hasattr(acc, "variable") and acc.variable is x
@sc
def hk_accumulate_grad_node_hook(t):
    x = L(t); y = x * 2; seen = []
    acc = y.grad_fn.next_functions[0][0]
    acc.register_hook(lambda gi, go: seen.append((len(gi), len(go))))
    y.sum().backward(); return seen
@sc
def hk_next_functions_no_rg(t):
    x = L(t); y = x * t.tensor([1., 1.])
    return [(type(f).__name__ if f is not None else None, i) for f, i in y.grad_fn.next_functions]
@sc
def hk_next_functions_chain(t):
    x = L(t); y = (x * 2).exp()
    return [(f.name(), i) for f, i in y.grad_fn.next_functions]
@sc
def hk_node_name(t):
    x = L(t); return (x * 2).grad_fn.name(), (x + 1).grad_fn.name(), x.sum().grad_fn.name(), (x ** 2).grad_fn.name(), x.exp().grad_fn.name()
@sc
def hk_node_names2(t):
    x = L(t); return x[0].grad_fn.name(), x.view(2, 1).grad_fn.name(), x.clone().grad_fn.name(), x.mean().grad_fn.name(), (-x).grad_fn.name()
@sc
def hk_node_names3(t):
    x = L(t); return (x - 1).grad_fn.name(), (x / 2).grad_fn.name(), x.sigmoid().grad_fn.name(), x.tanh().grad_fn.name(), x.relu().grad_fn.name()
@sc
def hk_node_metadata(t):
    x = L(t); n = (x * 2).grad_fn; n.metadata["a"] = 1; return dict(n.metadata)
@sc
def hk_hook_modifies_grad_inplace(t):
    x = L(t); h = x * 2
    def hook(g):
        g.mul_(2)
    h.register_hook(hook)
    (h * h).sum().backward(); return x.grad
@sc
def hk_hook_on_output_used_twice(t):
    x = L(t); h = x * 2; cnt = []
    h.register_hook(lambda g: cnt.append(g.clone()))
    (h * h + h).sum().backward(); return cnt
@sc
def hk_hook_returns_different_dtype(t):
    x = L(t); x.register_hook(lambda g: g.double()); x.sum().backward(); return x.grad
@sc
def hk_hook_returns_int(t):
    x = L(t); x.register_hook(lambda g: g.long()); x.sum().backward(); return x.grad
@sc
def hk_hook_after_backward(t):
    x = L(t); y = (x * 2).sum(); y.backward(retain_graph=True)
    x.register_hook(lambda g: g * 0); y.backward(); return x.grad
@sc
def hk_retain_grad_leaf_noop(t):
    x = L(t); x.retain_grad(); x.sum().backward(); return x.grad, x.retains_grad
@sc
def hk_retain_grad_twice(t):
    x = L(t); h = x * 2; h.retain_grad(); h.retain_grad(); h.sum().backward(); return h.grad
@sc
def hk_retain_grad_no_rg(t):
    x = t.tensor([1.]); x.retain_grad()
@sc
def hk_retain_grad_accumulates(t):
    x = L(t); h = x * 2; h.retain_grad()
    y = h.sum(); y.backward(retain_graph=True); y.backward(); return h.grad
@sc
def hk_retain_grad_create_graph(t):
    x = L(t); h = x * x; h.retain_grad()
    (h * h).sum().backward(create_graph=True); return h.grad
@sc
def hk_register_hook_non_callable(t):
    x = L(t); x.register_hook(5); x.sum().backward()
@sc
def hk_hook_on_view(t):
    x = L(t, 1., 2., 3.); v = x[1:]; v.register_hook(lambda g: g * 7); (v * 1).sum().backward(); return x.grad
@sc
def hk_hook_on_base_after_view_inplace(t):
    x = L(t); b = x * 1; seen = []
    b.register_hook(lambda g: seen.append(g.clone()))
    b[0].mul_(2); b.sum().backward(); return x.grad, seen
@sc
def hk_hook_on_expand(t):
    x = L(t, 2.); e = x.expand(3); e.register_hook(lambda g: g * t.tensor([1., 2., 3.])); e.sum().backward(); return x.grad
@sc
def hk_grad_fn_hook_on_leaf(t):
    x = L(t); return x.grad_fn
@sc
def hk_multi_grad_hook(t):
    x = L(t); y = L(t); seen = []
    t.autograd.graph.register_multi_grad_hook((x, y), lambda grads: seen.append([g is None for g in grads]))
    (x * 2).sum().backward(); return seen
@sc
def hk_multi_grad_hook_any(t):
    x = L(t); y = L(t); seen = []
    t.autograd.graph.register_multi_grad_hook((x, y), lambda g: seen.append(g.clone()), mode="any")
    (x * 2 + y).sum().backward(); return seen
@sc
def hk_multi_grad_bad_mode(t):
    x = L(t); t.autograd.graph.register_multi_grad_hook((x,), lambda g: None, mode="foo")
@sc
def hk_hook_nonleaf_in_no_grad_registration(t):
    x = L(t); h = x * 2
    with t.no_grad():
        h.register_hook(lambda g: g * 3)
    h.sum().backward(); return x.grad
@sc
def hk_node_hook_grad_outputs_values(t):
    x = L(t); y = x.exp(); seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append((gi[0].clone(), go[0].clone())))
    (y * 3).sum().backward(); return seen
@sc
def hk_prehook_order_with_tensor_hook(t):
    x = L(t); y = x * 2; z = y.exp(); order = []
    y.register_hook(lambda g: order.append("tensor"))
    y.grad_fn.register_prehook(lambda go: order.append("pre"))
    y.grad_fn.register_hook(lambda gi, go: order.append("post"))
    z.sum().backward(); return order
@sc
def hk_hook_returns_tuple(t):
    x = L(t); x.register_hook(lambda g: (g,)); x.sum().backward()
@sc
def hk_post_acc_hook_sees_grad_set(t):
    x = L(t); seen = []
    x.register_post_accumulate_grad_hook(lambda p: seen.append((p is x, p.grad is not None)))
    x.sum().backward(); return seen
@sc
def hk_nonleaf_hook_on_unused_branch(t):
    x = L(t); h = x * 2; cnt = []
    h.register_hook(lambda g: cnt.append(1))
    (x * 3).sum().backward(); return cnt
@sc
def hk_hook_seen_grad_rg_create_graph(t):
    x = L(t); seen = []
    h = x * x
    h.register_hook(lambda g: seen.append(g.requires_grad))
    (h * x).sum().backward(create_graph=True); return seen
@sc
def hk_post_acc_returns_tensor(t):
    x = L(t); x.register_post_accumulate_grad_hook(lambda p: t.ones(2)); (x * 2).sum().backward()
@sc
def hk_prehook_replace_none(t):
    x = L(t); a, b = x.split(1)
    a.grad_fn.register_prehook(lambda go: tuple(t.ones(1) if g is None else g for g in go))
    a.sum().backward(); return x.grad
@sc
def hk_node_hook_none_to_value_unused_input(t):
    x = L(t); w = t.tensor([1., 2.]); y = x * w
    y.grad_fn.register_hook(lambda gi, go: tuple(t.ones(2) if g is None else g for g in gi))
    y.sum().backward(); return x.grad
