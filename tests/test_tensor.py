"""Runtime Tensor: dtypes, factories, attributes, repr, ops (forward + grad vs torch), import cost."""

import subprocess
import sys
import time

import numpy as np
import pytest

import symgrad.tensor as sgt
from symgrad import _runtime_ops as ops
from symgrad.tensor import tensor

torch = pytest.importorskip("torch")


def test_default_dtypes_and_wrapped_scalar_promotion():
    assert tensor([1.0, 2.0]).dtype is sgt.float32
    assert tensor([1, 2]).dtype is sgt.int64
    assert tensor([True]).dtype is sgt.bool
    assert tensor(np.zeros(2)).dtype is sgt.float64
    x = tensor([1.0, 2.0])
    assert (x + 2.5).dtype is sgt.float32
    assert (tensor([1, 2]) + 2.5).dtype is sgt.float32
    assert (tensor([1, 2]) * 2).dtype is sgt.int64
    assert (x + tensor(1.0, dtype=sgt.float64)).dtype is sgt.float32  # 0-d tensors rank lower
    assert (x + tensor([1.0, 1.0], dtype=sgt.float64)).dtype is sgt.float64
    assert (x > 1).dtype is sgt.bool and not (tensor([1.0], requires_grad=True) > 0).requires_grad


def test_factories():
    assert sgt.zeros(2, 3).shape == (2, 3) and sgt.zeros((2, 3)).dtype is sgt.float32
    assert sgt.ones(2, dtype=sgt.float64).dtype is sgt.float64
    assert sgt.full((2,), 3).dtype is sgt.int64
    assert sgt.arange(5).dtype is sgt.int64 and sgt.arange(0.0, 1.0, 0.5).tolist() == [0.0, 0.5]
    sgt.manual_seed(0)
    a = sgt.randn(3)
    sgt.manual_seed(0)
    assert sgt.randn(3).tolist() == a.tolist() and a.dtype is sgt.float32
    assert 0 <= sgt.rand(10).numpy().min() and sgt.rand(10).numpy().max() < 1
    arr = np.zeros(3, np.float32)
    t = sgt.from_numpy(arr)
    arr[0] = 5
    assert t[0].item() == 5.0
    assert sgt.zeros_like(t).shape == (3,) and sgt.ones_like(t, dtype=sgt.float64).dtype is sgt.float64
    assert sgt.empty(2).shape == (2,)
    assert sgt.tensor([1.0], requires_grad=True).requires_grad


def test_attributes_and_methods():
    x = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    assert x.shape == (2, 3) and x.size() == (2, 3) and x.size(1) == 3 and x.ndim == 2
    assert x.dim() == 2 and x.numel() == 6 and x.stride() == (3, 1) and x.is_contiguous()
    assert x.T.stride() == (1, 3) and not x.T.is_contiguous()
    assert str(x.device) == "cpu" and x.is_leaf and x.grad_fn is None
    y = x * 2
    assert not y.is_leaf and y.grad_fn.name() == "MulBackward0"
    assert x.detach().tolist() == [[1, 2, 3], [4, 5, 6]]
    assert tensor([3.5]).item() == 3.5
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        x.numpy()
    with pytest.raises(RuntimeError, match="a Tensor with 6 elements cannot be converted to Scalar"):
        x.item()
    assert x.double().dtype is sgt.float64 and x.double().grad_fn.name() == "ToCopyBackward0"
    assert x.clone().grad_fn.name() == "CloneBackward0"
    assert x.to(sgt.float32) is x


def test_repr_like_torch():
    assert repr(tensor([1.0, 2.5], requires_grad=True)) == "tensor([1.0000, 2.5000], requires_grad=True)"
    assert repr(tensor([1.0, 2.0]) * 2) == "tensor([2., 4.])"
    assert repr(tensor([[1, 2], [3, 4]])) == "tensor([[1, 2],\n        [3, 4]])"
    assert repr(tensor(3.0)) == "tensor(3.)"
    assert repr(tensor([1.0, 2.0], dtype=sgt.float64)) == "tensor([1., 2.], dtype=symgrad.float64)"
    assert repr(tensor([1.0], requires_grad=True).exp()) == "tensor([2.7183], grad_fn=<ExpBackward0>)"


