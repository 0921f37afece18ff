"""Higher-level autograd: ``vjp``, ``jvp`` (double-vjp trick), ``jacobian``, ``hessian``,
``hvp``, ``vhp``, with torch.autograd.functional's signatures, return structures (a Tensor
for a Tensor argument, tuples for tuples) and strict-mode errors."""

from symgrad import tensor as _tm
from symgrad import _runtime_ops as _ops
from symgrad.autograd import engine as _engine
from symgrad.autograd import grad_mode as _gm

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(inp, arg_name=None, fn_name=None):
    if arg_name is None and fn_name is None:
        return _as_tuple_nocheck(inp)
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not isinstance(el, _tm.Tensor):
            if is_inp_tuple:
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                    f"Tensors but the value at index {i} has type {type(el)}."
                )
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but the given {arg_name} has type {type(el)}."
            )
    return is_inp_tuple, inp


def _as_tuple_nocheck(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _tuple_postprocess(res, to_unpack):
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    if isinstance(inputs[0], _tm.Tensor):
        if not create_graph:
            return tuple(inp.detach() for inp in inputs)
        return inputs
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prepend}v has invalid size: should be {el_other.size()} but got "
                f"{el_v.size()}."
            )


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode."
            )
        if not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(
                    f"The hessian of the user-provided function with respect to input {i} is "
                    "independent of the input. This is not allowed in strict mode. You should "
                    "ensure that your function is thrice differentiable and that the hessian "
                    "depends on the inputs."
                )
            if input_type == "jacobian":
                raise RuntimeError(
                    "While computing the hessian, found that the jacobian of the user-provided "
                    f"function with respect to input {i} is independent of the input. This is "
                    "not allowed in strict mode. You should ensure that your function is twice "
                    "differentiable and that the jacobian depends on the inputs (this would be "
                    "violated by a linear function for example)."
                )
            if input_type == "grad_inputs":
                raise RuntimeError(
                    f"The gradient with respect to input {i} is independent of the inputs of "
                    "the user-provided function. This is not allowed in strict mode."
                )
            raise RuntimeError(
                f"Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when "
                "running in strict mode."
            )


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grad_outputs = (), ()
    for out, grad_out in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs += (out,)
            new_grad_outputs += (grad_out,)
    if len(new_outputs) == 0:
        return (None,) * len(inputs)
    return _engine.grad(new_outputs, inputs, new_grad_outputs, allow_unused=True,
                        create_graph=create_graph, retain_graph=retain_graph)


_STRICT_NONE = {
    "back": "The output of the user-provided function is independent of input {i}. This is not "
            "allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    res = ()
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                raise RuntimeError(_STRICT_NONE[stage].format(i=i))
            grads_i = _tm.zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            if "double" not in stage:
                raise RuntimeError(
                    f"The jacobian of the user-provided function is independent of input {i}. "
                    "This is not allowed in strict mode when create_graph=True."
                )
            raise RuntimeError(
                f"The hessian of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode when create_graph=True."
            )
        res += (grads_i,)
    return res



def _last_product(of, wrt, v, like, strict, create_graph, stage):
    """The final vector product of vjp/jvp/vhp/hvp, with torch's zero-filling for unused
    inputs; differentiable only when create_graph asks for it."""
    with _gm.set_grad_enabled(True if create_graph else _gm.is_grad_enabled()):
        grad_res = _autograd_grad(of, wrt, v, create_graph=create_graph)
        return _fill_in_zeros(grad_res, like, strict, create_graph, stage)


def _finish(outputs, is_outputs_tuple, result, is_result_tuple, create_graph):
    """(outputs, result), detached unless create_graph, unpacked as the caller passed them."""
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(result, is_result_tuple))

