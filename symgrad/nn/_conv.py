"""torch.nn.functional's padding, convolutions and pooling (`pad`, `conv1d/2d/3d`,
`conv_transpose1d/2d/3d`, `avg_pool1d/2d`, `max_pool1d/2d`, `adaptive_avg_pool1d/2d`,
`lp_pool1d/2d`), re-exported by symgrad.nn.functional.

Each is written once over traced values from the tracer's structural primitives: a window
of a convolution or pooling is one strided slice of the padded input per kernel tap
(`x[..., t*d : t*d + (out-1)*s + 1 : s]`), so a generated program grows with the number of
taps, never with the number of output elements. A convolution stacks its taps
(im2col) and multiplies by the weight in one matmul per call (groups as a batch dim); a
transposed convolution is the convolution of the stride-dilated input with the flipped
weight; average pooling sums the taps and divides by the window's count (itself the pooling
of a ones vector where padding makes it vary); max pooling routes each window's value, and
so its gradient, to the first maximal tap (torch's argmax), through a one-hot built with
`cumsum`; adaptive average pooling multiplies by a pooling matrix built from index ramps
(torch's start = floor(i*L/O), end = ceil((i+1)*L/O)). In a traced forward they trace into
the caller's graph (every target); on runtime tensors each is one forward-only Function
with torch's node name, through `_run`, like the rest of nn.functional.

Importing this module imports no SymPy (the trace does, on first use).
"""
from __future__ import annotations

import math
import numbers
import re

from .._api_helpers import _is_traced, _run, _where
from ._common import _data, _known


