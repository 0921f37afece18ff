"""Forward-mode AD (``sg.autograd.forward_ad``) against torch.autograd.forward_ad, side by side:
tangents of ops, views and in-place ops, custom Functions, grad modes, mixing with reverse
mode, and every error (class and message)."""
import numpy as np
import pytest

import symgrad as sg
import symgrad.autograd.forward_ad as fwAD

torch = pytest.importorskip("torch")
tfwAD = torch.autograd.forward_ad

from test_runtime_vs_torch import CASES, A, B, C  # noqa: E402  (the same op table)

rng = np.random.default_rng(1)
TA, TB, TC = (rng.standard_normal(x.shape) for x in (A, B, C))


def tan(m, y):
    return (fwAD if m is sg else tfwAD).unpack_dual(y).tangent


def close(got, want, rtol=1e-9, atol=1e-12):
    if want is None:
        assert got is None
        return
    assert got is not None
    got = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    want = want.detach().numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def both(f, primals, tangents, dtype=np.float64, **kw):
    """f(module, *duals) in symgrad and in torch under a dual level; (symgrad, torch) outputs
    with their tangents, compared."""
    with fwAD.dual_level(), tfwAD.dual_level():
        sd = [fwAD.make_dual(sg.tensor(np.asarray(p, dtype)), sg.tensor(np.asarray(t, dtype)))
              if t is not None else sg.tensor(np.asarray(p, dtype))
              for p, t in zip(primals, tangents)]
        td = [tfwAD.make_dual(torch.tensor(np.asarray(p, dtype)), torch.tensor(np.asarray(t, dtype)))
              if t is not None else torch.tensor(np.asarray(p, dtype))
              for p, t in zip(primals, tangents)]
        so, to = f(sg, *sd), f(torch, *td)
        so = so if isinstance(so, tuple) else (so,)
        to = to if isinstance(to, tuple) else (to,)
        for s, t in zip(so, to):
            close(s, t, **kw)
            close(tan(sg, s), tan(torch, t), **kw)
    return so, to


def raises_like(f_sg, f_torch):
    """Both raise, the same class and message."""
    with pytest.raises(Exception) as want:
        f_torch()
    cls = type(want.value)
    with pytest.raises(Exception) as got:
        f_sg()
    assert type(got.value) is cls or (type(got.value).__name__ == cls.__name__
                                      and not cls.__module__.startswith("builtins"))
    assert str(got.value).replace("symgrad.", "torch.") == str(want.value)


# ---------------------------------------------------------------------------------- ops
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_table_tangents_match_torch(name):
    """Every case of the runtime-vs-torch table, each input dual."""
    both(CASES[name], (A, B, C), (TA, TB, TC))


@pytest.mark.parametrize("which", [(True, False, False), (False, True, True)])
def test_op_table_some_inputs_dual(which):
    for name in ("broadcast_mul_sum", "div_pow", "matmul_T", "where_clamp", "cat_stack",
                 "pow_tensor_exp", "clamp_tensor_bounds", "max_two"):
        both(CASES[name], (A, B, C), tuple(t if w else None for t, w in zip((TA, TB, TC), which)))


UNARY = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "erf",
         "abs", "neg", "log1p", "expm1", "sinh", "cosh", "asinh", "atan", "reciprocal",
         "square", "sign", "floor"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op):
    both(lambda m, x: getattr(x, op)(), (C,), (TC,))


def test_elementwise_chain_broadcasting_float32():
    f = lambda m, x, y, z: (m.sin(x) * m.exp(y) + m.tanh(x / z) - y ** 2) / (1 + z.sigmoid())
    both(f, (A, B, C), (TA, TB, TC), dtype=np.float32, rtol=1e-5, atol=1e-6)
    both(lambda m, x, y: x * y + 2.5 - 3 / y, (A[0], B), (TA[0], TB))


@pytest.mark.parametrize("red", ["sum", "mean", "prod", "max", "min", "amax", "logsumexp"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
def test_reductions(red, dim, keepdim):
    if dim is None:
        f = lambda m, x: getattr(x, red)() if red not in ("amax", "logsumexp") else \
            getattr(x, red)(dim=(0, 1))
    else:
        def f(m, x):
            r = getattr(x, red)(dim, keepdim=keepdim)
            return r.values if red in ("max", "min") else r
    both(f, (C,), (TC,))


def test_prod_with_zeros():
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 1.5]])
    both(lambda m, x: x.prod(1) + x.prod(), (x,), (np.ones_like(x),))


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 2)), ((4,), (4,)), ((3, 4), (4,)),
                                    ((4,), (4, 2)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 1))])
