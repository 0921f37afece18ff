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

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "get_numerical_jacobian",
           "get_analytical_jacobian"]


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
    # torch's: an output that is not a Tensor raises AttributeError (it has no requires_grad)
    return tuple(o for o in _as_tuple(x) if o.requires_grad)


def _is_float_tensor(o):
    return isinstance(o, _tm.Tensor) and o._data.dtype.kind in "fc"


def _to_tensor(a):
    return _tm._wrap(np.ascontiguousarray(a))


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""


def _outputs_of(func, inputs):
    """The floating-point outputs of ``func(*inputs)`` (torch skips integral ones)."""
    return tuple(o for o in _as_tuple(func(*inputs)) if _is_float_tensor(o))


def _check_same_dtype_and_shape(minus, plus, eps):
    """torch's check that a perturbed input does not change what `func` returns but its values
    (an AssertionError, as torch's)."""
    for a, b in zip(minus, plus):
        if a.shape != b.shape:
            raise AssertionError(
                "Expected `func` to return outputs with the same shape when inputs are "
                f"perturbed by {eps}, but got: shapes {_tm.Size(a.shape)} and "
                f"{_tm.Size(b.shape)}.")
        if a.dtype != b.dtype:
            raise AssertionError(
                "Expected `func` to return outputs with the same dtype when inputs are "
                f"perturbed by {eps}, but got: dtypes {_tm._DTYPES[a.dtype]} and "
                f"{_tm._DTYPES[b.dtype]}.")
    if len(minus) != len(plus):
        raise AssertionError(
            "Expected `func` to return the same number of outputs when inputs are perturbed "
            f"by {eps}, but got: {len(minus)} and {len(plus)}.")


def _numerical_jacobian(func, inputs, eps):
    """Per differentiable input (in order), per floating output: a (numel_in, numel_out)
    central-difference matrix."""
    jac = []
    for x in inputs:
        if not _is_diff_input(x):
            continue
        data = x._data
        mats = None
        for k, idx in enumerate(np.ndindex(*data.shape)):
            orig = data[idx].copy()
            with _gm.enable_grad():  # the function may itself take gradients (gradgradcheck)
                data[idx] = orig - eps
                minus = [o._data.copy() for o in _outputs_of(func, inputs)]
                data[idx] = orig + eps
                plus = [o._data.copy() for o in _outputs_of(func, inputs)]
                data[idx] = orig
            _check_same_dtype_and_shape(minus, plus, eps)
            if mats is None:
                mats = [np.zeros((data.size, p.size), dtype=data.dtype) for p in plus]
            for j in range(len(plus)):
                mats[j][k] = ((plus[j] - minus[j]) / (2 * eps)).reshape(-1)
        if mats is None:    # an empty input: one empty matrix per floating output
            mats = [np.zeros((0, o.numel()), dtype=data.dtype)
                    for o in _outputs_of(func, inputs)]
        jac.append(mats)
    return jac


def _analytical_jacobian(diff_inputs, out):
    """Per differentiable input: (numel_in, numel_out) from one vjp per output element, and
    whether every gradient had the input's dtype and size."""
    mats = [np.zeros((x.numel(), out.numel()), dtype=x._data.dtype) for x in diff_inputs]
    types_ok = sizes_ok = True
    for k in range(out.numel()):
        g = np.zeros(out._data.size, out._data.dtype)
        g[k] = 1
        grads = _engine.grad(out, diff_inputs, _tm._wrap(g.reshape(out._data.shape)),
                             retain_graph=True, allow_unused=True)
        for i, (x, gi) in enumerate(zip(diff_inputs, grads)):
            if gi is None:
                continue
            if gi._data.shape != x._data.shape:
                sizes_ok = False
                continue
            if gi._data.dtype != x._data.dtype:
                types_ok = False
            mats[i][:, k] = gi._data.reshape(-1)
    return mats, types_ok, sizes_ok