def _named(fn):
    """torch's error (class and message) from a bad argument, with the op's name appended
    where torch's message lacks it ("non-positive stride is not supported (conv2d)")."""
    import functools

    @functools.wraps(fn)
    def op(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
            msg = str(e)
            if type(e) not in (RuntimeError, NotImplementedError, TypeError, ValueError) \
                    or re.search(rf"\b{fn.__name__}\b", msg):
                raise
            raise type(e)(f"{msg} ({fn.__name__})") from None
    return op

# ------------------------------------------------------------------------------ helpers


def _shape(op, x):
    from ..tensor import Tensor

    if not _is_traced(x) and not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    shape = _known(x)
    if shape is None:
        raise RuntimeError(f"{op} needs the input's shape: compile with example inputs "
                           f"(sg.compile(fn, *arrays)), not shape-generic")
    return shape


def _ints(op, name, value, n, conv=False):
    """value as a tuple of n ints (an int repeated), torch's errors otherwise."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (int(value),) * n
    try:
        out = tuple(value)
    except TypeError:
        raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, not "
                        f"{type(value).__name__}") from None
    for i, v in enumerate(out):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, but found "
                            f"element of type {type(v).__name__} at pos {i}")
    out = tuple(int(v) for v in out)
    if len(out) == 1 and n > 1 and not conv:
        return out * n
    if len(out) != n:
        if conv:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                               f"values to match the convolution dimensions, but got "
                               f"{name}={list(out)}")
        if op == "max_pool1d":
            raise RuntimeError(f"max_pool1d() {name} must be an int, list of ints or tuple of "
                               f"ints of size 1 but got size {len(out)}")
        if n == 1:
            raise RuntimeError(f"{op}() argument '{name}' should contain one int (got "
                               f"{len(out)})")
        words = {2: "two", 3: "three"}.get(n, str(n))
        if name == "stride":
            raise RuntimeError(f"{op}: stride must either be omitted, a single int, or a tuple "
                               f"of {words} ints")
        if name == "dilation":
            raise RuntimeError(f"{op}: dilation must be either a single int, or a tuple of "
                               f"{words} ints")
        raise RuntimeError(f"{op}: {name} must either be a single int, or a tuple of {words} "
                           f"ints")
    return out


def _full(x, d, size, value):
    """A block of x's shape with `size` along dim d, filled with value (traced)."""
    from ..tensor import full_like

    n = _known(x)[d]
    base = x.narrow(d, 0, 1) if n > 0 else x.sum(d, keepdim=True)
    shape = list(_known(x))
    shape[d] = size
    return full_like(base, value).expand(tuple(shape))


def _cat(parts, d):
    from .._runtime_ops import cat

    parts = [p for p in parts if p is not None]
    return parts[0] if len(parts) == 1 else cat(parts, d)


# ------------------------------------------------------------------------------ pad
def _pad_body(x, pads, mode, value):
    """x padded: pads[i] = (lo, hi) of dim -1 - i; negative crops."""
    ndim = len(_known(x))
    for i, (lo, hi) in enumerate(pads):
        d = ndim - 1 - i
        n = _known(x)[d]
        if mode == "circular":
            # torch (_pad_circular): crop first, then wrap the cropped values
            if lo < 0 or hi < 0:
                a, b = max(-lo, 0), max(-hi, 0)
                x = x.narrow(d, a, n - a - b)
                n -= a + b
            left = x.narrow(d, n - lo, lo) if lo > 0 else None
            right = x.narrow(d, 0, hi) if hi > 0 else None
            x = _cat([left, x, right], d)
            continue
        left = right = None
        if lo > 0:
            if mode == "constant":
                left = _full(x, d, lo, value)
            elif mode == "reflect":
                left = x.narrow(d, 1, lo).flip(d)
            else:
                left = x.narrow(d, 0, 1).expand(_resized(x, d, lo))
        if hi > 0:
            if mode == "constant":
                right = _full(x, d, hi, value)
            elif mode == "reflect":
                right = x.narrow(d, n - 1 - hi, hi).flip(d)
            else:
                right = x.narrow(d, n - 1, 1).expand(_resized(x, d, hi))
        if lo < 0 or hi < 0:
            a, b = max(-lo, 0), max(-hi, 0)
            x = x.narrow(d, a, n - a - b)
        x = _cat([left, x, right], d)
    return x


def _resized(x, d, size):
    shape = list(_known(x))
    shape[d] = size
    return tuple(shape)


_PAD_NODES = {"reflect": "ReflectionPad{}DBackward0", "replicate": "ReplicationPad{}DBackward0"}


@_named
def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: `pad` = (left, right) of the last dim, then of the one before,
    ...; mode 'constant' (value, default 0), 'reflect', 'replicate' or 'circular'; negative
    pads crop."""
    if not isinstance(pad, (tuple, list)) and type(pad).__name__ != "Size":
        raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, not "
                        f"{type(pad).__name__}")
    for i, v in enumerate(pad):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, but "
                            f"found element of type {type(v).__name__} at pos {i}")
    pad = [int(v) for v in pad]
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant" and value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    shape = _shape("pad", input)
    ndim = len(shape)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {ndim}")
    pads = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    k = len(pads)
    if mode == "constant":
        for i, (lo, hi) in enumerate(pads):
            if shape[ndim - 1 - i] + min(lo, 0) + min(hi, 0) < 0:
                raise RuntimeError("narrow(): length must be non-negative.")
        node = "ConstantPadNdBackward0"
    else:
        if k not in (1, 2, 3) or ndim not in (k + 1, k + 2):
            raise NotImplementedError(f"Padding size {len(pad)} is not supported for {ndim}D "
                                      f"input tensor.")
        for i, (lo, hi) in enumerate(pads):
            d = ndim - 1 - i
            n = shape[d]
            if mode == "reflect" and (lo >= n or hi >= n):
                raise RuntimeError(f"Argument #{2 + 2 * k}: Padding size should be less than the "
                                   f"corresponding input dimension, but got: padding ({lo}, "
                                   f"{hi}) at dimension {d} of input {list(shape)}")
            if mode == "circular" and (lo > n or hi > n):
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if mode != "circular" and n == 0:
                raise RuntimeError(f"pad: mode '{mode}' needs non-empty dimensions, but got "
                                   f"input of size {list(shape)}")
            if n + min(lo, 0) + min(hi, 0) < 0:
                raise RuntimeError(f"pad: the padding ({lo}, {hi}) crops more than the size "
                                   f"{n} of dimension {d} of input {list(shape)}")
        node = "CopySlices" if mode == "circular" else _PAD_NODES[mode].format(k)
    value = 0.0 if value is None else value
    return _run("pad", node, _pad_body, input, tuple(pads), mode, value)


# ------------------------------------------------------------------------------ windows
def _taps(xp, start, kernel, stride, dilation, out):
    """The strided slices of xp (spatial dims from `start`), one per kernel tap in
    row-major order, each of the output's spatial shape."""
    import itertools

    taps = []
    for tap in itertools.product(*(range(k) for k in kernel)):
        index = [slice(None)] * start
        for t, s, d, o in zip(tap, stride, dilation, out):
            index.append(slice(t * d, t * d + (o - 1) * s + 1, s))
        taps.append(xp[tuple(index)])
    return taps


def _constant_pad(x, pads, value):
    """x with pads = [(lo, hi) of the first spatial dim, ...] (spatial dims last)."""
    if not any(lo or hi for lo, hi in pads):
        return x
    return _pad_body(x, tuple(reversed(pads)), "constant", value)


# ------------------------------------------------------------------------------ convolution
def _conv_body(x, w, b, k, stride, pads, dilation, groups, out, unbatched):
    from .._runtime_ops import stack

    if unbatched:
        x = x.unsqueeze(0)
    xp = _constant_pad(x, pads, 0.0)
    n, c = _known(x)[:2]
    o = _known(w)[0]
    taps = _taps(xp, 2, _known(w)[2:], stride, dilation, out)
    length = n * math.prod(out)
    taps_k = len(taps)
    cols = taps[0].unsqueeze(2) if taps_k == 1 else stack(taps, 2)   # (N, C, K, *out)
    # (C, K, N, *out): the batch joins the output positions, so that the product (and each
    # of its gradients) is one 2-D matmul per group, not N matmuls of a broadcast weight
    cols = cols.permute(1, 2, 0, *range(3, 3 + k))
    per = (c // groups) * taps_k
    if groups == 1:
        y = w.reshape((o, per)).matmul(cols.reshape((per, length)))
    else:
        y = w.reshape((groups, o // groups, per)).matmul(cols.reshape((groups, per, length)))
    y = y.reshape((o, n) + tuple(out)).transpose(0, 1)
    if b is not None:
        y = y + b.reshape((o,) + (1,) * k)
    return y.squeeze(0) if unbatched else y


def _dtype_name(x):
    if _is_traced(x):
        return x.tracer.precision_of(x)
    data = _data(x)
    return None if data is None else data.dtype.name


_SCALAR = {"float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long",
           "bfloat16": "BFloat16", "int32": "Int", "bool": "Bool"}


def _check_common(op, k, input, weight, stride, padding, dilation, groups, transposed=False):
    groups = int(groups)
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    wshape = _shape(op, weight)
    kw = len(wshape) - 2
    stride = _ints(op, "stride", stride, k, conv=True)
    dilation = _ints(op, "dilation", dilation, k, conv=True)
    for name, v in (("stride", stride), ("dilation", dilation)):
        if len(v) != kw:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of "
                               f"{kw} values to match the convolution dimensions, but got "
                               f"{name}={list(v)}")
    if not isinstance(padding, str):
        padding = _ints(op, "padding", padding, k, conv=True)
        if len(padding) != kw:
            raise RuntimeError(f"expected padding to be a single integer value or a list of "
                               f"{kw} values to match the convolution dimensions, but got "
                               f"padding={list(padding)}")
        if any(p < 0 for p in padding):
            raise RuntimeError("negative padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    shape = _shape(op, input)
    if len(shape) not in (k + 1, k + 2):
        raise RuntimeError(f"Expected {k + 1}D (unbatched) or {k + 2}D (batched) input to "
                           f"{op}, but got input of size: {list(shape)}")
    if len(wshape) != k + 2:
        raise RuntimeError(f"{op}: expected weight to be {k + 2}-dimensional, but got weight "
                           f"of size {list(wshape)}")
    unbatched = len(shape) == k + 1
    batched = (1,) + tuple(shape) if unbatched else tuple(shape)
    if wshape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size [{list(wshape)}] "
                           f"instead")
    a, b = _dtype_name(input), _dtype_name(weight)
    if a and b and a != b:
        raise RuntimeError(f"expected scalar type {_SCALAR.get(a, a)} but found "
                           f"{_SCALAR.get(b, b)}")
    _not_float(op, input)
    if transposed:
        if batched[1] != wshape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {list(wshape)}, expected "
                               f"input{list(batched)} to have {wshape[0]} channels, but got "
                               f"{batched[1]} channels instead")
    elif batched[1] != wshape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(wshape)}, expected "
                           f"input{list(batched)} to have {wshape[1] * groups} channels, but "
                           f"got {batched[1]} channels instead")
    return shape, wshape, batched, unbatched, stride, padding, dilation, groups


