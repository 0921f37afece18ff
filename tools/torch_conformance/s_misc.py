from harness import sc

def L(t, *v): return t.tensor(list(v) or [1., 2.], requires_grad=True)
def FW(t): return t.autograd.forward_ad

@sc
def fw_make_dual_no_level(t): FW(t).make_dual(t.ones(2), t.ones(2))
@sc
def fw_make_dual_shape(t):
    with FW(t).dual_level():
        FW(t).make_dual(t.ones(2), t.ones(3))
@sc
def fw_unpack_plain(t):
    with FW(t).dual_level():
        p, tg = FW(t).unpack_dual(t.ones(2)); return p, tg
@sc
def fw_basic_mul(t):
    with FW(t).dual_level():
        d = FW(t).make_dual(t.tensor([1., 2.]), t.tensor([1., 0.]))
        o = d * d + d.sin()
        return FW(t).unpack_dual(o)
@sc
def fw_nested_level_error(t):
    with FW(t).dual_level():
        with FW(t).dual_level():
            pass
@sc
def fw_after_exit_no_tangent(t):
    with FW(t).dual_level():
        d = FW(t).make_dual(t.tensor([1., 2.]), t.tensor([1., 0.]))
    return FW(t).unpack_dual(d).tangent
@sc
def fw_int_tangent(t):
    with FW(t).dual_level():
        FW(t).make_dual(t.tensor([1., 2.]), t.tensor([1, 0]))
@sc
def fw_unpacked_fields(t):
    with FW(t).dual_level():
        d = FW(t).make_dual(t.tensor([1., 2.]), t.tensor([1., 0.]))
        u = FW(t).unpack_dual(d)
        return type(u).__name__, u._fields if hasattr(u, "_fields") else None
@sc
def fw_sum_reduce(t):
    with FW(t).dual_level():
        d = FW(t).make_dual(t.tensor([[1., 2.], [3., 4.]]), t.ones(2, 2))
        return FW(t).unpack_dual(d.sum(0)).tangent, FW(t).unpack_dual(d.mean()).tangent
@sc
def fw_view_tangent(t):
    with FW(t).dual_level():
        d = FW(t).make_dual(t.tensor([1., 2., 3.]), t.tensor([1., 2., 3.]))
        return FW(t).unpack_dual(d[1:]).tangent, FW(t).unpack_dual(d.view(3, 1)).tangent
@sc
def fw_no_grad_still(t):
    with FW(t).dual_level():
        d = FW(t).make_dual(t.tensor([1., 2.]), t.tensor([1., 1.]))
        with t.no_grad():
            o = d.exp()
        return FW(t).unpack_dual(o).tangent
@sc
def sth_pack_unpack_counts(t):
    c = {"p": 0, "u": 0}
    def pack(x): c["p"] += 1; return x
    def unpack(x): c["u"] += 1; return x
    x = L(t)
    with t.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x * x).sin()
    y.sum().backward(); return c, x.grad
@sc
def sth_pack_returns_nontensor(t):
    x = L(t)
    with t.autograd.graph.saved_tensors_hooks(lambda x: "s", lambda s: t.ones(2)):
        y = x * x
    y.sum().backward(); return x.grad
@sc
def sth_unpack_returns_nontensor(t):
    x = L(t)
    with t.autograd.graph.saved_tensors_hooks(lambda x: x, lambda s: 5):
        y = x * x
    y.sum().backward()
@sc
def sth_disable(t):
    x = L(t)
    with t.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        with t.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
            pass
@sc
def sth_save_on_cpu(t):
    x = L(t)
    with t.autograd.graph.save_on_cpu():
        y = (x * x).exp()
    y.sum().backward(); return x.grad
@sc
def anomaly_names_op(t):
    x = t.tensor([-1.], requires_grad=True)
    with t.autograd.detect_anomaly():
        y = x.sqrt()
        try:
            y.sum().backward()
        except RuntimeError as e:
            return str(e)[:60]
    return x.grad
@sc
def anomaly_warns_forward(t):
    with t.autograd.detect_anomaly():
        x = L(t); (x * 2).sum().backward()
    return x.grad
@sc
def gbatched_msg(t):
    x = L(t); t.autograd.grad(x * x, x, t.ones(3, 3), is_grads_batched=True)
@sc
def gbatched_multiple(t):
    x = L(t); w = L(t, 3., 4.)
    return t.autograd.grad((x * w, x.sum()), (x, w), (t.ones(3, 2), t.ones(3)), is_grads_batched=True)
@sc
def gbatched_allow_unused(t):
    x = L(t); w = L(t)
    return t.autograd.grad(x * 2, (x, w), t.ones(2, 2), is_grads_batched=True, allow_unused=True)
@sc
def gbatched_materialize(t):
    x = L(t); w = L(t)
    return t.autograd.grad(x * 2, (x, w), t.ones(2, 2), is_grads_batched=True, materialize_grads=True)
@sc
def retain_grad_hook_after_retain(t):
    x = L(t); h = x * 2; h.retain_grad(); h.register_hook(lambda g: g * 100); h.sum().backward(); return h.grad
@sc
def retain_grad_in_no_grad_setting(t):
    x = L(t); h = x * 2
    with t.no_grad():
        h.retain_grad()
    h.sum().backward(); return h.grad
@sc
def node_saved_attrs(t):
    x = L(t); y = x * x; return hasattr(y.grad_fn, "_saved_self"), hasattr(y.grad_fn, "_saved_other")