def _forward_jacobian(func, inputs):
    """Per differentiable input, per floating output: (numel_in, numel_out) from one
    forward-mode AD pass (a unit tangent) per input element."""
    from symgrad.autograd import forward_ad as fwAD

    jac = []
    for i, x in enumerate(inputs):
        if not _is_diff_input(x):
            continue
        mats = None
        for k in range(x.numel()):
            e = np.zeros(x._data.size, x._data.dtype)
            e[k] = 1
            with fwAD.dual_level():
                args = list(inputs)
                args[i] = fwAD.make_dual(x.detach(), _tm._wrap(e.reshape(x._data.shape)))
                outs = _outputs_of(func, args)
                if mats is None:
                    mats = [np.zeros((x.numel(), o.numel()), dtype=x._data.dtype) for o in outs]
                for j, o in enumerate(outs):
                    t = fwAD.unpack_dual(o).tangent
                    if t is not None:
                        mats[j][k] = t._data.reshape(-1)
        jac.append(mats or [])
    return jac


def _mismatch(a, n, out_idx, in_idx, fast_mode, rtol, atol, forward=False):
    mode = "computed with forward mode " if forward else ""
    head = f"Jacobian {mode}mismatch for output {out_idx:d} with respect to input {in_idx:d},\n"
    if not fast_mode:
        return head + f"numerical:{_to_tensor(n)!r}\nanalytical:{_to_tensor(a)!r}\n"
    # torch's fast mode compares one random projection u^T J v, then recomputes the full
    # Jacobians for the message
    rng = _tm._rng()
    u = rng.standard_normal(n.shape[0])
    v = rng.standard_normal(n.shape[1])
    msg = (head + f"numerical:{float(u @ n @ v)}\nanalytical:{float(u @ a @ v)}\n\n"
           "The above quantities relating the numerical and analytical jacobians are computed \n"
           "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more "
           "background \nabout fast mode. Below, we recompute numerical and analytical "
           "jacobians in slow mode:\n\n"
           f"Numerical:\n {_to_tensor(n)!r}\nAnalytical:\n{_to_tensor(a)!r}\n\n"
           f"The max per-element difference (slow mode) is: {float(np.abs(n - a).max())}.\n")
    return msg


def _check_inputs(tupled):
    any_diff = False
    for idx, x in enumerate(tupled):
        if not _is_diff_input(x):
            continue
        if x._data.dtype not in (np.float64, np.complex128):
            warnings.warn(
                f"Input #{idx} requires gradient and is not a double precision floating point "
                "or complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ",
                UserWarning,
                stacklevel=4,
            )
        if not all(st > 0 or sz <= 1 for st, sz in zip(x._data.strides, x._data.shape)):
            raise RuntimeError(
                f"The {idx}th input has a dimension with stride 0. gradcheck only supports "
                "inputs that are non-overlapping to be able to compute the numerical gradients "
                "correctly. You should call .contiguous on the input before passing it to "
                "gradcheck.")
        any_diff = True
    if not any_diff:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of "
            "them have requires_grad=True."
        )


def _warn_bc_breaking():
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled "
        "by default, but it may break existing callers of this function. If this is true for "
        "you, you can call this function with \"check_undefined_grad=False\" to disable the "
        "feature", UserWarning, stacklevel=4)


def _test_undefined_backward_mode(func, tupled, diff_inputs):
    # torch makes each output's gradient undefined: the backward runs from None gradients
    # (hooks see None; a custom backward gets zeros, or None under set_materialize_grads(False))
    with _gm.enable_grad():
        outs = tuple(o for o in _differentiable_outputs(func(*tupled)) if isinstance(o, _tm.Tensor))
        if not outs:
            return
        try:
            grads_in = _engine.execute([_engine.edge(o) for o in outs], [None] * len(outs),
                                       False, False, [_engine.edge(x) for x in diff_inputs])
        except RuntimeError as e:
            _warn_bc_breaking()
            raise GradcheckError(
                "Expected backward function to handle undefined output grads. Please look at "
                "\"Notes about undefined output gradients\" in "
                "\"tools/autograd/derivatives.yaml\"") from e
    for g in grads_in:
        if g is not None and np.any(g._data != 0):
            _warn_bc_breaking()
            raise GradcheckError(
                "Expected all input grads to be undefined or zero when all output grads are "
                "undefined or zero. Please look at \"Notes about undefined output gradients\" "
                "in \"tools/autograd/derivatives.yaml\"")


