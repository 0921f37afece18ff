"""The runtime ``Tensor``: a numpy (or cupy) array plus the autograd metadata torch keeps.

Contract (torch's, see API.md "Tensors"): dtypes with float32 as the default float dtype,
factories, ``requires_grad`` settable on leaves only, ``grad``/``grad_fn``/``is_leaf``,
version counters shared by a tensor, its views and ``detach()``, and the differentiable ops as
methods. The ops themselves live in ``symgrad._runtime_ops``; the graph and engine in
``symgrad.autograd``. This module must not import SymPy.

Rooms: ``Tensor``'s operators and op methods are the mixin ``_TensorOps`` in
``symgrad/_tensor_methods.py``; the argument and memory-layout helpers (``_wrap_dim``,
``_np_aliases``, ``_is_contiguous``, ...) are in ``symgrad/_tensor_args.py``; the version
counters and a view's history after an in-place write in ``symgrad/_tensor_versions.py``; the
printing in ``symgrad/_tensor_repr.py``; the factories (``tensor``, ``zeros``, ``rand``, ...,
``FloatTensor``) in ``symgrad/_tensor_factories.py``. This module keeps the dtypes (the default
float dtype, ``_default_float``, is a global here that ``set_default_dtype`` rebinds: the rooms
read it as ``_tm._default_float``), ``Size`` and ``Tensor``, and re-exports every moved name.
"""

import numpy as np

from symgrad import _device
from symgrad._device import device
from symgrad import _tensor_methods
from symgrad._tensor_args import (  # noqa: F401  (the op layer reads them here: _tm._wrap_dim)
    _SUM_NAMES, _empty_like_layout, _is_contiguous, _is_non_overlapping_and_dense,
    _keyword_shape, _np_aliases, _wrap_dim,
)
from symgrad._tensor_methods import _TensorOps
from symgrad._tensor_versions import (  # noqa: F401  (re-exported: _tm._vc_of, ...)
    CUSTOM_FUNCTION_VIEW_ADVICE, MULTI_OUTPUT_VIEW_ADVICE, NO_GRAD_VIEW_ADVICE, _InferenceVersion,
    _VersionCounter, _regenerate_view, _vc_of, grad_dtype_live, post_acc_live, view_rebase_error,
)
from symgrad.ops import table as _table

__all__ = [
    "Tensor", "Size", "dtype", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full",
    "empty", "zeros_like", "ones_like", "full_like", "empty_like", "rand", "randn", "randint",
    "rand_like", "randn_like", "randint_like", "FloatTensor", "DoubleTensor", "HalfTensor",
    "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
    "arange", "linspace", "logspace", "eye", "manual_seed", "get_default_dtype", "set_default_dtype",
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
    "half", "float", "double", "short", "int", "long", "device", "is_tensor",
]

_builtin_bool = bool
_builtin_float = float
_builtin_int = int


# ----------------------------------------------------------------------------- dtypes
class dtype:
    """A tensor element type, spelled as torch spells it (``symgrad.float32``)."""

    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "_legacy")

    def __init__(self, name, np_dtype, legacy):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = self.np.kind == "f"
        self.is_signed = self.np.kind in "fi"
        self.itemsize = self.np.itemsize
        self._legacy = legacy

    def __repr__(self):
        return f"symgrad.{self.name}"

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


float16 = half = dtype("float16", np.float16, "HalfTensor")
float32 = float = dtype("float32", np.float32, "FloatTensor")
float64 = double = dtype("float64", np.float64, "DoubleTensor")
int8 = dtype("int8", np.int8, "CharTensor")
int16 = short = dtype("int16", np.int16, "ShortTensor")
int32 = int = dtype("int32", np.int32, "IntTensor")
int64 = long = dtype("int64", np.int64, "LongTensor")
uint8 = dtype("uint8", np.uint8, "ByteTensor")
bool = dtype("bool", np.bool_, "BoolTensor")