def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): returns ``(outputs, vjp)`` shaped like torch's."""
    with _gm.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].nelement() != 1:
            raise RuntimeError(
                "The vector v can only be None if the user-provided function returns a single "
                "Tensor with a single element."
            )
    result = _last_product(outputs, inputs, v, inputs, strict, create_graph, "back")
    return _finish(outputs, is_outputs_tuple, result, is_inputs_tuple, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v) by the double-vjp trick, as torch computes it."""
    with _gm.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].nelement() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to the user-provided function is a "
                "single Tensor with a single element."
            )
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        # The backward is linear in grad_outputs, so their value does not matter (zeros).
        grad_outputs = tuple(_tm.zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    result = _last_product(grad_inputs, grad_outputs, v, outputs, strict, create_graph, "back_trick")
    return _finish(outputs, is_outputs_tuple, result, is_outputs_tuple, create_graph)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs`` (a Tensor, or nested tuples as torch returns).

    ``vectorize=True`` assembles, as torch's batched gradient does, one tensor per input over
    every output's rows and views it per output (a block needs a graph when any block of its
    input does). ``strategy="forward-mode"`` (with ``vectorize=True``) pushes each input
    element's basis vector through ``func`` as a tangent (forward-mode AD, one forward pass per
    input element, where reverse mode takes one backward per output element), as torch's
    ``_jacfwd``; each block has its output's dtype.
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".'
        )
    if strategy == "forward-mode":
        # the combinations torch refuses, refused with torch's errors in torch's order (code
        # ported from torch keeps failing the same way); vectorize=True forward-mode is
        # supported
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and `strategy=\"forward-"
                "mode\"` are not supported together (yet). Please either set "
                "`create_graph=False` or `strategy=\"reverse-mode\"`."
            )
        if strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` and `strategy=\"forward-"
                "mode\"` are not supported together (yet). Please either set `strict=False` or "
                "`strategy=\"reverse-mode\"`."
            )
        if not vectorize:
            raise NotImplementedError(
                "Computing Jacobian using forward-AD or forward-over-reverse Hessian is only "
                "implemented for `vectorize=True`."
            )
        return _jacfwd(func, inputs)
    with _gm.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` and `vectorize=True` are not "
                "supported together. Please either set `strict=False` or `vectorize=False`."
            )
        rows = []   # per output, per input, the rows of the block (one per output element)
        for i, out in enumerate(outputs):
            jac_i = tuple([] for _ in range(len(inputs)))
            flat = out.reshape(-1)
            for j in range(out.nelement()):
                vj = _autograd_grad((flat[j],), inputs, retain_graph=True,
                                    create_graph=create_graph)
                for el_idx, (jac_i_el, vj_el, inp_el) in enumerate(zip(jac_i, vj, inputs)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError(
                                "The jacobian of the user-provided function is independent of "
                                f"input {i}. This is not allowed in strict mode when "
                                "create_graph=True."
                            )
                        jac_i_el.append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is independent of "
                                f"input {el_idx}. This is not allowed in strict mode."
                            )
                        jac_i_el.append(_tm.zeros_like(inp_el))
            rows.append(jac_i)
        if vectorize:
            result = _batched_blocks(rows, outputs, inputs)
        else:
            result = tuple(tuple(_stack(jac_i_el, out.shape + inputs[el_idx].shape,
                                        inputs[el_idx])
                                 for el_idx, jac_i_el in enumerate(jac_i))
                           for jac_i, out in zip(rows, outputs))
        result = _grad_postprocess(result, create_graph)
        return _tuple_postprocess(result, (is_outputs_tuple, is_inputs_tuple))


def _jacfwd(func, inputs):
    """jacobian(strategy="forward-mode", vectorize=True), as torch's _jacfwd: the columns of
    every block are the output tangents of one input element's basis vector (zero tangents
    for the other inputs; an output without a tangent does not depend on the inputs: zeros).
    Torch batches the basis with vmap; here it is a loop, with the same numbers. As torch's,
    the blocks keep the tangents' graph: a forward-over-reverse Hessian requires grad."""
    from symgrad.autograd import forward_ad as fwAD

    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    numels = [inp.nelement() for inp in inputs]
    columns, outputs, is_outputs_tuple = [], None, False
    for j, n in enumerate(numels):
        for k in range(n):
            with fwAD.dual_level():
                duals = []
                for m, other in enumerate(inputs):
                    basis = _tm.zeros_like(other)
                    if m == j:
                        basis._data.reshape(-1)[k] = 1
                    duals.append(fwAD.make_dual(other, basis))
                is_outputs_tuple, outs = _as_tuple(func(*duals), "outputs of the "
                                                   "user-provided function", "jacobian")
                unpacked = [fwAD.unpack_dual(out) for out in outs]
            outputs = [primal for primal, _ in unpacked]
            columns.append([_tm.zeros_like(primal) if tangent is None else tangent
                            for primal, tangent in unpacked])
    result = []
    for i, out in enumerate(outputs):
        blocks, start = [], 0
        for inp, n in zip(inputs, numels):
            cols = [c[i] for c in columns[start:start + n]]
            start += n
            shape = tuple(out.shape) + tuple(inp.shape)
            if cols:   # (n, *out) -> (*out, n) -> (*out, *inp)
                block = _ops.stack(cols, -1).reshape(shape)
            else:
                block = _tm.zeros(shape, dtype=out.dtype)
            blocks.append(block if block.dtype == out.dtype else block.to(out.dtype))
        result.append(blocks)
    # torch's containers: lists where tuples were asked for (a list of lists for tuples of
    # inputs and outputs, a list of blocks for a tuple of inputs and a single output)
    return _tuple_postprocess(result, (is_outputs_tuple, is_inputs_tuple))