def _check_bias(bias, wshape, channels):
    if bias is not None and _known(bias) not in (None, (channels,)):
        raise RuntimeError(f"Given weight of size {list(wshape)}, expected bias to be "
                           f"1-dimensional with {channels} elements, but got bias of size "
                           f"{list(_known(bias))} instead")


def _conv(op, k, input, weight, bias, stride, padding, dilation, groups):
    _, wshape, batched, unbatched, stride, padding, dilation, groups = _check_common(
        op, k, input, weight, stride, padding, dilation, groups)
    _check_bias(bias, wshape, wshape[0])
    kernel = wshape[2:]
    spatial = batched[2:]
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * k
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = []
            for kk, d in zip(kernel, dilation):
                total = d * (kk - 1)
                pads.append((total // 2, total - total // 2))
            pads = tuple(pads)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pads = tuple((p, p) for p in padding)
    padded = [n + lo + hi for n, (lo, hi) in zip(spatial, pads)]
    effective = [d * (kk - 1) + 1 for kk, d in zip(kernel, dilation)]
    if any(e > p for e, p in zip(effective, padded)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, effective))}). Kernel size can't be greater "
                           f"than actual input size")
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, effective, stride))
    node = "SqueezeBackward1" if unbatched else "ConvolutionBackward0"
    return _run(op, node, _conv_body, input, weight, bias, k, stride, pads, dilation,
                groups, out, unbatched)


