"""torch.nn.functional's names: `F = sg.nn.functional` in place of `torch.nn.functional`.

Every op is written once, over traced values, from symgrad's stable primitives (`softplus`,
`log_sigmoid`, `erfc`, `log_softmax`, `where`, ...). In a traced forward (a Function with only
a forward, `sg.compile`, the CLI) it traces into the caller's graph. On runtime tensors it is
a forward-only Function whose forward is that same code: one autograd node with torch's name
(`SiluBackward0`, `MseLossBackward0`, ...), its backward generated on first use per signature
(shapes, dtypes, constants) and cached, like the composite ops of `symgrad/_composite_ops.py`.

The gradients at kinks are torch's: `hardtanh` / `relu6` 0 at the bounds, `leaky_relu`
`negative_slope` at 0, `hardshrink` / `softshrink` 0 at +-lambd, `threshold` 0 at the
threshold, `hardswish` -0.5 and 1.5 at -3 and 3, `elu` alpha at 0.

Importing this module imports no SymPy (the trace does, on first use).
"""
from __future__ import annotations

import math
import numbers
import warnings

from .._api_helpers import (  # noqa: F401  (MASK_DIFFERENTIABLE: as before)
    MASK_DIFFERENTIABLE, _is_traced, _run, _where, with_out,
)

__all__ = [
    # activations
    "relu", "relu6", "sigmoid", "tanh", "silu", "gelu", "mish", "elu", "selu", "celu",
    "hardtanh", "leaky_relu", "hardswish", "hardsigmoid", "softsign", "tanhshrink",
    "softshrink", "hardshrink", "threshold", "glu", "logsigmoid", "softplus", "softmax",
    "log_softmax", "softmin", "linear", "normalize", "layer_norm", "rms_norm", "group_norm",
    "scaled_dot_product_attention", "cosine_similarity", "pairwise_distance",
    # losses
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss", "kl_div",
    "poisson_nll_loss", "gaussian_nll_loss",
]


# ------------------------------------------------------------------------------ machinery
def _inplace(input, fn, inplace):
    """fn(input), written into `input` when inplace: fn runs on a private copy of the old
    value (a node that saves its input keeps it: F.elu(a, inplace=True) then backward raised a
    false in-place error), and input's history becomes fn's node, as torch's relu_ / elu_
    (a.grad_fn is ReluBackward0 / EluBackward1, not a copy)."""
    if inplace and not _is_traced(input):
        from .. import _runtime_ops

        return _runtime_ops.inplace(input, "apply", fn)
    return fn(input)


def _known(x):
    """The shape tuple of x, or None in a shape-generic trace."""
    s = getattr(x, "shape", None)
    try:
        return tuple(int(d) for d in s)
    except (TypeError, ValueError):
        return None


def _size(shape):
    return f"torch.Size({list(shape)})"


def _data(x):
    """The array of a runtime tensor, None for a traced value (or anything else)."""
    from ..tensor import Tensor

    return x._data if isinstance(x, Tensor) else None


def _dtype_kind(x):
    """'f' (floating), 'i' (integer) or 'b' (bool) of a runtime tensor or traced value."""
    if _is_traced(x):
        return {"float": "f", "int": "i", "bool": "b"}.get(x.dtype, "f")
    data = _data(x)
    kind = data.dtype.kind if data is not None else "f"
    return "i" if kind == "u" else kind


# ------------------------------------------------------------------------------ reductions
_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce):
    if size_average is None:
        size_average = True
    if reduce is None:
        reduce = True
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def _reduction(op, reduction, size_average=None, reduce=None, extra=()):
    if size_average is not None or reduce is not None:
        warnings.warn("size_average and reduce args will be deprecated, please use "
                      "reduction='...' instead.", UserWarning, stacklevel=3)
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in _REDUCTIONS + tuple(extra):
        choices = ", ".join(repr(r) for r in _REDUCTIONS + tuple(extra))
        raise ValueError(f"{reduction} is not a valid value for reduction ({op}: "
                         f"reduction={reduction!r}; choose one of {choices})")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_same_or_broadcast(op, input, target):
    """torch's mse_loss / l1_loss: a target of another size warns and broadcasts."""
    a, b = _known(input), _known(target)
    if a is None or b is None or a == b:
        return
    warnings.warn(f"Using a target size ({_size(b)}) that is different to the input size "
                  f"({_size(a)}). This will likely lead to incorrect results due to "
                  f"broadcasting. Please ensure they have the same size.", UserWarning,
                  stacklevel=3)
    for i, (x, y) in enumerate(zip(reversed(a), reversed(b))):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"{op}: the size of input ({x}) must match the size of target "
                               f"({y}) at non-singleton dimension {max(len(a), len(b)) - 1 - i}")


def _weighted(loss, weight):
    return loss if weight is None else loss * weight


