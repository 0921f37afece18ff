"""SymbolicTensor's elementwise methods: the machinery (operand, arith, _apply, broadcasting),
arithmetic and comparison operators, and the elementwise ops (exp, where, clamp, softplus, ...)
that build one SymPy expression per value. A mixin of `trace.SymbolicTensor`, moved verbatim
from trace.py (with `_unary` and `_binary_op`, which write the methods trace.py makes from the
op table's one-function formulas: `formula_function` reads a formula's dotted name).
"""
from __future__ import annotations

import importlib
import math
import numbers
import sys

import sympy

from . import _fastsym
from ._dtypes import dtype_name as _dtype_name   # the one normaliser (symgrad/_dtypes.py)
from ._symbols import symbol_of
from ._trace_forward import muted_recorder
from .errors import DtypeError, TraceError
from .ops import elementwise as ew


# Names of trace.py used below. trace.py imports this module before it defines them, so it
# binds them here once it has (trace._bind_moved_names).
_FROM_TRACE = ("SymbolicTensor", "_at", "_folded_out_of_range", "_out_of_range", "_pow",
    "_relation", "_shallow_numbers", "broadcast_shapes", "tree_size", "user_site",)
(SymbolicTensor, _at, _folded_out_of_range, _out_of_range, _pow, _relation, _shallow_numbers,
    broadcast_shapes, tree_size, user_site,) = (None,) * len(_FROM_TRACE)


# Past this many elementwise ops (the benchmark functions have 5-250), a trace's ops build
# their SymPy formulas once per shape of their operands (`_by_shape`), as an unrolled program
# repeats a few; so does a large program's derivative (Tracer.large) from its first op. A
# small program's ops are untouched. (With 0 here, the goldens, the examples and
# `python -m symgrad._builtins` regenerate byte-identically too, and the numerics corpus passes.)
SHAPE_MEMO_MIN = 256


