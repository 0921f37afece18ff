"""torch names added in round 5: F.rms_norm, F.group_norm, F.scaled_dot_product_attention,
sg.nan_to_num (and Tensor.nan_to_num / nan_to_num_), sg.fmax, sg.fmin, sg.ldexp,
sg.special.erfcx, sg.cdist; a traced sg.where of a non-bool condition; a missing
sg.nn.functional name.

Each op against torch 2.13 (float64): values, first and second derivatives at run time
(create_graph through the generated modules), values and vector-Jacobian products through
sg.compile (NumPy; C where the op brings a new C printer), broadcasting, edge values, and
torch's error class for bad input.
"""
import math

import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")
TF = torch.nn.functional
F = sg.nn.functional

RNG = np.random.default_rng(5)


def _close(got, want, tol=1e-10, what=""):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=what)


def _grads(loss, inputs, torch_mode, create_graph=False):
    if torch_mode:
        return torch.autograd.grad(loss, inputs, create_graph=create_graph, allow_unused=True)
    return sg.autograd.grad(loss, inputs, create_graph=create_graph, allow_unused=True)


def check_runtime(sg_fn, torch_fn, arrays, node=None, second=True, tol=1e-10):
    """Values, first and second derivatives of sg_fn against torch_fn (float64; a bool or
    int array is a non-differentiable operand)."""
    diff = [a.dtype.kind == "f" for a in arrays]
    ts = [sg.tensor(a, requires_grad=d) for a, d in zip(arrays, diff)]
    Ts = [torch.tensor(a, requires_grad=d) for a, d in zip(arrays, diff)]
    y, Y = sg_fn(*ts), torch_fn(*Ts)
    _close(y.detach().numpy(), Y.detach().numpy(), tol, "forward")
    if node is not None:
        assert y.grad_fn.name() == node
    w = RNG.normal(size=tuple(Y.shape))
    sd = [t for t, d in zip(ts, diff) if d]
    Td = [t for t, d in zip(Ts, diff) if d]
    gs = _grads((y * sg.tensor(w)).sum(), sd, False, create_graph=second)
    Gs = _grads((Y * torch.tensor(w)).sum(), Td, True, create_graph=second)
    for i, (g, G) in enumerate(zip(gs, Gs)):
        _close(g.detach().numpy() if g is not None else 0 * G.detach().numpy(),
               G.detach().numpy() if G is not None else 0, tol, f"grad {i}")
    if not second:
        return
    # second order: the gradient of sum(v * grad) (a Hessian-vector product)
    vs = [RNG.normal(size=tuple(G.shape)) for G in Gs]
    s = sum((g * sg.tensor(v)).sum() for g, v in zip(gs, vs) if g is not None
            and g.requires_grad)
    S = sum((G * torch.tensor(v)).sum() for G, v in zip(Gs, vs) if G is not None
            and G.requires_grad)
    if isinstance(S, int):
        return
    hs = _grads(s, sd, False)
    Hs = _grads(S, Td, True)
    for i, (h, H) in enumerate(zip(hs, Hs)):
        want = H.numpy() if H is not None else np.zeros(Td[i].shape)
        got = h.numpy() if h is not None else np.zeros(Td[i].shape)
        _close(got, want, max(tol, 1e-9), f"second derivative {i}")


def check_compiled(sg_fn, torch_fn, arrays, target="numpy", tol=1e-10):
    """sg.compile(sg_fn): forward and backward (a vector-Jacobian product) against torch."""
    mod = sg.compile(sg_fn, *arrays, target=target)
    diff = [a.dtype.kind == "f" for a in arrays]
    Ts = [torch.tensor(a, requires_grad=d) for a, d in zip(arrays, diff)]
    Y = torch_fn(*Ts)
    _close(mod.forward(*arrays), Y.detach().numpy(), tol, "compiled forward")
    w = RNG.normal(size=tuple(Y.shape))
    grads = mod.backward(w, *arrays)
    Gs = torch.autograd.grad((Y * torch.tensor(w)).sum(), [t for t, d in zip(Ts, diff) if d],
                             allow_unused=True)
    got = [g for g, d in zip(grads, diff) if d]
    for i, (g, G) in enumerate(zip(got, Gs)):
        _close(g, G.numpy() if G is not None else 0 * g, tol, f"compiled grad {i}")


def _both(sg_fn, torch_fn, arrays, node=None, second=True, tol=1e-10):
    check_runtime(sg_fn, torch_fn, arrays, node, second, tol)
    check_compiled(sg_fn, torch_fn, arrays, tol=tol)