def _node(reduction, none):
    """torch's node of a loss that ends in a plain reduction: `none`'s op without one."""
    return {"mean": "MeanBackward0", "sum": "SumBackward0"}.get(reduction, none)


def _check_weight(weight, input):
    """torch's mse_loss / l1_loss / huber_loss: weight of the input's size."""
    w, a = _known(weight), _known(input)
    if weight is not None and w is not None and a is not None and w != a:
        raise ValueError("Weights and input must have the same size.")


def _weighted_mean(loss, weight, reduction):
    # torch's mse_loss and l1_loss with a weight: the mean is sum(weight * loss) / sum(weight)
    if weight is not None and reduction == "mean":
        return (loss * weight).sum() / weight.sum()
    return _reduce(_weighted(loss, weight), reduction)


def _weighted_node(reduction, weight, plain, mean="DivBackward0"):
    if weight is None:
        return plain
    return {"mean": mean, "sum": "SumBackward0"}.get(reduction, "MulBackward0")


# ------------------------------------------------------------------------------ activations
def relu(input, inplace=False):
    """torch.nn.functional.relu."""
    return _inplace(input, lambda input: input.relu(), inplace)


def sigmoid(input):
    """torch.nn.functional.sigmoid."""
    return input.sigmoid()


def tanh(input):
    """torch.nn.functional.tanh."""
    return input.tanh()


def _silu(x):
    return x * x.sigmoid()


def silu(input, inplace=False):
    """torch.nn.functional.silu: x * sigmoid(x)."""
    return _inplace(input, lambda input: _run("silu", "SiluBackward0", _silu, input), inplace)


_SQRT1_2 = math.sqrt(0.5)
_SQRT_2_PI = math.sqrt(2 / math.pi)


def _gelu(x):
    # 0.5 * x * (1 + erf(x / sqrt 2)) with 1 + erf(u) = erfc(-u): exact in the lower tail
    return 0.5 * x * (x * -_SQRT1_2).erfc()


def _gelu_tanh(x):
    # 0.5 * x * (1 + tanh(u)) = x * sigmoid(2u): no cancellation in the lower tail
    return x * ((x + 0.044715 * (x * x * x)) * (2 * _SQRT_2_PI)).sigmoid()


def gelu(input, approximate="none"):
    """torch.nn.functional.gelu; approximate='none' (erf) or 'tanh'."""
    if approximate == "none":
        return _run("gelu", "GeluBackward0", _gelu, input)
    if approximate == "tanh":
        return _run("gelu_tanh", "GeluBackward0", _gelu_tanh, input)
    raise RuntimeError(f"approximate argument must be either none or tanh. (gelu: "
                       f"approximate={approximate!r})")


def _mish(x):
    return x * x.softplus().tanh()


def mish(input, inplace=False):
    """torch.nn.functional.mish: x * tanh(softplus(x))."""
    return _inplace(input, lambda input: _run("mish", "MishBackward0", _mish, input), inplace)


def _elu(x, alpha, scale, input_scale):
    neg = (x * input_scale).expm1() * alpha if input_scale != 1 else x.expm1() * alpha
    # torch: at 0 (and -0) the slope is the negative branch's, alpha * input_scale, and the
    # second derivative 0 (elu_double_backward masks x < 0); NaN: x, with gradient 1
    out = _where(x < 0, neg, _where(x <= 0, x * (alpha * input_scale), x))
    return out * scale if scale != 1 else out


def elu(input, alpha=1.0, inplace=False):
    """torch.nn.functional.elu: x for x > 0, alpha * expm1(x) otherwise."""
    return _inplace(input, lambda input: _run("elu", ("EluBackward1" if inplace else "EluBackward0"), _elu, input, float(alpha), 1.0, 1.0),
                    inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """torch.nn.functional.selu: scale * elu(x, alpha) with the SELU constants."""
    return _inplace(input, lambda input: _run("elu", ("EluBackward1" if inplace else "EluBackward0"), _elu, input, _SELU_ALPHA, _SELU_SCALE,
                                1.0), inplace)


def celu(input, alpha=1.0, inplace=False):
    """torch.nn.functional.celu: max(0, x) + min(0, alpha * expm1(x / alpha))."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError (celu: alpha=0)")
    return _inplace(input, lambda input: _run("elu", ("CeluBackward1" if inplace else "CeluBackward0"), _elu, input, float(alpha), 1.0,
                                1.0 / alpha), inplace)


def _hardtanh(x, lo, hi):
    # torch: the gradient is 0 at and beyond the bounds (x <= lo or x >= hi)
    return _where(x <= lo, lo, _where(x >= hi, hi, x))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """torch.nn.functional.hardtanh: clamp(x, min_val, max_val), gradient 0 at the bounds."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _inplace(input, lambda input: _run("hardtanh", "HardtanhBackward0", _hardtanh, input,
                                float(min_val), float(max_val)), inplace)


