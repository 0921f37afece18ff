"""Stage 1 — trace: run the user's forward on `SymbolicTensor` proxies and record a `Graph`.

Elementwise work (arithmetic, exp, where, ... with broadcasting) accumulates into one SymPy
expression per value, over one `real=True` symbol per *leaf* (an input or the result of a
structural op). A pending expression becomes an `elementwise` node when a structural op
consumes it or it is an output, so a short chain of elementwise ops is one region, and the
stabilizing rewrites see the whole formula.

The IR is a DAG, never a tree (`Tracer.bind`): a pending value that is used a second time, or
whose formula has grown past `CHAIN_MAX` operations, becomes a node of its own (a *binding*)
before it is used, and its users refer to its symbol. A value reused k levels deep (an
unrolled integrator, a recurrent cell) is therefore computed, differentiated, optimized and
printed once, not 2**k times: every stage's cost is linear in the traced program.

Python control flow on a traced value cannot be recorded: `bool(x)`, `float(x)`, `if x > 0:`
raise `TraceError` naming the user's line and suggesting `sg.where`.
"""
from __future__ import annotations

import difflib
import functools
import inspect
import math
import os
import sys
from typing import Any

import sympy

from . import _methods
from ._dtypes import dtype_kind as _dtype_kind   # the one normaliser (symgrad/_dtypes.py)
from .errors import DimensionError, ShapeError, TraceError
from .graph import Graph, Node, Param
from ._symbols import symbol_of  # moved to _symbols.py (the IR layer); also re-exported
from .ops import elementwise as ew
from .ops.structural import SHAPE_HELPERS, STRUCTURAL
from .ops import table as _table
# The shapes, the Tracer, SymbolicTensor's op methods by kind (mixins) and the traced functions
# of several values: moved there verbatim; trace.py re-exports every name
from ._trace_elementwise import _ElementwiseMethods, _binary_op, _unary, formula_function
from ._trace_functions import (  # noqa: F401
    _LETTERS, _joined, _keyword_only_shape, _traced_operands, cat, einsum, full_like, ones_like,
    stack, tensordot, zeros_like,
)
from ._trace_movement import _MovementMethods
from ._trace_reductions import _ReductionMethods
from ._trace_shapes import (  # noqa: F401
    GenericShape, TensorSpec, _EXACT_LIMIT, _FOLD_MAX, _FOLD_MIN, _folded_out_of_range,
    _is_tensor_like, _number, _out_of_range, _shallow_numbers, broadcast_shapes,
)
from ._tracer import (  # noqa: F401
    CHAIN_MAX, DISSOLVE_MAX, REUSE_MIN, Tracer, _dims, _weighted_size, dissolve_bindings,
)
# the user's line and the refusals; the forward being traced (its signature, arguments,
# provenance and captured values): moved there verbatim; trace.py re-exports every name
from ._trace_sites import (  # noqa: F401
    _BUILTINS_FILE, _PKG_DIR, _SITE, _SKIP_DIRS, _TRACING, _at, display_path, refuse_no_grad,
    refuse_random, site_of, user_site,
)
from ._trace_forward import (  # noqa: F401
    TraceCtx, _RESERVED, _call_label, _count, _defines_setup_context,
    _file_recorder, _input_name, _is_var_positional_key, _named_globals, _rebuild_call,
    _signature_text, _user_files, bind_inputs, forward_of, locate_captured, muted_recorder,
    resolve_captured, source_line, source_of,
)


def tree_size(expr, memo) -> int:
    """The number of operations in `expr` counted as a tree (each use of a shared
    sub-expression counted again), computed over its DAG: linear in the distinct
    sub-expressions, however large the tree. `memo` caches results per sub-expression."""
    return _weighted_size(expr, {}, memo)


def free_symbols(expr) -> set:
    """`expr.free_symbols`, over its DAG (SymPy's walks the tree: exponential in the depth
    of reuse)."""
    out: set = set()
    stack = [expr]
    seen = set()   # ids (the walk holds every object it meets): no SymPy hash per node
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, sympy.Symbol):
            out.add(e)
        elif isinstance(e, sympy.Basic):
            stack.extend(e.args)
    return out


