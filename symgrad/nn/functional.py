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
from ._common import _data, _dtype_kind, _inplace, _known
from ._conv import (  # padding, convolutions, pooling: nn/_conv.py (re-exported)
    adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, conv1d, conv2d, conv3d,
    conv_transpose1d, conv_transpose2d, conv_transpose3d, lp_pool1d, lp_pool2d, max_pool1d,
    max_pool2d, pad,
)
from ._losses import (  # the losses: nn/_losses.py (re-exported: sg.nn.functional.<loss>)
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, gaussian_nll_loss,
    huber_loss, kl_div, l1_loss, mse_loss, nll_loss, poisson_nll_loss, smooth_l1_loss,
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
    # padding, convolutions, pooling
    "pad", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "lp_pool1d", "lp_pool2d",
]


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


def __getattr__(name):
    """torch's AttributeError for a name this module lacks, with the close names it has."""
    import difflib

    if name.startswith("__"):
        raise AttributeError(f"module 'symgrad.nn.functional' has no attribute '{name}'")
    close = difflib.get_close_matches(name, __all__, n=3, cutoff=0.75)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise AttributeError(f"module 'symgrad.nn.functional' has no attribute '{name}'.{hint}")