def relu6(input, inplace=False):
    """torch.nn.functional.relu6: hardtanh(x, 0, 6) (gradient 0 at 0 and at 6)."""
    return _inplace(input, lambda input: _run("hardtanh", "HardtanhBackward0", _hardtanh, input, 0.0, 6.0),
                    inplace)


def _leaky_relu(x, slope):
    return _where(x > 0, x, x * slope)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """torch.nn.functional.leaky_relu: gradient negative_slope at 0, as torch."""
    return _inplace(input, lambda input: _run("leaky_relu", ("LeakyReluBackward1" if inplace else "LeakyReluBackward0"), _leaky_relu, input,
                                float(negative_slope)), inplace)


def _hardswish(x):
    # torch: x * relu6(x + 3) / 6 (NaN at -inf), gradient 0 at and below -3, 1 at and above 3
    xd = x.detach()
    return _where(x <= -3, xd * (xd + 3).relu() / 6, _where(x < 3, x * (x + 3) / 6, x))


def hardswish(input, inplace=False):
    """torch.nn.functional.hardswish: x * relu6(x + 3) / 6."""
    return _inplace(input, lambda input: _run("hardswish", "HardswishBackward0", _hardswish, input), inplace)


def _hardsigmoid(x):
    inside = (x > -3) & (x < 3)
    # NaN: NaN with gradient 0, as torch
    return _where(inside, x / 6 + 0.5, _where(x <= -3, 0.0, _where(x >= 3, 1.0, x.detach())))


def hardsigmoid(input, inplace=False):
    """torch.nn.functional.hardsigmoid: relu6(x + 3) / 6, gradient 1/6 strictly inside."""
    return _inplace(input, lambda input: _run("hardsigmoid", "HardsigmoidBackward0", _hardsigmoid, input),
                    inplace)


def _softsign(x):
    return x / (x.abs() + 1)


def softsign(input):
    """torch.nn.functional.softsign: x / (1 + |x|)."""
    return _run("softsign", "DivBackward0", _softsign, input)


def _tanhshrink(x):
    return x - x.tanh()


def tanhshrink(input):
    """torch.nn.functional.tanhshrink: x - tanh(x)."""
    return _run("tanhshrink", "SubBackward0", _tanhshrink, input)


def _softshrink(x, lambd):
    band = (x >= -lambd) & (x <= lambd)
    return _where(band, 0.0, _where(x > lambd, x - lambd, x + lambd))


def softshrink(input, lambd=0.5):
    """torch.nn.functional.softshrink: x -+ lambd outside [-lambd, lambd], else 0."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return _run("softshrink", "SoftshrinkBackward0", _softshrink, input, float(lambd))


def _hardshrink(x, lambd):
    return _where((x >= -lambd) & (x <= lambd), 0.0, x)


def hardshrink(input, lambd=0.5):
    """torch.nn.functional.hardshrink: x outside [-lambd, lambd], else 0 (gradient 0 at the
    bounds)."""
    return _run("hardshrink", "HardshrinkBackward0", _hardshrink, input, float(lambd))


def _threshold(x, th, value):
    return _where(x <= th, value, x)


def threshold(input, threshold, value, inplace=False):
    """torch.nn.functional.threshold: value where x <= threshold, else x."""
    return _inplace(input, lambda input: _run("threshold", ("ThresholdBackward1" if inplace else "ThresholdBackward0"), _threshold, input,
                                float(threshold), float(value)), inplace)


def _glu(x, dim):
    a, b = x.chunk(2, dim)
    return a * b.sigmoid()


def glu(input, dim=-1):
    """torch.nn.functional.glu: a * sigmoid(b) of the two halves along dim."""
    shape = _known(input)
    if shape is not None:
        if not shape:
            raise RuntimeError("glu does not support scalars because halving size must be even")
        d = dim + len(shape) if dim < 0 else dim
        if shape[d] % 2:
            raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size "
                               f"{shape[d]}")
    return _run("glu", "GluBackward0", _glu, input, int(dim))


def logsigmoid(input):
    """torch.nn.functional.logsigmoid: log(sigmoid(x)), exact and stable."""
    return input.log_sigmoid()


def softplus(input, beta=1.0, threshold=20.0):
    """torch.nn.functional.softplus: log(1 + exp(beta x)) / beta (x where beta x > threshold
    below the default threshold)."""
    return input.softplus(beta, threshold)


def _softmax_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def _cast(input, dtype):
    return input if dtype is None or _is_traced(input) else input.to(dtype)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """torch.nn.functional.softmax."""
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    return _cast(input, dtype).softmax(dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """torch.nn.functional.log_softmax."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    return _cast(input, dtype).log_softmax(dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """torch.nn.functional.softmin: softmax(-x)."""
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    return (-_cast(input, dtype)).softmax(dim)


def linear(input, weight, bias=None):
    """torch.nn.functional.linear: input @ weight.T + bias."""
    out = input.matmul(weight.t() if len(weight.shape) == 2 else weight)
    return out if bias is None else out + bias


@with_out
def normalize(input, p=2.0, dim=1, eps=1e-12):
    """torch.nn.functional.normalize: input / max(norm_p(input, dim), eps)."""
    from .._functions import normalize as _normalize

    return _normalize(input, p, dim, eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """torch.nn.functional.cosine_similarity."""
    from .._functions import cosine_similarity as _cosine

    return _cosine(x1, x2, dim, eps)


def _pairwise_distance(x1, x2, p, eps, keepdim):
    return (x1 - x2 + eps).norm(p, -1, keepdim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """torch.nn.functional.pairwise_distance: norm_p(x1 - x2 + eps) along the last dim."""
    return _run("pairwise_distance", "NormBackward1", _pairwise_distance, x1, x2, float(p),
                float(eps), bool(keepdim))


def _layer_norm(x, dims, eps, weight, bias):
    mean = x.mean(dims, keepdim=True)
    centred = x - mean
    var = (centred * centred).mean(dims, keepdim=True)
    out = centred * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm over the last len(normalized_shape) dims."""
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    normalized_shape = tuple(int(d) for d in normalized_shape)
    shape = _known(input)
    k = len(normalized_shape)
    if shape is not None and (len(shape) < k or shape[len(shape) - k:] != normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input "
                           f"with shape [*, {', '.join(map(str, normalized_shape))}], but got "
                           f"input of size{list(shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and _known(t) not in (None, normalized_shape):
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {list(_known(t))} and normalized_shape = "
                               f"{list(normalized_shape)}")
    dims = tuple(range(-k, 0))
    return _run("layer_norm", "NativeLayerNormBackward0", _layer_norm, input, dims,
                float(eps), weight, bias)


