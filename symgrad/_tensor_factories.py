"""The tensor factories: ``tensor``, ``as_tensor``, ``from_numpy``, ``zeros`` ... ``full_like``,
the random ones (``rand``, ``randn``, ``randint``, their ``_like``; ``manual_seed``), the legacy
types (``FloatTensor`` ...), ``arange``, ``linspace``, ``logspace``, ``eye``. Moved verbatim
from tensor.py, which imports it once ``Tensor`` exists and re-exports every name (the public
ones keep ``symgrad.tensor`` as their ``__module__``). Bad arguments get torch's error classes
and messages (a size's type and sign, a range's step, a tensor's data: None, strings, complex
numbers, ragged lists).

The default float dtype is ``symgrad.tensor._default_float``, a global ``set_default_dtype``
rebinds: it is read through the module (``_tm._default_float``), never copied here.
"""

import numbers
import operator
import sys

import numpy as np

from symgrad import _device
from symgrad import tensor as _tm
from symgrad._runtime_ops import _is_traced
from symgrad.tensor import (  # noqa: F401  (the dtypes: _LegacyTensorType looks them up by name)
    Size, Tensor, _DTYPES, _builtin_bool, _builtin_int, _np_dtype, _sg_dtype, _wrap, bool,
    float16, float32, float64, int8, int16, int32, int64, uint8,
)


# ------------------------------------------------------------------------ factories
_generator = None


def _rng():
    global _generator
    if _generator is None:
        _generator = np.random.default_rng()
    return _generator


def manual_seed(seed):
    """Seed the generator behind ``rand``/``randn``/``randint``."""
    global _generator
    _generator = np.random.default_rng(seed)
    return _generator


def _infer_dtype(data):
    """torch's inference: bool, then int64, then the default float dtype."""
    kinds = set()

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, Tensor):
            kinds.add(x._data.dtype.kind)
        elif isinstance(x, (_builtin_bool, np.bool_)):
            kinds.add("b")
        elif isinstance(x, (_builtin_int, np.integer)):
            kinds.add("i")
        else:
            kinds.add("f")

    walk(data)
    if "f" in kinds or "c" in kinds or not kinds:
        return _tm._default_float.np
    if "i" in kinds or "u" in kinds:
        return np.dtype(np.int64)
    return np.dtype(np.bool_)


def _complex_error(value):
    text = repr(complex(value))
    text = text[1:-1] if text.startswith("(") else text
    return TypeError(f"symgrad tensors are real: complex values are not supported (got {text})")


def _check_element(x):
    """torch's refusals of a scalar in a tensor's data: None and other objects
    (RuntimeError 'Could not infer dtype of ...'), strings (TypeError), complex numbers
    (symgrad has no complex dtypes: TypeError)."""
    if isinstance(x, (_builtin_bool, numbers.Real, np.bool_, np.integer, np.floating)):
        return
    if isinstance(x, (complex, np.complexfloating)):
        raise _complex_error(x.item() if isinstance(x, np.generic) else x)
    if isinstance(x, (str, bytes, np.str_, np.bytes_)):
        raise TypeError(f"new(): invalid data type '{type(x).__name__}'")
    raise RuntimeError(f"Could not infer dtype of {type(x).__name__}")


def _check_array(a):
    """An array in a tensor's data: real numbers of a dtype symgrad holds (or converts)."""
    if a.dtype.kind == "c":
        bad = a.reshape(-1)[0].item() if a.size else complex(0)
        raise _complex_error(bad)
    if a.dtype.kind not in "biuf":
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{a.dtype.type.__name__}. The only supported "
            "types are: float64, float32, float16, int64, int32, int16, int8, uint8, and bool.")


def _data_shape(x):
    """The shape of nested data as torch reads it (the first element of each level sets the
    length the others must have), refusing bad elements with torch's error classes."""
    if isinstance(x, Tensor):
        return tuple(x.shape)
    if isinstance(x, np.ndarray):
        _check_array(x)
        return x.shape
    if not isinstance(x, (list, tuple)):
        _check_element(x)
        return ()
    if not x:
        return (0,)
    inner = _data_shape(x[0])
    for y in x[1:]:
        _check_level(y, inner, 1)
    return (len(x),) + inner


