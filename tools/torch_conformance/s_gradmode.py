from harness import sc
import threading

def L(t, *v): return t.tensor(list(v) or [1., 2.], requires_grad=True)

@sc
def gm_no_grad_ctx(t):
    x = L(t)
    with t.no_grad():
        y = x * 2
    return y.requires_grad, y.grad_fn is None, t.is_grad_enabled()
@sc
def gm_no_grad_decorator(t):
    @t.no_grad()
    def f(x): return x * 2, t.is_grad_enabled()
    y, e = f(L(t)); return y.requires_grad, e, t.is_grad_enabled()
@sc
def gm_no_grad_decorator_noparens(t):
    @t.no_grad
    def f(x): return x * 2
    return f(L(t)).requires_grad
@sc
def gm_enable_grad_decorator_noparens(t):
    @t.enable_grad
    def f(x): return x * 2
    with t.no_grad():
        return f(L(t)).requires_grad
@sc
def gm_enable_grad_inside_no_grad(t):
    x = L(t)
    with t.no_grad():
        with t.enable_grad():
            y = x * 2
        z = x * 2
    return y.requires_grad, z.requires_grad
@sc
def gm_set_grad_enabled_false(t):
    x = L(t)
    with t.set_grad_enabled(False):
        y = x * 2
    return y.requires_grad, t.is_grad_enabled()
@sc
def gm_set_grad_enabled_function(t):
    t.set_grad_enabled(False); a = t.is_grad_enabled(); t.set_grad_enabled(True); return a, t.is_grad_enabled()
@sc
def gm_set_grad_enabled_decorator(t):
    @t.set_grad_enabled(False)
    def f(x): return x * 2
    r = f(L(t)).requires_grad
    return r, t.is_grad_enabled()
@sc
def gm_set_grad_enabled_non_bool(t):
    t.set_grad_enabled(1)
@sc
def gm_set_grad_enabled_none(t):
    t.set_grad_enabled(None)
@sc
def gm_no_grad_generator(t):
    @t.no_grad()
    def gen(x):
        for i in range(2):
            yield (x * i).requires_grad, t.is_grad_enabled()
    r = list(gen(L(t))); return r, t.is_grad_enabled()
@sc
def gm_no_grad_generator_interleaved(t):
    @t.no_grad()
    def gen():
        for i in range(2):
            yield t.is_grad_enabled()
    g = gen(); a = next(g); outside = t.is_grad_enabled(); b = next(g); return a, outside, b
@sc
def gm_enable_grad_generator(t):
    @t.enable_grad()
    def gen():
        yield t.is_grad_enabled()
    with t.no_grad():
        return list(gen()), t.is_grad_enabled()
@sc
def gm_inference_mode_generator(t):
    @t.inference_mode()
    def gen():
        yield t.is_inference_mode_enabled()
    return list(gen()), t.is_inference_mode_enabled()
@sc
def gm_nesting(t):
    s = []
    with t.no_grad():
        s.append(t.is_grad_enabled())
        with t.enable_grad():
            s.append(t.is_grad_enabled())
            with t.set_grad_enabled(False):
                s.append(t.is_grad_enabled())
            s.append(t.is_grad_enabled())
        s.append(t.is_grad_enabled())
    s.append(t.is_grad_enabled()); return s
@sc
def gm_restore_after_exception(t):
    try:
        with t.no_grad():
            raise ValueError
    except ValueError:
        pass
    return t.is_grad_enabled()
@sc
def gm_decorator_restore_after_exception(t):
    @t.no_grad()
    def f(): raise KeyError
    try:
        f()
    except KeyError:
        pass
    return t.is_grad_enabled()
@sc
def gm_thread_local(t):
    res = []
    def worker(): res.append(t.is_grad_enabled())
    with t.no_grad():
        th = threading.Thread(target=worker); th.start(); th.join()
    return res
@sc
def gm_thread_local_set(t):
    res = []
    def worker():
        t.set_grad_enabled(False); res.append(t.is_grad_enabled())
    th = threading.Thread(target=worker); th.start(); th.join()
    return res, t.is_grad_enabled()
@sc
def gm_inference_mode(t):
    x = L(t)
    with t.inference_mode():
        y = x * 2
        e = t.is_inference_mode_enabled(); g = t.is_grad_enabled()
    return y.requires_grad, y.is_inference(), e, g, t.is_inference_mode_enabled()
@sc
def gm_inference_mode_false(t):
    with t.inference_mode(False):
        return t.is_inference_mode_enabled(), t.is_grad_enabled()
@sc
def gm_inference_mode_decorator(t):
    @t.inference_mode()
    def f(x): return x * 2
    y = f(L(t)); return y.requires_grad, y.is_inference()
@sc
def gm_inference_mode_decorator_noparens(t):
    @t.inference_mode
    def f(x): return x * 2
    y = f(L(t)); return y.requires_grad, y.is_inference()
@sc
def gm_inference_tensor_in_autograd(t):
    with t.inference_mode():
        y = t.ones(2)
    x = L(t); (x * y).sum().backward()