# ----------------------------------------------------------------------------- fmax / fmin
NANS_A = np.array([1.0, np.nan, 3.0, np.nan, 2.0, -np.inf, np.inf, -1.0])
NANS_B = np.array([2.0, 1.0, np.nan, np.nan, 2.0, 0.5, np.nan, -np.inf])


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_nan_ignoring_with_torch_gradients(name):
    # NaN on either side, both, ties (2, 2: the whole gradient to input), infinities
    sg_fn = lambda a, b: getattr(sg, name)(a, b)   # noqa: E731
    torch_fn = lambda a, b: getattr(torch, name)(a, b)   # noqa: E731
    _both(sg_fn, torch_fn, [NANS_A, NANS_B], node=f"{name.capitalize()}Backward0")


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_broadcast_method_and_compiled_c(name):
    a, b = RNG.normal(size=(3, 1, 4)), RNG.normal(size=(5, 1))
    b[0, 0] = np.nan
    a[1, 0, 2] = np.nan
    sg_fn = lambda a, b: getattr(a, name)(b) * a   # noqa: E731
    torch_fn = lambda a, b: getattr(a, name)(b) * a   # noqa: E731
    _both(sg_fn, torch_fn, [a, b])
    check_compiled(sg_fn, torch_fn, [a, b], target="c")


def test_fmax_fmin_dtypes_and_errors():
    i = sg.tensor([1, 5, 3])
    j = sg.tensor([4, 2, 3])
    assert sg.fmax(i, j).dtype == sg.int64 and sg.fmax(i, j).tolist() == [4, 5, 3]
    assert sg.fmin(sg.tensor([1.0, 2.0]), sg.tensor([0, 3])).dtype == sg.float32
    for name in ("fmax", "fmin"):
        with pytest.raises(TypeError, match=rf"{name}\(\): argument 'other'"):
            getattr(sg, name)(sg.ones(2), 2.0)
        with pytest.raises(TypeError):
            getattr(torch, name)(torch.ones(2), 2.0)
        with pytest.raises(TypeError, match="must be Tensor"):
            sg.compile(lambda x: getattr(x, name)(1.0), np.ones(2))


# ----------------------------------------------------------------------------------- ldexp
def test_ldexp_values_gradients_broadcast():
    x = RNG.normal(size=(3, 4))
    e = np.array([-3.0, 0.0, 2.0, 10.0])
    _both(sg.ldexp, torch.ldexp, [x, e], node="LdexpBackward0")
    _both(lambda x, e: x.ldexp(e), lambda x, e: x.ldexp(e), [x, e])


def test_ldexp_integer_exponent_and_errors():
    x = sg.tensor([1.5, -2.0], requires_grad=True)
    y = sg.ldexp(x, sg.tensor([3, -1]))
    want = torch.ldexp(torch.tensor([1.5, -2.0]), torch.tensor([3, -1]))
    assert y.dtype == sg.float32 and y.tolist() == want.tolist()
    y.sum().backward()
    _close(x.grad.numpy(), [8.0, 0.5])
    assert sg.ldexp(sg.tensor([1, 2]), sg.tensor([1, 2])).dtype == sg.float32   # torch's too
    with pytest.raises(TypeError, match=r"ldexp\(\): argument 'other'"):
        sg.ldexp(sg.ones(2), 2)
    # through compile with an integer exponent input
    mod = sg.compile(sg.ldexp, np.array([1.5, -2.0]), np.array([3, -1]))
    _close(mod.forward(np.array([1.5, -2.0]), np.array([3, -1])), [12.0, -1.0])


# ------------------------------------------------------------------------------ nan_to_num
EDGES = np.array([np.nan, np.inf, -np.inf, 0.0, -2.5, 1e308, -1e-300])


@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5}, {"nan": -1.0, "posinf": 7.0},
                                    {"posinf": 3.0, "neginf": -4.0}, {"neginf": 0.0}])
def test_nan_to_num_values_gradients(kwargs):
    # (an upstream gradient that is inf or NaN where x is not finite: torch's grad * isfinite
    # is NaN there, symgrad's selection 0; not compared)
    x = np.stack([EDGES, EDGES[::-1]])
    _both(lambda x: sg.nan_to_num(x, **kwargs) * 0.5 + (x.nan_to_num(**kwargs) * 1e-300).tanh(),
          lambda x: torch.nan_to_num(x, **kwargs) * 0.5 + (x.nan_to_num(**kwargs) * 1e-300).tanh(),
          [x])
    check_runtime(lambda x: sg.nan_to_num(x, **kwargs), lambda x: torch.nan_to_num(x, **kwargs),
                  [x], node="NanToNumBackward0", second=False)


