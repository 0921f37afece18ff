"""More torch.autograd conformance scenarios, each run against torch and symgrad (found by
a differential sweep: same code, `torch.` replaced by `sg.`)."""
import threading
import warnings

import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")


def _leaf(m, v=(1.0, 2.0, 3.0)):
    return m.tensor(list(v), requires_grad=True)


def _np(t):
    return np.asarray(t.detach().numpy())


def _both(fn):
    """fn(module) for torch and symgrad: (result, exception class) each."""
    out = []
    for m in (torch, sg):
        try:
            out.append((fn(m), None))
        except Exception as exc:  # noqa: BLE001 - the class is what is compared
            out.append((None, type(exc)))
    return out


# ----------------------------------------------------------- zero-dim gradient sums
def test_zero_dim_gradient_sum_is_an_array_and_prints():
    # two paths into a 0-d tensor: NumPy's 0-d + 0-d is a scalar, not an array
    for m in (torch, sg):
        x = m.tensor(1.5, requires_grad=True)
        g, = m.autograd.grad(x * x + x.sin(), x)
        assert repr(g) == "tensor(3.0707)"
        assert float(g) == pytest.approx(3.0 + np.cos(1.5), rel=1e-6)
    x = sg.tensor(2.0, requires_grad=True)
    (x * x + x.exp()).backward()
    (x * x).backward()
    assert isinstance(x.grad.numpy(), np.ndarray) and x.grad.device.type == "cpu"
    assert float(x.grad) == pytest.approx(8.0 + np.exp(2.0), rel=1e-6)


def test_third_order_backward_into_scalar_leaf():
    res = []
    for m in (torch, sg):
        x = m.tensor(1.5, requires_grad=True)
        y = x.sin() * x ** 2
        g, = m.autograd.grad(y, x, create_graph=True)
        h, = m.autograd.grad(g, x, create_graph=True)
        h.backward()
        res.append(float(x.grad))
        repr(x.grad)
    assert res[1] == pytest.approx(res[0], rel=1e-5)