# --------------------------------------------------------------------------- values
class SymbolicTensor(_MovementMethods, _ReductionMethods, _ElementwiseMethods):
    """A traced tensor. Mirrors `sg.Tensor`'s differentiable API; records instead of computing."""

    __array_priority__ = 1000

    def __init__(self, tracer, expr, shape, dtype, node=None, site=None):
        self.tracer = tracer
        self.expr = expr
        self.shape = shape
        self.dtype = dtype
        self.node = node
        self.site = site
        self.uses = 0        # times read as an operand (Tracer.bind)

    # ---- introspection
    @property
    def ndim(self):
        if isinstance(self.shape, tuple):
            return len(self.shape)
        raise TraceError(f"the rank of this value is unknown in a shape-generic trace"
                         f"{_at(user_site())}; give example inputs: sg.compile(fn, *arrays), "
                         "`--shape NAME=2,3` on the command line, or an `example_inputs` "
                         "staticmethod on the Function")

    def dim(self):
        return self.ndim

    def size(self, dim=None):
        self.ndim
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        self.ndim
        return math.prod(self.shape)

    def __len__(self):
        return self.size(0)

    def __repr__(self):
        return f"SymbolicTensor({self.expr}, shape={self.shape})"

    __hash__ = object.__hash__

    # ---- refusing data-dependent control flow
    def _refuse(self, what):
        site = user_site()
        raise TraceError(
            f"{what} of a traced value{_at(site)}: symgrad traces the forward once, so Python "
            "control flow cannot depend on tensor values. Use sg.where(cond, a, b) for "
            "elementwise choices (or sg.maximum / sg.clamp).")

    def __bool__(self):
        self._refuse("bool()")

    def __float__(self):
        self._refuse("float()")

    def __int__(self):
        self._refuse("int()")

    def __index__(self):
        self._refuse("using as an index")

    def item(self):
        self._refuse(".item()")

    def tolist(self):
        self._refuse(".tolist()")

    def numpy(self):
        self._refuse(".numpy()")

    def __array__(self, *args, **kwargs):
        self._refuse("converting to a NumPy array")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # `numpy.float32(0.5) * x` lands here (the scalar's operator tries the ufunc first):
        # a NumPy scalar is a constant like a Python number, so the operator is the traced one
        ops = _UFUNC_OPERATORS.get(ufunc.__name__)
        if ops is not None and method == "__call__" and not kwargs and len(inputs) == 2:
            a, b = inputs
            if a is self and not isinstance(b, SymbolicTensor):
                return getattr(self, ops[0])(b)
            if b is self and not isinstance(a, SymbolicTensor):
                return getattr(self, ops[1])(a)
        _foreign_call("numpy", ufunc.__name__)

    def __array_function__(self, func, types, args, kwargs):
        # numpy.sum / numpy.where / numpy.concatenate ... on a traced value
        linalg = getattr(func, "__module__", "") == "numpy.linalg"
        _foreign_call("numpy", ("linalg." if linalg else "") + func.__name__)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # torch.exp(x), torch.nn.functional.relu(x), ... on a traced value
        _foreign_call("torch", getattr(func, "__name__", str(func)))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        site = user_site()
        if name.endswith("_") and not name.endswith("__"):   # torch's in-place spelling
            hint = (f"use the out-of-place x.{name[:-1]}(...) and assign its result"
                    if name[:-1] in SUPPORTED else
                    "build a new value instead (sg.zeros_like, sg.full_like, sg.where)")
            raise TraceError(f"in-place op '{name}' on a traced value{_at(site)}: a traced "
                             f"forward cannot modify a value in place; {hint}")
        close = difflib.get_close_matches(name, SUPPORTED, n=3, cutoff=0.75)
        # a likely typo gets its correction alone; otherwise the whole list helps
        hint = (f" Did you mean {' or '.join(close)}?" if close else
                f" Supported, by group: {_grouped_ops(SUPPORTED)} "
                "(docs/working-with-symgrad.md)")
        raise TraceError(f"unsupported op '{name}' on a traced value{_at(site)}.{hint}")

    def __setitem__(self, index, value):
        raise TraceError(f"in-place assignment inside a traced forward{_at(user_site())}; "
                         "build a new value with sg.where instead")