def _fn_key(fn):
    """What identifies the formula `fn` builds: its code (a lambda with no closure or
    defaults: the same arithmetic on every call) or the SymPy function class; None (not
    memoized) for anything else."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn if isinstance(fn, type) else None
    if fn.__closure__ or fn.__defaults__ or fn.__kwdefaults__:
        return None
    return code


def _by_shape(tracer, name, fn, operands):
    """fn(*operands): past SHAPE_MEMO_MIN ops of a trace (or in a large program's derivative:
    Tracer.large), built once per shape of the operands (`_fastsym.canonical`) and renamed
    back, so the SymPy constructors that fold operands (a coefficient distributed over a sum,
    sin's evaluation) run once per shape of an unrolled program's step, not once per step.
    Exact: the formula over placeholders with the operands' assumptions, renamed.
    Returns (formula, finite, quiet): finite True when the formula is known to hold no zoo or
    nan (checked once per shape), else None (not checked); quiet True when it is known to
    hold no constant `_folded_out_of_range` could flag (the shape's numbers, checked once per
    shape, are the formula's: renamed node for node), else False (not known)."""
    tracer.elementwise_ops += 1
    key = _fn_key(fn) if tracer.large or tracer.elementwise_ops > SHAPE_MEMO_MIN else None
    if key is None:
        return fn(*operands), None, False
    shape, order, entry = _fastsym.canonical_args_entry(operands)
    memo = tracer.shape_memo
    hit = memo.get((name, key, shape))
    if hit is None:
        expr = fn(*shape.args)
        basic = isinstance(expr, sympy.Basic)
        hit = memo[(name, key, shape)] = (
            expr, basic and not expr.has(sympy.zoo, sympy.nan),
            tree_size(expr, {}) if basic else None,
            basic and not any(_out_of_range(n) for n in _shallow_numbers(expr)))
    expr, finite, size, quiet = hit
    if not order or size is None:
        return expr, finite, quiet
    out, alike = _fastsym.rename_back_planned(expr, shape, order, entry, operands)
    # its tree size is the shape's (a renaming of symbols): Tracer.bind need not walk it
    tracer.sizes[out] = size
    return out, finite, quiet and alike


def _unary(sympy_fn, name):
    def method(self):
        return self._apply(name, sympy_fn)
    method.__name__ = name
    return method


def _is_dtype_like(a):
    """A dtype argument of Tensor.to (symgrad's, torch's, NumPy's, or a NumPy type), not a
    device (a string or a device object)."""
    if isinstance(a, str):
        return False
    if isinstance(a, type):
        return issubclass(a, (numbers.Number, bool)) or a.__module__ == "numpy"
    text = f"{type(a).__module__}.{type(a).__name__}"
    return text in ("symgrad.tensor.dtype", "torch.dtype") or text.startswith("numpy.dtype")


# the modules an op table formula names (symgrad/ops/table.py): "module.function"
FORMULA_MODULES = {"sympy": "sympy", "ew": "symgrad.ops.elementwise",
                   "stable": "symgrad.ops.stable", "specfun": "symgrad.ops.specfun"}


def formula_function(formula):
    """The function an op table formula names. Imported when first called: the stable and
    special functions' modules are not imported with the tracer (start-up time)."""
    module, function = formula.split(".")
    return getattr(importlib.import_module(FORMULA_MODULES[module]), function)


def _binary_op(formula, name):
    """The traced value's method of the op table's two-operand op `name` (x.atan2(y))."""
    def method(self, other):
        _no_numbers(name, self, other)
        return self._binary(other, formula_function(formula), name)
    method.__name__ = name
    method.__qualname__ = f"SymbolicTensor.{name}"
    return method


# ops whose result torch keeps integral for integer (and bool) operands; of two bools, a bool
_KEEPS_INTEGERS = frozenset({"add", "sub", "mul", "pow", "maximum", "minimum", "fmax", "fmin",
                             "fmod", "remainder", "floor_divide"})
_BOOL_LOGIC = {"add": sympy.Or, "mul": sympy.And, "maximum": sympy.Or, "minimum": sympy.And,
               "fmax": sympy.Or, "fmin": sympy.And}


def _no_numbers(name, *operands):
    """torch's TypeError where op `name` takes only Tensors at a place a Python number is
    (x.atan2(2.0); the op table's `tensors`), naming the user's line."""
    from .ops import table

    tensors = table.tensor_operands().get(name)
    error = tensors and table.number_operand_error(name, tensors, operands, method=True)
    if error:
        raise TypeError(f"{error}{_at(user_site())}")


def _nan_to_num_check(nan, posinf, neginf):
    """torch.nan_to_num's TypeError for a replacement that is no number."""
    for name, value in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if value is not None and not isinstance(value, numbers.Real):
            raise TypeError(f"nan_to_num(): argument '{name}' must be float, not "
                            f"{type(value).__name__}")


class _ElementwiseMethods:
    """SymbolicTensor's elementwise methods (see the module docstring)."""

    # ---- elementwise machinery
    def operand(self):
        """This value's expression, read as an operand of a new value: counts as a use, so a
        reused or long formula becomes a binding first (`Tracer.bind`)."""
        return self.tracer.bind(self).expr

    def arith(self):
        """This value's expression as a number (bools become 1.0 / 0.0)."""
        self.tracer.bind(self)
        if self.dtype == "bool":
            return sympy.Piecewise((sympy.S.One, self.expr), (sympy.S.Zero, True))
        return self.expr

    def _isnan(self):
        """The bool tensor "this value is NaN" (x != x would fold to False)."""
        return SymbolicTensor(self.tracer, ew.isnan(self.arith()), self.shape, "bool",
                              site=self.site)

    def isnan(self):
        return self._isnan()

    def isfinite(self):
        return SymbolicTensor(self.tracer, ew.isfinite(self.arith()), self.shape, "bool",
                              site=user_site())

    def isinf(self):
        return SymbolicTensor(self.tracer, ew.isinf(self.arith()), self.shape, "bool",
                              site=user_site())

    def isposinf(self):
        return SymbolicTensor(self.tracer, ew.isposinf(self.arith()), self.shape, "bool",
                              site=user_site())

    def isneginf(self):
        return SymbolicTensor(self.tracer, ew.isneginf(self.arith()), self.shape, "bool",
                              site=user_site())

    def truth(self):
        """This value's expression as a condition (numbers: nonzero)."""
        self.tracer.bind(self)
        return self.expr if self.dtype == "bool" else sympy.Ne(self.expr, 0)

    def _binary(self, other, fn, name, reverse=False, dtype="float"):
        site = user_site()
        # a Python int keeps an int tensor's dtype (index arithmetic: i - 1, 2 * i)
        int_const = isinstance(other, numbers.Integral) and not isinstance(other, bool)
        other = self.tracer.lift(other, site)   # (may read a user's object: recorded)
        hook = muted_recorder()   # the rest runs symgrad's and SymPy's code only
        try:
            return self._binary_lifted(other, fn, name, reverse, dtype, site, int_const)
        finally:
            if hook is not None:
                sys.setprofile(hook)

    def _binary_lifted(self, other, fn, name, reverse, dtype, site, int_const):
        a, b = (other, self) if reverse else (self, other)
        shape = broadcast_shapes(a.shape, b.shape, name, site)
        if dtype == "float" and name in _KEEPS_INTEGERS:
            # torch keeps integers integral: int + int, bool * int, maximum of ints are
            # integers; bool + bool (or), bool * bool (and), maximum / minimum of bools are
            # bools; bool - anything is refused
            kinds = {self.dtype, "int" if int_const else other.dtype}
            if name == "sub" and kinds == {"bool"}:
                raise DtypeError(   # a RuntimeError, as torch's
                    f"sub{_at(site)}: Subtraction, the `-` operator, with two bool tensors is "
                    "not supported. Use the `^` or `logical_xor()` operator instead.")
            if name == "sub" and "bool" in kinds:
                raise DtypeError(
                    f"sub{_at(site)}: Subtraction, the `-` operator, with a bool tensor is "
                    "not supported. If you are trying to invert a mask, use the `~` or "
                    "`logical_not()` operator instead.")
            if kinds == {"bool"} and name in _BOOL_LOGIC:
                expr = _BOOL_LOGIC[name](a.truth(), b.truth())
                return SymbolicTensor(self.tracer, expr, shape, "bool", site=site)
            if "float" not in kinds and kinds != {"bool"}:
                dtype = "int"
        finite = None   # True: the formula is known to hold no zoo / nan (_by_shape)
        try:
            if fn in (sympy.And, sympy.Or):
                expr = fn(a.truth(), b.truth())
            elif dtype == "bool":
                expr = fn(a.operand() if a.dtype != "bool" else a.arith(),
                          b.operand() if b.dtype != "bool" else b.arith())
            else:
                expr, finite, quiet = _by_shape(self.tracer, name, fn, (a.arith(), b.arith()))
                if not quiet and _folded_out_of_range(expr, (a.expr, b.expr)):
                    a, b = a._unfold(), b._unfold()
                    expr, finite = fn(a.arith(), b.arith()), None
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise TraceError(f"{name}{_at(site)}: {exc}") from None
        if not finite and expr.has(sympy.zoo, sympy.nan):
            if "bool" in (a.dtype, b.dtype):   # its 0/1 formula: 1/0 is folded symbolically
                raise TraceError(
                    f"{name}{_at(site)}: a bool tensor as a divisor inside a traced forward is "
                    "not supported (torch gives inf where it is False); pass it to the forward "
                    "as a float tensor")
            raise TraceError(f"{name}{_at(site)}: the expression divides by the constant zero")
        if name == "pow" and a.dtype == "bool" and b.dtype == "float" \
                and getattr(a.expr, "free_symbols", None):   # (True ** x is 1 ** x)
            # 0 ** y's derivative log(0) would be folded to a constant the modules cannot print
            raise TraceError(
                f"pow{_at(site)}: a bool tensor as the base of a float power inside a traced "
                "forward is not supported; pass it to the forward as a float tensor")
        return SymbolicTensor(self.tracer, expr, shape, dtype, site=site)

    def _apply(self, name, fn, *extra):
        site = user_site()
        hook = muted_recorder()   # symgrad's and SymPy's code only (see _binary)
        try:
            return self._apply_muted(name, fn, extra, site)
        finally:
            if hook is not None:
                sys.setprofile(hook)

    def _apply_muted(self, name, fn, extra, site):
        try:
            if extra:
                expr, quiet = fn(self.arith(), *extra), False
            else:
                expr, _, quiet = _by_shape(self.tracer, name, fn, (self.arith(),))
            if not quiet and _folded_out_of_range(expr, (self.expr,) + extra):
                expr = fn(self._unfold().arith(), *extra)
        except (TypeError, ValueError) as exc:
            raise TraceError(f"{name}{_at(site)}: {exc}") from None
        return SymbolicTensor(self.tracer, expr, self.shape, "float", site=site)

    def _unfold(self):
        """This value as its own node (a pending expression is materialized), so that an op
        on it cannot fold its constants with the op's (see _folded_out_of_range)."""
        if self.expr.is_Number or (self.node is not None and self.expr == symbol_of(self.node)):
            return self
        node = self.tracer.materialize(self)
        return self.tracer._leaf_value(node, self.shape)

    # arithmetic
    def __add__(self, o): return self._binary(o, lambda a, b: a + b, "add")
    def __radd__(self, o): return self._binary(o, lambda a, b: a + b, "add", True)
    def __sub__(self, o): return self._binary(o, lambda a, b: a - b, "sub")
    def __rsub__(self, o): return self._binary(o, lambda a, b: a - b, "sub", True)
    def __mul__(self, o): return self._binary(o, lambda a, b: a * b, "mul")
    def __rmul__(self, o): return self._binary(o, lambda a, b: a * b, "mul", True)
    def __truediv__(self, o): return self._divide(o)
    def __rtruediv__(self, o): return self._binary(o, lambda a, b: a / b, "div", True)
    def __pow__(self, o): return self._binary(o, _pow, "pow")
    def __rpow__(self, o): return self._binary(o, _pow, "pow", True)
    def __neg__(self): return self._apply("neg", lambda a: -a)
    def __pos__(self): return self
    def __matmul__(self, o): return self.matmul(o)
    def __rmatmul__(self, o): return self.tracer.lift(o, user_site()).matmul(self)

    # comparisons (bool results, not differentiable)
    def __gt__(self, o): return self._binary(o, _relation(sympy.StrictGreaterThan), "gt", dtype="bool")
    def __ge__(self, o): return self._binary(o, _relation(sympy.GreaterThan), "ge", dtype="bool")
    def __lt__(self, o): return self._binary(o, _relation(sympy.StrictLessThan), "lt", dtype="bool")
    def __le__(self, o): return self._binary(o, _relation(sympy.LessThan), "le", dtype="bool")
    def __eq__(self, o): return self._binary(o, _relation(sympy.Eq), "eq", dtype="bool")
    def __ne__(self, o): return self._binary(o, _relation(sympy.Ne), "ne", dtype="bool")
    def __and__(self, o): return self._binary(o, sympy.And, "logical_and", dtype="bool")
    def __or__(self, o): return self._binary(o, sympy.Or, "logical_or", dtype="bool")
    def __invert__(self):
        return SymbolicTensor(self.tracer, ew.negation(self.truth()), self.shape, "bool",
                              site=user_site())

    logical_not = __invert__

    def logical_and(self, other):
        return self & other

    def logical_or(self, other):
        return self | other

    def __xor__(self, o):
        # (a & ~b) | (~a & b): And / Or / Not print on every target (Xor does not)
        return (self & ~self.tracer.lift(o)) | (~self & o)

    def __rxor__(self, o):
        return self.tracer.lift(o) ^ self

    logical_xor = __xor__

    gt, ge, lt, le, eq, ne = __gt__, __ge__, __lt__, __le__, __eq__, __ne__
    def mul(self, other):
        return self * other

    def pow(self, exponent):
        return self ** exponent

    def div(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return self / other
        if rounding_mode == "floor":
            return self // other
        if rounding_mode == "trunc":
            return (self / other).trunc()
        raise TraceError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}{_at(user_site())}")

    def add(self, other, *, alpha=1):
        return self + (other if alpha == 1 else alpha * other)

    def sub(self, other, *, alpha=1):
        return self - (other if alpha == 1 else alpha * other)
    true_divide = divide = multiply = None  # filled below
    neg = negative = __neg__

    # unary math: the methods that are one SymPy (or symgrad.ops.elementwise) function are
    # made from the op table (symgrad/ops/table.py) after the class; these are the others
    rsqrt = _unary(lambda a: 1 / sympy.sqrt(a), "rsqrt")
    abs = _unary(sympy.Abs, "abs")
    __abs__ = abs
    square = _unary(lambda a: a * a, "square")
    reciprocal = _unary(lambda a: 1 / a, "reciprocal")
    log2 = _unary(lambda a: sympy.log(a) / sympy.log(2), "log2")
    log10 = _unary(lambda a: sympy.log(a) / sympy.log(10), "log10")
    exp2 = _unary(lambda a: sympy.Integer(2) ** a, "exp2")

    def round(self, decimals=0):
        if not decimals:
            return self._apply("round", ew.rint)
        scale = sympy.Integer(10) ** int(decimals)
        return self._apply("round", lambda a: ew.rint(a * scale) / scale)

    def frac(self):
        return self - self.trunc()

    def erfc(self): return self._stable("erfc")

    def logit(self, eps=None):
        x = self if eps is None else self.clamp(eps, 1 - eps)
        return x.log() - (-x).log1p()

    def sinc(self):
        # torch.sinc: sin(pi x)/(pi x), 1 at 0; the removable-singularity op near 0
        from .ops import stable

        return (self * math.pi)._apply("sinc", stable.sinc)

    def deg2rad(self):
        return self * (math.pi / 180)

    def rad2deg(self):
        return self * (180 / math.pi)

    def sgn(self):
        return self.sign()

    def absolute(self):
        return self.abs()

    def addcmul(self, tensor1, tensor2, value=1):
        _no_numbers("addcmul", self, tensor1, tensor2)
        return self + value * (tensor1 * tensor2)

    def addcdiv(self, tensor1, tensor2, value=1):
        _no_numbers("addcdiv", self, tensor1, tensor2)
        return self + value * (tensor1 / tensor2)

    def logaddexp2(self, other):
        _no_numbers("logaddexp2", self, other)
        ln2 = math.log(2)
        return (self * ln2).logaddexp(other * ln2) / ln2

    def ldexp(self, other):
        # torch.ldexp: input * 2 ** other (an integer exponent is exact)
        _no_numbers("ldexp", self, other)
        other = self.tracer.lift(other, user_site())
        if other.dtype != "float":   # 2 ** e of an integer array e < 0 is NumPy's error
            other = SymbolicTensor(self.tracer, sympy.Float(1.0) * other.arith(), other.shape,
                                   "float", site=other.site)
        return self * other.exp2()

    def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
        # torch.nan_to_num: NaN, +inf, -inf replaced (by default 0 and the float dtype's
        # largest and lowest finite values); the gradient is 0 where they are, as torch's
        _nan_to_num_check(nan, posinf, neginf)
        if self.dtype != "float":
            return self
        tr = self.tracer
        # the defaults: nextafter(+-inf, 0), the finite extremes of the dtype the module runs
        # in (no finfo constant: a dtype-generic module gives float64's for float64 inputs)
        bound = SymbolicTensor(tr, ew.toward_zero(self.arith()), self.shape, "float",
                               site=user_site())
        big = bound if posinf is None else float(posinf)
        low = bound if neginf is None else float(neginf)
        return tr.where(self._isnan(), float(nan if nan is not None else 0.0),
                        tr.where(self.isposinf(), big, tr.where(self.isneginf(), low, self)))

    def __mod__(self, o): return self._binary(o, ew.remainder, "remainder")
    def __rmod__(self, o): return self._binary(o, ew.remainder, "remainder", True)
    def __floordiv__(self, o): return self._binary(o, lambda a, b: sympy.floor(a / b), "floor_divide")
    def __rfloordiv__(self, o):
        return self._binary(o, lambda a, b: sympy.floor(a / b), "floor_divide", True)

    def lerp(self, end, weight):
        _no_numbers("lerp", self, end)
        return self + weight * (end - self)

    def clamp_min(self, min):
        return self.clamp(min=min)

    def clamp_max(self, max):
        return self.clamp(max=max)

    def _stable(self, name, *extra):
        from .ops import stable

        fn = getattr(stable, name, None) or getattr(sympy, name)
        return self._apply(name, fn, *extra)

    def log1p(self): return self._stable("log1p")
    def expm1(self): return self._stable("expm1")
    def sigmoid(self): return self._stable("sigmoid")
    def erf(self): return self._stable("erf")

    # special functions (symgrad.ops.specfun): torch.lgamma, digamma, polygamma, erfinv, i0,
    # mvlgamma; torch.special's i0e, i1, i1e
    def _special(self, name, *extra):
        from .ops import specfun

        return self._apply(name, specfun.SPECIAL_OPS[name], *extra)

    def lgamma(self): return self._special("lgamma")
    def digamma(self): return self._special("digamma")
    def erfinv(self): return self._special("erfinv")
    def i0(self): return self._special("i0")
    def i0e(self): return self._special("i0e")
    def i1(self): return self._special("i1")
    def i1e(self): return self._special("i1e")

    def polygamma(self, n):
        from .ops import specfun

        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise TraceError(f"polygamma: n must be a non-negative int, got {n!r}"
                             f"{_at(user_site())}")
        if n == 0:
            return self.digamma()
        return self._apply("polygamma", lambda a: specfun.polygamma(sympy.Integer(int(n)), a))

    def mvlgamma(self, p):
        # torch.mvlgamma: log of the multivariate gamma function of dimension p,
        # p(p-1)/4 log(pi) + sum_j lgamma(x - j/2) (torch also checks x > (p-1)/2)
        if isinstance(p, bool) or not isinstance(p, numbers.Integral) or p < 1:
            raise TraceError(f"mvlgamma: p has to be greater than or equal to 1, got {p!r}"
                             f"{_at(user_site())}")
        out = self.lgamma()
        for j in range(1, int(p)):
            out = out + (self - j / 2).lgamma()
        return out + p * (p - 1) / 4 * math.log(math.pi)

    def softplus(self, beta=1.0, threshold=20.0):
        # torch's default threshold is a linear cut-off for overflow; softplus here is exact
        # and stable, and differs from the cut-off by less than exp(-20). A lower threshold
        # chosen by the user changes the numbers (x where beta * x > threshold): honour it
        soft = self._stable("softplus") if beta == 1 else (self * beta).softplus() / beta
        if threshold >= 20:
            return soft
        return self.tracer.where(self * beta > threshold, self, soft)

    def log_sigmoid(self):
        return self._stable("log_sigmoid")

    def floor_divide(self, other):
        return self // other

    def clamp(self, min=None, max=None):
        site = user_site()
        if min is None and max is None:
            raise TraceError(f"clamp: at least one of 'min' or 'max' must not be None{_at(site)}")
        tr = self.tracer
        min, max = (int(b) if isinstance(b, bool) else b for b in (min, max))   # torch's 1 / 0
        lo = tr.lift(min, site) if min is not None else SymbolicTensor(
            tr, sympy.S.NegativeInfinity, self.shape if not isinstance(self.shape, tuple) else (),
            "float")
        hi = tr.lift(max, site) if max is not None else SymbolicTensor(
            tr, sympy.S.Infinity, self.shape if not isinstance(self.shape, tuple) else (), "float")
        shape = broadcast_shapes(broadcast_shapes(self.shape, lo.shape, "clamp", site), hi.shape,
                                 "clamp", site)
        expr = ew.clamp(self.arith(), lo.operand(), hi.operand())
        # of an integer value and integer bounds (or none): an integer, as torch's
        kinds = {self.dtype} | {"int" if isinstance(b, numbers.Integral) else
                                getattr(b, "dtype", "float") for b in (min, max) if b is not None}
        integral = "float" not in kinds and kinds != {"bool"}
        return SymbolicTensor(tr, expr, shape, "int" if integral else "float", site=site)

    clip = clamp

    def where(self, condition, other):
        return self.tracer.where(condition, self, other)

    def detach(self):
        return self.tracer.structural("stop_gradient", (self,), site=user_site())

    # ---- dtype conversions (torch's spellings). A generated module computes in ONE float
    # dtype, the inputs' (float32 inputs: float32 math): a conversion that keeps the value's
    # kind and precision is the value itself; float <-> bool and int/bool -> float convert;
    # one that would change the float precision, or make an integer of a float, cannot be
    # honoured by a fused module and says so (never silently different numbers from torch).
    def _convert(self, dtype, what):
        site = user_site()
        name = _dtype_name(dtype)
        if "complex" in name:
            raise TraceError(
                f"{what}{_at(site)}: converting to {name} inside a traced forward is not "
                "supported: a compiled forward computes in one real float dtype")
        kind = "bool" if name == "bool" else "int" if "int" in name else "float"
        if kind == "bool":
            if self.dtype == "bool":
                return self
            return SymbolicTensor(self.tracer, self.truth(), self.shape, "bool", site=site)
        if kind == "int":
            if self.dtype == "int":
                return self
            if self.dtype == "bool":
                return SymbolicTensor(self.tracer, self.arith(), self.shape, "int", site=site)
            raise TraceError(
                f"{what}{_at(site)}: converting a float value to {name} inside a traced forward "
                "is not supported: a compiled forward computes in one float dtype and an "
                "integer cast has no gradient. Round within floats (trunc(), floor(), round()), "
                "or compute the integer values outside the forward and pass them in")
        if self.dtype != "float":
            return SymbolicTensor(self.tracer, self.arith(), self.shape, "float", site=site)
        have = self.tracer.precision_of(self)
        if have is not None and name in ("float16", "bfloat16", "float32", "float64") \
                and name != have:
            raise TraceError(
                f"{what}{_at(site)}: converts a {have} value to {name}, but a compiled forward "
                f"computes in one float dtype, its inputs' ({have} here), and cannot switch "
                f"precision inside: pass {name} inputs instead (convert them before the call), "
                "or drop the conversion")
        return self

    def float(self):
        return self._convert("float32", "float")

    def double(self):
        return self._convert("float64", "double")

    def half(self):
        return self._convert("float16", "half")

    def bfloat16(self):
        return self._convert("bfloat16", "bfloat16")

    def long(self):
        return self._convert("int64", "long")

    def int(self):
        return self._convert("int32", "int")

    def short(self):
        return self._convert("int16", "short")

    def bool(self):
        return self._convert("bool", "bool")

    def to(self, *args, **kwargs):
        """torch's Tensor.to(dtype) / to(device, dtype) / to(other) / to(device): the device
        is the module's (a no-op), the dtype a conversion (`_convert`)."""
        dtype = kwargs.get("dtype")
        for a in args:
            if isinstance(a, SymbolicTensor):
                dtype = {"bool": "bool", "int": "int64"}.get(a.dtype) or \
                    (self.tracer.precision_of(a) or "float")
            elif hasattr(a, "itemsize") or _is_dtype_like(a):
                dtype = a
        return self if dtype is None else self._convert(dtype, "to")

    def type(self, dtype=None, non_blocking=False, **kwargs):
        if dtype is None:
            raise TraceError(f"type{_at(user_site())}: type() without a dtype returns a type "
                             "name string, which a traced forward cannot compute with")
        return self._convert(dtype, "type")

    def contiguous(self):
        return self

    def clone(self):
        return self