@_named
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv1d: input (N, C_in, L) or (C_in, L), weight
    (C_out, C_in / groups, kL); padding an int, a tuple, 'valid' or 'same'."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@_named
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d: input (N, C_in, H, W) or (C_in, H, W), weight
    (C_out, C_in / groups, kH, kW); padding an int, a tuple, 'valid' or 'same'."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@_named
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d: input (N, C_in, D, H, W) or (C_in, D, H, W), weight
    (C_out, C_in / groups, kD, kH, kW)."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


# ------------------------------------------------------------------------------ transposed
def _dilate(x, d, s):
    """x with s - 1 zeros between neighbours along dim d."""
    from .._runtime_ops import stack
    from ..tensor import zeros_like

    if s == 1:
        return x
    shape = _known(x)
    n = shape[d]
    z = zeros_like(x)
    y = stack([x] + [z] * (s - 1), d + 1)
    y = y.reshape(shape[:d] + (n * s,) + shape[d + 1:])
    return y.narrow(d, 0, (n - 1) * s + 1)


def _conv_transpose_body(x, w, b, k, stride, padding, output_padding, dilation, groups,
                         unbatched):
    if unbatched:
        x = x.unsqueeze(0)
    for i, s in enumerate(stride):
        x = _dilate(x, 2 + i, s)
    wshape = _known(w)
    cin, cout_g, kernel = wshape[0], wshape[1], wshape[2:]
    # (C_in, C_out/g, k) -> (C_out, C_in/g, k), flipped: the transposed conv's weight
    w = w.reshape((groups, cin // groups, cout_g) + kernel).transpose(1, 2)
    w = w.reshape((groups * cout_g, cin // groups) + kernel)
    w = w.flip(*range(2, 2 + k))
    pads = []
    for kk, d, p, op in zip(kernel, dilation, padding, output_padding):
        edge = d * (kk - 1) - p
        pads.append((edge, edge + op))
    xp = _pad_body(x, tuple(reversed(pads)), "constant", 0.0)
    spatial = _known(xp)[2:]
    out = tuple(n - d * (kk - 1) for n, d, kk in zip(spatial, dilation, kernel))
    y = _conv_body(xp, w, None, k, (1,) * k, ((0, 0),) * k, dilation, groups, out, False)
    if b is not None:
        y = y + b.reshape((groups * cout_g,) + (1,) * k)
    return y.squeeze(0) if unbatched else y


def _conv_transpose(op, k, input, weight, bias, stride, padding, output_padding, groups,
                    dilation):
    if isinstance(padding, str):
        raise TypeError(f"{op}(): argument 'padding' must be tuple of ints, not str")
    _, wshape, batched, unbatched, stride, padding, dilation, groups = _check_common(
        op, k, input, weight, stride, padding, dilation, groups, transposed=True)
    output_padding = _ints(op, "output_padding", output_padding, k, conv=True)
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(op_ >= s and op_ >= d for op_, s, d in zip(output_padding, stride, dilation)):
        names = ("depth", "height", "width")[3 - k:] if k > 1 else ("width",)
        if k == 1:
            raise RuntimeError(f"output padding must be smaller than either stride or "
                               f"dilation, but got output_padding={output_padding[0]} "
                               f"stride={stride[0]} dilation={dilation[0]}")
        parts = [f"output_padding_{n}: {v}" for n, v in zip(names, output_padding)]
        parts += [f"stride_{n}: {v}" for n, v in zip(names, stride)]
        parts += [f"dilation_{n}: {v}" for n, v in zip(names, dilation)]
        raise RuntimeError("output padding must be smaller than either stride or dilation, "
                           "but got " + " ".join(parts))
    _check_bias(bias, wshape, wshape[1] * groups)
    out = [(n - 1) * s - 2 * p + d * (kk - 1) + op_ + 1 for n, s, p, d, kk, op_ in
           zip(batched[2:], stride, padding, dilation, wshape[2:], output_padding)]
    if any(o <= 0 for o in out):
        raise RuntimeError(f"{op}: the output size {out} is not positive (input "
                           f"{list(batched[2:])}, stride {list(stride)}, padding "
                           f"{list(padding)}, dilation {list(dilation)}, kernel "
                           f"{list(wshape[2:])})")
    node = "SqueezeBackward1" if unbatched else "ConvolutionBackward0"
    return _run(op, node, _conv_transpose_body, input, weight, bias, k, stride, padding,
                output_padding, dilation, groups, unbatched)


@_named
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose1d: weight (C_in, C_out / groups, kL)."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


@_named
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose2d: weight (C_in, C_out / groups, kH, kW)."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


@_named
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose3d: weight (C_in, C_out / groups, kD, kH, kW)."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


# ------------------------------------------------------------------------------ pooling
def _pool_out(n, k, s, p, d, ceil_mode):
    span = n + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_geometry(op, k, input, kernel_size, stride, padding, dilation, ceil_mode,
                   one_d_errors=False):
    """torch's checks of a pooling op; returns (shape, kernel, stride, padding, dilation,
    out, extra) with extra the right padding past `padding` that ceil_mode's last window
    reaches."""
    shape = _shape(op, input)
    kernel = _ints(op, "kernel_size", kernel_size, k)
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _ints(op, "stride", stride, k)
    padding = _ints(op, "padding", padding, k)
    dilation = _ints(op, "dilation", dilation, k)
    if one_d_errors:   # max_pool1d's own messages
        if len(shape) not in (2, 3):
            raise RuntimeError(f"max_pool1d: Expected 2D or 3D (batch mode) tensor with "
                               f"optional 0 dim batch size for input, but got:{list(shape)}")
        if kernel[0] <= 0:
            raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got "
                               f"{kernel[0]}")
        if stride[0] <= 0:
            raise RuntimeError(f"max_pool1d() stride must be greater than zero, but got "
                               f"{stride[0]}")
        if padding[0] < 0:
            raise RuntimeError(f"max_pool1d() padding must be non-negative, but got "
                               f"{padding[0]}")
        if padding[0] > kernel[0] // 2:
            raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, "
                               f"but got padding={padding[0]} and kernel_size={kernel[0]}")
        if dilation[0] <= 0:
            raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got "
                               f"{dilation[0]}")
        out = _pool_out(shape[-1], kernel[0], stride[0], padding[0], dilation[0], ceil_mode)
        if out <= 0:
            raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")
        outs = (out,)
    else:
        if len(shape) not in (k + 1, k + 2):
            if k == 1:
                raise RuntimeError(f"Expected 2 to 3 dimensions, but got {len(shape)}-"
                                   f"dimensional tensor for argument #1 'self' (while checking "
                                   f"arguments for {op})")
            raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with "
                               f"optional 0 dim batch size for input, but got:{list(shape)}")
        if any(v == 0 for v in stride):
            raise RuntimeError("stride should not be zero")
        if any(v <= 0 for v in kernel):
            raise RuntimeError("kernel size should be greater than zero, but got "
                               + " ".join(f"k{a}: {v}" for a, v in zip("HW"[2 - k:], kernel)))
        if any(v < 0 for v in stride):
            raise RuntimeError("stride should be greater than zero, but got "
                               + " ".join(f"d{a}: {v}" for a, v in zip("HW"[2 - k:], stride)))
        if any(v <= 0 for v in dilation):
            raise RuntimeError("dilation should be greater than zero, but got "
                               + " ".join(f"dilation{a}: {v}"
                                          for a, v in zip("HW"[2 - k:], dilation)))
        for p, kk, d in zip(padding, kernel, dilation):
            if p < 0:
                raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
            if p > (d * (kk - 1) + 1) // 2:
                raise RuntimeError(f"pad should be at most half of effective kernel size, but "
                                   f"got pad={p}, kernel_size={kk} and dilation={d}")
        outs = tuple(_pool_out(n, kk, s, p, d, ceil_mode) for n, kk, s, p, d in
                     zip(shape[-k:], kernel, stride, padding, dilation))
        if any(o <= 0 for o in outs):
            planes = shape[-k - 1] if len(shape) == k + 2 else shape[0]
            given = "x".join(map(str, ((planes,) + ((1,) if k == 1 else ()) + shape[-k:])))
            calc = "x".join(map(str, ((planes,) + ((1,) if k == 1 else ()) + outs)))
            raise RuntimeError(f"Given input size: ({given}). Calculated output size: "
                               f"({calc}). Output size is too small")
    extra = tuple(max(0, (o - 1) * s + d * (kk - 1) + 1 - (n + 2 * p)) for o, s, d, kk, n, p
                  in zip(outs, stride, dilation, kernel, shape[-k:], padding))
    return shape, kernel, stride, padding, dilation, outs, extra


