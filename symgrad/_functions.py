"""torch's free functions that are no Tensor method: `sg.einsum`, `sg.tensordot`,
`sg.normalize`, `sg.cosine_similarity`, `sg.var_mean`, `sg.std_mean`.

On traced values they trace (`symgrad.trace.einsum`, ...). On runtime tensors `einsum` and
`tensordot` are forward-only Functions whose forward is the traced function (their backward is
generated on first use per signature, as for the composite ops); the others are compositions
of Tensor ops, so they run the same way in both.
"""
from __future__ import annotations

import numpy as np

from . import _methods
from ._api_helpers import _is_traced, _where, _xlog1py_op, with_out


def _tensors(values):
    from . import tensor as _tm

    return [v if isinstance(v, _tm.Tensor) else _tm.tensor(v) for v in values]


def _is_subscripts(seq):
    """Whether a list is einsum subscripts (ints and ...), not a list of operands."""
    return all(k is Ellipsis or (isinstance(k, (int, np.integer)) and not isinstance(k, bool))
               for k in seq)


def _einsum_forward(equation, *operands):
    from .trace import einsum as traced

    return traced(equation, *operands)


def _tensordot_forward(a, b, dims=2):
    from .trace import tensordot as traced

    return traced(a, b, dims)


_SUBSCRIPTS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_equation(args):
    """(equation, operands) of einsum's sublist form, ``einsum(a, [0, 1], b, [1, 2],
    [0, 2])`` (torch's and NumPy's): each operand followed by its subscripts as ints in
    [0, 52) (or ``...``), then optionally the output's."""
    args = list(args)
    out = args.pop() if len(args) % 2 == 1 else None
    operands, parts = args[0::2], []

    def letters(sub, which):
        if not isinstance(sub, (list, tuple)):
            raise TypeError(f"einsum(): {which} must be a list of subscripts (ints in [0, 52) "
                            f"or ...), got {type(sub).__name__}")
        text = []
        for k in sub:
            if k is Ellipsis:
                text.append("...")
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool) \
                    and 0 <= k < len(_SUBSCRIPTS):
                text.append(_SUBSCRIPTS[int(k)])
            else:
                raise ValueError(f"einsum(): subscript in subscript list is not within the "
                                 f"valid range [0, 52), got {k!r} in {which}")
        return "".join(text)

    for i, sub in enumerate(args[1::2]):
        parts.append(letters(sub, f"the sublist of operand {i}"))
    eq = ",".join(parts)
    if out is not None:
        eq += "->" + letters(out, "the output sublist")
    return eq, tuple(operands)


def einsum(equation, *operands):
    """torch.einsum(equation, *operands) (or a list of operands), or the sublist form
    ``einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])``."""
    if not isinstance(equation, str) and operands and isinstance(operands[0], (list, tuple)) \
            and not (len(operands) == 1 and not _is_subscripts(operands[0])):
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if _is_traced(equation) or any(_is_traced(v) for v in operands):
        return _einsum_forward(equation, *operands)
    from ._composite_ops import function

    return function("einsum", _einsum_forward).apply(equation, *_tensors(operands))


