"""dtype conversions inside a traced forward (`.float()`, `.double()`, `.long()`, `.bool()`,
`.to(...)`, `.type(...)`, `.type_as(...)`): the ones a fused module can honour give torch's
numbers; the ones it cannot (a float made an integer, a change of float precision) raise a
TraceError naming the op and the user's line. Before, every conversion returned the value
unchanged: `(x * 2).to(int64)` came back 3.4 where torch gives 3, and `x.double()` of a
float32 input computed and returned float32."""
import numpy as np
import pytest

import symgrad as sg
from symgrad.errors import TraceError

torch = pytest.importorskip("torch")

X32 = np.array([1.7, -2.3, 0.4, 0.0, -0.6], dtype=np.float32)


def _both(fn, x):
    """(symgrad's compiled value, gradient of its sum) and torch's."""
    mod = sg.compile(fn, x, cache_ok=False)
    got = mod.forward(x)
    (g,) = mod.backward(np.ones_like(got), x)
    t = torch.tensor(x, requires_grad=True)
    want = fn(t)
    want.sum().backward()
    return got, g, want.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("name, fn", [
    ("mask_float", lambda a: (a > 0).float() * a),
    ("mask_long", lambda a: (a > 0).long() * a),
    ("mask_int", lambda a: (a < 0).int() * a * a),
    ("mask_to_dtype_of_other", lambda a: (a > 0).to(a) * a),
    ("mask_type_as", lambda a: (a > 0).type_as(a) * a.exp()),
    ("bool_of_float", lambda a: a.bool().float() * a + 1),
    ("same_precision", lambda a: a.float().exp() * a.to(torch.float32)),
    ("to_device", lambda a: a.to("cpu") * 2 + a.to(device="cpu", dtype=torch.float32)),
    ("type_same", lambda a: a.type(torch.float32).sin()),
])
def test_conversions_a_module_honours_match_torch(name, fn):
    got, g, want, gwant = _both(fn, X32)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g, gwant, rtol=1e-6, atol=1e-7)


def test_float64_inputs_keep_double_and_to_numpy_float64():
    x = X32.astype(np.float64)
    got, g, want, gwant = _both(lambda a: a.double().tanh() * a.to(torch.float64), x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(g, gwant, rtol=1e-14)


@pytest.mark.parametrize("spelling, fn", [
    ("long", lambda a: (a * 2).long() * a),
    ("int", lambda a: (a * 2).int()),
    ("to", lambda a: (a * 2).to(sg.int64)),
    ("to", lambda a: (a * 2).to(torch.int32)),
    ("type", lambda a: a.type(torch.int64)),
])
def test_float_to_integer_raises_naming_op_and_line(spelling, fn):
    with pytest.raises(TraceError, match=rf"^{spelling} \(at .*test_trace_casts.py:\d+.*"
                                         r"integer cast has no gradient"):
        sg.compile(fn, X32, cache_ok=False)


@pytest.mark.parametrize("spelling, fn, have, want", [
    ("double", lambda a: a.double() * 3, "float32", "float64"),
    ("to", lambda a: a.to(np.float64) * 3, "float32", "float64"),
    ("to", lambda a: a.to(float) * 3, "float32", "float64"),
    ("half", lambda a: a.half(), "float32", "float16"),
])
def test_precision_change_raises_instead_of_computing_in_the_inputs_dtype(spelling, fn, have,
                                                                          want):
    with pytest.raises(TraceError, match=rf"^{spelling} \(at .*\): converts a {have} value to "
                                         rf"{want}.*pass {want} inputs"):
        sg.compile(fn, X32, cache_ok=False)
    with pytest.raises(TraceError, match="float64 value to float32"):
        sg.compile(lambda a: a.float() * 3, X32.astype(np.float64), cache_ok=False)


def test_forward_only_function_reports_the_conversion_from_apply():
    class Twice(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return x.double() * 2

    with pytest.raises(TraceError, match=r"double \(at .*test_trace_casts.py"):
        Twice.apply(sg.tensor(X32, requires_grad=True))
    y = Twice.apply(sg.tensor(X32.astype(np.float64), requires_grad=True))
    np.testing.assert_allclose(y.detach().numpy(), 2 * X32.astype(np.float64))


def test_type_without_dtype_is_refused():
    with pytest.raises(TraceError, match="type without a dtype|type\\(\\) without a dtype"):
        sg.compile(lambda a: a.type(), X32, cache_ok=False)


def test_numpy_dtype_spellings_are_read():
    x = X32.astype(np.float64)
    mod = sg.compile(lambda a: a.to(np.float64) * a.to(np.dtype("float64")), x, cache_ok=False)
    np.testing.assert_allclose(mod.forward(x), x * x)
    with pytest.raises(TraceError, match="integer cast"):
        sg.compile(lambda a: a.to(np.int64), x, cache_ok=False)


def test_complex_conversion_raises_instead_of_staying_real():
    """`.to(complex64)` returned the real value unchanged (the name is no float precision)."""
    for fn in (lambda a: a.to(torch.complex64) * 2, lambda a: a.type(np.complex128)):
        with pytest.raises(TraceError, match=r"(to|type) \(at .*\): converting to complex"):
            sg.compile(fn, X32, cache_ok=False)