@sc
def gm_inference_tensor_add_ok(t):
    with t.inference_mode():
        y = t.ones(2)
    x = L(t); (x + y).sum().backward(); return x.grad
@sc
def gm_inference_tensor_inplace_outside(t):
    with t.inference_mode():
        y = t.ones(2)
    y.add_(1)
@sc
def gm_inference_tensor_requires_grad(t):
    with t.inference_mode():
        y = t.ones(2)
    y.requires_grad_()
@sc
def gm_inference_tensor_clone_outside(t):
    with t.inference_mode():
        y = t.ones(2)
    z = y.clone(); return z.is_inference()
@sc
def gm_is_inference_normal(t): return t.ones(2).is_inference()
@sc
def gm_grad_mode_module_names(t):
    gm = t.autograd.grad_mode
    return all(hasattr(gm, n) for n in ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "set_multithreading_enabled"])
@sc
def gm_autograd_names(t):
    a = t.autograd
    return [hasattr(a, n) for n in ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_inference_mode_enabled", "is_grad_enabled", "set_multithreading_enabled", "grad_mode"]]
@sc
def gm_torch_level_names(t):
    return [hasattr(t, n) for n in ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_inference_mode_enabled", "is_grad_enabled"]]
@sc
def gm_no_grad_clone(t):
    ng = t.no_grad(); return hasattr(ng, "clone") and type(ng.clone()).__name__
@sc
def gm_set_grad_enabled_clone(t):
    s = t.set_grad_enabled(False); c = s.clone(); t.set_grad_enabled(True); return type(c).__name__
@sc
def gm_set_grad_enabled_immediate(t):
    # set_grad_enabled applies at construction
    m = t.set_grad_enabled(False); a = t.is_grad_enabled()
    with m:
        b = t.is_grad_enabled()
    return a, b, t.is_grad_enabled()
@sc
def gm_no_grad_reuse(t):
    ng = t.no_grad(); r = []
    with ng:
        r.append(t.is_grad_enabled())
    with ng:
        r.append(t.is_grad_enabled())
    return r, t.is_grad_enabled()
@sc
def gm_no_grad_args_error(t):
    t.no_grad(True)
@sc
def gm_enable_grad_inside_inference(t):
    x = L(t)
    with t.inference_mode():
        with t.enable_grad():
            y = x * 2
    return y.requires_grad, y.is_inference()
@sc
def gm_no_grad_on_class_method(t):
    class A:
        @t.no_grad()
        def f(self, x): return x * 2
    return A().f(L(t)).requires_grad
@sc
def gm_no_grad_preserves_name(t):
    @t.no_grad()
    def my_func(x):
        "doc"
        return x
    return my_func.__name__, my_func.__doc__
@sc
def gm_no_grad_requires_grad_factory(t):
    with t.no_grad():
        x = t.ones(2, requires_grad=True)
    return x.requires_grad, x.is_leaf
@sc
def gm_no_grad_leaf_toggle(t):
    with t.no_grad():
        x = t.ones(2); x.requires_grad_()
    return x.requires_grad
@sc
def gm_no_grad_view_of_leaf(t):
    x = L(t)
    with t.no_grad():
        v = x.view(2)
    return v.requires_grad, v.is_leaf, v._base is x
@sc
def gm_no_grad_detach(t):
    x = L(t)
    with t.no_grad():
        d = x.detach()
    return d.requires_grad
@sc
def gm_grad_in_no_grad(t):
    x = L(t)
    with t.no_grad():
        y = x * 2
    return t.autograd.grad(y.sum(), x)
@sc
def gm_backward_under_no_grad_graph_built_before(t):
    x = L(t); y = (x * x).sum()
    with t.no_grad():
        g, = t.autograd.grad(y, x)
    return g
@sc
def gm_function_in_no_grad_needs_input_grad(t):
    seen = []
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            seen.append(t.is_grad_enabled()); return x * 2
        @staticmethod
        def backward(ctx, g): return g
    with t.enable_grad():
        F.apply(L(t))
    return seen
@sc
def gm_decorated_async_like_class(t):
    @t.no_grad()
    class A:
        pass
    return type(A).__name__
@sc
def gm_inference_mode_bad_arg(t):
    with t.inference_mode(mode="yes"):
        return t.is_inference_mode_enabled()
@sc
def gm_anomaly_ctx(t):
    with t.autograd.detect_anomaly():
        a = t.is_anomaly_enabled()
    return a, t.is_anomaly_enabled()
@sc
def gm_anomaly_check_nan_false(t):
    with t.autograd.detect_anomaly(check_nan=False):
        x = t.tensor([0.], requires_grad=True); (x.sqrt() * 0).sum().backward()
        return t.is_anomaly_check_nan_enabled(), x.grad
@sc
def gm_set_detect_anomaly_fn(t):
    with t.autograd.set_detect_anomaly(True):
        a = t.is_anomaly_enabled()
    return a, t.is_anomaly_enabled()
@sc
def gm_anomaly_nan_error(t):
    with t.autograd.detect_anomaly():
        x = t.tensor([0.], requires_grad=True)
        y = x.sqrt() * 0
        y.sum().backward()