def _batched_blocks(rows, outputs, inputs):
    """The blocks as torch's vectorized jacobian makes them: per input, the rows of every
    output stacked into one tensor, split by output and viewed to (output shape, input
    shape)."""
    per_input = []
    for el_idx, inp in enumerate(inputs):
        all_rows = [r for jac_i in rows for r in jac_i[el_idx]]
        stacked = _ops.stack(all_rows, 0) if all_rows else None
        blocks, start = [], 0
        for out in outputs:
            n = out.nelement()
            shape = out.shape + inp.shape
            if stacked is None:
                blocks.append(_tm.zeros(shape, dtype=inp.dtype))
            else:
                blocks.append(stacked[start:start + n].reshape(shape))
            start += n
        per_input.append(blocks)
    return tuple(tuple(per_input[k][i] for k in range(len(inputs))) for i in range(len(outputs)))


def _stack(rows, shape, like):
    if not rows:
        return _tm.zeros(shape, dtype=like.dtype)
    return _ops.stack(rows, 0).reshape(shape)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of scalar ``func`` at ``inputs`` (nested tuples for tuple inputs)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, _tm.Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single "
                "element"
            )
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_prefix(func, inputs, v, create_graph, strict, name):
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    if v is not None:
        _, v = _as_tuple(v, "v", name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
    elif len(inputs) != 1 or inputs[0].nelement() != 1:
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided function is a "
            "single Tensor with a single element."
        )
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple or not isinstance(outputs[0], _tm.Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single "
            "element"
        )
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for scalar ``func``."""
    with _gm.enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_prefix(
            func, inputs, v, create_graph, strict, "vhp")
    result = _last_product(jac, inputs, v, inputs, strict, create_graph, "double_back")
    return _finish(outputs, is_outputs_tuple, result, is_inputs_tuple, create_graph)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for scalar ``func``, by the double-backward trick as torch."""
    with _gm.enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_prefix(
            func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(_tm.zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    result = _last_product(double_back, grad_jac, v, inputs, strict, create_graph, "double_back_trick")
    return _finish(outputs, is_outputs_tuple, result, is_inputs_tuple, create_graph)