def tensordot(a, b, dims=2):
    """torch.tensordot(a, b, dims): dims an int (the last of a with the first of b) or a pair
    of dim lists."""
    if _is_traced(a) or _is_traced(b):
        return _tensordot_forward(a, b, dims)
    from ._composite_ops import function

    if not isinstance(dims, int):
        dims = tuple(d if isinstance(d, int) else tuple(d) for d in dims)
    a, b = _tensors((a, b))
    return function("tensordot", _tensordot_forward).apply(a, b, dims)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """torch.nn.functional.normalize: input / max(norm_p(input, dim), eps)."""
    return input / input.norm(p, dim, keepdim=True).clamp_min(eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """torch.nn.functional.cosine_similarity: sum((x1 / |x1|) * (x2 / |x2|), dim), each norm
    at least eps."""
    n1 = x1.norm(2, dim, keepdim=True).clamp_min(eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _renamed_warnings(fn, old, new):
    """fn(), its warnings re-issued with ``old`` (an op name) replaced by ``new``."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    for w in caught:
        warnings.warn(str(w.message).replace(old, new, 1), w.category, stacklevel=3)
    return out


def _pass_through(ctx, grads):
    return list(grads)


def _one_node(name, outs):
    """The outputs of a torch op that is one node with several outputs (var_mean, std_mean),
    computed here by one node per output: new tensors (copies) that share one node ``name``
    whose backward hands each output's gradient to the node that computed it. A pre-hook on
    it sees every output's gradient, as torch's; the inner nodes keep their saved values and
    version checks."""
    if any(_is_traced(o) for o in outs):
        return tuple(outs)
    from ._runtime_ops import record
    from .tensor import _wrap

    copies = [_wrap(o._data.copy()) for o in outs]
    return tuple(record(name, _pass_through, None, list(outs), copies, list))


def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """torch.var_mean: (var, mean), one VarMeanBackward0 node."""
    var = _renamed_warnings(lambda: input.var(dim, unbiased, keepdim, correction=correction),
                            "var():", "var_mean():")
    return _one_node("VarMeanBackward0", (var, input.mean(dim, keepdim=keepdim)))


def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """torch.std_mean: (std, mean), one StdMeanBackward0 node."""
    std = _renamed_warnings(lambda: input.std(dim, unbiased, keepdim, correction=correction),
                            "std():", "std_mean():")
    return _one_node("StdMeanBackward0", (std, input.mean(dim, keepdim=keepdim)))


def bmm(input, mat2):
    """torch.bmm: batched matrix product of two 3-D tensors."""
    for name, t in (("batch1", input), ("batch2", mat2)):
        if isinstance(getattr(t, "shape", None), tuple) and len(t.shape) != 3 \
                or not _is_traced(t) and len(t.shape) != 3:
            raise RuntimeError(f"{name} must be a 3D tensor (bmm: got {len(t.shape)}-D)")
    return input.matmul(mat2)


def _add_product(input, product, beta, alpha):
    product = product if alpha == 1 else product * alpha
    if beta == 0:   # torch: input is ignored (its NaN and inf do not propagate)
        return product
    return product + (input if beta == 1 else input * beta)


@with_out
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """torch.addmm: beta * input + alpha * (mat1 @ mat2)."""
    return _add_product(input, mat1.matmul(mat2), beta, alpha)


@with_out
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """torch.baddbmm: beta * input + alpha * bmm(batch1, batch2)."""
    return _add_product(input, bmm(batch1, batch2), beta, alpha)


def _isnan(x):
    from . import _runtime_ops

    return _runtime_ops.isnan(x)


@with_out
def _tensor_operands(name, *operands):
    """torch's TypeError where a Python number is an operand `name` takes only as a Tensor."""
    import numbers

    for position, (param, value) in enumerate(operands, 1):
        if isinstance(value, numbers.Number):
            raise TypeError(f"{name}(): argument '{param}' (position {position}) must be "
                            f"Tensor, not {type(value).__name__}")


def heaviside(input, values):
    """torch.heaviside: values where input is 0, else 1 for input > 0 and 0 otherwise (also
    for NaN). Not differentiable in torch; here its gradient is 0 (values' where input is 0)."""
    _tensor_operands("heaviside", ("input", input), ("values", values))
    step = _where(input > 0, 1.0, 0.0)
    if not _is_traced(input) and not _is_traced(values):
        from .autograd import no_grad

        with no_grad():
            return _where(input == 0, values, step.to(input.dtype))
    return _where(input == 0, values, step)


def masked_fill(input, mask, value):
    """torch.masked_fill: value where mask is True, else input."""
    if _is_traced(input):
        return input.masked_fill(mask, value)
    from . import tensor as _tm
    from ._composite_ops import _C_TYPES

    if isinstance(mask, _tm.Tensor) and mask._data.dtype.kind != "b":
        name = mask._data.dtype.name
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_C_TYPES.get(name, name)}")
    if not isinstance(value, _tm.Tensor):
        value = _tm.tensor(value, dtype=input.dtype)
    return _where(mask, value.to(input.dtype), input)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """torch.nansum: the sum with NaNs counted as 0 (their gradient is 0)."""
    return _where(_isnan(input), 0.0, input).sum(dim, keepdim)


@with_out
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """torch.nanmean: the mean of the entries that are not NaN."""
    nan = _isnan(input)
    return _where(nan, 0.0, input).sum(dim, keepdim) / _where(nan, 0.0, 1.0).sum(dim, keepdim)


@with_out
def copysign(input, other):
    """torch.copysign: |input| with the sign of other (of other's sign bit on runtime tensors
    and numbers, -0.0 included; in a traced forward, of other < 0). other gets no gradient."""
    _tensor_operands("copysign", ("input", input))
    import math

    import numpy as np

    from . import tensor as _tm

    mag = input.abs()
    if isinstance(other, (int, float)):
        return -mag if math.copysign(1.0, other) < 0 else mag
    if _is_traced(other) or _is_traced(input):
        return _where(other < 0, -mag, mag)
    negative = _tm.tensor(np.signbit(other._data))
    return _where(negative, -mag, mag)


@with_out
def float_power(input, exponent):
    """torch.float_power: input ** exponent computed in float64."""
    from . import tensor as _tm

    if not _is_traced(input) and isinstance(input, _tm.Tensor):
        input = input.to(_tm.float64)
    if not _is_traced(exponent) and isinstance(exponent, _tm.Tensor):
        exponent = exponent.to(_tm.float64)
    return input ** exponent


def dist(input, other, p=2):
    """torch.dist: the p-norm of input - other."""
    _tensor_operands("dist", ("input", input), ("other", other))
    return (input - other).norm(p)


def _cdist(x1, x2, p):
    # every pair's p-norm of x1[..., i, :] - x2[..., j, :]: the norm's subgradient is 0 at a
    # zero distance (torch's cdist backward defines it so there)
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, -1)