UNARY = ["abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
         "sigmoid", "relu", "erf", "neg"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_forward_grad_and_node_name(name):
    data = [0.3, 0.7, 1.4] if name in ("log", "sqrt", "rsqrt") else [-0.9, 0.3, 1.2]
    x = tensor(data, requires_grad=True)
    xt = torch.tensor(data, requires_grad=True)
    y = getattr(ops, name)(x)
    yt = getattr(torch, name)(xt)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert y.grad_fn.name() == yt.grad_fn.name()
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)


CASES = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("rsub", lambda a, b: 2.0 - b),
    ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b), ("pow", lambda a, b: a ** 2),
    ("powt", lambda a, b: a.abs() ** b), ("rpow", lambda a, b: 2 ** a),
    ("matmul", lambda a, b: a @ b.T), ("maximum", lambda a, b: a.maximum(b)),
    ("minimum", lambda a, b: a.minimum(b)), ("clamp", lambda a, b: a.clamp(-0.5, 0.5)),
    ("clampmin", lambda a, b: a.clamp(min=0.1)),
    ("sum", lambda a, b: a.sum()), ("sumdim", lambda a, b: a.sum(1, keepdim=True) * b),
    ("mean", lambda a, b: a.mean(0)), ("max", lambda a, b: a.max()), ("min", lambda a, b: a.min()),
    ("maxdim", lambda a, b: a.max(1).values), ("mindim", lambda a, b: a.min(0, keepdim=True)[0]),
    ("prod", lambda a, b: a.prod(1)), ("reshape", lambda a, b: a.reshape(3, 2) * 2),
    ("view", lambda a, b: a.view(-1)), ("transpose", lambda a, b: a.transpose(0, 1)),
    ("permute", lambda a, b: a.permute(1, 0)), ("T", lambda a, b: a.T),
    ("squeeze", lambda a, b: a.unsqueeze(0).squeeze(0)), ("expand", lambda a, b: a[:1].expand(4, 3)),
    ("getitem", lambda a, b: a[1, 1:]), ("getadv", lambda a, b: a[[0, 1, 1]]),
    ("where", lambda a, b: (a > 0).where(a, b) if False else None),
]


def _where(lib, a, b):
    return lib.where(a > 0, a, b * 2)


@pytest.mark.parametrize("name, fn", [c for c in CASES if c[0] != "where"], ids=[c[0] for c in CASES if c[0] != "where"])
def test_ops_forward_grad_vs_torch(name, fn):
    a = [[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]
    b = [[1.0, 2.0, 0.5], [-1.0, 0.25, 3.0]]
    x, y = tensor(a, requires_grad=True), tensor(b, requires_grad=True)
    xt, yt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, outt = fn(x, y), fn(xt, yt)
    np.testing.assert_allclose(out.detach().numpy(), outt.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert out.grad_fn.name() == outt.grad_fn.name()
    (out * out).sum().backward()
    (outt * outt).sum().backward()
    for o, t in ((x, xt), (y, yt)):
        if t.grad is None:
            assert o.grad is None
        else:
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_where_and_max_namedtuple():
    x = tensor([-1.0, 2.0], requires_grad=True)
    out = ops.where(x > 0, x, x * 3)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3, 1])
    assert out.grad_fn.name() == "WhereBackward0"
    m = tensor([[1.0, 5.0], [7.0, 2.0]]).max(1)
    assert m.values.tolist() == [5.0, 7.0] and m.indices.tolist() == [1, 0]
    assert m.indices.dtype is sgt.int64


def test_setitem_and_getitem_plain():
    x = sgt.zeros(3, 4)
    x[1] = 2.0
    x[:, 0] = tensor([7.0, 8.0, 9.0])
    x[x > 7.5] = -1.0
    assert x.tolist()[1] == [-1.0, 2.0, 2.0, 2.0]
    assert x[0].tolist() == [7.0, 0, 0, 0]


def test_traced_values_dispatch_to_their_methods():
    class Traced:
        def exp(self):
            return "traced-exp"

        def sum(self, dim, keepdim):
            return ("traced-sum", dim, keepdim)

    assert ops.exp(Traced()) == "traced-exp"
    assert ops.sum(Traced(), 1, True) == ("traced-sum", 1, True)