def _rms_norm(x, dims, eps, weight):
    out = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    return out if weight is None else out * weight


def _float_name(x):
    """The float dtype name of a runtime tensor or traced value ('float32', ...), None where
    a trace does not know it."""
    if _is_traced(x):
        return x.tracer.precision_of(x)
    return _data(x).dtype.name


def _not_float(op, x):
    """torch's NotImplementedError for a norm of an integer (or bool) tensor."""
    if _dtype_kind(x) != "f":
        from ..errors import scalar_type_name

        name = "Long" if _is_traced(x) else scalar_type_name(_data(x).dtype)
        raise NotImplementedError(f'"{op}" not implemented for \'{name}\'')


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """torch.nn.functional.rms_norm: x / sqrt(mean(x**2) + eps) over the last
    len(normalized_shape) dims, times weight; eps None: the float dtype's machine epsilon
    (torch.finfo(input.dtype).eps)."""
    if not isinstance(normalized_shape, (tuple, list)) and \
            type(normalized_shape).__name__ != "Size":
        raise TypeError(f"rms_norm(): argument 'normalized_shape' (position 2) must be tuple "
                        f"of ints, not {type(normalized_shape).__name__}")
    normalized_shape = tuple(int(d) for d in normalized_shape)
    _not_float("rms_norm", input)
    shape = _known(input)
    k = len(normalized_shape)
    if shape is not None and (len(shape) < k or shape[len(shape) - k:] != normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input "
                           f"with shape [*{', '.join(map(str, normalized_shape))}], but got "
                           f"input of size{list(shape)}")
    if weight is not None and _known(weight) not in (None, normalized_shape):
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(_known(weight))} and normalized_shape = "
                           f"{list(normalized_shape)}")
    if eps is None:
        name = _float_name(input)
        if name is None:
            raise RuntimeError("rms_norm: eps=None is the float dtype's machine epsilon, and "
                               "this trace does not know its input's float dtype: compile "
                               "with example inputs, or pass eps=")
        import numpy as np

        eps = float(np.finfo(name).eps)
    dims = tuple(range(-k, 0))
    return _run("rms_norm", "MulBackward0", _rms_norm, input, dims, float(eps), weight)


