"""autograd.functional side by side with torch over its flags: jacobian and hessian with
create_graph x strict x vectorize x strategy, vjp / jvp / vhp / hvp with create_graph x strict,
inputs that do or do not require grad. Each call's outcome is compared whole: the nesting, and
per tensor shape, dtype, requires_grad, whether it has a grad_fn and values; or the error's
class and message. Forward-mode results too: they come from forward-mode AD in both (a
forward-over-reverse Hessian requires grad, as torch's)."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")

X = np.array([0.7, 1.3, 0.4])
Y = np.array([0.2, 0.9, 1.1])
V = np.array([0.5, -1.5, 2.0])

FUNCTIONS = {   # name: (number of inputs, f(m) -> the function for module m)
    "vector": (1, lambda m: lambda x: x.exp() * 2),
    "scalar": (1, lambda m: lambda x: (x.exp() * x).sum()),
    "linear": (1, lambda m: lambda x: 3.0 * x),
    "linear_sum": (1, lambda m: lambda x: (3.0 * x).sum()),
    "two_inputs": (2, lambda m: lambda x, y: (x * y.sin()).sum()),
    "two_inputs_vector": (2, lambda m: lambda x, y: x * y.sin()),
    "tuple_output": (2, lambda m: lambda x, y: (x * y, x.exp())),
    "independent_of_y": (2, lambda m: lambda x, y: (x * x).sum()),
    "constant": (1, lambda m: lambda x: m.zeros(3, dtype=m.float64)),
    "to_float64": (1, lambda m: lambda x: (x * x).to(m.float64)),
    "relu": (1, lambda m: lambda x: (m.relu(x - 1.0) * x).sum()),
    "where": (1, lambda m: lambda x: m.where(x > 1.0, x * x, 2.0 * x).sum()),
}
SCALAR = {"scalar", "linear_sum", "two_inputs", "independent_of_y", "relu", "where"}


def _t(m, a, dtype="float64", requires_grad=False):
    make = torch.tensor if m is torch else sg.tensor
    return make(a, dtype=getattr(m, dtype), requires_grad=requires_grad)


def _describe(r):
    if isinstance(r, (tuple, list)):
        return tuple(_describe(e) for e in r)
    values = np.round(np.array((r.detach() + 0).numpy(), dtype=np.float64), 10).tolist()
    head = (tuple(r.shape), str(r.dtype).split(".")[-1])
    return head + (r.requires_grad, r.grad_fn is None, values)


def _outcome(m, api, name, kwargs, dtype, requires_grad, with_v):
    n, make = FUNCTIONS[name]
    xs = [_t(m, X, dtype, requires_grad), _t(m, Y, dtype, requires_grad)][:n]
    args = [make(m), xs[0] if n == 1 else tuple(xs)]
    if with_v:
        vs = [_t(m, V, dtype), _t(m, V[::-1].copy(), dtype)][:n]
        args.append(vs[0] if n == 1 else tuple(vs))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _describe(getattr(m.autograd.functional, api)(*args, **kwargs))
    except Exception as exc:   # the same error, class and message
        return f"{type(exc).__name__}: {exc}".replace("symgrad.Size", "torch.Size")


def _same(api, name, kwargs, dtype="float64", requires_grad=False, with_v=False):
    want = _outcome(torch, api, name, kwargs, dtype, requires_grad, with_v)
    got = _outcome(sg, api, name, kwargs, dtype, requires_grad, with_v)
    if isinstance(want, str):   # torch's own typos ("isonly", "`vectorized=True`")
        want = want.replace("isonly", "is only").replace("vectorized=True", "vectorize=True")
    assert got == want, (api, name, kwargs, dtype, requires_grad)


# hessian: the scalar functions, and two that are not (torch's error)
@pytest.mark.parametrize("api, name", [("jacobian", n) for n in sorted(FUNCTIONS)]
                         + [("hessian", n) for n in sorted(SCALAR | {"vector", "constant"})])
def test_jacobian_and_hessian_flags_as_torch(api, name):
    key = "strategy" if api == "jacobian" else "outer_jacobian_strategy"
    dtypes = ("float64", "float32") if name == "to_float64" else ("float64",)
    for cg, strict, vectorize, strategy, dtype, rg in itertools.product(
            (False, True), (False, True), (False, True), ("reverse-mode", "forward-mode"),
            dtypes, (False, True)):
        kwargs = {"create_graph": cg, "strict": strict, "vectorize": vectorize, key: strategy}
        _same(api, name, kwargs, dtype, rg)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("api", ["vjp", "jvp", "vhp", "hvp"])
def test_vector_products_flags_as_torch(api, name):
    for cg, strict, rg, with_v in itertools.product((False, True), (False, True),
                                                    (False, True), (False, True)):
        if api == "vjp" and with_v and name in SCALAR:
            continue   # v shaped like the inputs is the wrong size for a scalar output
        _same(api, name, {"create_graph": cg, "strict": strict}, "float64", rg, with_v)


def test_invalid_strategy_is_an_assertion_error_as_torch():
    x = sg.tensor(X)
    with pytest.raises(AssertionError, match="forward-mode"):
        sg.autograd.functional.jacobian(lambda a: a * a, x, strategy="forward")
    with pytest.raises(AssertionError, match="forward-mode"):
        sg.autograd.functional.hessian(lambda a: (a * a).sum(), x,
                                       outer_jacobian_strategy="forward")


def test_forward_mode_strict_is_refused_before_vectorize_is_checked():
    x = sg.tensor(X)
    for vectorize in (False, True):
        with pytest.raises(RuntimeError, match='`strict=True` and `strategy="forward-mode"`'):
            sg.autograd.functional.jacobian(lambda a: a * a, x, strict=True,
                                            vectorize=vectorize, strategy="forward-mode")


def test_forward_mode_jacobian_has_the_output_dtype():
    x = sg.tensor(X, dtype=sg.float32)
    jac = sg.autograd.functional.jacobian(lambda a: (a * a).to(sg.float64), x, vectorize=True,
                                          strategy="forward-mode")
    assert jac.dtype == sg.float64
    rev = sg.autograd.functional.jacobian(lambda a: (a * a).to(sg.float64), x)
    assert rev.dtype == sg.float32   # reverse mode: the input's dtype
    np.testing.assert_allclose(jac.numpy(), np.diag(2 * X), rtol=1e-6)


def test_vectorized_blocks_share_their_input_graph():
    """torch's vectorized jacobian computes one batched gradient per input: the block of
    x.exp() w.r.t. y is zeros, but a view of y's batched gradient, which needs a graph."""
    jac = sg.autograd.functional.jacobian(lambda x, y: (x * y, x.exp()),
                                          (sg.tensor(X), sg.tensor(Y)), create_graph=True,
                                          vectorize=True)
    assert jac[1][1].requires_grad and jac[1][1].grad_fn is not None
    np.testing.assert_array_equal(jac[1][1].detach().numpy(), np.zeros((3, 3)))
    plain = sg.autograd.functional.jacobian(lambda x, y: (x * y, x.exp()),
                                            (sg.tensor(X), sg.tensor(Y)), create_graph=True)
    assert not plain[1][1].requires_grad