@sc
def node_saved_attr_value(t):
    x = L(t); w = L(t, 3., 4.); y = x * w; return y.grad_fn._saved_other
@sc
def grad_fn_call_directly(t):
    x = L(t); y = x * 3; return y.grad_fn(t.ones(2))
@sc
def grad_fn_next_acc_variable(t):
    x = L(t); y = x * 3; return y.grad_fn.next_functions[0][0].variable is x
@sc
def grad_fn_sequence_nr(t):
    x = L(t); a = x * 2; b = a * 3; return b.grad_fn._sequence_nr() > a.grad_fn._sequence_nr()
@sc
def get_gradient_edge_leaf(t):
    x = L(t); e = t.autograd.graph.get_gradient_edge(x); return type(e.node).__name__, e.output_nr
@sc
def get_gradient_edge_nonleaf(t):
    x = L(t); y = x * 2; e = t.autograd.graph.get_gradient_edge(y); return e.node.name(), e.output_nr
@sc
def get_gradient_edge_no_rg(t):
    x = t.ones(2); t.autograd.graph.get_gradient_edge(x)
@sc
def increment_version(t):
    x = t.ones(2); v = x._version; t.autograd.graph.increment_version(x); return x._version - v
@sc
def node_is_node(t):
    x = L(t); y = x * 2; return isinstance(y.grad_fn, t.autograd.graph.Node)
@sc
def node_register_hook_handle_remove_twice(t):
    x = L(t); y = x * 2; h = y.grad_fn.register_hook(lambda gi, go: None); h.remove(); h.remove(); y.sum().backward(); return x.grad
@sc
def variable_deprecated(t):
    v = t.autograd.Variable(t.ones(2), requires_grad=True); return v.requires_grad, v.is_leaf
@sc
def backward_on_view_leaf(t):
    x = L(t, 1., 2., 3.); v = x[1:]; v.backward(t.ones(2)); return x.grad
@sc
def grad_create_graph_hook_returns_graph(t):
    x = L(t); h = x * x
    h.register_hook(lambda g: g * x)
    g, = t.autograd.grad(h.sum(), x, create_graph=True)
    g2, = t.autograd.grad(g.sum(), x); return g, g2
@sc
def double_backward_accumulates(t):
    x = L(t); y = (x ** 3).sum(); g, = t.autograd.grad(y, x, create_graph=True); g.sum().backward(); g.sum().backward(); return x.grad
@sc
def grad_on_output_with_retain_false_then_hook(t):
    x = L(t); y = (x * x).sum(); t.autograd.grad(y, x, retain_graph=False)
    try:
        t.autograd.grad(y, x)
    except RuntimeError as e:
        return "Trying to backward through the graph a second time" in str(e)
@sc
def inputs_kw_grad_not_accumulated_elsewhere(t):
    x = L(t); w = L(t); (x * w).sum().backward(inputs=[x]); (x * w).sum().backward(inputs=[w]); return x.grad, w.grad
@sc
def materialize_grads_with_is_batched(t):
    x = L(t); y = L(t); return t.autograd.grad((x * 2), [x, y], t.eye(2), is_grads_batched=True, materialize_grads=True)
@sc
def create_graph_grad_of_grad_none(t):
    x = L(t); g, = t.autograd.grad((x * 3).sum(), x, create_graph=True); return g.requires_grad
@sc
def create_graph_second_grad_of_linear(t):
    x = L(t); g, = t.autograd.grad((x * 3).sum(), x, create_graph=True); t.autograd.grad(g.sum(), x)
@sc
def create_graph_second_grad_of_linear_allow_unused(t):
    x = L(t); g, = t.autograd.grad((x * x).sum() + x.sum(), x, create_graph=True); return t.autograd.grad(g.sum(), x)
@sc
def grad_inputs_output_itself(t):
    x = L(t); y = x * 2; return t.autograd.grad(y, y, t.ones(2))
@sc
def backward_inputs_output_itself(t):
    x = L(t); y = x * 2; y.backward(t.ones(2), inputs=[y]); return y.grad, x.grad
@sc
def leaf_grad_float64_via_grad_dtype(t):
    x = L(t); return x.grad_dtype if hasattr(x, "grad_dtype") else "none"
@sc
def grad_setter_rg_tensor(t):
    x = L(t); g = t.ones(2, requires_grad=True); x.grad = g; return x.grad is g, x.grad.requires_grad
@sc
def grad_setter_on_no_rg(t):
    x = t.ones(2); x.grad = t.ones(2); return x.grad
@sc
def zero_grad_pattern(t):
    x = L(t); (x * 2).sum().backward(); x.grad.detach_(); x.grad.zero_(); (x * 3).sum().backward(); return x.grad
@sc
def torch_autograd_graph_names(t):
    g = t.autograd.graph
    return [hasattr(g, n) for n in ["Node", "GradientEdge", "get_gradient_edge", "increment_version", "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "register_multi_grad_hook", "allow_mutation_on_saved_tensors"]]
@sc
def function_names(t):
    f = t.autograd.function
    return [hasattr(f, n) for n in ["Function", "FunctionCtx", "once_differentiable", "InplaceFunction", "NestedIOFunction", "BackwardCFunction"]]
@sc
def functional_names(t):
    f = t.autograd.functional
    return [hasattr(f, n) for n in ["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"]]
@sc
def fwad_names(t):
    f = t.autograd.forward_ad
    return [hasattr(f, n) for n in ["dual_level", "make_dual", "unpack_dual", "enter_dual_level", "exit_dual_level", "UnpackedDualTensor"]]