def _window_taps(x, k, kernel, stride, padding, dilation, out, extra, value):
    start = len(_known(x)) - k
    pads = tuple((p, p + e) for p, e in zip(padding, extra))
    xp = _constant_pad(x, pads, value)
    return _taps(xp, start, kernel, stride, dilation, out)


def _counts(x, k, dim, kernel, stride, padding, out, extra, include_pad):
    """The number of elements each window of dim `dim` (of the last k) divides by, as a
    traced 1-D vector: the pooling of ones (1 over the padding too where include_pad; the
    ceil_mode overhang never counts)."""
    from ..tensor import ones_like

    shape = _known(x)
    i = len(shape) - k + dim
    line = x[tuple(0 if j != i else slice(None) for j in range(len(shape)))]
    ones = ones_like(line)
    p, e = padding[dim], extra[dim]
    if include_pad and p:
        ones = _pad_body(ones, ((p, p),), "constant", 1.0)
        p = 0
    taps = _window_taps(ones, 1, (kernel[dim],), (stride[dim],), (p,), (1,), (out[dim],),
                        (e,), 0.0)
    total = taps[0]
    for t in taps[1:]:
        total = total + t
    return total.reshape((out[dim],) + (1,) * (k - 1 - dim))


def _uniform_counts(n, kk, s, p, o, e, include_pad):
    """Whether every window of one dim holds the same count (then a constant divides)."""
    counts = set()
    for i in range(o):
        a = i * s - p
        b = min(a + kk, n + p)
        if not include_pad:
            a, b = max(a, 0), min(b, n)
        counts.add(b - a)
    return counts.pop() if len(counts) == 1 else None