def test_matmul(sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    ta, tb = rng.standard_normal(sa), rng.standard_normal(sb)
    both(lambda m, x, y: x @ y, (a, b), (ta, tb))
    both(lambda m, x, y: x @ y, (a, b), (None, tb))
    both(lambda m, x, y: m.matmul(x, y), (a, b), (ta, None))


def test_movement_and_indexing():
    f = lambda m, x: (x.reshape(2, 6).t().reshape(-1)[::2] + x.permute(1, 0).flatten()[:6]
                      + x.unsqueeze(0).expand(2, 3, 4).sum(0).view(12)[3:9]
                      + x[1:, None, ::2].squeeze().reshape(-1).sum() + x.transpose(0, 1)[2, 1:].sum())
    both(f, (A,), (TA,))
    both(lambda m, x: x[m.tensor([0, 2, 2])][:, [1, 3]] * x[x > 0].sum(), (A,), (TA,))
    both(lambda m, x: x.T @ x + x.mT.sum(), (A,), (TA,))


def test_cat_stack_where_clamp_clone_to():
    f = lambda m, x, y: (m.cat([x, y.unsqueeze(0)], 0).sum(0)
                         + m.stack([y, y * 2], 1).sum(1)
                         + m.where(x > 0, x, y).sum(0)
                         + x.clamp(-0.5, 0.5).sum(0) + x.clamp(min=y).sum(0)
                         + x.clone().sum(0) + x.float().double().sum(0) + x.contiguous().sum(0))
    both(f, (A, B), (TA, TB))
    both(f, (A, B), (None, TB))


def test_composite_ops():
    f = lambda m, x: (m.softmax(x, dim=1) * x.logsumexp(1, keepdim=True) + x.cumsum(0)
                      + m.nn.functional.softplus(x) if m is torch else
                      m.softmax(x, dim=1) * x.logsumexp(1, keepdim=True) + x.cumsum(0)
                      + m.softplus(x))
    both(f, (A,), (TA,))
    both(lambda m, x: x.std(1) + x.var(0).sum() + x.norm(), (A,), (TA,))


def test_mixed_dtype_tangent():
    """A float64 tangent on a float32 primal is allowed and kept (torch)."""
    with fwAD.dual_level(), tfwAD.dual_level():
        s = fwAD.make_dual(sg.tensor(A, dtype=sg.float32), sg.tensor(TA))
        t = tfwAD.make_dual(torch.tensor(A, dtype=torch.float32), torch.tensor(TA))
        assert fwAD.unpack_dual(s).tangent.dtype == sg.float64
        for f in (lambda x: x.exp(), lambda x: x * 2):
            got, want = tan(sg, f(s)), tan(torch, f(t))
            assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
            close(got, want, rtol=1e-6)


def test_non_float_outputs_have_no_tangent():
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor(A), sg.tensor(TA))
        for y in (d > 0, d.argmax(), d.max(1).indices, d.long(), d.isnan()):
            assert fwAD.unpack_dual(y).tangent is None
        assert fwAD.unpack_dual(d.detach()).tangent is None
        assert fwAD.unpack_dual(d.data).tangent is None
        assert fwAD.unpack_dual(sg.tensor(A).exp()).tangent is None


