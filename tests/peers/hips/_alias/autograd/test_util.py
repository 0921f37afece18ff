"""autograd.test_util's check_grads / combo_check over symgrad, with HIPS's checks: the
vector-Jacobian product against a central difference (EPS 1e-6, TOL = RTOL = 1e-6, random
directions), and, to `order`, the same check of the derivative function itself.

- "rev": y = f(x); for a random covector u and direction v, <v, J^T u> (symgrad's
  `autograd.grad(y, x, u, create_graph=True)`) against <u, (f(x + eps v/2) - f(x - eps v/2))
  / eps>. Order 2: the function (x, u) -> J^T u is checked the same way (its derivatives are
  symgrad's second-order ones: create_graph on the runtime, gradient modules when compiled).
- "fwd": J v from symgrad's forward-mode AD (`autograd.forward_ad`: dual tensors) against
  the central difference. Order 2: the function (x, v) -> J v, built as the vjp of the vjp
  (a reverse-over-reverse product, differentiable to any order), is checked again.

In "compiled" mode (autograd.MODE) the top-level function is a forward-only `sg.Function`;
the derivative functions of the higher orders are built on its `apply`, so every derivative
comes from its generated modules.
"""
from itertools import product

import numpy as _onp

import symgrad as _sg

from . import MODE, _checked

TOL = 1e-6
RTOL = 1e-6
EPS = 1e-6


class ComplexUnsupported(TypeError):
    """A complex input: symgrad has no complex dtype (a documented difference)."""


def scalar_close(a, b):
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


_rng = _onp.random   # the global state, as HIPS (tests/conftest.py seeds it per test)


def _np(v):
    if isinstance(v, _sg.Tensor):
        return v.detach().numpy()
    return _onp.asarray(v)


def _check_real(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            _check_real(v)
        elif not isinstance(v, _sg.Tensor) and _onp.iscomplexobj(v):
            raise ComplexUnsupported("symgrad has no complex dtype")


def _leaf(v):
    if isinstance(v, _sg.Tensor) and v.requires_grad:
        return v
    return _sg.tensor(_onp.array(_np(v), dtype=_onp.float64), requires_grad=True)


def _value(g, xs):
    """g at plain values: a NumPy array (float64)."""
    y = g(*[_sg.tensor(_onp.array(_np(x), dtype=_onp.float64)) for x in xs])
    return _onp.asarray(_np(y), dtype=_onp.float64)


def _randn_like(a):
    return _rng.randn(*_onp.shape(a))


def _vjp(g, xs, u, create_graph):
    """J^T u at xs (Tensors that require grad): one array / Tensor per x."""
    y = g(*xs)
    if not isinstance(y, _sg.Tensor) or not y.requires_grad:
        return [_sg.zeros_like(x) for x in xs]
    u = u if isinstance(u, _sg.Tensor) else _sg.tensor(_onp.asarray(u, dtype=_onp.float64))
    got = _sg.autograd.grad(y, xs, grad_outputs=u.reshape(tuple(y.shape)),
                            create_graph=create_graph, allow_unused=True)
    return [_sg.zeros_like(x) if g_ is None else g_ for g_, x in zip(got, xs)]


def _numeric_jvp(g, xs, vs):
    plus = _value(g, [_np(x) + EPS / 2 * v for x, v in zip(xs, vs)])
    minus = _value(g, [_np(x) - EPS / 2 * v for x, v in zip(xs, vs)])
    return (plus - minus) / EPS


def _check_vjp(g, xs, name):
    leaves = [_leaf(x) for x in xs]
    y = _value(g, xs)
    u = _randn_like(y)
    vs = [_randn_like(_np(x)) for x in xs]
    vjp = _vjp(g, leaves, u, create_graph=False)
    exact = sum(float(_onp.sum(v * _np(j))) for v, j in zip(vs, vjp))
    numeric = float(_onp.sum(u * _numeric_jvp(g, xs, vs)))
    assert scalar_close(numeric, exact), (
        f"Derivative (VJP) check of {name} failed with arg {xs}:\nanalytic: {exact}\n"
        f"numeric:  {numeric}")


def _check_jvp(g, xs, name):
    from symgrad.autograd import forward_ad as fwAD

    vs = [_randn_like(_np(x)) for x in xs]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(_sg.tensor(_onp.array(_np(x), dtype=_onp.float64)),
                                _sg.tensor(v)) for x, v in zip(xs, vs)]
        y = g(*duals)
        tangent = fwAD.unpack_dual(y).tangent if isinstance(y, _sg.Tensor) else None
    exact = _onp.zeros(_onp.shape(_np(y))) if tangent is None else _np(tangent)
    numeric = _numeric_jvp(g, xs, vs)
    w = _randn_like(numeric)
    assert _onp.shape(exact) == _onp.shape(numeric), (exact, numeric)
    a, b = float(_onp.sum(w * exact)), float(_onp.sum(w * numeric))
    assert scalar_close(a, b), f"Value mismatch ({name}, JVP):\nx: {exact}\ny: {numeric}"


