"""``gradcheck`` / ``gradgradcheck``: compare analytical gradients with finite differences.

Same signatures, defaults, messages and ``GradcheckError`` as torch.autograd.gradcheck (the
slow, full-Jacobian mode: numerical Jacobian by central differences, analytical Jacobian one
vector-Jacobian product per output element).
"""

import warnings

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd import engine as _engine
from symgrad.autograd import grad_mode as _gm

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` and ``gradgradcheck`` when a check fails."""


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _is_diff_input(x):
    return isinstance(x, _tm.Tensor) and x.requires_grad


def _differentiable_outputs(x):
    return tuple(o for o in _as_tuple(x) if isinstance(o, _tm.Tensor) and o.requires_grad)


def _to_tensor(a):
    return _tm._wrap(np.ascontiguousarray(a))


def _numerical_jacobian(func, inputs, outputs, eps):
    """Per output, per differentiable input: a (numel_in, numel_out) central-difference matrix."""
    jac = [[None] * len(inputs) for _ in outputs]
    for i, x in enumerate(inputs):
        if not _is_diff_input(x):
            continue
        data = x._data
        mats = [np.zeros((data.size, o.numel()), dtype=data.dtype) for o in outputs]
        for k, idx in enumerate(np.ndindex(*data.shape)):
            orig = data[idx].copy()
            with _gm.enable_grad():  # the function may itself take gradients (gradgradcheck)
                data[idx] = orig - eps
                minus = [o._data.copy() for o in _outputs_of(func, inputs)]
                data[idx] = orig + eps
                plus = [o._data.copy() for o in _outputs_of(func, inputs)]
                data[idx] = orig
            for j in range(len(outputs)):
                mats[j][k] = ((plus[j] - minus[j]) / (2 * eps)).reshape(-1)
        for j in range(len(outputs)):
            jac[j][i] = mats[j]
    return jac


def _outputs_of(func, inputs):
    return tuple(o for o in _as_tuple(func(*inputs)) if isinstance(o, _tm.Tensor))


def _analytical_jacobian(inputs, outputs):
    """Per output, per differentiable input: (numel_in, numel_out) from one vjp per element."""
    diff_idx = [i for i, x in enumerate(inputs) if _is_diff_input(x)]
    diff_inputs = [inputs[i] for i in diff_idx]
    jac = [[None] * len(inputs) for _ in outputs]
    for j, out in enumerate(outputs):
        mats = {i: np.zeros((inputs[i].numel(), out.numel()), dtype=inputs[i]._data.dtype)
                for i in diff_idx}
        if out.requires_grad:
            for k in range(out.numel()):
                g = np.zeros(out._data.size, out._data.dtype)
                g[k] = 1
                grads = _engine.grad(out, diff_inputs, _tm._wrap(g.reshape(out._data.shape)),
                                     retain_graph=True, allow_unused=True)
                for i, gi in zip(diff_idx, grads):
                    if gi is not None:
                        mats[i][:, k] = gi._data.reshape(-1)
        for i in diff_idx:
            jac[j][i] = mats[i]
    return jac


def _forward_jacobian(func, inputs, outputs):
    """Per output, per differentiable input: (numel_in, numel_out) from one forward-mode AD
    pass (a unit tangent) per input element."""
    from symgrad.autograd import forward_ad as fwAD

    jac = [[None] * len(inputs) for _ in outputs]
    for i, x in enumerate(inputs):
        if not _is_diff_input(x):
            continue
        mats = [np.zeros((x.numel(), o.numel()), dtype=x._data.dtype) for o in outputs]
        for k in range(x.numel()):
            e = np.zeros(x._data.size, x._data.dtype)
            e[k] = 1
            with fwAD.dual_level():
                args = list(inputs)
                args[i] = fwAD.make_dual(x, _tm._wrap(e.reshape(x._data.shape)))
                for j, o in enumerate(_outputs_of(func, args)):
                    t = fwAD.unpack_dual(o).tangent
                    if t is not None:
                        mats[j][k] = t._data.reshape(-1)
        for j in range(len(outputs)):
            jac[j][i] = mats[j]
    return jac


def _fail(msg, raise_exception):
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Check gradients computed by backward against finite differences (torch's gradcheck).

    Args:
        func: function of the inputs returning a Tensor or a tuple of Tensors.
        inputs: Tensor or tuple of Tensors (and other values).
        eps: finite-difference step.
        atol: absolute tolerance.
        rtol: relative tolerance.
        raise_exception: raise ``GradcheckError`` on failure (else return False).
        nondet_tol: tolerance for non-determinism of two identical backward calls.

    Returns:
        True when all checks pass.
    """
    tupled = _as_tuple(inputs)
    if not any(_is_diff_input(x) for x in tupled):
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of "
            "them have requires_grad=True."
        )
    for idx, x in enumerate(tupled):
        if _is_diff_input(x) and x._data.dtype != np.float64:
            warnings.warn(
                f"Input #{idx} requires gradient and is not a double precision floating point "
                "or complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ",
                UserWarning,
                stacklevel=2,
            )
    with _gm.enable_grad():
        outputs = _outputs_of(func, tupled)
    if not (check_backward_ad or check_forward_ad):
        return True
    numerical = _numerical_jacobian(func, tupled, outputs, eps)
    if check_forward_ad:
        forward = _forward_jacobian(func, tupled, outputs)
        for j in range(len(outputs)):
            for i, x in enumerate(tupled):
                if not _is_diff_input(x):
                    continue
                a, n = forward[j][i], numerical[j][i]
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    return _fail(
                        f"Jacobian computed with forward mode mismatch for output {j} with "
                        f"respect to input {i},\nnumerical:{_to_tensor(n)!r}\n"
                        f"analytical:{_to_tensor(a)!r}\n", raise_exception)
    if not check_backward_ad:
        return True
    for j, out in enumerate(outputs):
        if out.requires_grad:
            continue
        for i, n in enumerate(numerical[j]):
            if n is not None and not np.allclose(n, 0, rtol=rtol, atol=atol):
                return _fail(
                    f"Numerical gradient for function expected to be zero for output {j} with "
                    f"respect to input {i}", raise_exception)
    with _gm.enable_grad():
        analytical = _analytical_jacobian(tupled, outputs)
        repeat = _analytical_jacobian(tupled, outputs)
    for j, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for i, x in enumerate(tupled):
            if not _is_diff_input(x):
                continue
            a, n = analytical[j][i], numerical[j][i]
            if a.shape != n.shape:
                return _fail("Analytical gradient has incorrect size", raise_exception)
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                return _fail(
                    f"Jacobian mismatch for output {j} with respect to input {i},\n"
                    f"numerical:{_to_tensor(n)!r}\nanalytical:{_to_tensor(a)!r}\n",
                    raise_exception)
            if np.abs(repeat[j][i] - a).max(initial=0) > nondet_tol:
                return _fail(
                    "Backward is not reentrant, i.e., running backward with same input and "
                    "grad_output multiple times gives different values, although analytical "
                    "gradient matches numerical gradient.The tolerance for nondeterminism was "
                    f"{nondet_tol}.", raise_exception)
    if check_undefined_grad:
        # every differentiable output given a zero gradient must give zero (or no) gradients
        diff_inputs = [x for x in tupled if _is_diff_input(x)]
        diff_outputs = [o for o in outputs if o.requires_grad]
        if diff_outputs:
            with _gm.enable_grad():
                outs = _differentiable_outputs(func(*tupled))
                grads = _engine.grad(outs, diff_inputs, [_tm.zeros_like(o) for o in outs],
                                     allow_unused=True)
            for g in grads:
                if g is not None and np.any(g._data != 0):
                    return _fail(
                        "Expected backward function to handle undefined output grads. Please "
                        "look at \"Notes about undefined output gradients\" in "
                        "\"tools/autograd/derivatives.yaml\"", raise_exception)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second-order gradients (gradcheck of the gradient function), as torch does.

    ``grad_outputs`` default to random tensors in [-1, 1) that require grad.
    """
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        with _gm.enable_grad():
            outputs = _differentiable_outputs(func(*tupled_inputs))
        rng = _tm._rng()
        grad_outputs = []
        for o in outputs:
            dt = o._data.dtype if o._data.dtype.kind == "f" else np.float64
            a = rng.uniform(-1, 1, o._data.shape).astype(dt)
            if gen_non_contig_grad_outputs and a.ndim:
                a = np.repeat(a, 2, axis=-1)[..., ::2]
            grad_outputs.append(_tm._wrap(a, True))
        grad_outputs = tuple(grad_outputs)
    tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_input_idx = [i for i, x in enumerate(tupled_inputs) if _is_diff_input(x)]
    diff_grad_idx = [i for i, x in enumerate(tupled_grad_outputs) if _is_diff_input(x)]

    def new_func(*args):
        input_args = tuple(
            x.requires_grad_() if isinstance(x, _tm.Tensor) and i in diff_input_idx else x
            for i, x in enumerate(args[:-num_outputs]))
        outputs = _differentiable_outputs(func(*input_args))
        gouts = tuple(
            x.requires_grad_() if isinstance(x, _tm.Tensor) and i in diff_grad_idx else x
            for i, x in enumerate(args[-num_outputs:]))
        diff_inputs = tuple(x for i, x in enumerate(input_args) if i in diff_input_idx)
        grads = _engine.grad(outputs, diff_inputs, gouts, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(new_func, tupled_inputs + tupled_grad_outputs, eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad)


# torch.autograd.gradcheck is the function, and this module's error is reachable from it too.
gradcheck.GradcheckError = GradcheckError
gradgradcheck.GradcheckError = GradcheckError
