"""Tensor ops without a checked-in generated module, as forward-only Functions.

Each op here is a `Function` whose forward is the traced method of the same name
(`x.sinh()`, `x.cumsum(dim)`, `x.logsumexp(dim)`, ...). Its backward is therefore generated,
on first use per signature (shapes, dtypes, constants), by the same compiler as any user
Function, and cached in memory and on disk; gradients of every order follow. The built-in
ops of `symgrad/_generated/` are the fast path (no SymPy, shape-generic); these fill in
torch's remaining names so that torch code ports.

`install()` adds the methods to `Tensor` (where it has none of that name); `symgrad`'s
function spellings (`sg.sinh(x)`) call the methods.
"""
from __future__ import annotations

import contextlib

from .autograd.function import Function
from .ops import table

# torch's names of the ops (`y.grad_fn` shows e.g. SinhBackward0, LogSoftmaxBackward0): the op
# table's entries the runtime runs as composites (symgrad/ops/table.py)
COMPOSITE = table.composite_names()
# ops with several outputs: torch's named tuple of (values, indices)
_NAMED = {"sort", "topk", "kthvalue", "cummax", "cummin"}
# ops whose second operand is an integer index tensor (kept as it is)
_INDEXED = {"gather": 2, "take_along_dim": 1, "index_select": 2}


def _aliases():
    """numpy-style aliases of the same ops: the op table's (arcsin, fix, arctan2, absolute,
    ...); sgn: torch's sign of complex numbers, the traced value's is written by hand."""
    return {**table.aliases(), "sgn": "sign"}


ALIASES = _aliases()

# torch's grad_fn name of every op: the op table's (<CamelName>Backward0 unless the entry says)
_NODE_NAMES = table.node_names()

_FUNCTIONS: dict[str, type] = {}


def composite(name: str, form: int = 0) -> type:
    """The forward-only Function of op `name` (created once). `form`: where torch names the
    op's node by its last operand (the table's node pair: a number, a tensor), 1 for a
    tensor (fmod(a, b): FmodBackward1)."""
    cls = _FUNCTIONS.get((name, form) if form else name)
    if cls is None:
        def forward(ctx, x, *args, **kwargs):
            from .trace import site_of

            # an index op's module checks its indices when it runs and names the op's line
            # in the message; the module is shared by every call site of this signature, so
            # it names none (the traceback has the caller's line)
            quiet = site_of(None) if name in _INDEXED else contextlib.nullcontext()
            try:
                with quiet:
                    return getattr(x, name)(*args, **kwargs)
            except TypeError as exc:   # name the Tensor op, not the traced method
                raise TypeError(str(exc).replace("SymbolicTensor.", "Tensor.")) from None

        forward.__qualname__ = f"{name}.forward"
        camel = "".join(part.capitalize() for part in name.split("_"))
        node = _NODE_NAMES.get(name, camel + "Backward0")
        cls = type(camel, (Function,),
                   {"forward": staticmethod(forward), "__module__": __name__,
                    "_node_name": node[form] if isinstance(node, tuple) else node,
                    "__doc__": f"torch.{name} as a forward-only Function (generated backward)."})
        _FUNCTIONS[(name, form) if form else name] = cls
    return cls


def _form(name, args, kwargs):
    """composite()'s `form` of a call: 1 where the op's node pair names a tensor last operand
    (the keyword one if given: lerp's weight=, clamp_min's min=)."""
    if not isinstance(_NODE_NAMES.get(name), tuple):
        return 0
    from .tensor import Tensor

    last = next(iter(kwargs.values())) if kwargs else args[-1]
    return int(isinstance(last, Tensor))


# ops that keep an integer (or bool) input's dtype in torch; the others compute in floats
_INTEGRAL = set(table.spellings(lambda op: op.integral and op.runtime == "composite")) | {
    "addcmul"}   # (torch: addcmul of integer tensors is an integer, its value= truncated)
_DIVIDING = {"fmod", "remainder", "floor_divide"}
# ops of two operands (promoted together)
_BINARY = set(table.spellings(lambda op: op.arity == 2 and op.runtime == "composite"))
# the operands of addcmul / addcdiv (lerp's weight, a tensor, is of input's dtype)
_ARITY = {**dict.fromkeys(_BINARY, 2), "addcmul": 3, "addcdiv": 3}
_INT64 = {"cumsum", "cumprod", "trace"}   # integer results widened to int64, as torch does