# the op methods of the mixins (_trace_*.py) are SymbolicTensor's: name them so (Python's
# TypeErrors quote the name, and _keyword_aliases's functools.wraps copies it)
for _base in SymbolicTensor.__mro__[1:-1]:
    for _name, _value in vars(_base).items():
        _value = getattr(_value, "fget", _value)
        if inspect.isfunction(_value) and _value.__qualname__ == f"{_base.__name__}.{_name}":
            _value.__qualname__ = f"SymbolicTensor.{_name}"
del _base, _name, _value


class _MinMax(tuple):
    """(values, indices), as torch.max(x, dim) returns."""

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    values = property(lambda self: self[0])
    indices = property(lambda self: self[1])


def _install_table_methods():
    """SymbolicTensor's methods made from the op table (symgrad/ops/table.py): the elementwise
    ops whose formula is one function (exp, sin, asin and arcsin, floor, ...; atan2 and arctan2,
    hypot, fmod, ...), each spelling one method. Run at import (and by a test that adds an
    entry)."""
    for op in _table.ELEMENTWISE:
        if op.formula is not None:
            method = _unary(formula_function(op.formula), op.name)
            for name in (op.name, *op.aliases):
                setattr(SymbolicTensor, name, method)
    for op in _table.BINARY:
        if op.formula is not None:
            method = _binary_op(op.formula, op.name)
            for name in (op.name, *op.aliases):
                setattr(SymbolicTensor, name, method)


_install_table_methods()

SymbolicTensor.multiply = SymbolicTensor.mul
SymbolicTensor.divide = SymbolicTensor.true_divide = SymbolicTensor.div


def _class_vars():
    """vars(SymbolicTensor) with its op-method mixins' (_trace_*.py): the class's own win."""
    out = {}
    for klass in reversed(SymbolicTensor.__mro__[:-1]):
        out.update(vars(klass))
    return out