# the C++ type names torch's messages give a dtype (caffe2::TypeMeta::name)
_CPP_TYPE = {"float16": "c10::Half", "float32": "float", "float64": "double",
             "int8": "signed char", "int16": "short int", "int32": "int", "int64": "long int",
             "uint8": "unsigned char", "bool": "bool"}
_DTYPES = {d.np: d for d in (float16, float32, float64, int8, int16, int32, int64, uint8, bool)}
_BY_NAME = {d.name: d for d in _DTYPES.values()}
_default_float = float32


def _dtype_by_name(name):
    return _BY_NAME[name]


def get_default_dtype():
    return _default_float


def set_default_dtype(d):
    global _default_float
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default_float = d


def _np_dtype(d):
    """numpy dtype for a symgrad dtype, a numpy dtype or a Python type."""
    if d is None:
        return None
    if isinstance(d, dtype):
        return d.np
    if d is _builtin_float:
        return _default_float.np
    if d is _builtin_int:
        return np.dtype(np.int64)
    if d is _builtin_bool:
        return np.dtype(np.bool_)
    try:
        npd = np.dtype(d)
    except TypeError:
        npd = None
    if npd is not None and npd.kind == "c":
        raise TypeError(f"symgrad tensors are real: complex dtypes are not supported (got {d})")
    if npd not in _DTYPES:   # torch: "argument 'dtype' must be torch.dtype, not str"
        raise TypeError(f"argument 'dtype' must be a symgrad dtype (float16, float32, float64, "
                        f"int8, int16, int32, int64, uint8, bool), not {d!r}")
    return npd


def _sg_dtype(np_dtype):
    try:
        return _DTYPES[np_dtype]
    except KeyError:
        raise TypeError(f"symgrad: unsupported dtype {np_dtype}") from None


class Size(tuple):
    """A tensor shape: a tuple that prints as ``symgrad.Size([2, 3])``."""

    __slots__ = ()

    def __repr__(self):
        return f"symgrad.Size({list(self)})"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


# -------------------------------------------------------------------------- Tensor
def _wrap(array, requires_grad=False):
    """A fresh leaf over ``array`` (no copy)."""
    t = _new(Tensor)
    t._data = array
    t._requires_grad = requires_grad
    t._grad = None
    t._grad_fn = None
    t._output_nr = 0
    # created on first use (_vc_of); an inference tensor's at once
    t._vc = _InferenceVersion() if _inference_live[0] and _gm._state.inference else None
    t._base = None
    t._view_fn = None
    t._view_version = 0
    t._view_meta = None
    t._retains_grad = False
    t._hooks = None
    t._grad_acc = None
    return t


_new = object.__new__