def _avg_pool_body(x, k, kernel, stride, padding, out, extra, ceil_mode, include_pad, divisor,
                   squeeze):
    if squeeze is not None:
        x = x.unsqueeze(squeeze)
    taps = _window_taps(x, k, kernel, stride, padding, (1,) * k, out, extra, 0.0)
    total = taps[0]
    for t in taps[1:]:
        total = total + t
    if divisor is not None:
        y = total / divisor
    else:
        shape = _known(x)
        y = total
        for dim in range(k):
            n = shape[len(shape) - k + dim]
            c = _uniform_counts(n, kernel[dim], stride[dim], padding[dim], out[dim],
                                extra[dim], include_pad)
            if c is not None:
                y = y / c
            else:
                y = y / _counts(x, k, dim, kernel, stride, padding, out, extra, include_pad)
    return y.squeeze(squeeze) if squeeze is not None else y


def _not_float(op, x):
    """A clear refusal of an integer (or bool) input: symgrad's windows are float (-inf
    padding, averages); torch's integer pooling floors each average."""
    from ._common import _dtype_kind

    if _dtype_kind(x) != "f":
        name = "Long" if _is_traced(x) else _SCALAR.get(_data(x).dtype.name,
                                                         _data(x).dtype.name)
        raise NotImplementedError(f"{op} of an integer tensor ({name}) is not supported: "
                                  f"convert the input to a float dtype first")


@_named
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """torch.nn.functional.avg_pool1d: input (N, C, L) or (C, L)."""
    _, kernel, stride, padding, _, out, extra = _pool_geometry(
        "avg_pool1d", 1, input, kernel_size, stride, padding, 1, ceil_mode)
    _not_float("avg_pool1d", input)
    return _run("avg_pool1d", "SqueezeBackward1", _avg_pool_body, input, 1, kernel, stride,
                padding, out, extra, bool(ceil_mode), bool(count_include_pad), None, None)


@_named
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """torch.nn.functional.avg_pool2d: input (N, C, H, W) or (C, H, W); divisor_override
    divides every window's sum by that number instead of its count."""
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError("divisor must be not zero")
    _, kernel, stride, padding, _, out, extra = _pool_geometry(
        "avg_pool2d", 2, input, kernel_size, stride, padding, 1, ceil_mode)
    _not_float("avg_pool2d", input)
    divisor = None if divisor_override is None else float(int(divisor_override))
    return _run("avg_pool2d", "AvgPool2DBackward0", _avg_pool_body, input, 2, kernel, stride,
                padding, out, extra, bool(ceil_mode), bool(count_include_pad), divisor, None)


def _max_pool_body(x, k, kernel, stride, padding, dilation, out, extra, squeeze):
    from .._runtime_ops import stack

    if squeeze is not None:
        x = x.unsqueeze(squeeze)
    taps = _window_taps(x, k, kernel, stride, padding, dilation, out, extra, -math.inf)
    if len(taps) == 1:
        y = taps[0]
    else:
        t = stack(taps, -1)
        # the first maximal tap (torch's argmax; a NaN is a maximum): a one-hot mask, so the
        # value and its gradient come from that tap alone, at every order
        top = t.detach().amax(-1, keepdim=True)
        hit = (t == top) | t.isnan()
        first = hit & (_where(hit, 1.0, 0.0).cumsum(-1) == 1)
        y = _where(first, t, 0.0).sum(-1)
    return y.squeeze(squeeze) if squeeze is not None else y