def _keyword_aliases(fn):
    """torch's NumPy-style keyword aliases, accepted wherever torch accepts them:
    `axis=` for `dim=` and `keepdims=` for `keepdim=` (`x.sum(axis=1, keepdims=True)`)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        for alias, name in (("axis", "dim"), ("keepdims", "keepdim")):
            if alias in kwargs:
                if name in kwargs:
                    raise TypeError(f"{fn.__name__}() got both '{name}' and its alias "
                                    f"'{alias}'")
                kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)
    return call


for _name, _fn in list(_class_vars().items()):
    if inspect.isfunction(_fn) and {"dim", "keepdim"} & set(inspect.signature(_fn).parameters):
        setattr(SymbolicTensor, _name, _keyword_aliases(_fn))
del _name, _fn

# the public API layer's methods: addmm, nansum, copysign, ... (symgrad._functions), A.inverse(),
# A.det(), ... (symgrad.linalg); those modules registered their installers in _methods
_methods.install_all(SymbolicTensor)


def _grouped_ops(names):
    from ._op_groups import grouped_text

    return grouped_text(names)


SUPPORTED = sorted(
    name for name in _class_vars()
    if not name.startswith("_") and name not in ("arith", "operand", "truth", "tracer", "expr",
                                                 "shape", "dtype",
                                                 "node", "site", "item", "tolist", "numpy"))


# NumPy ufuncs that are Python operators: (method when the traced value is the left operand,
# method when it is the right one)
_UFUNC_OPERATORS = {
    "add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"), "true_divide": ("__truediv__", "__rtruediv__"),
    "divide": ("__truediv__", "__rtruediv__"), "power": ("__pow__", "__rpow__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__"), "remainder": ("__mod__", "__rmod__"),
    "matmul": ("__matmul__", "__rmatmul__"),
    "greater": ("__gt__", "__lt__"), "greater_equal": ("__ge__", "__le__"),
    "less": ("__lt__", "__gt__"), "less_equal": ("__le__", "__ge__"),
    "equal": ("__eq__", "__eq__"), "not_equal": ("__ne__", "__ne__"),
}

# the sg name of a numpy / torch function, where it differs
_SG_EQUIVALENT = {"concatenate": "cat", "concat": "cat", "dot": "matmul", "clip": "clamp",
                  "power": "pow", "multiply": "mul", "subtract": "sub", "divide": "div",
                  "true_divide": "div", "negative": "neg", "absolute": "abs", "fabs": "abs",
                  "arctan2": "atan2", "logaddexp": "logsumexp", "swapaxes": "transpose"}


def _linalg_names():
    linalg = _methods.NAMESPACES["linalg"]

    return {n for n in dir(linalg) if not n.startswith("_")} - {"math", "collections"}


def _foreign_call(library, name):
    """TraceError for numpy.NAME / torch.NAME called on a traced value, naming the user's line
    and the sg spelling."""
    skip = []
    for mod_name in ("numpy", "torch"):
        mod = sys.modules.get(mod_name)
        if mod is not None and getattr(mod, "__file__", None):
            skip.append(os.path.dirname(os.path.abspath(mod.__file__)) + os.sep)
    site = user_site(tuple(skip))
    if name.startswith(("linalg.", "linalg_")):   # numpy.linalg.solve, torch.linalg.solve
        short = name[len("linalg."):]
        raise TraceError(f"{library}.linalg.{short} was called on a traced value{_at(site)}: a "
                         f"traced forward must use symgrad ops, not {library}'s; "
                         + (f"use sg.linalg.{short}(...)" if short in _linalg_names() else
                            "symgrad.linalg has no such function (docs/linear-algebra.md)"))
    sg_name = _SG_EQUIVALENT.get(name, name)
    in_sg = hasattr(sys.modules.get("symgrad"), sg_name)
    if in_sg and sg_name in SUPPORTED and sg_name != "where":
        hint = f"use sg.{sg_name}(...) or the method x.{sg_name}(...)"
    elif in_sg or sg_name in SUPPORTED:
        hint = f"use sg.{sg_name}(...)" if in_sg else f"use the method x.{sg_name}(...)"
    else:
        hint = "symgrad has no such op: write it with sg ops"
    raise TraceError(f"{library}.{name} was called on a traced value{_at(site)}: a traced "
                     f"forward must use symgrad ops, not {library}'s; {hint}")


def _advanced_getitem(x, index, site):
    """x[index] with integer arrays / lists / boolean masks among the index's parts.

    Constant parts (NumPy arrays, lists, Tensors that need no gradient) are resolved now, with
    NumPy's own indexing of an array of element numbers (broadcasting, negative indices,
    masks, slices mixed in): the result is a gather of those elements, `x.reshape(-1)
    .index_select(0, flat).reshape(shape)`, and `flat` is a constant input of the module.
    A traced integer index along one dim (the others full slices) is an `index_select`. A
    boolean mask that is a traced value has a value-dependent result shape: refused."""
    import numpy

    traced = [p for p in index if isinstance(p, SymbolicTensor)]
    if traced:
        if any(p.dtype == "bool" for p in traced):
            raise TraceError(
                f"indexing with a boolean mask that is a traced value{_at(site)}: the result's "
                "shape would depend on the values, which a traced forward cannot have; use "
                "sg.where(mask, x, 0) (and mask.sum() for the count) instead")
        full = slice(None)
        rest = [p for p in index if p is not traced[0]]
        if len(traced) > 1 or any(p is not Ellipsis and not (isinstance(p, slice) and p == full)
                                  for p in rest) \
                or x._rank() is None or traced[0]._rank() is None:
            raise TraceError(f"advanced indexing with a traced index{_at(site)} is supported "
                             "as x[idx] / x[:, idx] / x[..., idx] (one integer index tensor, "
                             "full slices elsewhere); use index_select or gather")
        pos = next(i for i, p in enumerate(index) if p is traced[0])
        e = next((i for i, p in enumerate(index) if p is Ellipsis), None)
        if e is not None:
            dim = pos if pos < e else x.ndim - (len(index) - pos)
        else:
            dim = pos
        idx = traced[0]
        shape = tuple(x.shape)
        out = x.index_select(dim, idx.reshape(-1))
        return out.reshape(shape[:dim] + tuple(idx.shape) + shape[dim + 1:])
    if x._rank() is None or x.tracer.captured is None:
        raise TraceError(f"advanced indexing (integer arrays, lists, masks){_at(site)} needs "
                         "the input's shape: give example inputs")
    shape = tuple(int(n) for n in x.shape)
    parts = []
    for p in index:
        if _is_tensor_like(p) or isinstance(p, list):
            p = numpy.asarray(getattr(p, "_data", p))
            if p.dtype.kind not in "iub" and p.size:
                raise IndexError(f"tensors used as indices must be long, int, byte or bool "
                                 f"tensors, got {p.dtype}{_at(site)}")
        parts.append(p)
    _check_masks(shape, parts, site)
    numbers_ = numpy.arange(int(numpy.prod(shape, dtype=numpy.int64)),
                            dtype=numpy.int64).reshape(shape)
    try:
        flat = numbers_[tuple(parts)]
    except IndexError as exc:
        raise IndexError(f"{exc}{_at(site)}") from None
    picked = x.reshape(-1).index_select(0, x.tracer.capture(flat.reshape(-1), site))
    return picked.reshape(tuple(int(n) for n in flat.shape))


def _check_masks(shape, parts, site):
    """torch's IndexError for a boolean mask whose shape is not the indexed dims' (NumPy's
    message names axes and sizes in its own words)."""
    import numpy

    if any(p is Ellipsis or p is None for p in parts):
        return
    dim = 0
    for p in parts:
        if isinstance(p, numpy.ndarray) and p.dtype == numpy.bool_:
            for j, k in enumerate(p.shape):
                if dim + j < len(shape) and k != shape[dim + j]:
                    raise IndexError(
                        f"The shape of the mask {list(p.shape)} at index {j} does not match "
                        f"the shape of the indexed tensor {list(shape)} at index {dim + j}"
                        f"{_at(site)}")
            dim += p.ndim
        elif not isinstance(p, bool):
            dim += 1


@functools.cache
def _relation(cls):
    """cls(a, b) in a form SymPy's Piecewise keeps (see symgrad.ops.elementwise.relation)."""
    return functools.partial(ew.relation, cls)