def _integral_args(name, args, kwargs):
    """torch's dtypes for op `name` on integer Tensors: (args, kwargs, result dtype or None).

    The traced forward computes in floating point, so integer operands go in as floats: the
    default float dtype for torch's floating ops (int -> float32), float64 (exact for
    integers below 2**53) for the ops whose result stays integral, cast back afterwards."""
    import numbers

    import numpy as np

    from . import _runtime_ops, tensor as _tm

    n = _ARITY.get(name, 1)
    values = args[:n]   # not dims and such
    operands = [a for a in values if isinstance(a, (_tm.Tensor, numbers.Number))]
    tensors = [a for a in args if isinstance(a, _tm.Tensor)]
    if not tensors:
        return args, kwargs, None
    dt = _runtime_ops._result_dtype(operands)
    if any(t._data.dtype.kind in "fc" for t in tensors):
        if n == 1:
            return args, kwargs, None
        # a float and an integer / bool operand: the integer one in the promoted float dtype
        # (the traced forward would read a bool divisor as a formula of its truth)
        if dt.kind not in "fc":   # lerp(int, int, float 0-d weight): the weight's dtype
            dt = _runtime_ops._result_dtype(tensors)
        fdt = _tm._sg_dtype(dt)
        return tuple(a.to(fdt) if i < n and isinstance(a, _tm.Tensor)
                     and a._data.dtype.kind not in "fc" else a for i, a in enumerate(args)), \
            kwargs, None
    if dt.kind in "fc" or name not in _INTEGRAL:
        # int Tensor and Python float: the promoted (default float) dtype; a floating op
        # of integer Tensors: the default float dtype
        float_dt = _tm._sg_dtype(dt) if dt.kind == "f" else _tm.get_default_dtype()
        return tuple(a.to(float_dt) if isinstance(a, _tm.Tensor) else a for a in args), \
            kwargs, None
    if name in _DIVIDING and len(args) > 1:
        divisor = args[1]
        d = divisor._data if isinstance(divisor, _tm.Tensor) else np.asarray(divisor)
        if (d == 0).any():
            raise RuntimeError("ZeroDivisionError")
    if name in ("floor", "ceil", "round", "trunc", "fix") and dt.kind == "b":
        raise NotImplementedError(f'"{name}" not implemented for \'Bool\'')
    out_dt = np.dtype(np.int64) if name in _INT64 else dt
    return tuple(a.to(_tm.float64) if isinstance(a, _tm.Tensor) else a for a in args), \
        kwargs, _tm._sg_dtype(out_dt)


# torch has no kernel for these ops of integer (or bool) operands, or of bool ones: its
# NotImplementedError, naming the kernel and the promoted dtype
_NO_INTEGER = {"hypot": "hypot_cpu", "logaddexp": "logaddexp_cpu",
               "logaddexp2": "logaddexp2_cpu"}
_NO_BOOL = {"fmod": "fmod_cpu", "remainder": "remainder_cpu", "floor_divide": "div_floor_cpu",
            "addcmul": "addcmul_cpu_out"}
_NO_BOOL_NUMBER = {"clamp_min": "clamp_min_scalar_cpu", "clamp_max": "clamp_max_scalar_cpu"}


def _check_kernel(name, args, kwargs):
    """torch's NotImplementedError for an op of integer / bool operands it has no kernel for
    (hypot of int64 tensors, remainder of bool ones)."""
    import numbers

    from . import _runtime_ops, tensor as _tm

    if name == "ldexp" and len(args) > 1 and all(isinstance(a, _tm.Tensor) for a in args[:2]) \
            and args[0]._data.dtype.kind == "f" and args[1]._data.dtype.kind == "b":
        # a float input's exponent kernel has no bools (an integer input's float32 one has)
        raise NotImplementedError('"ldexp_cpu_exp" not implemented for \'Bool\'')
    if name not in _NO_INTEGER and name not in _NO_BOOL and name not in _NO_BOOL_NUMBER:
        return

    operands = [a for a in (*args[:_ARITY.get(name, 2)],
                            *(v for k, v in kwargs.items() if k != "value"))
                if isinstance(a, (_tm.Tensor, numbers.Number))]
    dt = _runtime_ops._result_dtype(operands)
    kernel = None
    if name in _NO_INTEGER and dt.kind not in "fc":
        kernel = _NO_INTEGER[name]
    elif dt.kind == "b" and name in _NO_BOOL:
        kernel = _NO_BOOL[name]
    elif dt.kind == "b" and name in _NO_BOOL_NUMBER and any(
            isinstance(a, numbers.Number) for a in operands):
        kernel = _NO_BOOL_NUMBER[name]
    if kernel is not None:
        legacy = _tm._sg_dtype(dt)._legacy.replace("Tensor", "")
        raise NotImplementedError(f'"{kernel}" not implemented for \'{legacy}\'')