# ------------------------------------------------------------------ views and in-place
def inplace_script(m, fw):
    T = lambda y: fw.unpack_dual(y).tangent
    out = []
    a = m.tensor([1., 2., 3.]).clone()
    da = fw.make_dual(a, m.tensor([1., 0., 0.]))
    v = da[1:]
    out += [T(v)]
    da.mul_(2)
    out += [T(da), T(v)]
    da.add_(fw.make_dual(m.ones(3), m.tensor([0., 5., 0.])))
    out += [T(da), T(v)]
    v.mul_(3)
    out += [T(da), T(v)]
    da.sub_(da * 0.5, alpha=2)
    da.div_(fw.make_dual(m.tensor([2., 4., 8.]), m.tensor([1., 1., 1.])))
    da.pow_(2)
    da.clamp_(0, 10)
    da.exp_()
    out += [da, T(da), T(v)]
    b = m.zeros(3)
    b.add_(da)
    out += [T(b)]
    c = m.zeros(4)
    c[1:] = da
    out += [T(c)]
    c2 = m.zeros(4)
    cv = c2[:2]
    cv.copy_(da[:2])
    out += [T(c2), T(cv)]
    e = m.zeros(4)
    e[m.tensor([0, 2])] = fw.make_dual(m.ones(2), m.tensor([7., 8.]))
    out += [T(e)]
    e[m.tensor([1])] = 5.0
    out += [T(e)]
    b2 = m.zeros(3)
    v2 = b2[:2]
    b2.add_(fw.make_dual(m.ones(3), m.tensor([1., 2., 3.])))
    out += [T(v2)]                       # a view made before its base got a tangent
    c3 = fw.make_dual(m.ones(2), m.tensor([1., 2.]))
    c3.copy_(m.zeros(2))
    out += [T(c3)]
    c4 = fw.make_dual(m.ones(2), m.tensor([1., 2.]))
    c4.zero_()
    out += [T(c4)]
    c5 = fw.make_dual(m.ones(2, 3), m.arange(6.).reshape(2, 3))
    c5[0] = c5[1] * 2
    c5[:, 1] += c5[:, 2]
    c5.t()[2].mul_(c5[0, 0])
    out += [c5, T(c5)]
    c6 = fw.make_dual(m.ones(3), m.tensor([1., 2., 3.]))
    c6.tanh_().sigmoid_()
    c6.relu_()
    c6.neg_()
    c6.fill_(2.0)
    out += [T(c6)]
    return out


def test_views_and_inplace_match_torch():
    with fwAD.dual_level(), tfwAD.dual_level():
        got = inplace_script(sg, fwAD)
        want = inplace_script(torch, tfwAD)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w)


def test_view_tangent_is_a_view_of_the_base_tangent():
    with fwAD.dual_level():
        t = sg.tensor(TA)
        d = fwAD.make_dual(sg.tensor(A), t)
        v = d.t()[1:]
        assert np.shares_memory(fwAD.unpack_dual(v).tangent.numpy(), t.numpy())
        assert fwAD.unpack_dual(d).tangent is t      # the tangent as given (torch)


def test_inplace_with_reverse_mode():
    """In-place on a dual non-leaf with reverse mode on: both derivatives as torch's."""
    def f(m, fw, x):
        d = fw.make_dual(x * 1.0, m.ones(3) * 0.5)
        d.mul_(x.exp())
        d[0] = d[1] * 3
        y = d.sin()
        return y, fw.unpack_dual(y).tangent

    x_sg = sg.tensor([0.5, 1.0, 2.0], dtype=sg.float64, requires_grad=True)
    x_t = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with fwAD.dual_level(), tfwAD.dual_level():
        ys, ts = f(sg, fwAD, x_sg)
        yt, tt = f(torch, tfwAD, x_t)
        close(ys, yt)
        close(ts, tt)
        ys.sum().backward()
        yt.sum().backward()
    close(x_sg.grad, x_t.grad)


# -------------------------------------------------------------------- custom Functions
class TorchSwish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        ctx.save_for_forward(x)
        ctx.beta = beta
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def jvp(ctx, tx, tbeta):
        x, = ctx.saved_tensors
        s = torch.sigmoid(ctx.beta * x)
        return tx * (s + ctx.beta * x * s * (1 - s))


class SgSwish(sg.Function):
    """Forward only: symgrad generates its backward and its jvp."""

    @staticmethod
    def forward(ctx, x, beta=1.0):
        return x * sg.sigmoid(beta * x)


class SgTwoOut(sg.Function):
    @staticmethod
    def forward(ctx, x, y):
        return sg.exp(x) * y, sg.log(y) + x.sum()


def test_forward_only_function_matches_torch_and_finite_differences():
    with fwAD.dual_level(), tfwAD.dual_level():
        s = SgSwish.apply(fwAD.make_dual(sg.tensor(A), sg.tensor(TA)), 1.7)
        t = TorchSwish.apply(tfwAD.make_dual(torch.tensor(A), torch.tensor(TA)), 1.7)
        close(s, t)
        close(tan(sg, s), tan(torch, t))
        outs = SgTwoOut.apply(fwAD.make_dual(sg.tensor(A), sg.tensor(TA)),
                              fwAD.make_dual(sg.tensor(C), sg.tensor(TC)))
        tangents = [tan(sg, o).numpy() for o in outs]
    eps = 1e-6
    for k, got in enumerate(tangents):
        hi = SgTwoOut.apply(sg.tensor(A + eps * TA), sg.tensor(C + eps * TC))[k].numpy()
        lo = SgTwoOut.apply(sg.tensor(A - eps * TA), sg.tensor(C - eps * TC))[k].numpy()
        np.testing.assert_allclose(got, (hi - lo) / (2 * eps), rtol=1e-6, atol=1e-7)