def _check_level(y, shape, dim):
    """``y`` must have ``shape`` (the first sibling's), at nesting depth ``dim``."""
    if not shape:
        if isinstance(y, (list, tuple, Tensor, np.ndarray)) and (
                not isinstance(y, (Tensor, np.ndarray)) or y.ndim):
            raise TypeError(f"{type(y).__name__!r} object cannot be interpreted as a number "
                            f"(at dim {dim})")
        if isinstance(y, np.ndarray):
            _check_array(y)
        elif not isinstance(y, Tensor):
            _check_element(y)
        return
    if isinstance(y, (Tensor, np.ndarray)):
        if isinstance(y, np.ndarray):
            _check_array(y)
        got = tuple(y.shape)
        if got != shape:
            n = got[0] if got else 0
            raise ValueError(f"expected sequence of length {shape[0]} at dim {dim} (got {n})")
        return
    if not isinstance(y, (list, tuple)):
        _check_element(y)
        raise TypeError(f"not a sequence (expected a sequence of length {shape[0]} at dim "
                        f"{dim}, got {type(y).__name__})")
    if len(y) != shape[0]:
        raise ValueError(f"expected sequence of length {shape[0]} at dim {dim} (got {len(y)})")
    for z in y:
        _check_level(z, shape[1:], dim + 1)


_KIND_DTYPE = {"b": np.dtype(np.bool_), "i": np.dtype(np.int64), "u": np.dtype(np.int64)}


def _from_nested(listed, data, npd):
    """The array of nested lists of numbers. NumPy reads them first with no dtype: numbers of
    a regular shape give a real array in one pass (its kind gives torch's dtype, as
    _infer_dtype would); anything else (None, strings, complex, ragged lists) is walked by
    _data_shape, which raises torch's error (NumPy would silently read None as nan, "1" as
    1.0, or drop an imaginary part)."""
    try:
        probe = np.array(listed)
    except (ValueError, TypeError):
        probe = None
    if probe is None or probe.dtype.kind not in "biuf":
        _data_shape(data)
        return np.array(listed, dtype=npd or _infer_dtype(data))
    return probe.astype(npd or _KIND_DTYPE.get(probe.dtype.kind, _tm._default_float.np),
                        copy=False)


def _to_list(x):
    if isinstance(x, Tensor):
        return x._data.tolist()
    if isinstance(x, (list, tuple)):
        return [_to_list(y) for y in x]
    return x


def _finish(array, dtype, device, requires_grad):
    if device is not None and _device.device(device).type != "cpu":
        xp = _device.array_module(device)
        array = xp.asarray(array)
    t = _wrap(array)
    if requires_grad:
        if array.dtype.kind not in "fc":   # torch's factories word it so (requires_grad_ not)
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad = True
    return t


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new leaf tensor holding a copy of ``data`` (lists, scalars, arrays, tensors)."""
    npd = _np_dtype(dtype)
    if isinstance(data, Tensor):
        import warnings

        warnings.warn(
            "To copy construct from a tensor, it is recommended to use "
            "sourceTensor.detach().clone() or sourceTensor.detach().clone().requires_grad_(True), "
            "rather than symgrad.tensor(sourceTensor).", UserWarning, stacklevel=2)
        arr = data._data.astype(npd or data._data.dtype, copy=True)
    elif isinstance(data, np.ndarray):
        _check_array(data)
        arr = np.array(data, dtype=npd, copy=True)
        if npd is None and arr.dtype not in _DTYPES:
            arr = arr.astype(_tm._default_float.np if arr.dtype.kind in "fc" else np.int64)
    elif hasattr(data, "__cuda_array_interface__"):
        arr = data.astype(npd or data.dtype, copy=True)
    else:
        if isinstance(data, np.generic):
            _check_element(data)
            arr = np.array(data, dtype=npd)
        else:
            arr = _from_nested(_to_list(data), data, npd)
    return _finish(arr, dtype, device, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Share ``data``'s memory when it already is an array of the right dtype."""
    if isinstance(data, Tensor):
        return data if dtype is None or _np_dtype(dtype) == data._data.dtype else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or _np_dtype(dtype) == data.dtype) \
            and data.dtype in _DTYPES and device in (None, "cpu"):
        return _wrap(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array):
    """A tensor sharing memory with ``array`` (writes show through both ways)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    if array.dtype.kind == "c":
        _check_array(array)
    if array.dtype not in _DTYPES:
        raise TypeError(
            f"can't convert np.ndarray of type {array.dtype}. The only supported types are: "
            "float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
        )
    return _wrap(array)


def _as_int(value):
    """``value`` as an int where torch takes one (ints, NumPy ints, 0-d integer tensors; never
    a bool or a float), else None."""
    if isinstance(value, (_builtin_bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _size(size, op="zeros"):
    """A factory's size (``zeros(2, 3)`` or ``zeros((2, 3))``) as torch checks it: ints only
    (TypeError), none negative (RuntimeError)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
        single = False
    else:
        single = len(size) == 1
    shape = []
    for pos, s in enumerate(size):
        n = _as_int(s)
        if n is None:
            if single:
                raise TypeError(f"{op}(): argument 'size' (position 1) must be tuple of ints, "
                                f"not {type(s).__name__}")
            raise TypeError(f"{op}(): argument 'size' failed to unpack the object at pos "
                            f"{pos + 1} with error \"type must be tuple of ints,but got "
                            f"{type(s).__name__}\"")
        shape.append(n)
    for n in shape:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {shape}")
    return tuple(shape)