class Tensor(_TensorOps):
    """An n-dimensional array with autograd metadata (torch.Tensor semantics)."""

    __slots__ = (
        "_data", "_requires_grad", "_grad", "_grad_fn", "_output_nr", "_vc", "_base",
        "_view_fn", "_view_version", "_view_meta", "_retains_grad", "_hooks", "_grad_acc",
        "_post_acc_hooks", "_grad_dtype",
        "__weakref__",
    )

    __array_priority__ = 1000  # ndarray <op> Tensor defers to Tensor's reflected operator

    def __new__(cls, *args, **kwargs):
        return _new(cls)

    def __init__(self, data=(), *, dtype=None, device=None, requires_grad=False):
        src = tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        for name in Tensor.__slots__[:-1]:
            if hasattr(src, name):   # the optional slots (_post_acc_hooks...) may be unset
                setattr(self, name, getattr(src, name))

    # -------------------------------------------------------------- basic attributes
    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def dtype(self):
        return _DTYPES[self._data.dtype]

    @property
    def device(self):
        return _device.device_of(self._data)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    ndimension = dim

    def numel(self):
        return self._data.size

    nelement = numel

    def element_size(self):
        return self._data.itemsize

    def stride(self, dim=None):
        item = self._data.itemsize
        strides = tuple(s // item for s in self._data.strides)
        if dim is None:
            return strides
        return strides[_wrap_dim(dim, self._data.ndim)]

    def is_contiguous(self, memory_format=None):
        return _is_contiguous(self._data)

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def is_complex(self):
        return self._data.dtype.kind == "c"

    def bernoulli(self, p=None, *, generator=None):
        """torch's ``x.bernoulli()``: 0 / 1 samples (x's dtype) with probabilities ``x`` (or
        ``p``); no gradient flows through the samples."""
        _no_random_in_trace("bernoulli")
        probs = self._data if p is None else np.broadcast_to(
            p._data if isinstance(p, Tensor) else np.asarray(p, self._data.dtype),
            self._data.shape)
        if np.any((probs < 0) | (probs > 1)):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
        return _wrap((_rng().random(self._data.shape) < probs).astype(self._data.dtype))

    def bernoulli_(self, p=0.5, *, generator=None):
        """torch's ``x.bernoulli_(p)``: fill ``x`` in place with 0 / 1 samples."""
        _no_random_in_trace("bernoulli_")
        probs = p._data if isinstance(p, Tensor) else np.asarray(p, np.float64)
        if np.any((probs < 0) | (probs > 1)):
            raise RuntimeError("bernoulli_ expects p to be in [0, 1], but got p=" + str(p))
        sample = _rng().random(self._data.shape) < np.broadcast_to(probs, self._data.shape)
        return self.copy_(_wrap(sample.astype(self._data.dtype)))

    def new(self, *args, **kwargs):
        """The legacy ``x.new(data)`` / ``x.new(*sizes)``: a tensor of ``x``'s dtype (torch
        recommends ``new_tensor`` / ``new_empty``)."""
        if not args and not kwargs:
            return empty(0, dtype=self.dtype)
        if kwargs or len(args) > 1 or isinstance(args[0], (_builtin_int,
                                                                         np.integer)):
            size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, Size)) \
                else args
            if args and isinstance(args[0], (tuple, list)) and not kwargs and len(args) == 1:
                return tensor(args[0], dtype=self.dtype)
            return empty(*size, dtype=kwargs.get("dtype", self.dtype))
        if isinstance(args[0], Size):
            return empty(*args[0], dtype=self.dtype)
        return tensor(args[0], dtype=self.dtype)

    def set_(self, source=None):
        """torch's ``x.set_(source)``: ``x`` takes ``source``'s data (sharing its memory) and
        shape; ``x.set_()`` makes it empty. A leaf that requires grad gets a new gradient
        accumulator, as torch's: a graph recorded before no longer reaches it (its
        GradientEdge from `get_gradient_edge` still does)."""
        if source is not None and not isinstance(source, Tensor):
            raise TypeError(f"set_(): argument 'source' must be Tensor, not "
                            f"{type(source).__name__} (symgrad has no storages)")
        if self._base is not None:
            raise RuntimeError("set_(): a view cannot take another tensor's data (symgrad); "
                               "call it on the view's base or on a clone")
        if self._requires_grad and _gm._state.enabled:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation."
                if self._grad_fn is None else
                "set_(): a tensor that requires grad can take another tensor's data only "
                "under no_grad (symgrad)")
        if source is not None and source._data.dtype != self._data.dtype:
            raise RuntimeError(
                f"Could not set tensor of type {source.dtype._legacy} to a tensor of type "
                f"{self.dtype._legacy}")
        self._data = (np.empty((0,), self._data.dtype) if source is None
                      else source._data)
        _vc_of(self).bump()
        self._grad_acc = None
        return self

    def narrow(self, dim, start, length):
        """torch's ``x.narrow(dim, start, length)``: a view of ``length`` entries from
        ``start`` along ``dim`` (``start`` may be negative or a 0-d integer tensor)."""
        nd = self._data.ndim
        if nd == 0:
            raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
        d = _wrap_dim(dim, nd)
        if isinstance(start, Tensor):
            start = start.item()
        size = self._data.shape[d]
        if length < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        if not -size <= start <= size:
            raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}],"
                             f" but got {start})")
        if start < 0:
            start += size
        if start + length > size:
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                               f"({size}).")
        return self[(slice(None),) * d + (slice(start, start + length),)]

    def select(self, dim, index):
        """torch's ``x.select(dim, index)``: ``x[..., index, ...]`` at ``dim`` (a view)."""
        nd = self._data.ndim
        if nd == 0:
            raise IndexError("select() cannot be applied to a 0-dim tensor.")
        d = _wrap_dim(dim, nd)
        size = self._data.shape[d]
        if not isinstance(index, (_builtin_int, np.integer)) or isinstance(index, _builtin_bool):
            raise TypeError(f"select(): argument 'index' must be int, not "
                            f"{type(index).__name__}")
        if not -size <= index < size:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(self._data.shape)} at dimension {dim}")
        return self[(slice(None),) * d + (index,)]

    def data_ptr(self):
        return self._data.__array_interface__["data"][0]

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    __hash__ = object.__hash__

    # -------------------------------------------------------------- autograd metadata
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if self._grad_fn is not None:
            msg = "you can only change requires_grad flags of leaf variables."
            if not value:
                msg += (" If you want to use a computed variable in a subgraph that doesn't "
                        "require differentiation use var_no_grad = var.detach().")
            raise RuntimeError(msg)
        if value and self._data.dtype.kind not in "fc":
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients")
        if value and type(self._vc) is _InferenceVersion and not _gm._state.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        self._requires_grad = _builtin_bool(value)

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self._grad_fn is not None:
            return self   # torch: a no-op on a non-leaf (which requires grad already)
        if requires_grad and self._data.dtype.kind not in "fc":   # torch words it so here
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def grad_fn(self):
        if self._base is not None and self._view_version != _vc_of(self).value:
            _regenerate_view(self)
        return self._grad_fn

    @property
    def output_nr(self):
        return self._output_nr

    @property
    def _version(self):
        vc = self._vc
        if type(vc) is _InferenceVersion:
            raise RuntimeError("Inference tensors do not track version counter.")
        return 0 if vc is None else vc.value

    def is_inference(self):
        """True for a tensor created in ``inference_mode`` (and its views and detach())."""
        return type(self._vc) is _InferenceVersion

    @property
    def grad(self):
        if self._grad_fn is not None and not self._retains_grad and self._grad is None:
            import warnings

            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
                "mistake, make sure you access the leaf Tensor instead.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type "
                    f"{type(value).__name__}"
                )
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            gd = self._leaf_grad_dtype()
            if gd is not None and value._data.dtype != gd.np:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{_CPP_TYPE[value.dtype.name]}'"
                    f" to a tensor with grad_dtype '{gd._legacy[:-len('Tensor')]}'. The "
                    "gradient must match the tensor's grad_dtype (defaults to the tensor's "
                    "dtype). You can set the tensor's grad_dtype attribute with a specific "
                    "dtype, or None to allow any dtype. Set grad_dtype with caution. Diverging "
                    "the dtypes of a tensor and its gradient may break downstream systems that "
                    "assume they match."
                )
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size"
                )
            if value.device != self.device:
                raise RuntimeError(
                    "attempting to assign a gradient located on device with index "
                    f"'{value.device}' to a tensor located on device '{self.device}'"
                )
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    def _leaf_grad_dtype(self):
        """The dtype a leaf's ``.grad`` must have: its own unless ``grad_dtype`` was set
        (None: any dtype)."""
        try:
            return self._grad_dtype
        except AttributeError:
            return self.dtype

    @property
    def grad_dtype(self):
        """The dtype of this leaf's ``.grad`` (default: the tensor's dtype; None: any)."""
        if self.grad_fn is not None:
            raise RuntimeError("grad_dtype can only be accessed on leaf tensors.")
        return self._leaf_grad_dtype()

    @grad_dtype.setter
    def grad_dtype(self, value):
        if self.grad_fn is not None:
            raise RuntimeError("grad_dtype can only be set on leaf tensors.")
        if value is not None and not isinstance(value, dtype):
            raise TypeError(f"grad_dtype must be a dtype or None, but got "
                            f"{type(value).__name__}")
        self._grad_dtype = value
        grad_dtype_live[0] = True

    @property
    def retains_grad(self):
        return self._retains_grad

    def retain_grad(self):
        """Populate ``.grad`` of this non-leaf during backward (no-op on leaves)."""
        if self.grad_fn is None:
            if not self._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._retains_grad:
            return
        self._retains_grad = True
        self._grad_fn._set_retains_grad(self._output_nr, self)

    def register_hook(self, hook):
        """Register ``hook(grad) -> Tensor or None`` run when this tensor's grad is computed.

        Returns a handle whose ``remove()`` unregisters it.
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        from symgrad.autograd import engine

        fn = self.grad_fn
        if fn is None:
            if self._hooks is None:
                self._hooks = {}
            return engine.RemovableHandle(self._hooks, hook)
        return fn._register_tensor_hook(self._output_nr, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Register ``hook(tensor)``, run after a gradient is accumulated into this leaf's
        ``.grad`` (torch's optimizer-in-backward hook). Returns a removable handle."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        from symgrad.autograd import engine

        hooks = getattr(self, "_post_acc_hooks", None)
        if hooks is None:
            hooks = self._post_acc_hooks = {}
            post_acc_live[0] = True
        return engine.RemovableHandle(hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Compute the gradient of this tensor w.r.t. graph leaves (see ``autograd.backward``)."""
        if gradient is None and retain_graph is None and not create_graph and inputs is None:
            _engine.backward_implicit(self)
        elif (type(gradient) is Tensor and not create_graph and inputs is None
              and self._base is None):
            # y.backward(g): a small graph, often (engine.backward's first test, inlined)
            fn = self._grad_fn
            a, ga = self._data, gradient._data
            if fn is None or ga.shape != a.shape or ga.dtype != a.dtype or \
                    not _engine._one_node(fn, self._output_nr, gradient,
                                          True if retain_graph else False):
                _engine._backward(self, gradient, retain_graph, create_graph, None, inputs)
        else:
            _engine.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self):
        """A new leaf sharing storage and version counter, outside the graph."""
        t = _wrap(self._data)
        t._vc = _vc_of(self)
        return t

    def detach_(self):
        if self._base is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
                "as True, gradients are views of DDP buckets, and hence detach_() cannot be "
                "called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."
            )
        self._grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    @property
    def data(self):
        """A detached tensor over the same storage, with its own version counter (torch)."""
        return _wrap(self._data)

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        if self._requires_grad and value._data.dtype.kind not in "fc":
            raise RuntimeError("data set to a tensor that requires gradients must be floating "
                               "point or complex dtype")
        self._data = value._data

    # -------------------------------------------------------------- conversion
    def numpy(self, *, force=False):
        if self._requires_grad and not force and _gm._state.grad:   # allowed under no_grad
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        if not isinstance(self._data, np.ndarray):
            if not force:
                raise TypeError(
                    "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy "
                    "the tensor to host memory first."
                )
            return self._data.get()
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return self._data.item()

    def tolist(self):
        return self._data.tolist()

    def __float__(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        if self._requires_grad:
            import warnings

            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to "
                          "unexpected behavior.\nConsider using tensor.detach() first.",
                          UserWarning, stacklevel=2)
        return _builtin_float(self.item())

    def __int__(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return _builtin_int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub":
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return _builtin_int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with more than one value is ambiguous"
            )
        return _builtin_bool(self._data.item())

    def type(self, dtype=None):
        if dtype is None:
            return f"symgrad.{self.dtype._legacy}"
        if isinstance(dtype, str):
            dtype = {d._legacy: d for d in _DTYPES.values()}[dtype.rsplit(".", 1)[-1]]
        return self.to(dtype)

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``; differentiable."""
        dt = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        copy = kwargs.pop("copy", False)
        for a in args:
            if isinstance(a, dtype):
                dt = a
            elif isinstance(a, Tensor):
                dt, dev = a.dtype, a.device
            elif isinstance(a, (str, device)) or (
                    isinstance(a, _builtin_int) and not isinstance(a, _builtin_bool)):
                dev = a
            elif isinstance(a, (type, np.dtype)):   # float, np.float64: checked by _np_dtype
                dt = a
            elif not isinstance(a, _builtin_bool):   # non_blocking / copy, positional
                raise TypeError(f"to() received an invalid combination of arguments - got "
                                f"({type(a).__name__}): expected a dtype, a device or a tensor")
        out = self
        if dev is not None and device(dev) != self.device:
            out = _ops.to_device(out, device(dev))
        if dt is not None and _np_dtype(dt) != out._data.dtype:
            out = _ops.to_dtype(out, _sg_dtype(_np_dtype(dt)))
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}")

    def half(self):
        return self.to(float16)

    def float(self):
        return self.to(float32)

    def double(self):
        return self.to(float64)

    def long(self):
        return self.to(int64)

    def int(self):
        return self.to(int32)

    def bool(self):
        return self.to(bool)

    def clone(self, memory_format=None):
        return _ops.clone(self)

    def contiguous(self, memory_format=None):
        return self if _is_contiguous(self._data) else _ops.clone(self, contiguous=True)

    def new_tensor(self, data, dtype=None, requires_grad=False):
        return tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, requires_grad=False):
        return _factory(np.zeros, size, dtype or self.dtype, None, requires_grad, "new_zeros")

    def new_ones(self, *size, dtype=None, requires_grad=False):
        return _factory(np.ones, size, dtype or self.dtype, None, requires_grad, "new_ones")

    def new_full(self, size, fill_value, dtype=None, requires_grad=False):
        return full(size, fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad,
                    _op="new_full")

    def new_empty(self, *size, dtype=None, requires_grad=False):
        return _factory(np.empty, size, dtype or self.dtype, None, requires_grad, "new_empty")

    # -------------------------------------------------------------- repr
    def __repr__(self):
        return _format_tensor(self)

    __str__ = __repr__

    def __format__(self, spec):
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, proto):
        return (_rebuild, (self.detach().numpy().copy(), self._requires_grad))

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment."
            )
        t = _wrap(self._data.copy(), self._requires_grad)
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    def view(self, *shape, **size):
        if size:
            shape = _keyword_shape("view", shape, size, "size")
        if len(shape) == 1 and isinstance(shape[0], dtype):
            return self._view_dtype(shape[0])
        return _ops.view(self, *shape)

    def _view_dtype(self, new):
        """torch's view(dtype): the same memory read as another dtype; not differentiable
        (torch returns a tensor outside the graph), sharing the version counter."""
        old = self._data.dtype
        a = self._data
        if new.np.itemsize != old.itemsize:
            ratio = max(new.np.itemsize, old.itemsize) // min(new.np.itemsize, old.itemsize)
            if a.ndim == 0:
                raise RuntimeError(
                    f"self.dim() cannot be 0 to view {_DTYPES[old]._legacy[:-6]} as "
                    f"{new._legacy[:-6]} (different element sizes)")
            if new.np.itemsize > old.itemsize and a.shape[-1] % ratio:
                raise RuntimeError(
                    f"self.size(-1) must be divisible by {ratio} to view "
                    f"{_DTYPES[old]._legacy[:-6]} as {new._legacy[:-6]} (different element "
                    f"sizes), but got {a.shape[-1]}")
            if a.shape[-1] != 1 and a.strides[-1] != old.itemsize:
                raise RuntimeError(
                    "self.stride(-1) must be 1 to view " f"{_DTYPES[old]._legacy[:-6]} as "
                    f"{new._legacy[:-6]} (different element sizes), but got "
                    f"{a.strides[-1] // old.itemsize}")
        t = _wrap(a.view(new.np))
        t._vc = _vc_of(self)
        return t

    def uniform_(self, a=0.0, b=1.0):
        # torch's UniformBackward0 / NormalBackward0: a zero gradient to the old values (a
        # saved tensor overwritten is detected), and a leaf that requires grad is refused
        return _ops.inplace(self, "random", _rng().uniform(a, b, self._data.shape),
                            "UniformBackward0")

    def normal_(self, mean=0.0, std=1.0):
        return _ops.inplace(self, "random", _rng().normal(mean, std, self._data.shape),
                            "NormalBackward0")




def _rebuild(array, requires_grad):
    return _wrap(array, requires_grad)


def is_tensor(obj):
    return isinstance(obj, Tensor)


# The op layer and grad mode import this module; they are bound here, after Tensor exists.
from symgrad import _runtime_ops as _ops  # noqa: E402
_tensor_methods._ops = _ops   # the op methods' module (symgrad/_tensor_methods.py) calls it too
from symgrad.autograd import grad_mode as _gm  # noqa: E402
_inference_live = _gm.inference_live
from symgrad.autograd import engine as _engine  # noqa: E402
# How a tensor prints, and the factories: they build and read Tensors, so they are imported
# once it exists (symgrad/_tensor_repr.py, symgrad/_tensor_factories.py); re-exported.
from symgrad._tensor_repr import (  # noqa: E402,F401
    _INVALID, _format_array, _format_tensor, _special)
from symgrad._tensor_factories import (  # noqa: E402,F401
    BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor,
    LongTensor, ShortTensor, _LegacyTensorType, _factory, _finish, _infer_dtype, _legacy_type,
    _like, _no_random_in_trace, _random_like, _rng, _size, _to_list, _traced_like,
    arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like, linspace, logspace,
    manual_seed, ones, ones_like, rand, rand_like, randint, randint_like, randn, randn_like,
    tensor, zeros, zeros_like,
)
# the public functions moved there keep this module's name (sg.zeros.__module__, as torch's)
for _public in (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like, linspace,
                logspace, manual_seed, ones, ones_like, rand, rand_like, randint, randint_like, randn,
                randn_like, tensor, zeros, zeros_like):
    _public.__module__ = __name__
del _public


# Hot operators call the op layer directly (one Python frame less than a method forwarding).
Tensor.__add__ = _ops.add
Tensor.__sub__ = _ops.sub
Tensor.__mul__ = _ops.mul
Tensor.__truediv__ = _ops.div
Tensor.__matmul__ = _ops.matmul
Tensor.__neg__ = _ops.neg
# The op table's fast-path ops (symgrad/ops/table.py): Tensor.exp is the op layer's function
# itself for the hot ones, a method forwarding to it for the others
for _op in _table.runtime("fast"):
    setattr(Tensor, _op.name, getattr(_ops, _op.name) if _op.hot else _ops.tensor_method(_op))
del _op


class _CallableModule(type(_sys_module := __import__("sys"))):
    """`sg.tensor(data)` is torch's factory, and `symgrad.tensor` is also this module's name:
    calling the module calls the factory, so `import symgrad.tensor` cannot shadow it."""

    def __call__(self, data, dtype=None, device=None, requires_grad=False, pin_memory=False):
        return tensor(data, dtype=dtype, device=device, requires_grad=requires_grad,
                      pin_memory=pin_memory)


_sys_module.modules[__name__].__class__ = _CallableModule