def _named(name, out):
    import collections

    cls = _RETURN_TYPES.get(name)
    if cls is None:
        cls = _RETURN_TYPES[name] = collections.namedtuple(name, ["values", "indices"])
    return cls(*out)


_RETURN_TYPES: dict[str, type] = {}


_DOF_MESSAGE = ("{}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                "reduction factor (input numel divided by output numel).")


def _check_dof(name, args, kwargs, out):
    """torch's warning when var / std divide by n - correction <= 0."""
    import warnings

    correction = kwargs.get("correction")
    if correction is None:
        unbiased = kwargs.get("unbiased", True)
        rest = args[1:]
        if rest and isinstance(rest[0], bool):        # x.var(False)
            unbiased = rest[0]
        elif len(rest) > 1 and isinstance(rest[1], bool):
            unbiased = rest[1]
        correction = 1 if unbiased else 0
    numel = args[0].numel()
    out_numel = out.numel()
    if numel - correction * out_numel <= 0 if out_numel else numel == 0:
        warnings.warn(_DOF_MESSAGE.format(name), UserWarning, stacklevel=4)


def _apply(name, args, kwargs):
    from .tensor import Tensor

    if name in ("var", "std") and isinstance(args[0], Tensor):
        out = _apply_inner(name, args, kwargs)
        _check_dof(name, args, kwargs, out)
        return out
    return _apply_inner(name, args, kwargs)


_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool"}


def _check_operands(name, args, kwargs):
    """torch's errors of lerp (input, end and a dimensioned weight of one dtype; a float one)
    and addcdiv (no integer tensor1 / tensor2)."""
    from .tensor import Tensor

    if name == "lerp":
        input = args[0]
        rest = list(args[1:]) + [kwargs[k] for k in ("end", "weight") if k in kwargs]
        for what, other in zip(("end", "weight"), rest):
            if isinstance(other, Tensor) and (what == "end" or other.dim()) \
                    and other._data.dtype != input._data.dtype:
                want, got = (_C_TYPES.get(a._data.dtype.name, a._data.dtype.name)
                             for a in (input, other))
                raise RuntimeError(f"expected dtype {want} for `{what}` but got dtype {got}")
        weight = rest[1] if len(rest) > 1 else None
        if input._data.dtype.kind not in "fc" and not (
                isinstance(weight, Tensor) and not weight.dim()
                and weight._data.dtype.kind == "f"):   # a float 0-d weight promotes
            kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
            legacy = input.type().split(".")[-1].replace("Tensor", "")
            raise NotImplementedError(f'"{kernel}" not implemented for \'{legacy}\'')
    elif name == "addcdiv":
        t1, t2 = (list(args[1:3]) + [kwargs.get("tensor1"), kwargs.get("tensor2")])[:2]
        if all(isinstance(t, Tensor) and t._data.dtype.kind not in "fc" for t in (t1, t2)):
            raise RuntimeError(
                "Integer division with addcdiv is no longer supported, and in a future  "
                "release addcdiv will perform a true division of tensor1 and tensor2. The "
                "historic addcdiv behavior can be implemented as (input + value * "
                "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
                "behavior is just the latter implementation: (input + value * tensor1 / "
                "tensor2), for all dtypes.")


def _apply_inner(name, args, kwargs):
    from .tensor import Tensor

    if name in ("lerp", "addcdiv") and isinstance(args[0], Tensor):
        _check_operands(name, args, kwargs)
    if name in _INDEXED:
        return _apply_indexed(name, args, kwargs)
    if name in _NAMED:
        x = args[0]
        if isinstance(x, Tensor) and x._data.dtype.kind not in "fc":
            # integer values sort exactly in float64; cast back, the indices stay int64
            values, indices = composite(name).apply(x.to(_float64()), *args[1:], **kwargs)
            return _named(name, (values.to(x.dtype), indices))
        return _named(name, composite(name).apply(*args, **kwargs))
    if any(isinstance(a, Tensor) and a._data.dtype.kind not in "fc" for a in args):
        _check_kernel(name, args, kwargs)
        if name == "addcmul" and isinstance(kwargs.get("value"), float) and all(
                a._data.dtype.kind not in "fc" for a in args if isinstance(a, Tensor)):
            kwargs = {**kwargs, "value": int(kwargs["value"])}   # torch's integer value
        args, kwargs, out_dt = _integral_args(name, args, kwargs)
        out = composite(name, _form(name, args, kwargs)).apply(*args, **kwargs)
        if out_dt is not None:
            out = out.to(out_dt) if not isinstance(out, tuple) else \
                type(out)(o.to(out_dt) for o in out)
        return out
    return composite(name, _form(name, args, kwargs)).apply(*args, **kwargs)


def _method(name):
    tensors = table.tensor_operands().get(name, ())

    def method(self, *args, **kwargs):
        if tensors:   # x.atan2(2.0): torch's TypeError (the op table's `tensors`)
            error = table.number_operand_error(name, tensors, (self,) + args, method=True)
            if error is not None:
                raise error
        return _apply(name, (self,) + args, kwargs)

    method.__name__ = name
    method.__doc__ = (f"x.{name}(...) as in torch; its backward is generated on first use "
                      f"per signature and cached.")
    return method


def _reflected(name):
    def method(self, other):
        from . import tensor as _tm

        if isinstance(other, _tm.Tensor):
            lhs = other
        elif self._data.dtype.kind not in "fc":   # 7 // int_tensor: torch's promotion
            from . import _runtime_ops

            lhs = _tm.tensor(other, dtype=_tm._sg_dtype(_runtime_ops._result_dtype((other, self))))
        else:
            lhs = _tm.tensor(other, dtype=self.dtype)
        return _apply(name, (lhs, self), {})

    return method


def install(tensor_cls) -> None:
    """Add every composite op as a method of `tensor_cls` where it has none of that name."""
    for name in table.composite_names():   # the table's now (a test adds an entry)
        if not hasattr(tensor_cls, name):
            setattr(tensor_cls, name, _method(name))
    for alias, name in _aliases().items():
        if not hasattr(tensor_cls, alias):
            setattr(tensor_cls, alias, getattr(tensor_cls, name))
    operators = {"__mod__": _method("remainder"), "__rmod__": _reflected("remainder"),
                 "__floordiv__": _method("floor_divide"),
                 "__rfloordiv__": _reflected("floor_divide")}
    for dunder, method in operators.items():
        if dunder not in vars(tensor_cls):
            setattr(tensor_cls, dunder, method)


def _float64():
    from . import tensor as _tm

    return _tm.float64


def _apply_indexed(name, args, kwargs):
    """gather / take_along_dim / index_select: the index operand stays an integer tensor; an
    integer input is read in float64 (exact) and cast back, as torch keeps its dtype."""
    from . import tensor as _tm

    x = args[0]
    if isinstance(x, _tm.Tensor) and x._data.dtype.kind not in "fc":
        return composite(name).apply(x.to(_tm.float64), *args[1:], **kwargs).to(x.dtype)
    return composite(name).apply(*args, **kwargs)


def function(name, traced):
    """The forward-only Function of free function `name` (einsum, tensordot): its forward is
    `traced`, the function over traced values."""
    cls = _FUNCTIONS.get(name)
    if cls is None:
        def forward(ctx, *args, **kwargs):
            return traced(*args, **kwargs)

        forward.__qualname__ = f"{name}.forward"
        cls = type("".join(part.capitalize() for part in name.split("_")), (Function,),
                   {"forward": staticmethod(forward), "__module__": __name__,
                    "__doc__": f"torch.{name} as a forward-only Function (generated backward)."})
        _FUNCTIONS[name] = cls
    return cls
