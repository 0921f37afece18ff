"""The tensor factories: ``tensor``, ``as_tensor``, ``from_numpy``, ``zeros`` ... ``full_like``,
the random ones (``rand``, ``randn``, ``randint``, their ``_like``; ``manual_seed``), the legacy
types (``FloatTensor`` ...), ``arange``, ``linspace``, ``eye``. Moved verbatim from tensor.py,
which imports it once ``Tensor`` exists and re-exports every name (the public ones keep
``symgrad.tensor`` as their ``__module__``).

The default float dtype is ``symgrad.tensor._default_float``, a global ``set_default_dtype``
rebinds: it is read through the module (``_tm._default_float``), never copied here.
"""

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
        arr = np.array(data, dtype=npd, copy=True)
        if npd is None and arr.dtype not in _DTYPES:
            arr = arr.astype(_tm._default_float.np if arr.dtype.kind in "fc" else np.int64)
    elif hasattr(data, "__cuda_array_interface__"):
        arr = data.astype(npd or data.dtype, copy=True)
    else:
        if isinstance(data, np.generic):
            arr = np.array(data, dtype=npd)
        else:
            arr = np.array(_to_list(data), dtype=npd or _infer_dtype(data))
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
    if array.dtype not in _DTYPES:
        raise TypeError(
            f"can't convert np.ndarray of type {array.dtype}. The only supported types are: "
            "float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
        )
    return _wrap(array)


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    return tuple(_builtin_int(s) for s in size)


def _factory(fill, size, dtype, device, requires_grad):
    npd = _np_dtype(dtype) or _tm._default_float.np
    shape = _size(size)
    arr = fill(shape, npd)
    return _finish(arr, dtype, device, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _factory(np.zeros, size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _factory(np.ones, size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _factory(np.empty, size, dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = _sg_dtype(_infer_dtype(fill_value))
    return _factory(lambda s, d: np.full(s, fill_value, d), (size,), dtype, device,
                    requires_grad)


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
    return _factory(lambda s, d: _rng().random(s).astype(d), size, dtype, device, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    _no_random_in_trace("randn")
    return _factory(lambda s, d: _rng().standard_normal(s).astype(d), size, dtype, device,
                    requires_grad)


def randint(low=0, high=None, size=None, dtype=None, device=None, requires_grad=False):
    _no_random_in_trace("randint")
    if size is None and isinstance(high, (tuple, list, Size)):   # randint(high, size)
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    return _factory(lambda s, d: _rng().integers(low, high, s).astype(d), (size,),
                    dtype or int64, device, requires_grad)


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
    if dtype is None:
        ints = all(isinstance(v, (_builtin_int, np.integer)) for v in (start, end, step))
        dtype = int64 if ints else _tm._default_float
    arr = np.arange(start, end, step).astype(_np_dtype(dtype))
    return _finish(arr, dtype, device, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    arr = np.linspace(start, end, steps).astype(_np_dtype(dtype) or _tm._default_float.np)
    return _finish(arr, dtype, device, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    arr = np.eye(n, m, dtype=_np_dtype(dtype) or _tm._default_float.np)
    return _finish(arr, dtype, device, requires_grad)