def test_nan_to_num_float32_default_bounds_and_compiled_c():
    x = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
    got = sg.nan_to_num(sg.tensor(x)).numpy()
    want = torch.nan_to_num(torch.tensor(x)).numpy()
    assert got.dtype == np.float32 and np.array_equal(got, want)
    for target in ("numpy", "c"):
        mod = sg.compile(lambda x: sg.nan_to_num(x), x, target=target)
        out = mod.forward(x)
        assert np.array_equal(out, want), (target, out)
        (g,) = mod.backward(np.ones(4, np.float32), x)
        assert np.array_equal(g, [0, 0, 0, 1]), (target, g)


def test_nan_to_num_defaults_follow_the_dtype_a_generic_module_runs_in():
    # nextafter(+-inf, 0) in the module's arithmetic: float64 inputs get float64's extremes
    # from a module compiled without examples (whose trace assumed float32)
    mod = sg.compile(lambda x: sg.nan_to_num(x), cache_ok=False)
    for dtype in (np.float64, np.float32):
        x = np.array([np.inf, -np.inf, np.nan, 2.0], dtype=dtype)
        want = torch.nan_to_num(torch.tensor(x)).numpy()
        out = mod.forward(x)
        assert out.dtype == dtype and np.array_equal(out, want), (dtype, out)


def test_nan_to_num_integers_inplace_and_errors():
    i = sg.tensor([1, 2, 3])
    out = sg.nan_to_num(i)
    assert out.dtype == sg.int64 and out.tolist() == [1, 2, 3]
    a = sg.tensor([np.nan, np.inf, 2.0], dtype=sg.float64, requires_grad=True)
    b = a * 1
    assert b.nan_to_num_(nan=5.0, posinf=6.0) is b
    assert b.tolist() == [5.0, 6.0, 2.0] and b.grad_fn.name() == "NanToNumBackward0"
    b.sum().backward()
    assert a.grad.tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(TypeError, match="'nan' must be float"):
        sg.nan_to_num(sg.ones(2), nan="a")
    with pytest.raises(TypeError):
        torch.nan_to_num(torch.ones(2), nan="a")


# --------------------------------------------------------------------------- special.erfcx
def test_erfcx_values_gradients_tails():
    # large |x|: erfc underflows past 26.5 (the scaled value ~ 1/(x sqrt(pi)) stays exact);
    # below -26, exp(x**2) overflows to inf, as torch's
    x = np.array([-26.0, -5.0, -1.0, -1e-8, 0.0, 0.5, 3.0, 26.0, 27.0, 100.0, 1e6, 1e150])
    _both(sg.special.erfcx, torch.special.erfcx, [x], node="SpecialErfcxBackward0", tol=1e-13)
    with np.errstate(over="ignore"):
        y = sg.special.erfcx(sg.tensor([1e300, -30.0, np.inf, np.nan]))
    _close(y.numpy(), torch.special.erfcx(torch.tensor([1e300, -30.0, np.inf, np.nan])).numpy())
    check_compiled(sg.special.erfcx, torch.special.erfcx, [x], target="c", tol=1e-13)


def test_erfcx_dtype_and_out():
    assert sg.special.erfcx(sg.tensor([1, 2])).dtype == sg.float32
    out = sg.zeros(2, dtype=sg.float64)
    sg.special.erfcx(sg.tensor([0.0, 1.0], dtype=sg.float64), out=out)
    want = torch.special.erfcx(torch.tensor([0.0, 1.0], dtype=torch.float64))
    _close(out.numpy(), want.numpy(), 1e-15)


# ----------------------------------------------------------------------------------- cdist
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, math.inf, 0.0])
def test_cdist_values_gradients_zero_distance_rows(p):
    a = RNG.normal(size=(2, 3, 4))
    b = RNG.normal(size=(1, 5, 4))
    b[0, 1] = a[1, 2]          # zero distances: torch's gradient is 0 there
    b[0, 3] = a[0, 0]
    sg_fn = lambda a, b: sg.cdist(a, b, p)   # noqa: E731
    torch_fn = lambda a, b: torch.cdist(a, b, p)   # noqa: E731
    check_runtime(sg_fn, torch_fn, [a, b], node="CdistBackward0", second=False)
    check_compiled(sg_fn, torch_fn, [a, b])