def test_forward_only_function_float32_c_target_shape_generic_constants():
    class Poly(sg.Function):
        @staticmethod
        def forward(ctx, x, y, k=3):
            return x ** k * y + sg.where(x > 0, sg.sqrt(x * x + 1), x)

    x32 = A.astype(np.float32)
    with fwAD.dual_level():
        out = Poly.apply(fwAD.make_dual(sg.tensor(x32), sg.tensor(TA.astype(np.float32))),
                         sg.tensor(B.astype(np.float32)), k=2)
        got = fwAD.unpack_dual(out).tangent
    assert got.dtype == sg.float32
    want = (2 * A * B + np.where(A > 0, A / np.sqrt(A * A + 1), 1.0)) * TA
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


class TorchWithJvp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_forward(x, y)
        ctx.save_for_backward(x, y)
        ctx.k = k
        return x * y * k, x + y

    @staticmethod
    def jvp(ctx, tx, ty, tk):
        assert tk is None
        x, y = ctx.saved_tensors
        return (tx * y + x * ty) * ctx.k, tx + ty

    @staticmethod
    def backward(ctx, g1, g2):
        x, y = ctx.saved_tensors
        return g1 * y * ctx.k + g2, g1 * x * ctx.k + g2, None


def _sg_twin(torch_cls):
    """The same Function class over symgrad (methods shared, torch swapped for sg)."""
    ns = {k: v for k, v in vars(torch_cls).items() if k not in ("__dict__", "__weakref__")}
    return type(torch_cls.__name__, (sg.Function,), ns)


SgWithJvp = _sg_twin(TorchWithJvp)


class TorchJvpSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, = inputs
        ctx.save_for_forward(x)

    @staticmethod
    def jvp(ctx, tx):
        x, = ctx.saved_tensors
        return tx * x.cos()

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("not called")


SgJvpSetupContext = _sg_twin(TorchJvpSetupContext)


