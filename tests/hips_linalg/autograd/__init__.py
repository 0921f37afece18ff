"""A minimal `autograd` alias over symgrad, enough to run HIPS autograd's
tests/test_linalg.py unchanged (see tests/hips_linalg/test_hips_linalg.py). Arrays a test
differentiates become `sg.Tensor`s; everything else stays NumPy."""
import builtins

import numpy as _onp
import symgrad as _sg

tuple = builtins.tuple   # HIPS' differentiable tuple: a plain tuple of Tensors here


def grad(fun, argnum=0):
    """d fun / d args[argnum] of a scalar-valued fun, as a NumPy array."""
    def gradfun(*args):
        args = list(args)
        x = _sg.tensor(_onp.asarray(args[argnum], dtype=float), requires_grad=True)
        args[argnum] = x
        out = fun(*args)
        (g,) = _sg.autograd.grad(out, [x])
        return g.detach().numpy()
    return gradfun