def test_cdist_second_order_against_torch_norm():
    # torch's cdist has no double backward; its norm of the differences has, with the same
    # first derivative (p = 2 and p = 1 away from ties and zero distances)
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4))
    for p in (2.0, 3.0):
        check_runtime(lambda a, b: sg.cdist(a, b, p),
                      lambda a, b: torch.linalg.vector_norm(a[:, None] - b[None], p, -1),
                      [a, b], tol=1e-9)


def test_cdist_errors():
    with pytest.raises(RuntimeError, match="at least 2D tensors, X1 got: 1D"):
        sg.cdist(sg.ones(3), sg.ones(3))
    with pytest.raises(RuntimeError, match="same number of columns. X1: 2 X2: 3"):
        sg.cdist(sg.ones(3, 2), sg.ones(3, 3))
    with pytest.raises(RuntimeError, match="non-negative p values"):
        sg.cdist(sg.ones(3, 2), sg.ones(3, 2), p=-1)
    with pytest.raises(RuntimeError, match="floating-point dtypes, X1 got: Long"):
        sg.cdist(sg.ones(3, 2, dtype=sg.int64), sg.ones(3, 2))
    with pytest.raises(RuntimeError, match=r"size of tensor a \(2\) must match"):
        sg.cdist(sg.ones(2, 3, 2), sg.ones(3, 3, 2))
    with pytest.raises(RuntimeError, match="same number of columns"):
        sg.compile(lambda a, b: sg.cdist(a, b), np.ones((3, 2)), np.ones((3, 3)))


# --------------------------------------------------------------------------------- rms_norm
def test_rms_norm_values_gradients():
    x = RNG.normal(size=(2, 3, 4))
    w = RNG.normal(size=4)
    _both(lambda x, w: F.rms_norm(x, (4,), w), lambda x, w: TF.rms_norm(x, (4,), w), [x, w],
          node="MulBackward0")
    _both(lambda x: F.rms_norm(x, [3, 4], eps=0.1), lambda x: TF.rms_norm(x, [3, 4], eps=0.1),
          [x])
    # a zero row: eps keeps it finite (torch's default eps: the dtype's machine epsilon)
    z = np.zeros((2, 4))
    z[1] = RNG.normal(size=4)
    _both(lambda x: F.rms_norm(x, (4,)), lambda x: TF.rms_norm(x, (4,)), [z], tol=1e-6)


def test_rms_norm_float32_eps_and_errors():
    x = RNG.normal(size=(3, 4)).astype(np.float32) * 1e-4
    got = F.rms_norm(sg.tensor(x), (4,)).numpy()
    want = TF.rms_norm(torch.tensor(x), (4,)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*3\]"):
        F.rms_norm(sg.ones(2, 4), (3,))
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
        F.rms_norm(sg.ones(2, 4), (4,), weight=sg.ones(3))
    with pytest.raises(TypeError, match="must be tuple of ints, not int"):
        F.rms_norm(sg.ones(2, 4), 4)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.rms_norm(sg.ones(2, 3, dtype=sg.int64), (3,))
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*3\]"):
        sg.compile(lambda x: F.rms_norm(x, (3,)), np.ones((2, 4)))


# ------------------------------------------------------------------------------- group_norm
@pytest.mark.parametrize("shape,groups", [((2, 6, 4), 3), ((3, 4), 2), ((2, 4, 3, 2), 1),
                                          ((2, 4, 3), 4)])
def test_group_norm_values_gradients(shape, groups):
    x = RNG.normal(size=shape)
    w, b = RNG.normal(size=shape[1]), RNG.normal(size=shape[1])
    _both(lambda x, w, b: F.group_norm(x, groups, w, b),
          lambda x, w, b: TF.group_norm(x, groups, w, b), [x, w, b],
          node="NativeGroupNormBackward0", tol=1e-9)
    _both(lambda x: F.group_norm(x, groups, eps=0.01),
          lambda x: TF.group_norm(x, groups, eps=0.01), [x], tol=1e-9)