def _max_indices(op, input, k, kernel, stride, padding, dilation, out, extra):
    """torch's return_indices of a max pooling on a runtime tensor: per window the flat
    index (over the last k dims of the input) of its first maximum (a NaN counts as one), as
    int64, computed from the same windows in NumPy (indices carry no gradient). A traced
    forward has no integer outputs: refused, naming the alternative."""
    import itertools

    import numpy as np

    if _is_traced(input):
        raise NotImplementedError(
            f"{op}(return_indices=True) in a traced forward: a generated module returns "
            f"float values only. Call it on runtime tensors (the indices come from NumPy), or "
            f"return the values and take the argmax outside the traced function")
    from .. import tensor as _tm

    data = _data(input)
    host = data if isinstance(data, np.ndarray) else data.get()
    lead = host.ndim - k
    pads = [(0, 0)] * lead + [(p, p + e) for p, e in zip(padding, extra)]
    xp = np.pad(host, pads, constant_values=-np.inf)
    taps, offsets = [], []
    for tap in itertools.product(*(range(kk) for kk in kernel)):
        index = [slice(None)] * lead
        for t, s, d, o in zip(tap, stride, dilation, out):
            index.append(slice(t * d, t * d + (o - 1) * s + 1, s))
        taps.append(xp[tuple(index)])
        offsets.append(tap)
    t = np.stack(taps, -1)
    with np.errstate(invalid="ignore"):
        hit = (t == np.max(np.where(np.isnan(t), -np.inf, t), -1, keepdims=True)) | \
            np.isnan(t)
    first = np.argmax(hit, -1)                                   # the first maximal tap
    flat = np.zeros(first.shape, dtype=np.int64)
    size = host.shape[lead:]
    for dim in range(k):
        tap_pos = np.array([off[dim] for off in offsets])[first] * dilation[dim]
        ramp = np.arange(out[dim]).reshape((-1,) + (1,) * (k - 1 - dim)) * stride[dim]
        flat = flat * size[dim] + (ramp + tap_pos - padding[dim])
    return _tm.tensor(flat, device=input.device)