def _test_backward_mul_by_grad_output(outputs, diff_inputs):
    grads = _engine.grad(outputs, diff_inputs, [_tm.zeros_like(o) for o in outputs],
                         allow_unused=True)
    for gi, di in zip(grads, diff_inputs):
        if gi is None:
            continue
        if np.any(gi._data != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if gi._data.dtype != di._data.dtype:
            raise GradcheckError("grad is incorrect type")
        if gi._data.shape != di._data.shape:
            raise GradcheckError("grad is incorrect size")


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

    The full Jacobians are compared in every mode (``fast_mode`` only changes the message);
    ``check_batched_grad`` compares the batched gradient (``is_grads_batched``) with one
    backward per grad output.

    Returns:
        True when all checks pass.
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    try:
        return _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol,
                                 check_undefined_grad, check_grad_dtypes, check_batched_grad,
                                 check_forward_ad, check_backward_ad, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                      check_grad_dtypes, check_batched_grad, check_forward_ad,
                      check_backward_ad, fast_mode):
    tupled = _as_tuple(inputs)
    _check_inputs(tupled)
    with _gm.enable_grad():
        func_out = func(*tupled)
    outputs = _differentiable_outputs(func_out)
    diff_inputs = [x for x in tupled if _is_diff_input(x)]
    if not outputs:
        # no differentiable output: the numerical gradient must be zero
        for mats in _numerical_jacobian(func, tupled, eps):
            for n in mats:
                if np.any(n != 0):
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    # the numerical Jacobians of the differentiable outputs (among the floating ones)
    float_outs = [o for o in _as_tuple(func_out) if _is_float_tensor(o)]
    keep = [j for j, o in enumerate(float_outs) if o.requires_grad]
    numerical = [[mats[j] for j in keep] for mats in _numerical_jacobian(func, tupled, eps)]
    if check_backward_ad:   # first, as torch: a backward failure hides a forward-AD one
        _check_backward(func, tupled, outputs, diff_inputs, numerical, eps, atol, rtol,
                        nondet_tol, check_undefined_grad, check_grad_dtypes,
                        check_batched_grad, fast_mode)
    if check_forward_ad:
        forward = _forward_jacobian(func, tupled)
        for i, mats in enumerate(numerical):
            for j, n in enumerate(mats):
                a = forward[i][keep[j]]
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    raise GradcheckError(_mismatch(a, n, j, i, fast_mode, rtol, atol, True))
    return True


def _check_backward(func, tupled, outputs, diff_inputs, numerical, eps, atol, rtol,
                    nondet_tol, check_undefined_grad, check_grad_dtypes, check_batched_grad,
                    fast_mode):
    with _gm.enable_grad():
        for j, out in enumerate(outputs):
            first, types_ok, sizes_ok = _analytical_jacobian(diff_inputs, out)
            second, _, _ = _analytical_jacobian(diff_inputs, out)
            if not types_ok and check_grad_dtypes:
                raise GradcheckError("Gradient has dtype mismatch")
            if not sizes_ok:
                raise GradcheckError("Analytical gradient has incorrect size")
            if any(np.abs(a - b).max(initial=0) > nondet_tol for a, b in zip(first, second)):
                raise GradcheckError(
                    "Backward is not reentrant, i.e., running backward with same input and "
                    "grad_output multiple times gives different values, although analytical "
                    "gradient matches numerical gradient."
                    f"The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG)
            for i, a in enumerate(first):
                n = numerical[i][j]
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    raise GradcheckError(_mismatch(a, n, j, i, fast_mode, rtol, atol))
        if check_batched_grad:
            for j, out in enumerate(outputs):
                _test_batched_grad(diff_inputs, out, j)
        _test_backward_mul_by_grad_output(outputs, diff_inputs)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, tupled, diff_inputs)