# ---------------------------------------------------- accumulation into a graph .grad
def test_first_order_accumulation_into_differentiable_grad_is_in_place():
    out = []
    for m in (torch, sg):
        x = _leaf(m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (x.tanh() * x.sigmoid()).sum().backward(create_graph=True)
        g0 = x.grad
        x.grad.sum().backward()
        out.append((x.grad is g0, x.grad.requires_grad, x.grad.grad_fn is not None,
                    _np(x.grad)))
    assert out[1][:3] == out[0][:3] == (True, True, True)
    np.testing.assert_allclose(out[1][3], out[0][3], rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------- backward(inputs=)
def test_backward_inputs_non_leaf_retains_grad_like_torch():
    for m in (torch, sg):
        x = _leaf(m, (1.0, 2.0))
        h = x * 2
        y = (h * h).sum()
        y.backward(inputs=[h], retain_graph=True)
        assert h.retains_grad
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # no non-leaf .grad warning: it is populated
            np.testing.assert_allclose(_np(h.grad), [4.0, 8.0])
        assert x.grad is None
        y.backward()                          # h keeps retaining: 4+4, 8+8
        np.testing.assert_allclose(_np(h.grad), [8.0, 16.0])
        np.testing.assert_allclose(_np(x.grad), [8.0, 16.0])


def test_non_leaf_grad_warning_only_while_grad_is_undefined():
    for m in (torch, sg):
        x = _leaf(m, (1.0, 2.0))
        h = x * 2
        with pytest.warns(UserWarning, match="not a leaf Tensor"):
            assert h.grad is None
        h.grad = m.ones(2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_allclose(_np(h.grad), [1.0, 1.0])


def test_grad_with_empty_inputs_raises():
    for m in (torch, sg):
        x = _leaf(m)
        with pytest.raises(RuntimeError, match="cannot be empty"):
            m.autograd.grad((x * 2).sum(), [])


# ------------------------------------------------------------------- requires_grad
def test_requires_grad_on_non_leaf():
    for m in (torch, sg):
        x = _leaf(m)
        h = x * 2
        assert h.requires_grad_(True) is h and h.requires_grad and not h.is_leaf
        assert h.requires_grad_() is h
        with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
            h.requires_grad_(False)
        with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
            h.requires_grad = True


# ---------------------------------------------------------------------------- hooks
def test_hook_returning_wrong_size_or_type_raises_like_torch():
    def size(m):
        x = _leaf(m)
        h = x * 2
        h.register_hook(lambda g: g.sum())
        (h * h).sum().backward()

    def nontensor(m):
        x = _leaf(m)
        x.register_hook(lambda g: 3.0)
        (x * x).sum().backward()

    def dtype(m):
        x = _leaf(m)
        h = x * 2
        h.register_hook(lambda g: g.double())
        (h * h).sum().backward()

    for fn, cls in ((size, RuntimeError), (nontensor, TypeError), (dtype, RuntimeError)):
        (_, et), (_, es) = _both(fn)
        assert et is cls and es is cls, (fn.__name__, et, es)
    with pytest.raises(RuntimeError, match="has changed the size of value"):
        size(sg)


# ------------------------------------------------------------------------ grad mode
def test_no_grad_decorated_generator_runs_to_completion():
    for m in (torch, sg):
        x = _leaf(m)

        @m.no_grad()
        def gen(a):
            for i in range(2):
                yield (a * i).requires_grad, m.is_grad_enabled()
            return "done"

        assert list(gen(x)) == [(False, False), (False, False)]
        assert m.is_grad_enabled()

        @m.enable_grad()
        def empty():
            return
            yield  # noqa

        assert list(empty()) == []


def test_set_grad_enabled_needs_a_bool():
    for m in (torch, sg):
        for bad in (1, None, "yes"):
            with pytest.raises(TypeError, match="must be bool"):
                m.set_grad_enabled(bad)
        assert m.is_grad_enabled()


def test_no_grad_decorating_a_class_warns_and_works():
    for m in (torch, sg):
        x = _leaf(m)
        with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
            @m.no_grad()
            class A:
                def __init__(self, t):
                    self.y = t * 2
        assert not A(x).y.requires_grad


# ------------------------------------------------------------------------- Function
def _fn(m, fwd, bwd):
    return type("F", (m.autograd.Function,), {"forward": staticmethod(fwd),
                                               "backward": staticmethod(bwd)})


def test_save_for_backward_non_tensor_raises_type_error_naming_the_argument():
    def fwd(ctx, x):
        ctx.save_for_backward(x, 3.0)
        return x * 1

    for m in (torch, sg):
        with pytest.raises(TypeError, match="argument 1 is of type float"):
            _fn(m, fwd, lambda ctx, g: g).apply(_leaf(m))


def test_mark_dirty_bumps_the_version_once_more():
    def fwd(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    def fwd_only_mark(ctx, x):
        ctx.mark_dirty(x)
        return x

    for m in (torch, sg):
        h = _leaf(m) * 1
        y = _fn(m, fwd, lambda ctx, g: g * 2).apply(h)
        assert y is h and h._version == 2
        y.sum().backward()
        c = m.ones(2)
        _fn(m, fwd_only_mark, lambda ctx, g: g).apply(c)
        assert c._version == 1


# --------------------------------------------------------------------- tensor basics
def test_float_int_of_many_elements_raise_value_error():
    for m in (torch, sg):
        with pytest.raises(ValueError, match="only one element tensors"):
            float(m.ones(2))
        with pytest.raises(ValueError, match="only one element tensors"):
            int(m.ones(2))
        with pytest.raises(RuntimeError):
            m.ones(2).item()


def test_tensor_of_a_tensor_warns_to_use_clone():
    for m in (torch, sg):
        with pytest.warns(UserWarning, match="sourceTensor.detach"):
            y = m.tensor(m.ones(2))
        assert not y.requires_grad


def test_T_on_non_matrix_warns():
    for m in (torch, sg):
        with pytest.warns(UserWarning, match="dimension other than 2"):
            assert tuple(m.ones(2, 3, 4).T.shape) == (4, 3, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert tuple(m.ones(2, 3).T.shape) == (3, 2)


# ------------------------------------------------------------- integer arithmetic
def test_true_division_of_integers_is_floating_like_torch():
    for m in (torch, sg):
        i = m.tensor([3, -4, 5])
        q = i / 2
        assert q.dtype == m.float32
        np.testing.assert_allclose(_np(q), [1.5, -2.0, 2.5])
        assert (i / m.tensor([2, 2, 2])).dtype == m.float32
        assert (2 / i).dtype == m.float32 and float((2 / i)[0]) == pytest.approx(2 / 3, 1e-6)
        np.testing.assert_array_equal(_np(m.tensor([1, 2]) / 0), [np.inf, np.inf])
        assert m.div(i, 2).dtype == m.float32


def test_integer_floor_trunc_division_and_remainder_keep_integer_dtypes():
    for m in (torch, sg):
        i = m.tensor([7, -7, 5])
        for got, want in ((i // 2, [3, -4, 2]), (i % 3, [1, 2, 2]), (7 // i, [1, -1, 1]),
                          (m.div(i, 2, rounding_mode="floor"), [3, -4, 2]),
                          (m.div(i, 2, rounding_mode="trunc"), [3, -3, 2]),
                          (m.fmod(i, 3), [1, -1, 2])):
            assert got.dtype == m.int64
            np.testing.assert_array_equal(_np(got), want)
        i32 = m.tensor([1, 2], dtype=m.int32)
        assert (i32 % 2).dtype == m.int32 and i32.flip(0).dtype == m.int32
        assert i32.cumsum(0).dtype == m.int64
        assert m.tensor([True, False]).flip(0).dtype == m.bool
        assert (i // 2.0).dtype == m.float32 and i.clamp_min(2.5).dtype == m.float32
        assert i.sinh().dtype == m.float32 and i.floor().dtype == m.int64
        for bad in (lambda: i // 0, lambda: i % 0, lambda: m.div(i, 0, rounding_mode="trunc")):
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                bad()


def test_where_of_python_scalars_is_default_float():
    for m in (torch, sg):
        c = m.tensor([True, False])
        assert m.where(c, 1.0, 0).dtype == m.float32
        assert m.where(c, m.tensor([1, 2]), 0.5).dtype == m.float32


def test_binary_shape_and_power_errors_are_runtime_errors():
    for m in (torch, sg):
        with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size "
                                               r"of tensor b \(2\) at non-singleton dimension 1"):
            m.ones(2, 3) + m.ones(2)
        with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
            m.tensor([2, 3]) ** -1


def test_reduction_with_a_repeated_dim_raises():
    for m in (torch, sg):
        with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
            m.ones(2, 3).sum((0, -2))
        np.testing.assert_allclose(_np(m.ones(2, 3).sum((0, -1))), 6.0)


# ------------------------------------------------------------------ graph API names
def test_increment_version_and_node_call_like_torch():
    for m in (torch, sg):
        x, y = m.ones(2), m.ones(3)
        m.autograd.graph.increment_version(x)
        m.autograd.graph.increment_version([x, y])
        assert (x._version, y._version) == (2, 1)
        a = _leaf(m)
        h = a.exp()
        out = h.grad_fn(m.ones(3))      # one input: a Tensor
        np.testing.assert_allclose(_np(out), np.exp([1.0, 2.0, 3.0]), rtol=1e-6)
        out = (a * m.ones(3)).grad_fn(m.full((3,), 2.0))   # two inputs: a tuple
        assert isinstance(out, tuple) and len(out) == 2
        np.testing.assert_allclose(_np(out[0]), [2.0, 2.0, 2.0])
        h2 = a * 1
        b = h2.exp()
        b.sum().backward(inputs=[a])
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            h3 = a * 1
            c = h3.sin()
            m.autograd.graph.increment_version(h3)
            c.sum().backward()


def test_anomaly_check_nan_flag_is_public():
    for m in (torch, sg):
        assert m.is_anomaly_check_nan_enabled() is True
        with m.autograd.set_detect_anomaly(True, check_nan=False):
            assert m.is_anomaly_check_nan_enabled() is False
        assert m.is_anomaly_check_nan_enabled() is True


@pytest.mark.parametrize("case", ["square", "sin"])
def test_second_order_through_where_with_a_bool_condition(case):
    # the derivative graph of where has an absent gradient (its bool condition): building its
    # own derivative crashed (AttributeError in Graph.nodes)
    torch = pytest.importorskip("torch")
    fns = {"square": (lambda m, x: m.where(x > 1, x * x, 0.0)),
           "sin": (lambda m, x: m.where(x > 1, m.sin(x), x * 3))}
    fn = fns[case]
    data = [0.5, 2.0, 3.0, -1.0]
    x = sg.tensor(data, dtype=sg.float64, requires_grad=True)
    (g,) = sg.autograd.grad(fn(sg, x).sum(), x, create_graph=True)
    (h,) = sg.autograd.grad(g.sum(), x)
    t = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    (tg,) = torch.autograd.grad(fn(torch, t).sum(), t, create_graph=True)
    (th,) = torch.autograd.grad(tg.sum(), t)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-14, atol=1e-300)
