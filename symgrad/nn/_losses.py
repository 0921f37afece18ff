"""torch.nn.functional's losses (`mse_loss` ... `gaussian_nll_loss`) and their reduction
machinery (`reduction=`, the legacy `size_average` / `reduce`, class weights): written once over
traced values, as the rest of symgrad.nn.functional, which re-exports every name here (the one
public spelling is `sg.nn.functional.<loss>`). Split out of nn/functional.py (1 041 lines) as is.

Importing this module imports no SymPy (the trace does, on first use).
"""
from __future__ import annotations

import math
import numbers
import warnings

from .._api_helpers import _is_traced, _run, _where
from ._common import _data, _dtype_kind, _known, _size

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