def _group_norm(x, shape, groups, eps, weight, bias):
    n, c = shape[0], shape[1]
    g = x.reshape((n, groups, -1))
    mean = g.mean(-1, keepdim=True)
    centred = g - mean
    var = (centred * centred).mean(-1, keepdim=True)
    out = (centred * (var + eps).rsqrt()).reshape(shape)
    affine = (c,) + (1,) * (len(shape) - 2)
    if weight is not None:
        out = out * weight.reshape(affine)
    if bias is not None:
        out = out + bias.reshape(affine)
    return out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.group_norm: input (N, C, *) normalized over each group of
    C / num_groups channels (and every other dim), then weight * x + bias per channel."""
    shape = _known(input)
    if shape is None:
        raise RuntimeError("group_norm needs the input's shape: compile with example inputs")
    if len(shape) < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{len(shape)}")
    num_groups = int(num_groups)
    if num_groups <= 0:
        raise RuntimeError(f"Expected num groups to be positive, but got num_groups="
                           f"{num_groups} (group_norm)")
    if shape[1] % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(shape)} and num_groups="
                           f"{num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and _known(t) not in (None, (shape[1],)):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape {list(_known(t))} "
                               f"and input of shape {list(shape)}")
    _not_float("GroupNormKernelImpl", input)
    return _run("group_norm", "NativeGroupNormBackward0", _group_norm, input, shape,
                num_groups, float(eps), weight, bias)


def _masked_softmax(logits, keep):
    """softmax over the last dim of the entries `keep` holds (all where None), 0 in a row with
    none (or all -inf), as torch's attention (_safe_softmax): shifted by the row's max
    (detached: the shift does not change the gradient), a NaN-free where on both sides."""
    if keep is not None:
        logits = _where(keep, logits, logits.detach().amin(-1, keepdim=True))
    top = logits.detach().amax(-1, keepdim=True)
    top = _where(top.isfinite(), top, 0.0)
    e = (logits - top).exp()
    if keep is not None:
        e = _where(keep, e, 0.0)
    total = e.sum(-1, keepdim=True)
    return e / _where(total == 0, 1.0, total)


def _causal(scores):
    """The lower-triangular keep-mask of torch's is_causal (row i keeps columns j <= i), from
    index ramps of the scores' shape."""
    from ..tensor import ones_like   # sg.ones_like (a traced value's too)

    ones = ones_like(scores)
    return ones.cumsum(-1) <= ones.cumsum(-2)


def _attention(q, k, v, mask, drop, causal, scale, repeat):
    if repeat > 1:
        k = k.repeat_interleave(repeat, -3)
        v = v.repeat_interleave(repeat, -3)
    scores = q.matmul(k.transpose(-2, -1)) * scale
    keep = None
    if mask is not None:
        if _dtype_kind(mask) == "b":
            keep = mask
        else:
            scores = scores + mask
    if causal:
        keep = _causal(scores)
    weights = _masked_softmax(scores, keep) if keep is not None or mask is not None \
        else scores.softmax(-1)
    if drop is not None:
        weights = weights * drop
    return weights.matmul(v)


_TORCH_DTYPE = {"float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
                "float64": "double", "int64": "long int", "int32": "int", "int16": "short int",
                "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}


def _torch_dtype(x):
    if _is_traced(x):
        kind = _dtype_kind(x)
        name = {"b": "bool", "i": "int64"}.get(kind) or x.tracer.precision_of(x) or "float32"
    else:
        name = _data(x).dtype.name
    return _TORCH_DTYPE.get(name, name)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention: softmax(q k^T * scale + mask) v over
    (..., L, E) queries, (..., S, E) keys and (..., S, Ev) values. attn_mask: bool (True:
    takes part) or float (added to the scores), broadcast to (..., L, S); is_causal: row i
    attends to columns j <= i; scale: default 1 / sqrt(E); a row with nothing to attend to is
    0, as torch's. dropout_p > 0 drops attention weights at run time (a fresh mask per call,
    from sg's generator); a traced forward has no random numbers and refuses it."""
    ranks = [t.dim() for t in (query, key, value)]
    if min(ranks) < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {ranks[0]} key.dim: {ranks[1]} and value.dim: "
                           f"{ranks[2]} instead.")
    dtypes = [_torch_dtype(t) for t in (query, key, value)]
    if len(set(dtypes)) > 1:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {dtypes[0]} key.dtype: {dtypes[1]} and value.dtype: "
                           f"{dtypes[2]} instead.")
    if attn_mask is not None:
        mask_dtype = _torch_dtype(attn_mask)
        if mask_dtype not in ("bool", "float", dtypes[0]):
            raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                               f"dtype, but got attn_mask.dtype: {mask_dtype} and  query.dtype: "
                               f"{dtypes[0]} instead.")
        if is_causal:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                               "set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got "
                           f"{dropout_p}")
    q, k, v = (_known(t) for t in (query, key, value))
    repeat = 1
    if q is not None and k is not None and v is not None:
        if enable_gqa and len(q) >= 3 and len(k) >= 3:
            if q[-3] % k[-3] or k[-3] != v[-3]:
                raise RuntimeError(f"scaled_dot_product_attention: with enable_gqa=True the "
                                   f"number of query heads ({q[-3]}) must be a multiple of "
                                   f"the key and value heads ({k[-3]}, {v[-3]})")
            repeat = q[-3] // k[-3]
        batch = math.prod(q[:-2])
        if k[-1] != q[-1]:
            raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to "
                               f"be: [{batch}, {q[-1]}] but got: [{batch}, {k[-1]}].")
        if v[-2] != k[-2]:
            raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to "
                               f"be: [{batch}, {k[-2]}] but got: [{batch}, {v[-2]}].")
    elif enable_gqa:
        raise RuntimeError("scaled_dot_product_attention: enable_gqa needs the shapes: "
                           "compile with example inputs")
    if scale is None:
        e = q[-1] if q is not None else None
        if e is None:
            raise RuntimeError("scaled_dot_product_attention: the default scale 1/sqrt(E) "
                               "needs the query's shape: compile with example inputs or "
                               "pass scale=")
        scale = 1.0 / math.sqrt(e)
    drop = None
    if dropout_p > 0:
        if any(_is_traced(t) for t in (query, key, value, attn_mask)):
            raise NotImplementedError(
                f"scaled_dot_product_attention: dropout_p={dropout_p} in a traced forward "
                "(symgrad's generated code has no random numbers): pass dropout_p=0.0 inside "
                "the traced function, or apply the attention on runtime tensors")
        drop = _dropout_mask(query, key, value, dropout_p)
    return _run("scaled_dot_product_attention", "UnsafeViewBackward0", _attention, query,
                key, value, attn_mask, drop, bool(is_causal), float(scale), int(repeat))


