"""`autograd.test_util.check_grads` with HIPS' semantics (reverse mode): the VJP of f at x,
paired with a random direction, against central differences; order 2 checks the VJP
(a function of x and the cotangent) the same way, through create_graph."""
import numpy as _onp
import symgrad as _sg

TOL = 1e-6
RTOL = 1e-6
EPS = 1e-6
_rng = _onp.random.RandomState(0)


def _randn(shape):
    return _onp.asarray(_rng.randn(*shape), dtype=float)   # 0-d too: float64, not a float


def _outputs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def _scalar_close(a, b):
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def _vjp(f, xs, vs, create_graph):
    ts = [_sg.tensor(x, requires_grad=True) for x in xs]
    ys = _outputs(f(*ts))
    grads = _sg.autograd.grad(ys, ts, [_sg.tensor(v) for v in vs], allow_unused=True,
                              create_graph=create_graph)
    return ts, grads


def _check_vjp(f, xs, name):
    with _sg.no_grad():
        ys = [y.detach().numpy() for y in _outputs(f(*[_sg.tensor(x) for x in xs]))]
    vs = [_randn(y.shape) for y in ys]
    us = [_randn(_onp.shape(x)) for x in xs]
    _, grads = _vjp(f, xs, vs, False)
    exact = sum(float(_onp.sum(u * (0 if g is None else g.detach().numpy())))
                for u, g in zip(us, grads))
    with _sg.no_grad():
        plus = _outputs(f(*[_sg.tensor(x + u * EPS / 2) for x, u in zip(xs, us)]))
        minus = _outputs(f(*[_sg.tensor(x - u * EPS / 2) for x, u in zip(xs, us)]))
    numeric = sum(float(_onp.sum(v * (p.detach().numpy() - m.detach().numpy()) / EPS))
                  for v, p, m in zip(vs, plus, minus))
    assert _scalar_close(numeric, exact), (
        f"Derivative (VJP) check of {name} failed:\nanalytic: {exact}\nnumeric:  {numeric}")
    return ys


def _check(f, xs, order, name):
    ys = _check_vjp(f, xs, name)
    if order > 1:
        n = len(xs)

        def vjp_f(*args):
            ts, vs = list(args[:n]), list(args[n:])
            with _sg.enable_grad():   # also where the caller evaluates without grad
                ts = [t if t.requires_grad else t.detach().requires_grad_() for t in ts]
                out = _sg.autograd.grad(_outputs(f(*ts)), ts, vs, allow_unused=True,
                                        create_graph=True)
            return tuple(g if g is not None else t * 0 for g, t in zip(out, ts))

        vs = [_randn(y.shape) for y in ys]
        _check(vjp_f, list(xs) + vs, order - 1, f"vjp_{name}")


def check_grads(fun, modes=None, order=2):
    """check_grads(fun, modes=['rev'], order=2)(*args): derivatives w.r.t. args[0]."""
    modes = ["fwd", "rev"] if modes is None else modes
    if "fwd" in modes and "rev" not in modes:
        raise NotImplementedError("forward mode is not part of this alias")

    def check(*args):
        rest = args[1:]
        if _onp.iscomplexobj(args[0]):
            raise NotImplementedError("complex inputs: symgrad differentiates real tensors")
        x = _onp.asarray(args[0], dtype=float)
        _check(lambda t: fun(t, *rest), [x], order, getattr(fun, "__name__", "fun"))
    return check