def _check_number(op, name, pos, value):
    """A scalar argument torch types as Number (a fill value, a range's bounds)."""
    if isinstance(value, (complex, np.complexfloating)):
        raise _complex_error(value)
    if isinstance(value, Tensor) and value.ndim == 0:
        return
    if not isinstance(value, (numbers.Real, np.bool_, np.integer, np.floating)):
        raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be Number, not "
                        f"{type(value).__name__}")


def _factory(fill, size, dtype, device, requires_grad, op="zeros"):
    npd = _np_dtype(dtype) or _tm._default_float.np
    shape = _size(size, op)
    arr = fill(shape, npd)
    return _finish(arr, dtype, device, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _factory(np.zeros, size, dtype, device, requires_grad, "zeros")


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _factory(np.ones, size, dtype, device, requires_grad, "ones")


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _factory(np.empty, size, dtype, device, requires_grad, "empty")


def full(size, fill_value, dtype=None, device=None, requires_grad=False, *, _op="full"):
    _check_number(_op, "fill_value", 2, fill_value)
    if dtype is None:
        dtype = _sg_dtype(_infer_dtype(fill_value))
    return _factory(lambda s, d: np.full(s, fill_value, d), (size,), dtype, device,
                    requires_grad, _op)


def _like(fill, t, dtype, requires_grad):
    return _factory(fill, (t.shape,), dtype or t.dtype, None, requires_grad)


def _traced_like(input, fill_value):
    """zeros_like & co. of a traced value (inside a forward being traced): a constant of its
    shape, or None for anything else."""
    if not _is_traced(input):
        return None
    from .trace import full_like as traced_full_like

    return traced_full_like(input, fill_value)


def zeros_like(input, dtype=None, device=None, requires_grad=False):
    traced = _traced_like(input, 0.0)
    return traced if traced is not None else _like(np.zeros, input, dtype, requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False):
    traced = _traced_like(input, 1.0)
    return traced if traced is not None else _like(np.ones, input, dtype, requires_grad)


def empty_like(input, dtype=None, device=None, requires_grad=False):
    return _like(np.empty, input, dtype, requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False):
    _check_number("full_like", "fill_value", 2, fill_value)
    traced = _traced_like(input, fill_value)
    if traced is not None:
        return traced
    return _like(lambda s, d: np.full(s, fill_value, d), input, dtype, requires_grad)


def _no_random_in_trace(op):
    """A random factory called inside a forward being traced is an error naming it (the trace
    module is loaded only when something is traced, so runtime calls pay a dict lookup)."""
    trace = sys.modules.get("symgrad.trace")
    if trace is not None:
        trace.refuse_random(op)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    _no_random_in_trace("rand")
    return _factory(lambda s, d: _rng().random(s).astype(d), size, dtype, device, requires_grad,
                    "rand")


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    _no_random_in_trace("randn")
    return _factory(lambda s, d: _rng().standard_normal(s).astype(d), size, dtype, device,
                    requires_grad, "randn")


def randint(low=0, high=None, size=None, dtype=None, device=None, requires_grad=False):
    _no_random_in_trace("randint")
    if size is None and isinstance(high, (tuple, list, Size)):   # randint(high, size)
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if not isinstance(size, (tuple, list, Size)):   # torch: size is a tuple, never an int
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__} (randint(low, high, size) or "
                        "randint(high, size))")
    _check_randint_range(low, high)
    return _factory(lambda s, d: _rng().integers(low, high, s).astype(d), (size,),
                    dtype or int64, device, requires_grad, "randint")


def _check_randint_range(low, high):
    for pos, (name, v) in enumerate((("low", low), ("high", high)), 1):
        if _as_int(v) is None:
            raise TypeError(f"randint(): argument '{name}' (position {pos}) must be int, not "
                            f"{type(v).__name__}")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")


