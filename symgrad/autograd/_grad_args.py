"""The arguments of ``backward`` and ``grad`` made uniform: tensors or gradient edges as a
tuple, ``inputs=`` checked, the seed gradients made (ones for a scalar output, torch's
errors otherwise). symgrad/autograd/engine.py imports these at module level and
re-exports them."""
from collections.abc import Mapping

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd.node import GradientEdge

_wrap = _tm._wrap

def _as_tuple(x):
    if isinstance(x, (_tm.Tensor, GradientEdge)):
        return (x,)
    return tuple(x)


def _inputs_tuple(inputs, who):
    """``inputs`` of backward / grad as a tuple: a dict gives its values (torch 2.13)."""
    if type(inputs) is dict:
        return tuple(inputs.values())
    if isinstance(inputs, Mapping):
        raise TypeError(f"`inputs` argument to `{who}()` must be a dict, not "
                        f"{type(inputs).__name__}. Other Mapping types are not supported.")
    inputs = _as_tuple(inputs)
    for t in inputs:
        if not isinstance(t, (_tm.Tensor, GradientEdge)):
            raise RuntimeError("all inputs have to be Tensors or GradientEdges, but got "
                               f"{type(t).__name__}")
    return inputs


def _make_grads(outputs, grads):
    if grads is None:
        grads = [None] * len(outputs)
    elif isinstance(grads, _tm.Tensor):
        grads = [grads]
    else:
        grads = list(grads)
    new = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if g is not None and not isinstance(g, _tm.Tensor):
            raise TypeError(
                f"gradients can be either Tensors or None, but got {type(g).__name__}"
            )
        if type(out) is GradientEdge:   # no tensor to check the gradient against
            if not isinstance(g, _tm.Tensor):
                raise RuntimeError(
                    f"grad_outputs[{i}] must be a Tensor: output {i} is a GradientEdge, for "
                    "which symgrad does not create an implicit gradient")
            new.append(g)
        elif isinstance(g, _tm.Tensor):
            if g._data.shape != out._data.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and "
                    f"output[{i}] has a shape of {out.shape}."
                )
            if g._data.dtype != out._data.dtype:
                g = g.to(out.dtype)
            new.append(g)
        elif g is None:
            if out._requires_grad:
                if out._data.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if out._data.dtype.kind != "f":
                    raise RuntimeError(
                        "grad can be implicitly created only for real scalar outputs but got "
                        f"{out.dtype}"
                    )
                new.append(_wrap(_ones(out._data)))
            else:
                new.append(None)
    # after the pairs, as torch: y.backward([1.0, 2.0]) is the TypeError above (a float)
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    return new


def _ones(a):
    """A fresh array of ones like ``a`` (np.ones_like is several times slower)."""
    if type(a) is np.ndarray:
        return np.ones(a.shape, a.dtype) if a.ndim else np.array(1, a.dtype)
    return np.ones_like(a)