def _shape(x):
    try:
        return tuple(int(d) for d in x.shape)
    except (TypeError, ValueError):
        return None


def _float_kind(x):
    if _is_traced(x):
        return x.dtype == "float"
    return x._data.dtype.kind in "fc"


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """torch.cdist: the p-norm distance between each row of x1 (..., P, M) and each row of
    x2 (..., R, M), batch dims broadcast: (..., P, R). p >= 0 (0: the count of differing
    entries; inf: the largest difference). The gradient at a zero distance is 0, as torch's;
    computed directly for every p (compute_mode only chooses how torch computes p = 2)."""
    from .errors import scalar_type_name

    _tensor_operands("cdist", ("x1", x1), ("x2", x2))
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, x in (("X1", x1), ("X2", x2)):
        if x.dim() < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: "
                               f"{x.dim()}D")
    for name, x in (("X1", x1), ("X2", x2)):
        if not _float_kind(x):
            dtype = "Long" if _is_traced(x) else scalar_type_name(x._data.dtype)
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {dtype}")
    a, b = _shape(x1), _shape(x2)
    if a is not None and b is not None:
        if a[-1] != b[-1]:
            raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {a[-1]} "
                               f"X2: {b[-1]}")
        for i, (m, n) in enumerate(zip(reversed(a[:-2]), reversed(b[:-2]))):
            if m != n and m != 1 and n != 1:
                dim = max(len(a), len(b)) - 3 - i
                raise RuntimeError(f"The size of tensor a ({m}) must match the size of tensor "
                                   f"b ({n}) at non-singleton dimension {dim}")
    p = float(p)
    if not p >= 0:   # negative or NaN
        raise RuntimeError("cdist only supports non-negative p values")
    from ._api_helpers import _run

    return _run("cdist", "CdistBackward0", _cdist, x1, x2, p)


def positive(input):
    """torch.positive: input itself."""
    return input


@with_out
def xlog1py(input, other):
    """torch.xlog1py (torch.special.xlog1py)."""
    return _xlog1py_op(input, other)


# installed as Tensor and traced-value methods where those have none of the name
METHODS = ("addmm", "baddbmm", "heaviside", "masked_fill", "nansum", "nanmean", "copysign",
           "float_power", "dist", "positive", "xlog1py", "bmm")

__all__ = ["einsum", "tensordot", "normalize", "cosine_similarity", "var_mean", "std_mean",
           "cdist", *METHODS]


def install(*classes):
    """Add the functions of METHODS as methods of `classes` where they have none of the name."""
    for cls in classes:
        for name in METHODS:
            if not hasattr(cls, name):
                setattr(cls, name, globals()[name])


_methods.register(install)   # the traced values' methods too (symgrad/_methods.py)