def test_group_norm_errors():
    x = sg.ones(2, 6, 4)
    with pytest.raises(RuntimeError, match="divisible by num_groups, but got input of shape "
                                           r"\[2, 6, 4\] and num_groups=4"):
        F.group_norm(x, 4)
    with pytest.raises(RuntimeError, match="Expected weight to be a vector of size equal"):
        F.group_norm(x, 3, weight=sg.ones(5))
    with pytest.raises(RuntimeError, match="Expected bias to be a vector of size equal"):
        F.group_norm(x, 3, bias=sg.ones(5))
    with pytest.raises(RuntimeError, match="Expected at least 2 dimensions"):
        F.group_norm(sg.ones(3), 1)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.group_norm(sg.ones(2, 4, dtype=sg.int64), 2)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        sg.compile(lambda x: F.group_norm(x, 4), np.ones((2, 6, 4)))


# -------------------------------------------------------------- scaled_dot_product_attention
Q = RNG.normal(size=(2, 3, 5, 4))
K = RNG.normal(size=(2, 3, 6, 4))
V = RNG.normal(size=(2, 3, 6, 3))


def test_sdpa_plain_scale_and_broadcast():
    _both(F.scaled_dot_product_attention, TF.scaled_dot_product_attention, [Q, K, V],
          node="UnsafeViewBackward0")
    _both(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3),
          lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, scale=0.3),
          [Q[0, 0], K[0, 0], V[0, 0]])


def test_sdpa_bool_mask_with_fully_masked_row():
    mask = RNG.normal(size=(5, 6)) > 0
    mask[1] = False           # nothing to attend to: a row of 0 (torch's _safe_softmax)
    mask[2] = True
    _both(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m),
          lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, m), [Q, K, V, mask])


def test_sdpa_float_mask_with_minus_inf():
    mask = RNG.normal(size=(3, 5, 6))
    mask[0, 2] = -np.inf      # a row of -inf: 0, its gradients 0 (not NaN)
    mask[1, 3, 1] = -np.inf
    _both(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m),
          lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, m), [Q, K, V, mask])


@pytest.mark.parametrize("lq", [5, 6, 8])
def test_sdpa_causal(lq):
    q = RNG.normal(size=(3, lq, 4))
    _both(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True),
          [q, K[0], V[0]])


def test_sdpa_grouped_query_attention():
    k, v = K[:, :1], V[:, :1]
    _both(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
          lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, enable_gqa=True),
          [Q, k, v])


def test_sdpa_dropout_runtime_and_traced():
    q, k, v = (sg.tensor(a, requires_grad=True) for a in (Q, K, V))
    sg.manual_seed(0)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    plain = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == plain.shape and not np.allclose(out.detach().numpy(),
                                                        plain.detach().numpy())
    out.sum().backward()
    assert np.isfinite(q.grad.numpy()).all()
    zero = F.scaled_dot_product_attention(q, k, v, dropout_p=1.0)
    assert np.array_equal(zero.detach().numpy(), np.zeros(zero.shape))
    with pytest.raises(NotImplementedError, match="dropout_p"):
        sg.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.1),
                   Q, K, V)


def test_sdpa_errors():
    x = sg.ones(2, 6, 4)
    cases = [
        (lambda m: m.scaled_dot_product_attention(X(x), X(x), X(x), is_causal=True,
                                                  attn_mask=B(6, 6)),
         RuntimeError, "Explicit attn_mask should not be set when is_causal=True"),
        (lambda m: m.scaled_dot_product_attention(X(x), X(x)[:, :, :3], X(x)),
         RuntimeError, "first two dimensions of batch2"),
        (lambda m: m.scaled_dot_product_attention(X(x), X(x), X(x)[:, :5]),
         RuntimeError, "first two dimensions of batch2"),
        (lambda m: m.scaled_dot_product_attention(X(x), X(x), X(x), attn_mask=L(6, 6)),
         RuntimeError, "Expected attn_mask dtype to be bool or float"),
        (lambda m: m.scaled_dot_product_attention(X(x), D(x), X(x)),
         RuntimeError, "Expected query, key, and value to have the same dtype"),
        (lambda m: m.scaled_dot_product_attention(X(x), X(x), X(x), dropout_p=1.5),
         RuntimeError, "dropout probability has to be between 0 and 1"),
        (lambda m: m.scaled_dot_product_attention(V1(), V1(), V1()),
         RuntimeError, "at least 2 dimensional"),
    ]
    for lib in ("sg", "torch"):
        mod = F if lib == "sg" else TF
        X = (lambda t: t) if lib == "sg" else (lambda t: torch.ones(2, 6, 4))   # noqa: E731
        D = (lambda t: t.double()) if lib == "sg" else \
            (lambda t: torch.ones(2, 6, 4, dtype=torch.float64))   # noqa: E731
        B = (lambda *s: sg.ones(*s, dtype=sg.bool)) if lib == "sg" else \
            (lambda *s: torch.ones(*s, dtype=torch.bool))   # noqa: E731
        L = (lambda *s: sg.ones(*s, dtype=sg.int64)) if lib == "sg" else \
            (lambda *s: torch.ones(*s, dtype=torch.int64))   # noqa: E731
        V1 = (lambda: sg.ones(3)) if lib == "sg" else (lambda: torch.ones(3))   # noqa: E731
        for fn, cls, message in cases:
            with pytest.raises(cls, match=message):
                fn(mod)