def _test_batched_grad(diff_inputs, out, out_idx):
    rng = _tm._rng()
    gos = rng.standard_normal((2,) + out._data.shape).astype(out._data.dtype)
    batched = _engine.grad(out, diff_inputs, _tm._wrap(gos), retain_graph=True,
                           allow_unused=True, is_grads_batched=True)
    for i, (x, b) in enumerate(zip(diff_inputs, batched)):
        expected = []
        for k in range(2):
            g = _engine.grad(out, [x], _tm._wrap(gos[k]), retain_graph=True,
                             allow_unused=True)[0]
            expected.append(np.zeros(x._data.shape, x._data.dtype) if g is None else g._data)
        got = np.zeros((2,) + x._data.shape, x._data.dtype) if b is None else b._data
        if not np.allclose(got, np.stack(expected)):
            raise GradcheckError(
                f"For output {out_idx} and input {i}:\n\ngradcheck or gradgradcheck failed "
                "while testing batched gradient computation.\n\nGot:\n"
                f"{_to_tensor(got)!r}\n\nExpected:\n{_to_tensor(np.stack(expected))!r}")


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second-order gradients (gradcheck of the gradient function), as torch does.

    ``grad_outputs`` default to random tensors in [-1, 1) that require grad.
    """
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError(
            "Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_rev_over_rev to be True")
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
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, masked=masked)


# torch.autograd.gradcheck is the function, and this module's error is reachable from it too.
gradcheck.GradcheckError = GradcheckError
gradgradcheck.GradcheckError = GradcheckError


# ------------------------------------------------------------ deprecated torch helpers
def _deprecated(name):
    warnings.warn(
        f"`{name}` was part of PyTorch's private API and not meant to be exposed. We are "
        "deprecating it and it will be removed in a future version of PyTorch. If you have a "
        "specific use for this or feature request for this to be a stable API, please file "
        "us an issue at https://github.com/pytorch/pytorch/issues/new",
        FutureWarning, stacklevel=3)


def get_numerical_jacobian(fn, inputs, target=None, eps=1e-3, grad_out=1.0):
    """Deprecated in torch (warns): per input of ``target`` (default: every differentiable
    input), the central-difference Jacobian of ``fn(inputs)``'s first output, as a
    (numel_in, numel_out) tensor. ``fn`` takes the inputs as one tuple."""
    _deprecated("get_numerical_jacobian")
    if grad_out != 1.0:
        raise ValueError("Expected grad_out to be 1.0 to get_numerical_jacobian, no longer "
                         "supports values of grad_out != 1.0.")
    tupled = _as_tuple(inputs)
    targets = tupled if target is None else _as_tuple(target)
    diff = [x for x in tupled if _is_diff_input(x)]
    jac = _numerical_jacobian(lambda *xs: fn(xs), tupled, eps)
    out = []
    for x, mats in zip(diff, jac):
        if any(x is t for t in targets):
            out.append(_tm._wrap(mats[0]))
    return tuple(out)


def get_analytical_jacobian(inputs, output, nondet_tol=0.0, grad_out=1.0):
    """Deprecated in torch (warns): ``(jacobians, reentrant, correct_grad_sizes,
    correct_grad_types)`` of ``output`` w.r.t. each differentiable input, from one vjp per
    output element; reentrant is whether a second pass agrees within ``nondet_tol``."""
    _deprecated("get_analytical_jacobian")
    if grad_out != 1.0:
        raise ValueError("Expected grad_out to be 1.0 to get_analytical_jacobian, no longer "
                         "supports values of grad_out != 1.0.")
    diff = [x for x in _as_tuple(inputs) if _is_diff_input(x)]
    with _gm.enable_grad():
        first, types_ok, sizes_ok = _analytical_jacobian(diff, output)
        second, _, _ = _analytical_jacobian(diff, output)
    reentrant = all(np.abs(a - b).max(initial=0) <= nondet_tol for a, b in zip(first, second))
    return tuple(_tm._wrap(a) for a in first), reentrant, sizes_ok, types_ok