class SgForwardAndJvp(sg.Function):
    """A forward (backward generated) and a jvp of its own: the jvp is used."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        return x.sin()

    @staticmethod
    def jvp(ctx, tx):
        x, = ctx.saved_tensors
        return tx * x.cos() * 0 + 42.0      # recognisably its own


def test_function_with_jvp():
    for y_tan in (None, TB):
        def f(m, x, y):
            cls = SgWithJvp if m is sg else TorchWithJvp
            return cls.apply(x, y, 2.0)
        both(f, (A, B), (TA, y_tan))
    both(lambda m, x: (SgJvpSetupContext if m is sg else TorchJvpSetupContext).apply(x),
         (A,), (TA,))
    with fwAD.dual_level():
        out = SgForwardAndJvp.apply(fwAD.make_dual(sg.tensor(A), sg.tensor(TA)))
        assert np.all(fwAD.unpack_dual(out).tangent.numpy() == 42.0)
    x = sg.tensor(A, requires_grad=True)                  # reverse mode: generated backward
    SgForwardAndJvp.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(A))


def test_function_with_jvp_and_reverse_mode():
    xs = sg.tensor(A, requires_grad=True)
    xt = torch.tensor(A, requires_grad=True)
    with fwAD.dual_level(), tfwAD.dual_level():
        ys = SgWithJvp.apply(fwAD.make_dual(xs, sg.tensor(TA)), sg.tensor(B), 2.0)
        yt = TorchWithJvp.apply(tfwAD.make_dual(xt, torch.tensor(TA)), torch.tensor(B), 2.0)
        (ys[0].sum() + ys[1].sum()).backward()
        (yt[0].sum() + yt[1].sum()).backward()
    close(xs.grad, xt.grad)


class TorchBackwardOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.exp()


SgBackwardOnly = _sg_twin(TorchBackwardOnly)


class TorchJvpWrongCount(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.sin()

    @staticmethod
    def jvp(ctx, tx):
        return tx, tx

    @staticmethod
    def backward(ctx, g):
        return g


class TorchJvpWrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.sin()

    @staticmethod
    def jvp(ctx, tx):
        return tx[:1]

    @staticmethod
    def backward(ctx, g):
        return g


class TorchSaveNonTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x, 3)
        return x * 2

    @staticmethod
    def jvp(ctx, tx):
        return tx * 2

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("cls", [TorchBackwardOnly, TorchJvpWrongCount, TorchJvpWrongShape,
                                 TorchSaveNonTensor])
def test_function_errors(cls):
    twin = _sg_twin(cls)
    with fwAD.dual_level(), tfwAD.dual_level():
        raises_like(lambda: twin.apply(fwAD.make_dual(sg.tensor(B), sg.tensor(TB))),
                    lambda: cls.apply(tfwAD.make_dual(torch.tensor(B), torch.tensor(TB))))
        if cls is TorchBackwardOnly:    # without a dual input it runs, as in torch
            close(twin.apply(sg.tensor(B)), cls.apply(torch.tensor(B)))


def test_function_jvp_returning_none_is_a_clear_error():
    class NoneJvp(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def jvp(ctx, tx):
            return None

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="NoneJvp's jvp returned NoneType as the forward "
                                               r"gradient of output 0: expected a Tensor of size \[4\]"):
            NoneJvp.apply(fwAD.make_dual(sg.tensor(B), sg.tensor(TB)))


# ------------------------------------------------------------------------ grad modes
def test_forward_ad_under_no_grad_and_inference_mode():
    for mode in ("no_grad", "inference_mode"):
        with fwAD.dual_level(), tfwAD.dual_level():
            s = fwAD.make_dual(sg.tensor(A), sg.tensor(TA))
            t = tfwAD.make_dual(torch.tensor(A), torch.tensor(TA))
            with getattr(sg, mode)():
                ys = (s * 2).sin()
            with getattr(torch, mode)():
                yt = (t * 2).sin()
            close(tan(sg, ys), tan(torch, yt))    # no_grad: a tangent; inference_mode: None


def test_reverse_mode_through_dual_ops_and_through_tangents():
    """backward through the primal (an op whose inputs are dual) and through the tangent
    (reverse over forward: the gradient of a JVP)."""
    def run(m, fw):
        x = m.tensor([1., 2., 0.5], dtype=m.float64, requires_grad=True)
        w = m.tensor([[0.3, -1.0, 2.0], [1.5, 0.2, -0.7]], dtype=m.float64, requires_grad=True)
        xd = fw.make_dual(x, m.tensor([1., 1., -2.], dtype=m.float64))
        out = ((w @ (xd * xd).sin()).tanh() * xd.sum()).exp()
        p, t = fw.unpack_dual(out)
        assert t.requires_grad and p.requires_grad
        gx, gw = m.autograd.grad(t.sum(), (x, w), retain_graph=True)
        p.sum().backward()
        return out, t, gx, gw, x.grad, w.grad

    with fwAD.dual_level(), tfwAD.dual_level():
        got, want = run(sg, fwAD), run(torch, tfwAD)
    for g, w in zip(got, want):
        close(g, w, rtol=1e-9)


def test_tangent_that_requires_grad():
    def run(m, fw):
        v = m.tensor([1., 2., 3.], dtype=m.float64, requires_grad=True)
        d = fw.make_dual(m.tensor([0.1, 0.2, 0.3], dtype=m.float64), v)
        t = fw.unpack_dual((d.exp() * d).sum()).tangent
        t.backward()
        return t, v.grad

    with fwAD.dual_level(), tfwAD.dual_level():
        for g, w in zip(run(sg, fwAD), run(torch, tfwAD)):
            close(g, w)


# ------------------------------------------------------------------------ the level API
def test_exiting_the_level_drops_tangents():
    with fwAD.dual_level() as level:
        assert level == 0
        d = fwAD.make_dual(sg.tensor(A), sg.tensor(TA))
        y = d.exp()
        assert fwAD.unpack_dual(y).tangent is not None
        assert "tangent=" in repr(y)
    assert fwAD.unpack_dual(y) == (y, None)
    assert fwAD.unpack_dual(y).tangent is None
    assert "tangent=" not in repr(y)
    assert fwAD.enter_dual_level() == 0
    try:
        assert fwAD.unpack_dual(d).tangent is None
    finally:
        fwAD.exit_dual_level()


def test_unpack_dual():
    with fwAD.dual_level(), tfwAD.dual_level():
        for m, fw in ((sg, fwAD), (torch, tfwAD)):
            t = m.tensor([1., 2.])
            x = m.tensor([3., 4.], requires_grad=True)
            d = fw.make_dual(x, t)
            u = fw.unpack_dual(d)
            assert type(u).__name__ == "UnpackedDualTensor" and u._fields == ("primal", "tangent")
            assert u.tangent is t and u.primal is not d and u.primal.requires_grad
            assert fw.unpack_dual(u.primal).tangent is None
            assert fw.unpack_dual(x).tangent is None    # make_dual's input: no tangent
            assert d.grad_fn.name() == "ViewBackward0" and not d.is_leaf
            assert fw.unpack_dual(x, level=3).tangent is None


def test_dual_level_as_decorator():
    @fwAD.dual_level()
    def f(x):
        return fwAD.unpack_dual(fwAD.make_dual(x, sg.ones(2)).exp()).tangent

    np.testing.assert_allclose(f(sg.tensor([0.0, 1.0])).numpy(), np.exp([0.0, 1.0]), rtol=1e-6)
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.make_dual(sg.ones(2), sg.ones(2))


ERRORS = {
    "make_dual_outside": (False, lambda m, fw: fw.make_dual(m.ones(3), m.ones(3))),
    "exit_outside": (False, lambda m, fw: fw.exit_dual_level()),
    "exit_wrong_level_outside": (False, lambda m, fw: fw.exit_dual_level(level=2)),
    "nested_enter": (True, lambda m, fw: fw.enter_dual_level()),
    "nested_context": (True, lambda m, fw: fw.dual_level().__enter__()),
    "exit_wrong_level": (True, lambda m, fw: fw.exit_dual_level(level=5)),
    "shape": (True, lambda m, fw: fw.make_dual(m.ones(3), m.ones(4))),
    "broadcastable_shape": (True, lambda m, fw: fw.make_dual(m.ones(2, 3), m.ones(3))),
    "int_primal": (True, lambda m, fw: fw.make_dual(m.arange(3), m.ones(3))),
    "int_tangent": (True, lambda m, fw: fw.make_dual(m.ones(3), m.arange(3))),
    "bool_tangent": (True, lambda m, fw: fw.make_dual(m.ones(3), m.ones(3) > 0)),
    "float_primal": (True, lambda m, fw: fw.make_dual(1.0, m.ones(3))),
    "float_tangent": (True, lambda m, fw: fw.make_dual(m.ones(3), 1.0)),
    "level": (True, lambda m, fw: fw.make_dual(m.ones(3), m.ones(3), level=3)),
    "dual_of_dual": (True, lambda m, fw: fw.make_dual(fw.make_dual(m.ones(3), m.ones(3)),
                                                      m.ones(3))),
    "unpack_float": (True, lambda m, fw: fw.unpack_dual(3.0)),
    "leaf_inplace": (True, lambda m, fw: fw.make_dual(m.ones(2, requires_grad=True),
                                                      m.ones(2)).mul_(2)),
    "add_broadcast": (True, lambda m, fw: fw.make_dual(m.ones(3), m.ones(3)) + m.ones(4)),
    "matmul_shapes": (True, lambda m, fw: fw.make_dual(m.ones(2, 3), m.ones(2, 3)) @ m.ones(2, 2)),
    "unpack_wrong_level": (True, lambda m, fw: fw.unpack_dual(fw.make_dual(m.ones(3), m.ones(3)),
                                                              level=3)),
    "inplace_broadcast": (True, lambda m, fw: fw.make_dual(m.ones(3), m.ones(3)).add_(
        m.ones(2, 3))),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name):
    in_level, f = ERRORS[name]
    if in_level:
        with fwAD.dual_level(), tfwAD.dual_level():
            raises_like(lambda: f(sg, fwAD), lambda: f(torch, tfwAD))
    else:
        raises_like(lambda: f(sg, fwAD), lambda: f(torch, tfwAD))
    assert fwAD._level[0] == tfwAD._current_level == -1


def test_error_leaves_level_usable():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError):
            fwAD.make_dual(sg.ones(3), sg.ones(4))
        d = fwAD.make_dual(sg.ones(3), sg.ones(3))
        assert fwAD.unpack_dual(d * 3).tangent.tolist() == [3.0, 3.0, 3.0]


# ----------------------------------------------------------------- gradcheck(check_forward_ad)
def test_gradcheck_check_forward_ad():
    x = sg.tensor(A[:2, :2], requires_grad=True)
    f = lambda x: (x.exp() * x.sum(0)).sin()
    assert sg.autograd.gradcheck(f, (x,), check_forward_ad=True)
    assert sg.autograd.gradcheck(f, (x,), check_forward_ad=True, check_backward_ad=False)
    assert sg.autograd.gradcheck(SgSwish.apply, (x, 1.3), check_forward_ad=True)

    class TorchWrongJvp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 3

        @staticmethod
        def backward(ctx, g):
            return g * 2

    twin = _sg_twin(TorchWrongJvp)
    raises_like(
        lambda: sg.autograd.gradcheck(twin.apply, (sg.tensor(B[:2], requires_grad=True),),
                                      check_forward_ad=True),
        lambda: torch.autograd.gradcheck(TorchWrongJvp.apply,
                                         (torch.tensor(B[:2], requires_grad=True),),
                                         check_forward_ad=True))


def test_c_target_function():
    """A forward-only Function on the C target: its jvp module is compiled for C too."""
    import os
    import shutil

    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler")

    class CFn(sg.Function):
        cpu_target = "c"

        @staticmethod
        def forward(ctx, x, y):
            return sg.tanh(x) * y + x * x

    x, y = np.linspace(-1, 1, 8), np.linspace(0, 2, 8)
    with fwAD.dual_level():
        one = CFn.apply(fwAD.make_dual(sg.tensor(x), sg.tensor(TB[:1].repeat(8))), sg.tensor(y))
        two = CFn.apply(fwAD.make_dual(sg.tensor(x), sg.ones(8, dtype=sg.float64)),
                        fwAD.make_dual(sg.tensor(y), sg.ones(8, dtype=sg.float64)))
        t1, t2 = fwAD.unpack_dual(one).tangent.numpy(), fwAD.unpack_dual(two).tangent.numpy()
    d = (1 - np.tanh(x) ** 2) * y + 2 * x
    np.testing.assert_allclose(t1, d * TB[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t2, d + np.tanh(x), rtol=1e-12, atol=1e-12)


# torch 2.13's tangents of grad(f(d), d, create_graph=True) with d = make_dual(x, v): H(x) v
X_FOR = np.array([0.5, 2.0, -1.5])
V_FOR = np.array([1.0, -0.5, 2.0])
FORWARD_OVER_REVERSE = [
    ("square", lambda d: (d * d).sum(), [2.0, -1.0, 4.0]),
    ("sin_x", lambda d: (d.sin() * d).sum(), [1.51545235, 1.32544426, -2.70953615]),
    ("exp_sum_squared", lambda d: d.exp().sum() ** 2, [25.26289792, -92.06764229, 7.55173701]),
    ("tanh_sin_chain", lambda d: d.tanh().sin().mul(d).sum(), [0.94472713, 0.04148837, -0.23673642]),
    ("logsumexp", lambda d: sg.logsumexp(d, 0), [0.20877963, -0.26112865, 0.05234902]),
    ("outer_matmul", lambda d: (d.reshape(3, 1) @ d.reshape(1, 3)).sin().sum(),
     [-0.7909647, -11.76367605, -11.72418103]),
]


@pytest.mark.parametrize("name, f, want", FORWARD_OVER_REVERSE, ids=[c[0] for c in FORWARD_OVER_REVERSE])
def test_forward_over_reverse_gives_the_hessian_vector_product(name, f, want):
    """A create_graph backward of dual tensors: the gradients carry H v as their tangent (the
    graph's nodes keep their inputs' tangents beside the saved values), as torch's do; the
    primal gradient is unchanged. Checked against torch's numbers and a central difference
    of the gradient along v."""
    x = sg.tensor(X_FOR, dtype=sg.float64)
    with fwAD.dual_level():
        d = fwAD.make_dual(x.detach().requires_grad_(), sg.tensor(V_FOR, dtype=sg.float64))
        g, = sg.autograd.grad(f(d), d, create_graph=True)
        tangent = fwAD.unpack_dual(g).tangent
    np.testing.assert_allclose(tangent.detach().numpy(), want, rtol=1e-7)

    def grad_at(a):
        t = sg.tensor(a, dtype=sg.float64, requires_grad=True)
        return sg.autograd.grad(f(t), t)[0].numpy()

    h = 1e-6
    fd = (grad_at(X_FOR + h * V_FOR) - grad_at(X_FOR - h * V_FOR)) / (2 * h)
    np.testing.assert_allclose(tangent.detach().numpy(), fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.detach().numpy(), grad_at(X_FOR), rtol=1e-14)


def test_forward_over_reverse_through_functions():
    """A forward-only Function (its generated backward's jvp) and one with backward and jvp
    (ctx.saved_tensors are the dual inputs) give H v too; after the level, no tangent stays."""
    class Gen(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return (x.sin() * x).sum()

    class Own(sg.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return (x * x * x).sum()

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x * x

        @staticmethod
        def jvp(ctx, t):
            x, = ctx.saved_tensors
            return (3 * x * x * t).sum()

    cases = [(Gen, (2 * np.cos(X_FOR) - X_FOR * np.sin(X_FOR)) * V_FOR), (Own, 6 * X_FOR * V_FOR)]
    for fn, want in cases:
        x = sg.tensor(X_FOR, dtype=sg.float64)
        with fwAD.dual_level():
            d = fwAD.make_dual(x.detach().requires_grad_(), sg.tensor(V_FOR, dtype=sg.float64))
            y = fn.apply(d)
            g, = sg.autograd.grad(y, d, create_graph=True)
            np.testing.assert_allclose(fwAD.unpack_dual(g).tangent.detach().numpy(), want,
                                       rtol=1e-12)
        with fwAD.dual_level():   # a new level: the old graph's kept tangents are stale
            fwAD.make_dual(sg.tensor([1.0]), sg.tensor([1.0]))   # (forward AD is live again)
            g2, = sg.autograd.grad(y, d, create_graph=True)
            assert fwAD.unpack_dual(g2).tangent is None
            np.testing.assert_allclose(g2.detach().numpy(), g.detach().numpy(), rtol=1e-14)


def test_forward_mode_jacobian_and_hessian_are_forward_ad():
    """jacobian(strategy="forward-mode") pushes basis tangents through the function (torch's
    _jacfwd): the blocks equal the closed form and reverse mode; a Function with only a
    backward has no jvp, so forward mode raises torch's NotImplementedError where reverse
    mode works; the forward-over-reverse Hessian equals the reverse one and, as torch's,
    requires grad."""
    F = sg.autograd.functional
    x = sg.tensor([[0.3, -1.2], [0.7, 2.0], [1.1, -0.4]], dtype=sg.float64)
    y = sg.tensor([0.5, -2.0], dtype=sg.float64)

    def f(x, y):
        return (x.sin() * y.reshape(1, 2)).exp(), (x * x).sum() + y.prod()

    fwd = F.jacobian(f, (x, y), vectorize=True, strategy="forward-mode")
    rev = F.jacobian(f, (x, y))
    xn, yn = x.numpy(), y.numpy()
    e = np.exp(np.sin(xn) * yn)
    d_x = np.zeros((3, 2, 3, 2))
    d_y = np.zeros((3, 2, 2))
    for i in range(3):
        for j in range(2):
            d_x[i, j, i, j] = e[i, j] * np.cos(xn[i, j]) * yn[j]
            d_y[i, j, j] = e[i, j] * np.sin(xn[i, j])
    want = ((d_x, d_y), (2 * xn, np.array([yn[1], yn[0]])))
    for i in range(2):
        for j in range(2):
            assert fwd[i][j].shape == rev[i][j].shape == want[i][j].shape
            np.testing.assert_allclose(fwd[i][j].numpy(), want[i][j], rtol=1e-14, atol=1e-15)
            np.testing.assert_allclose(fwd[i][j].numpy(), rev[i][j].numpy(), rtol=1e-14)

    class OnlyBackward(sg.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.raises(NotImplementedError, match="jvp function"):
        F.jacobian(OnlyBackward.apply, y, vectorize=True, strategy="forward-mode")
    np.testing.assert_allclose(F.jacobian(OnlyBackward.apply, y).numpy(), 2 * np.eye(2))

    def g(v):
        return (v.sin() * v).sum() + (v[0] * v[1]).exp()

    v = sg.tensor([0.4, -0.9, 1.3], dtype=sg.float64)
    h_fwd = F.hessian(g, v, vectorize=True, outer_jacobian_strategy="forward-mode")
    h_rev = F.hessian(g, v)
    np.testing.assert_allclose(h_fwd.detach().numpy(), h_rev.numpy(), rtol=1e-13)
    assert h_fwd.requires_grad and not h_rev.requires_grad
