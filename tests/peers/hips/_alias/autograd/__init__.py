"""`autograd` (HIPS) mapped onto symgrad, so that HIPS autograd's own test files run unchanged.

Two modes (``MODE[0]``, set per test by tests/peers/hips/conftest.py):

- ``"runtime"``: the checked function runs eagerly on symgrad Tensors (float64) and is
  differentiated by symgrad's autograd engine;
- ``"compiled"``: the checked function is the forward of a forward-only ``sg.Function``:
  traced, differentiated, optimized and emitted by the compiler (its non-differentiated
  array arguments are arrays its forward captures: constant inputs of the module), and every
  derivative, of every order, comes from the generated modules.

``grad``, ``value_and_grad``, ``elementwise_grad`` keep HIPS's signatures (``argnum``); the
gradient is returned as a NumPy value, as HIPS returns one.
"""
import numpy as _onp

import symgrad as _sg

MODE = ["runtime"]

__all__ = ["grad", "value_and_grad", "elementwise_grad", "MODE"]


def _leaf(x):
    a = _onp.asarray(x)
    if a.dtype.kind == "c":
        from .test_util import ComplexUnsupported

        raise ComplexUnsupported("symgrad has no complex dtype")
    return _sg.tensor(a.astype(_onp.float64), requires_grad=True)


def _as_numpy(v):
    if isinstance(v, _sg.Tensor):
        v = v.detach().numpy()
    return v


def _is_container(v):
    return isinstance(v, (list, tuple)) and len(v) > 0 and not all(
        isinstance(b, (int, float)) for b in v)


def _checked(fun, argnums, args, kwargs):
    """(g, xs): g(*leaves) evaluates fun with the differentiated arguments replaced, in the
    active mode; xs the differentiated values, flattened: an argument that is a list / tuple
    of arrays (np.concatenate's) is one leaf per array, rebuilt before fun sees it."""
    rest = list(args)
    xs, spec = [], []
    for i in argnums:
        a = args[i]
        if _is_container(a):
            spec.append((i, type(a), len(a)))
            xs.extend(a)
        else:
            spec.append((i, None, 1))
            xs.append(a)

    def substituted(*vals):
        full, k = list(rest), 0
        for i, kind, n in spec:
            full[i] = vals[k] if kind is None else kind(vals[k:k + n])
            k += n
        return fun(*full, **kwargs)

    if MODE[0] != "compiled" or getattr(fun, "_differential_operator", False):
        # grad(grad(f)): the outer function calls autograd.grad, which no trace records;
        # the inner grad compiles f, and its second derivative comes from f's modules
        return substituted, xs

    class Checked(_sg.Function):
        @staticmethod
        def forward(ctx, *vals):
            return substituted(*vals)

    Checked.__name__ = Checked.__qualname__ = f"checked_{getattr(fun, '__name__', 'f')}"
    return Checked.apply, xs


def _grad_of(fun, argnum, args, kwargs):
    argnums = (argnum,) if isinstance(argnum, int) else tuple(argnum)
    g, xs = _checked(fun, argnums, args, kwargs)
    nested = any(isinstance(x, _sg.Tensor) and x.requires_grad for x in xs)
    leaves = [x if isinstance(x, _sg.Tensor) and x.requires_grad else _leaf(x) for x in xs]
    y = g(*leaves)
    if not isinstance(y, _sg.Tensor) or not y.requires_grad:
        grads = [_sg.zeros_like(t) if nested else _onp.zeros(_onp.shape(_as_numpy(t)))
                 for t in leaves]
    else:
        if y.numel() != 1:
            raise TypeError("Grad only applies to real scalar-output functions. Try jacobian, "
                            "elementwise_grad or holomorphic_grad.")
        got = _sg.autograd.grad(y, leaves, allow_unused=True, create_graph=nested)
        if nested:   # grad(grad(f)): the gradient stays differentiable
            return y, (got[0] if isinstance(argnum, int) else tuple(got))
        grads = [_onp.zeros(_onp.shape(x)) if g_ is None else g_.numpy().reshape(_onp.shape(x))
                 for g_, x in zip(got, xs)]
    if nested:
        return y, (grads[0] if isinstance(argnum, int) else tuple(grads))
    grads = [g_[()] if g_.ndim == 0 and not isinstance(x, _onp.ndarray) else g_
             for g_, x in zip(grads, xs)]
    value = _as_numpy(y)
    return value, (grads[0] if isinstance(argnum, int) else tuple(grads))


def grad(fun, argnum=0):
    """HIPS autograd's grad: the gradient of a scalar function in argument `argnum`."""
    def gradfun(*args, **kwargs):
        return _grad_of(fun, argnum, args, kwargs)[1]
    gradfun._differential_operator = True
    return gradfun


def value_and_grad(fun, argnum=0):
    def vg(*args, **kwargs):
        value, g = _grad_of(fun, argnum, args, kwargs)
        return (value[()] if isinstance(value, _onp.ndarray) and value.ndim == 0 else value), g
    return vg


def elementwise_grad(fun, argnum=0):
    def eg(*args, **kwargs):
        return grad(lambda *a, **k: fun(*a, **k).sum(), argnum)(*args, **kwargs)
    return eg