def _random_like(name, draw, input, dtype, requires_grad):
    _no_random_in_trace(name)
    return _like(draw, input, dtype, requires_grad)


def rand_like(input, dtype=None, device=None, requires_grad=False):
    """torch.rand_like: uniform [0, 1) samples of ``input``'s shape (and dtype)."""
    return _random_like("rand_like", lambda s, d: _rng().random(s).astype(d), input, dtype,
                        requires_grad)


def randn_like(input, dtype=None, device=None, requires_grad=False):
    """torch.randn_like: standard normal samples of ``input``'s shape (and dtype)."""
    return _random_like("randn_like", lambda s, d: _rng().standard_normal(s).astype(d), input,
                        dtype, requires_grad)


def randint_like(input, low=0, high=None, dtype=None, device=None, requires_grad=False):
    """torch.randint_like(input, high) or (input, low, high)."""
    if high is None:
        low, high = 0, low
    _check_randint_range(low, high)
    return _random_like("randint_like", lambda s, d: _rng().integers(low, high, s).astype(d),
                        input, dtype, requires_grad)


class _LegacyTensorType(type):
    """torch.FloatTensor & co.: ``torch.LongTensor([1, 2])`` builds a tensor of that dtype,
    ``torch.DoubleTensor(2, 3)`` an uninitialised one of that shape, and ``isinstance(x,
    torch.LongTensor)`` tests the dtype."""

    def __call__(cls, *args):
        dt = globals()[cls._dtype_name]
        if len(args) == 1 and not isinstance(args[0], (_builtin_int, np.integer)):
            return tensor(args[0], dtype=dt)
        return empty(*args, dtype=dt)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == globals()[cls._dtype_name]


def _legacy_type(name, dtype_name):
    return _LegacyTensorType(name, (), {"_dtype_name": dtype_name, "__module__": "symgrad"})


FloatTensor = _legacy_type("FloatTensor", "float32")
DoubleTensor = _legacy_type("DoubleTensor", "float64")
HalfTensor = _legacy_type("HalfTensor", "float16")
LongTensor = _legacy_type("LongTensor", "int64")
IntTensor = _legacy_type("IntTensor", "int32")
ShortTensor = _legacy_type("ShortTensor", "int16")
CharTensor = _legacy_type("CharTensor", "int8")
ByteTensor = _legacy_type("ByteTensor", "uint8")
BoolTensor = _legacy_type("BoolTensor", "bool")


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
        _check_number("arange", "end", 1, end)
    else:
        _check_number("arange", "start", 1, start)
        _check_number("arange", "end", 2, end)
        _check_number("arange", "step", 3, step)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if not (np.isfinite(start) and np.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        ints = all(isinstance(v, (_builtin_int, np.integer)) for v in (start, end, step))
        dtype = int64 if ints else _tm._default_float
    arr = np.arange(start, end, step).astype(_np_dtype(dtype))
    return _finish(arr, dtype, device, requires_grad)


def _check_steps(op, steps):
    n = _as_int(steps)
    if n is None:
        raise TypeError(f"{op}(): argument 'steps' (position 3) must be int, not "
                        f"{type(steps).__name__}")
    if n < 0:
        raise RuntimeError("number of steps must be non-negative")
    return n


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    _check_number("linspace", "start", 1, start)
    _check_number("linspace", "end", 2, end)
    steps = _check_steps("linspace", steps)
    arr = np.linspace(start, end, steps).astype(_np_dtype(dtype) or _tm._default_float.np)
    return _finish(arr, dtype, device, requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    """torch.logspace: ``steps`` values ``base ** t``, t evenly spaced from start to end."""
    _check_number("logspace", "start", 1, start)
    _check_number("logspace", "end", 2, end)
    steps = _check_steps("logspace", steps)
    _check_number("logspace", "base", 4, base)
    arr = np.logspace(start, end, steps, base=base).astype(
        _np_dtype(dtype) or _tm._default_float.np)
    return _finish(arr, dtype, device, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    for pos, (name, v) in enumerate((("n", n), ("m", m)), 1):
        if v is None and name == "m":
            continue
        k = _as_int(v)
        if k is None:
            raise TypeError(f"eye(): argument '{name}' (position {pos}) must be int, not "
                            f"{type(v).__name__}")
        if k < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {k}")
    arr = np.eye(n, m, dtype=_np_dtype(dtype) or _tm._default_float.np)
    return _finish(arr, dtype, device, requires_grad)