def _dropout_mask(query, key, value, p):
    """The attention weights' dropout factor: 0 with probability p, else 1 / (1 - p)."""
    import numpy as np

    from .. import tensor as _tm

    q, k = _known(query), _known(key)
    shape = tuple(int(d) for d in np.broadcast_shapes(q[:-2], k[:-2])) + (q[-2], k[-2])
    dtype = query.dtype
    if p >= 1.0:
        return _tm.zeros(shape, dtype=dtype)
    return (_tm.rand(shape, dtype=dtype) >= p).to(dtype) * (1.0 / (1.0 - p))


# ------------------------------------------------------------------------------ losses
def _mse(x, t, reduction, weight):
    d = x - t
    return _weighted_mean(d * d, weight, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """torch.nn.functional.mse_loss: mean / sum / elementwise (input - target)**2."""
    reduction = _reduction("mse_loss", reduction, size_average, reduce)
    _check_same_or_broadcast("mse_loss", input, target)
    _check_weight(weight, input)
    return _run("mse_loss", _weighted_node(reduction, weight, "MseLossBackward0"), _mse, input,
                target, reduction, weight)


def _l1(x, t, reduction, weight):
    return _weighted_mean((x - t).abs(), weight, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """torch.nn.functional.l1_loss: |input - target| (gradient 0 where they are equal)."""
    reduction = _reduction("l1_loss", reduction, size_average, reduce)
    _check_same_or_broadcast("l1_loss", input, target)
    _check_weight(weight, input)
    return _run("l1_loss", _weighted_node(reduction, weight, _node(reduction, "AbsBackward0")),
                _l1, input, target, reduction, weight)


def _smooth_l1(x, t, reduction, beta):
    d = x - t
    a = d.abs()
    return _reduce(_where(a < beta, (0.5 / beta) * (d * d), a - 0.5 * beta), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """torch.nn.functional.smooth_l1_loss: 0.5 d**2 / beta where |d| < beta, else
    |d| - 0.5 beta; beta = 0 is l1_loss."""
    reduction = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _check_same_or_broadcast("smooth_l1_loss", input, target)
    if beta == 0:
        return _run("l1_loss", _node(reduction, "AbsBackward0"), _l1, input, target,
                    reduction, None)
    return _run("smooth_l1_loss", "SmoothL1LossBackward0", _smooth_l1, input, target,
                reduction, float(beta))


def _huber(x, t, reduction, delta, weight):
    d = x - t
    a = d.abs()
    loss = _where(a < delta, 0.5 * (d * d), delta * (a - 0.5 * delta))
    return _reduce(_weighted(loss, weight), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """torch.nn.functional.huber_loss: 0.5 d**2 where |d| < delta, else
    delta (|d| - 0.5 delta)."""
    reduction = _reduction("huber_loss", reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _check_same_or_broadcast("huber_loss", input, target)
    _check_weight(weight, input)
    return _run("huber_loss", _weighted_node(reduction, weight, "HuberLossBackward0",
                                             "MeanBackward0"), _huber, input, target, reduction,
                float(delta), weight)


def _bce(x, t, weight, reduction):
    # torch clamps each log at -100 (a finite loss at 0 and 1)
    loss = -(t * x.log().clamp_min(-100.0) + (1 - t) * (-x).log1p().clamp_min(-100.0))
    return _reduce(_weighted(loss, weight), reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """torch.nn.functional.binary_cross_entropy of probabilities (logs clamped at -100)."""
    reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    a, b = _known(input), _known(target)
    if a is not None and b is not None and a != b:
        raise ValueError(f"Using a target size ({_size(b)}) that is different to the input "
                         f"size ({_size(a)}) is deprecated. Please ensure they have the same "
                         f"size. (binary_cross_entropy: input and target)")
    data = _data(input)
    if data is not None and data.size and not ((data >= 0) & (data <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1 "
                           "(binary_cross_entropy: input)")
    return _run("binary_cross_entropy", "BinaryCrossEntropyBackward0", _bce, input, target,
                weight, reduction)


def _bce_logits(x, t, weight, pos_weight, reduction):
    # torch: (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x), softplus(-x) = -log_sigmoid(x)
    log_sig = x.log_sigmoid()
    if pos_weight is None:
        loss = (1 - t) * x - log_sig
    else:
        loss = (1 - t) * x - ((pos_weight - 1) * t + 1) * log_sig
    return _reduce(_weighted(loss, weight), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """torch.nn.functional.binary_cross_entropy_with_logits, through log_sigmoid: exact at
    any logit."""
    reduction = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    a, b = _known(input), _known(target)
    if a is not None and b is not None and a != b:
        raise ValueError(f"Target size ({_size(b)}) must be the same as input size "
                         f"({_size(a)}) (binary_cross_entropy_with_logits: input and target)")
    return _run("binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0",
                _bce_logits, input, target, weight, pos_weight, reduction)


def _class_dim(input):
    shape = _known(input)
    ndim = len(shape) if shape is not None else input.dim()
    return 0 if ndim == 1 else 1


def _class_shape(w, cd, ndim):
    """weight (C,) broadcast along class dim cd of an ndim input."""
    if w is None or ndim <= 1:
        return w
    return w.reshape((-1,) + (1,) * (ndim - cd - 1))


def _nll(logp, target, weight, ignore_index, reduction, cd, ndim, smoothing):
    # one-hot by comparison with the class index, no gather: an ignored target picks nothing,
    # and the -inf log-probability of another class is selected away, never multiplied by 0
    from ..tensor import ones_like   # sg.ones_like

    classes = ones_like(logp).cumsum(cd) - 1   # 0, 1, ..., C-1 along the class dim
    kept = target != ignore_index
    t = target.unsqueeze(cd) if ndim > 1 else target
    hit = (t == classes) & (t != ignore_index)
    w = _class_shape(weight, cd, ndim)
    picked = logp if w is None else logp * w
    loss = -_where(hit, picked, 0.0).sum(cd)
    wt = _where(hit, 1.0 if w is None else w, 0.0).sum(cd)   # weight of each target
    out = loss.sum() / wt.sum() if reduction == "mean" else _reduce(loss, reduction)
    if not smoothing:
        return out
    smooth = _where(kept, -picked.sum(cd), 0.0)
    smooth = smooth.sum() / wt.sum() if reduction == "mean" else _reduce(smooth, reduction)
    return (1 - smoothing) * out + smooth * (smoothing / _known(logp)[cd])


def _check_class_target(op, input, target, ignore_index):
    kind = _dtype_kind(target)
    if kind not in "ib":
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got Float ({op}: "
                           f"class-index targets are an int64 tensor; probability targets "
                           f"have the input's shape)")
    a, b = _known(input), _known(target)
    if a is None or b is None:
        return
    if len(a) >= 2 and (not b or b[0] != a[0]):
        raise ValueError(f"Expected input batch_size ({a[0]}) to match target batch_size "
                         f"({b[0] if b else 1}). ({op}: input and target)")
    expected = a[:1] + a[2:] if len(a) >= 2 else ()
    if b != expected:
        raise RuntimeError(f"{op}: expected target of size {list(expected)} for input of size "
                           f"{list(a)}, got {list(b)}")
    data = _data(target)
    if data is not None and data.size:
        n = a[1] if len(a) >= 2 else a[0]
        bad = (data != ignore_index) & ((data < 0) | (data >= n))
        if bad.any():
            raise IndexError(f"Target {int(data[bad].flat[0])} is out of bounds. ({op}: "
                             f"{n} classes)")


def _nll_node(shape, reduction):
    """torch's node of nll_loss: NllLoss2DBackward0 from 3 dims, behind a view for 3 or more
    than 4 dims without reduction."""
    ndim = 2 if shape is None else len(shape)
    if ndim <= 2:
        return "NllLossBackward0"
    return "ViewBackward0" if reduction == "none" and ndim != 4 else "NllLoss2DBackward0"


def _nll_body(x, target, weight, ignore_index, reduction, smoothing, log_softmax_first):
    shape = _known(x)
    ndim = len(shape) if shape is not None else x.dim()
    cd = 0 if ndim == 1 else 1
    logp = x.log_softmax(cd) if log_softmax_first else x
    return _nll(logp, target, weight, ignore_index, reduction, cd, ndim, smoothing)


def _ce_probs(x, target, weight, reduction, smoothing):
    shape = _known(x)
    ndim = len(shape)
    cd = 0 if ndim == 1 else 1
    n_classes = shape[cd]
    logp = x.log_softmax(cd)
    if smoothing:
        target = target * (1 - smoothing) + smoothing / n_classes
    w = _class_shape(weight, cd, ndim)
    terms = logp * target if w is None else logp * w * target
    if reduction == "mean":
        return -terms.sum() / (math.prod(shape) / n_classes)
    if reduction == "sum":
        return -terms.sum()
    return -terms.sum(cd)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """torch.nn.functional.cross_entropy: class indices (an int64 target without the class
    dim; weight, ignore_index, label_smoothing) or class probabilities (a float target of the
    input's shape)."""
    reduction = _reduction("cross_entropy", reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing}")
    a, b = _known(input), _known(target)
    if a is None:
        raise RuntimeError("cross_entropy needs the input's shape: compile with example "
                           "inputs")
    if a == b:   # class probabilities: a float target of the input's shape
        if _dtype_kind(target) != "f":
            raise RuntimeError("Expected floating point type for target with class "
                               "probabilities, got Long (cross_entropy: target)")
        return _run("cross_entropy_probs", "DivBackward1" if reduction == "mean" else
                    "NegBackward0", _ce_probs, input, target, weight, reduction,
                    float(label_smoothing))
    _check_class_target("cross_entropy", input, target, ignore_index)
    node = "AddBackward0" if label_smoothing else _nll_node(a, reduction)
    return _run("cross_entropy", node, _nll_body, input, target, weight,
                int(ignore_index), reduction, float(label_smoothing), True)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """torch.nn.functional.nll_loss of log-probabilities and int64 class indices."""
    reduction = _reduction("nll_loss", reduction, size_average, reduce)
    _check_class_target("nll_loss", input, target, ignore_index)
    return _run("nll_loss", _nll_node(_known(input), reduction), _nll_body, input, target, weight,
                int(ignore_index), reduction, 0.0, False)


def _kl_div(x, t, reduction, log_target):
    if log_target:
        loss = t.exp() * (t - x)
    else:
        loss = t.xlogy(t) - t * x
    if reduction == "batchmean":
        shape = _known(x)
        return loss.sum() / (shape[0] if shape else 1)
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """torch.nn.functional.kl_div: target * (log(target) - input) (0 where target is 0), or
    exp(target) * (target - input) with log_target."""
    reduction = _reduction("kl_div", reduction, size_average, reduce, extra=("batchmean",))
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns "
                      "with the KL div math definition.'mean' will be changed to behave the "
                      "same as 'batchmean' in the next major release.", UserWarning,
                      stacklevel=2)
    node = "DivBackward0" if reduction == "batchmean" else \
        _node(reduction, "MulBackward0" if log_target else "SubBackward0")
    return _run("kl_div", node, _kl_div,
                input, target, reduction, bool(log_target))


def _poisson_nll(x, t, log_input, full, eps, reduction):
    loss = x.exp() - t * x if log_input else x - t * (x + eps).log()
    if full:
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + _where(t > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """torch.nn.functional.poisson_nll_loss."""
    reduction = _reduction("poisson_nll_loss", reduction, size_average, reduce)
    return _run("poisson_nll_loss", _node(reduction, "AddBackward0" if full else "SubBackward0"),
                _poisson_nll, input, target, bool(log_input), bool(full), float(eps),
                reduction)


def _gaussian_nll(x, t, var, full, eps, reduction):
    # torch clamps var at eps without a gradient of the clamp (var's gradient is as unclamped)
    v = var + (var.clamp_min(eps) - var).detach()
    d = x - t
    loss = 0.5 * (v.log() + d * d / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """torch.nn.functional.gaussian_nll_loss."""
    reduction = _reduction("gaussian_nll_loss", reduction)
    if isinstance(var, numbers.Number):
        if var < 0:
            raise ValueError("var has negative entry/entries (gaussian_nll_loss: var)")
        if _is_traced(input):
            var = input.tracer.lift(float(var))
        else:
            from ..tensor import full_like
            var = full_like(input, float(var))
    a, v = _known(input), _known(var)
    if a is not None and v is not None and v != a:
        if a[:-1] == v:
            var = var.unsqueeze(-1)
        elif not (a[:-1] == v[:-1] and v[-1:] == (1,)):
            raise ValueError("var is of incorrect size (gaussian_nll_loss: var)")
    data = _data(var)
    if data is not None and (data < 0).any():
        raise ValueError("var has negative entry/entries (gaussian_nll_loss: var)")
    return _run("gaussian_nll_loss", _node(reduction, "AddBackward0" if full else "MulBackward0"),
                _gaussian_nll, input, target, var, bool(full), float(eps), reduction)


def __getattr__(name):
    """torch's AttributeError for a name this module lacks, with the close names it has."""
    import difflib

    if name.startswith("__"):
        raise AttributeError(f"module 'symgrad.nn.functional' has no attribute '{name}'")
    close = difflib.get_close_matches(name, __all__, n=3, cutoff=0.75)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise AttributeError(f"module 'symgrad.nn.functional' has no attribute '{name}'.{hint}")