def test_runtime_does_not_import_sympy():
    code = (
        "import sys\n"
        "import symgrad.tensor as t\n"
        "import symgrad.autograd as ag\n"
        "x = t.tensor([1.0, 2.0], requires_grad=True)\n"
        "y = (x.exp() * x + x.sin()).sum(); y.backward()\n"
        "assert x.grad is not None\n"
        "assert 'sympy' not in sys.modules, 'sympy imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tiny_op_overhead_is_torch_like():
    x = tensor([1.0, 2.0, 3.0], requires_grad=True)

    def step():
        y = (x * 2.0).exp().sum()
        y.backward()

    for _ in range(50):
        step()
    n = 300
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    per_step = (time.perf_counter() - t0) / n
    # three ops + backward; generous bound for slow CI machines
    assert per_step < 400e-6, per_step


def test_cpp_node_names_are_torchs():
    """AccumulateGrad and CopySlices are C++ nodes in torch: name() is qualified, the type and
    repr are not."""
    x = sgt.ones(3, requires_grad=True)
    acc = (x * 2).grad_fn.next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert type(acc).__name__ == "AccumulateGrad" and repr(acc).startswith("<AccumulateGrad ")
    c = x.clone()
    c[0:2].mul_(2)
    assert c.grad_fn.name() == "torch::autograd::CopySlices"
    assert repr(c.grad_fn).startswith("<CopySlices object at ")


def test_set_default_dtype_reaches_every_constructor():
    # the default float dtype is a global of symgrad.tensor that set_default_dtype rebinds; the
    # factories, the printing and the op layer live in other modules and must read it live
    import symgrad as sg

    assert sg.get_default_dtype() is sg.float32
    try:
        sg.set_default_dtype(sg.float64)
        assert sg.get_default_dtype() is sg.float64
        made = {
            "tensor": sg.tensor([1.0, 2.0]), "as_tensor": sg.as_tensor([1.5]),
            "tensor(longdouble array)": sg.tensor(np.ones(2, np.longdouble)),
            "Tensor": sg.Tensor([1.0]), "module call": sgt([0.5]), "zeros": sg.zeros(2),
            "ones": sg.ones(2, 3), "empty": sg.empty(2), "full": sg.full((2,), 1.5),
            "rand": sg.rand(2), "randn": sg.randn(2), "arange": sg.arange(0.0, 1.0, 0.5),
            "linspace": sg.linspace(0, 1, 3), "eye": sg.eye(2),
            "where(scalars)": sg.where(sg.tensor([True, False]), 1.0, 2.0),
            "int tensor * float": sg.tensor([1, 2]) * 2.5,
            "int / int": sg.tensor([1]) / sg.tensor([2]),
        }
        for name, t in made.items():
            assert t.dtype is sg.float64, (name, t.dtype)
        assert sg.zeros_like(sg.zeros(2, dtype=sg.float32)).dtype is sg.float32   # input's dtype
        assert sg.arange(3).dtype is sg.int64 and sg.full((1,), 2).dtype is sg.int64
        # the default dtype prints no dtype=; float32, no longer the default, still prints none
        assert repr(sg.tensor([1.0, 2.0])) == "tensor([1., 2.])"
        assert repr(sg.tensor([1.0], dtype=sg.float16)) == "tensor([1.], dtype=symgrad.float16)"
        sg.set_default_dtype(sg.float16)
        assert sg.zeros(1).dtype is sg.float16 and sg.tensor([1.0]).dtype is sg.float16
        assert repr(sg.tensor([1.0])) == "tensor([1.])"
        with pytest.raises(TypeError, match="only floating-point types"):
            sg.set_default_dtype(sg.int64)
    finally:
        sg.set_default_dtype(sg.float32)
    assert sg.zeros(1).dtype is sg.float32 and sg.tensor([1.0]).dtype is sg.float32


def test_the_factories_moved_out_keep_symgrad_tensor_as_their_module():
    # symgrad/_tensor_factories.py holds them; their public name is symgrad.tensor's, as before
    import pickle

    import symgrad as sg

    for name in ("tensor", "zeros", "ones", "full", "rand", "randn", "arange", "eye",
                 "manual_seed", "zeros_like", "from_numpy", "as_tensor", "linspace",
                 "randint_like"):
        fn = getattr(sgt, name)
        assert fn.__module__ == "symgrad.tensor", name
        assert pickle.loads(pickle.dumps(fn)) is fn
    assert sg.Tensor.__module__ == "symgrad.tensor" and sg.Size.__module__ == "symgrad.tensor"
    assert sg.FloatTensor.__module__ == "symgrad"
    assert sg.manual_seed(3) is not None and sg.rand(2).shape == (2,)