def _jvp_rr(g, x, v):
    """J v at x (Tensors that require grad) as the vjp of the vjp: w -> J^T w is linear in
    w, and its vjp along v is J v; differentiable again (create_graph)."""
    y = g(*x)
    if not isinstance(y, _sg.Tensor) or not y.requires_grad:
        return _sg.zeros(tuple(getattr(y, "shape", ())), dtype=_sg.float64)
    w = _sg.zeros(tuple(y.shape), dtype=_sg.float64, requires_grad=True)
    jt = _vjp(g, x, w, create_graph=True)
    vs = [v_ if isinstance(v_, _sg.Tensor) else _sg.tensor(_onp.asarray(v_, dtype=float))
          for v_ in v]
    pairs = [(j, v_) for j, v_ in zip(jt, vs) if j.requires_grad]
    if not pairs:
        return _sg.zeros_like(y)
    (jv,) = _sg.autograd.grad([j for j, _ in pairs], [w],
                              grad_outputs=[v_.reshape(tuple(j.shape)) for j, v_ in pairs],
                              create_graph=True, allow_unused=True)
    return _sg.zeros_like(y) if jv is None else jv


def _check_jvp_rr(g, xs, name):
    vs = [_randn_like(_np(x)) for x in xs]
    exact = _np(_jvp_rr(g, [_leaf(x) for x in xs], vs))
    numeric = _numeric_jvp(g, xs, vs)
    w = _randn_like(numeric)
    a, b = float(_onp.sum(w * exact)), float(_onp.sum(w * numeric))
    assert scalar_close(a, b), f"Value mismatch ({name}, JVP):\nx: {exact}\ny: {numeric}"


def _check(g, xs, modes, order, name, top=True):
    _check_real(xs)
    if "fwd" in modes:
        # forward-mode AD of the checked function itself; its derivative functions (which
        # call autograd.grad inside) get J v as a reverse-over-reverse product
        (_check_jvp if top else _check_jvp_rr)(g, xs, name)
        if order > 1:
            n = len(xs)

            def jvp_g(*xv):
                return _jvp_rr(g, [_leaf(a) for a in xv[:n]], xv[n:])

            vs = [_randn_like(_np(x)) for x in xs]
            _check(jvp_g, list(xs) + vs, modes, order - 1, f"jvp_{name}", False)
    if "rev" in modes:
        _check_vjp(g, xs, name)
        if order > 1:
            n = len(xs)

            def vjp_g(*xu):
                x, u = [_leaf(a) for a in xu[:n]], xu[n]
                out = _vjp(g, x, u, create_graph=True)
                return out[0] if n == 1 else _sg.cat([o.reshape(-1) for o in out])

            u = _randn_like(_value(g, xs))
            _check(vjp_g, list(xs) + [u], modes, order - 1, f"vjp_{name}", False)


def _packed(g):
    """g with a list / tuple of outputs (np.split's) as one flat vector: the same vector
    space as HIPS's container of arrays."""
    def packed(*xs):
        y = g(*xs)
        if isinstance(y, (list, tuple)):
            if builtins_any(isinstance(t, _sg.Tensor) for t in y):
                return _sg.cat([(t if isinstance(t, _sg.Tensor) else
                                 _sg.tensor(_onp.asarray(t, dtype=float))).reshape(-1)
                                for t in y])
            return _onp.concatenate([_onp.ravel(t) for t in y])
        return y
    return packed


builtins_any = any


def check_grads(f, argnum=0, modes=None, order=2):
    """HIPS's check_grads(f, argnum, modes, order)(*args, **kwargs)."""
    if modes is None:
        modes = ["fwd", "rev"]
    assert all(m in ["fwd", "rev"] for m in modes)
    argnums = (argnum,) if isinstance(argnum, int) else tuple(argnum)

    def checker(*args, **kwargs):
        _check_real(list(args) + list(kwargs.values()))
        g, xs = _checked(f, argnums, args, kwargs)
        _check(_packed(g), xs, modes, order, getattr(f, "__name__", "f"))

    return checker


def combo_check(fun, *args, **kwargs):
    # Tests all combinations of args and kwargs given.
    _check_grads = lambda f: check_grads(f, *args, **kwargs)  # noqa: E731

    def _combo_check(*args, **kwargs):
        kwarg_key_vals = [[(k, x) for x in xs] for k, xs in kwargs.items()]
        for _args in product(*args):
            for _kwargs in product(*kwarg_key_vals):
                _check_grads(fun)(*_args, **dict(_kwargs))

    return _combo_check


__all__ = ["check_grads", "combo_check", "scalar_close", "ComplexUnsupported", "MODE"]