def _pow(a, b):
    if b == sympy.S.Half:
        return sympy.sqrt(a)
    if a.is_Number and a.is_zero and not b.is_Number:
        # 0 ** y, a constant zero base: 1 at y = 0, 0 above, inf below, as torch; piecewise
        # constant, so its derivative in y is 0 (torch: -inf below 0, inf * log(0)). SymPy's
        # 0**y differentiates to 0**y * log(0), complex infinity, which no printer can write.
        return sympy.Piecewise((sympy.S.One, sympy.Eq(b, 0)), (sympy.S.Zero, b > 0),
                               (sympy.oo, True))
    return sympy.Pow(a, b)


# --------------------------------------------------------------------------- trace()
def trace(fn, *example_inputs, **kwargs) -> Graph:
    """Trace a forward into a `Graph`.

    Args:
        fn: a `Function` subclass (its `forward(ctx, ...)` is traced) or a plain function.
        *example_inputs: arrays / Tensors / `TensorSpec`s for tensor arguments (their shapes
            and dtypes specialise the trace), Python values for constants. With no tensor
            examples, every argument without a default is a tensor of unknown shape and the
            trace is shape-generic.

    Returns:
        The traced `Graph`.
    """
    if isinstance(fn, SymbolicTensor) or type(fn).__name__ == "Tensor" and hasattr(fn, "_data"):
        return fn.trace()   # torch.trace(x): the sum of the diagonal
    forward, takes_ctx, name = forward_of(fn)
    tensors, constants, params = bind_inputs(fn, example_inputs, kwargs)
    if not tensors:
        star = next((p.name for p in params or () if p.kind == p.VAR_POSITIONAL), None)
        how = (f" (for *{star}: `--shape {star}0=3 --shape {star}1=3`, one per input)"
               if star else "")
        raise TraceError(f"{_call_label(fn, name)} has no tensor inputs to trace (it takes "
                         f"{_signature_text(params or [])}){_at(source_line(forward))}; give "
                         f"example inputs: sg.compile(fn, *arrays), `--shape NAME=2,3` on the "
                         f"command line{how}, or an `example_inputs` staticmethod on the "
                         "Function")
    generic = all(getattr(v, "shape", None) is None for _, v in tensors)
    tracer = Tracer(generic=generic)
    tracer.captured = []
    values = {}
    inputs = []
    for arg_name, example in tensors:
        shape = None if generic else tuple(int(n) for n in example.shape)
        kind = _dtype_kind(example.dtype)
        value = tracer.input(_input_name(arg_name), shape, kind)
        tracer.note_precision(value.node, example)
        values[arg_name] = value
        inputs.append(value.node)
    call_args, call_kwargs = _rebuild_call(params, values, dict(constants), example_inputs)
    ctx = TraceCtx(len(inputs))
    files = set()
    recording = sys.getprofile() is None   # a profiler of the user's own keeps its hook
    if recording:
        sys.setprofile(_file_recorder(files))
    tracing = _TRACING.set(tracer)
    try:
        result = (forward(ctx, *call_args, **call_kwargs) if takes_ctx
                  else forward(*call_args, **call_kwargs))
    except (TraceError, ShapeError):
        raise
    except RecursionError:
        raise TraceError(f"{_call_label(fn, name)} recursed too deeply while being traced"
                         f"{_at(source_line(forward))}") from None
    finally:
        _TRACING.reset(tracing)
        if recording:
            sys.setprofile(None)
    deps = _user_files(files, forward) if recording else None
    label = _call_label(fn, name)
    if result is None:
        raise TraceError(f"{label} returned None{_at(source_line(forward))}: a forward must "
                         "return its output (or a tuple of outputs); is a `return` missing?")
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    if not outputs:
        raise TraceError(f"{label} returned an empty {type(result).__name__}: a forward must "
                         "return at least one output")
    out_nodes = []
    for i, out in enumerate(outputs):
        if not isinstance(out, SymbolicTensor):
            what = "its output" if len(outputs) == 1 and outputs is not result else f"output {i}"
            if out is None or not isinstance(out, (bool, int, float)) and not _is_tensor_like(out):
                raise TraceError(f"{label}: {what} is a {type(out).__name__}, not a tensor"
                                 f"{_at(source_line(forward))}; a forward returns tensors "
                                 "(one, or a tuple)")
            tracer.lift(out, f"{what} of {label}")   # an array that is no input: its error
            # a number (or a 0-d constant): not a traced value, with or without example shapes
            raise TraceError(f"{label} returned a constant ({what} is {out!r}, not a traced "
                             f"value){_at(source_line(forward))}; outputs must depend on the "
                             "inputs")
        node = tracer.materialize(out)
        if node.op == "input" or node in out_nodes:
            # an output that is an input (or repeats another output) gets a node of its own
            node = tracer.materialize(SymbolicTensor(tracer, out.expr, out.shape, out.dtype,
                                                     site=out.site), copy=True)
        out_nodes.append(node)
    names = ("out",) if len(out_nodes) == 1 else tuple(f"out{i}" for i in range(len(out_nodes)))
    captured = tuple((locate_captured(forward, array), array) for array, _ in tracer.captured)
    inputs += [value.node for _, value in tracer.captured]
    return dissolve_bindings(Graph(name=name, inputs=tuple(inputs), outputs=tuple(out_nodes),
                 output_names=names, captured=captured,
                 constant_inputs=tuple(value.node.name for _, value in tracer.captured),
                 constants=tuple((k, v) for k, v in constants), source=source_of(fn),
                 arg_names=tuple(arg_name for arg_name, _ in tensors),
                 generic=generic, returns_tuple=isinstance(result, (tuple, list)), deps=deps,
                 mask_orders=getattr(fn, "_mask_orders", 0),
                 named_globals=_named_globals(forward),
                 output_dtypes=tracer.output_dtypes(out_nodes) or (),
                 input_dtypes=tuple(tracer.dtype_names.get(id(n)) for n in inputs)),
                             tracer.bindings)


class _CallableModule(type(sys)):
    """`import symgrad.trace` binds this module to the name `symgrad.trace`, shadowing the
    function `sg.trace`; calling the module calls `trace()`, so both spellings keep working."""

    def __call__(self, fn, *example_inputs, **kwargs):
        return trace(fn, *example_inputs, **kwargs)


sys.modules[__name__].__class__ = _CallableModule


# The modules moved out of trace.py (the Tracer, the shapes, SymbolicTensor's op methods, the
# traced functions) are imported before trace.py defines the names they call (SymbolicTensor,
# user_site, ...): bind those names there now (each module lists them in _FROM_TRACE).
def _bind_moved_names():
    here = globals()
    for module in ("symgrad._trace_elementwise", "symgrad._trace_functions",
                   "symgrad._trace_reductions", "symgrad._trace_movement",
                   "symgrad._trace_shapes", "symgrad._tracer", "symgrad._linalg_trace"):
        module = sys.modules[module]
        for name in module._FROM_TRACE:
            setattr(module, name, here[name])


_bind_moved_names()