# ------------------------------------------------------------------------ traced where dtype
@pytest.mark.parametrize("dtype,name", [(np.float64, "Double"), (np.float32, "Float"),
                                        (np.int64, "Long")])
def test_traced_where_of_a_non_bool_condition_is_torchs_error(dtype, name):
    message = f"where expected condition to be a boolean tensor, but got a tensor with dtype " \
              f"{name}"
    c = np.ones(3, dtype=dtype)
    with pytest.raises(RuntimeError, match=message):
        sg.compile(lambda c, a, b: sg.where(c, a, b), c, np.ones(3), np.ones(3))
    with pytest.raises(RuntimeError, match=message):
        sg.compile(lambda c, a: a.where(c, a), c, np.ones(3))
    with pytest.raises(RuntimeError, match=message):   # the runtime agrees
        sg.where(sg.tensor(c), sg.ones(3), sg.ones(3))
    with pytest.raises(RuntimeError, match=message):
        torch.where(torch.tensor(c), torch.ones(3), torch.ones(3))
    # a bool condition still traces
    mod = sg.compile(lambda c, a, b: sg.where(c, a, b), c > 0, np.ones(3), np.ones(3))
    _close(mod.forward(np.array([True, False, True]), np.ones(3), np.zeros(3)), [1, 0, 1])


@pytest.mark.parametrize("dtype,name", [(np.float64, "double"), (np.float32, "float"),
                                        (np.int64, "long int")])
def test_masked_fill_of_a_non_bool_mask_is_torchs_error(dtype, name):
    # was where()'s message at run time, and accepted (as mask != 0) in a traced forward
    message = f"masked_fill_ only supports boolean masks, but got mask with dtype {name}"
    m = np.ones(3, dtype=dtype)
    with pytest.raises(RuntimeError, match=message):
        torch.ones(3, dtype=torch.float64).masked_fill(torch.tensor(m), 0.0)
    with pytest.raises(RuntimeError, match=message):
        sg.ones(3, dtype=sg.float64).masked_fill(sg.tensor(m), 0.0)
    with pytest.raises(RuntimeError, match=message):
        sg.compile(lambda x, m: x.masked_fill(m, 0.0), np.ones(3), m)


# ------------------------------------------------------------------ missing functional names
def test_missing_functional_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'symgrad.nn.functional' has no attribute "
                                             "'no_such_op'"):
        F.no_such_op
    with pytest.raises(AttributeError, match="Did you mean group_norm"):
        F.group_nrom
    assert not hasattr(F, "max_pool2d_nonexistent")
    assert all(callable(getattr(F, n)) for n in ("rms_norm", "group_norm",
                                                  "scaled_dot_product_attention"))


# ------------------------------------------------------------------------- the C target
@pytest.mark.slow  # a C build
def test_norms_attention_cdist_compiled_to_c_match_torch():
    q, k, v = Q[0], K[0], V[0]
    w = RNG.normal(size=4)
    x = RNG.normal(size=(2, 4, 3))
    mask = RNG.normal(size=(5, 6)) > -0.5
    mask[3] = False

    def block(q, k, v, m, w, x, lib):
        Fn = F if lib is sg else TF
        a = Fn.scaled_dot_product_attention(q, k, v, m)
        b = Fn.scaled_dot_product_attention(q, k, v, is_causal=True)
        return (Fn.rms_norm(a, (3,), w[:3]).sum() + b.sum() + lib.cdist(q[0], k[0]).sum()
                + Fn.group_norm(x, 2).pow(2).sum() + lib.fmax(q, q.flip(-1)).sum())

    arrays = [q, k, v, mask, w, x]
    check_compiled(lambda *a: block(*a, sg), lambda *a: block(*a, torch), arrays, target="c",
                   tol=1e-9)