@_named
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch.nn.functional.max_pool1d: input (N, C, L) or (C, L); padding is -inf;
    return_indices=True (runtime tensors): also each window's first maximum's int64 index."""
    _, kernel, stride, padding, dilation, out, extra = _pool_geometry(
        "max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
        one_d_errors=True)
    _not_float("max_pool1d", input)
    indices = _max_indices("max_pool1d", input, 1, kernel, stride, padding, dilation, out,
                           extra) if return_indices else None
    values = _run("max_pool1d", "SqueezeBackward1", _max_pool_body, input, 1, kernel, stride,
                  padding, dilation, out, extra, None)
    return (values, indices) if return_indices else values


@_named
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch.nn.functional.max_pool2d: input (N, C, H, W) or (C, H, W); padding is -inf;
    the gradient goes to each window's first maximum (torch's argmax); return_indices=True
    (runtime tensors): also that maximum's int64 flat index in each (H, W) plane."""
    shape = _shape("max_pool2d", input)
    if len(shape) not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    _, kernel, stride, padding, dilation, out, extra = _pool_geometry(
        "max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode)
    _not_float("max_pool2d", input)
    indices = _max_indices("max_pool2d", input, 2, kernel, stride, padding, dilation, out,
                           extra) if return_indices else None
    values = _run("max_pool2d", "MaxPool2DWithIndicesBackward0", _max_pool_body, input, 2,
                  kernel, stride, padding, dilation, out, extra, None)
    return (values, indices) if return_indices else values


# ------------------------------------------------------------------------------ adaptive
def _pooling_matrix(x, d, o):
    """(o, n) with row i the mean over torch's window [floor(i n / o), ceil((i + 1) n / o))
    of dim d of x, built from index ramps."""
    from ..tensor import ones_like

    shape = _known(x)
    n = shape[d]
    line = x[tuple(0 if j != d else slice(None) for j in range(len(shape)))]
    grid = ones_like(line).expand((o, n))
    i = grid.cumsum(0) - 1
    j = grid.cumsum(1) - 1
    inside = ((j + 1) * o > i * n) & (j * o < (i + 1) * n)
    m = _where(inside, 1.0, 0.0)
    return m / m.sum(1, keepdim=True)


def _adaptive_body(x, k, out, squeeze):
    if squeeze is not None:
        x = x.unsqueeze(squeeze)
    shape = _known(x)
    for dim in range(k):
        d = len(shape) - k + dim
        n, o = shape[d], out[dim]
        if n == o:
            continue
        if n % o == 0:   # equal windows: a reshape and a mean
            cur = _known(x)
            x = x.reshape(cur[:d] + (o, n // o) + cur[d + 1:]).mean(d + 1)
            continue
        m = _pooling_matrix(x, d, o)
        x = x.transpose(d, -1).matmul(m.transpose(0, 1)).transpose(d, -1)
    return x.squeeze(squeeze) if squeeze is not None else x


def _adaptive_sizes(op, k, output_size, shape):
    if isinstance(output_size, numbers.Integral) and not isinstance(output_size, bool):
        sizes = (int(output_size),) * k
    else:
        sizes = tuple(output_size)
        if len(sizes) != k:
            if k == 1:
                raise RuntimeError(f"adaptive_avg_pool1d() argument 'output_size' should "
                                   f"contain one int (got {len(sizes)})")
            raise RuntimeError(f"{op}: output_size must be {k}")
    sizes = tuple(shape[len(shape) - k + i] if s is None else int(s)
                  for i, s in enumerate(sizes))
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to "
                           f"0 but received {{{', '.join(map(str, sizes))}}}")
    return sizes


@_named
def adaptive_avg_pool1d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool1d: input (N, C, L) or (C, L); window i is
    [floor(i L / O), ceil((i + 1) L / O))."""
    shape = _shape("adaptive_avg_pool1d", input)
    if len(shape) not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {len(shape)}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for "
                           f"adaptive_avg_pool1d)")
    sizes = _adaptive_sizes("adaptive_avg_pool1d", 1, output_size, shape)
    if sizes[0] == 0 or shape[-1] == 0:
        raise RuntimeError(f"adaptive_avg_pool1d: output size {sizes[0]} and input size "
                           f"{shape[-1]} must be positive")
    _not_float("adaptive_avg_pool1d", input)
    return _run("adaptive_avg_pool1d", "SqueezeBackward1", _adaptive_body, input, 1,
                sizes, None)


@_named
def adaptive_avg_pool2d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool2d: input (N, C, H, W) or (C, H, W);
    output_size an int or (H_out, W_out), None keeping that dim's size."""
    shape = _shape("adaptive_avg_pool2d", input)
    if len(shape) not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{list(shape)}")
    sizes = _adaptive_sizes("adaptive_avg_pool2d", 2, output_size, shape)
    if 0 in sizes or 0 in shape[-2:]:
        raise RuntimeError(f"adaptive_avg_pool2d: output size {list(sizes)} and input "
                           f"spatial size {list(shape[-2:])} must be positive")
    _not_float("adaptive_avg_pool2d", input)
    node = "MeanBackward1" if sizes == (1, 1) else "AdaptiveAvgPool2DBackward0"
    return _run("adaptive_avg_pool2d", node, _adaptive_body, input, 2, sizes, None)


# ------------------------------------------------------------------------------ lp pooling
def _lp_pool_body(x, k, p, kernel, stride, out, extra, ceil_mode, squeeze):
    if squeeze is not None:
        x = x.unsqueeze(squeeze)
    y = _avg_pool_body(x ** p, k, kernel, stride, (0,) * k, out, extra, ceil_mode, True, None,
                       None)
    # torch: (sign(y) * relu(|y|)) * prod(kernel), to the 1/p
    y = (y.sign() * y.abs().relu() * math.prod(kernel)) ** (1.0 / p)
    return y.squeeze(squeeze) if squeeze is not None else y


@_named
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """torch.nn.functional.lp_pool1d: (sum over the window of x**p) ** (1/p)."""
    _, kernel, stride, _, _, out, extra = _pool_geometry(
        "avg_pool1d", 1, input, kernel_size, stride, 0, 1, ceil_mode)
    _not_float("lp_pool1d", input)
    return _run("lp_pool1d", "PowBackward0", _lp_pool_body, input, 1, float(norm_type),
                kernel, stride, out, extra, bool(ceil_mode), None)


@_named
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """torch.nn.functional.lp_pool2d: (sum over the window of x**p) ** (1/p)."""
    _, kernel, stride, _, _, out, extra = _pool_geometry(
        "avg_pool2d", 2, input, kernel_size, stride, 0, 1, ceil_mode)
    _not_float("lp_pool2d", input)
    return _run("lp_pool2d", "PowBackward0", _lp_pool_body, input, 2, float(norm_type),
                kernel, stride, out, extra, bool(ceil_mode), None)
