"""The tracer's shapes and numbers: GenericShape (a shape-generic trace's symbolic shape),
broadcast_shapes, the number checks (_number, _out_of_range, _folded_out_of_range) and
TensorSpec. Moved verbatim from trace.py (which re-exports every name).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import sympy

from .errors import ShapeError, TraceError
from .graph import Node
from .ops.structural import SHAPE_HELPERS


# Names of trace.py used below. trace.py imports this module before it defines them, so it
# binds them here once it has (trace._bind_moved_names).
_FROM_TRACE = ("SymbolicTensor", "_at", "user_site",)
(SymbolicTensor, _at, user_site,) = (None,) * len(_FROM_TRACE)


# --------------------------------------------------------------------------- shapes
@dataclass(frozen=True)
class GenericShape:
    """A shape known only at run time: the broadcast of the shapes of `sources`."""

    sources: tuple[Node, ...]

    def __repr__(self):
        return "(" + ", ".join(f"shape({n.name})" for n in self.sources) + ")"

    def _unknown(self, *args):
        raise TraceError(f"the shape of this value is unknown in a shape-generic trace"
                         f"{_at(user_site())}; give example inputs: sg.compile(fn, *arrays), "
                         "`--shape NAME=2,3` on the command line, or an `example_inputs` "
                         "staticmethod on the Function")

    __getitem__ = __len__ = __iter__ = _unknown


def broadcast_shapes(a, b, what="broadcast", site=None):
    """torch broadcasting of two concrete shapes; ShapeError names both (and `site`)."""
    if isinstance(a, GenericShape) or isinstance(b, GenericShape):
        sources = tuple(a.sources if isinstance(a, GenericShape) else ())
        for n in (b.sources if isinstance(b, GenericShape) else ()):
            if n not in sources:
                sources += (n,)
        return GenericShape(tuple(sorted(sources, key=lambda n: n.index)))
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"{what}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast "
                             f"together (size {x} vs {y} at dimension {-i}){_at(site)}")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


SHAPE_HELPERS["broadcast_shapes"] = broadcast_shapes   # matmul's shape rule (ops/structural.py)


def _number(value, site=None):
    """A Python number as an exact SymPy constant where that is exact."""
    if isinstance(value, bool):
        return sympy.true if value else sympy.false
    if isinstance(value, int):
        return sympy.Integer(value)
    value = float(value)
    if not math.isfinite(value):
        raise TraceError(f"the constant {value} cannot be used in arithmetic{_at(site)}; "
                         "use sg.where / sg.clamp with finite bounds instead")
    frac = Fraction(value)
    # exact where that is exact and small: 1e300 as a 301-digit Integer would be printed as
    # such (an OverflowError when NumPy converts it) and fold exactly into 1e310
    if frac.denominator <= 1024 and abs(frac.numerator) <= _EXACT_LIMIT:
        return sympy.Rational(frac.numerator, frac.denominator)
    return sympy.Float(value)


_EXACT_LIMIT = 2 ** 53
# The range a folded constant must stay in: float32's normal numbers (the narrowest dtype a
# module may compute in). SymPy folds the constants of x * 1e300 * 1e10 into x * 1e310,
# which is inf in float64, where eager arithmetic computes (x * 1e300) * 1e10 = 1e290 at
# x = 1e-20; such a fold is undone (see _unfold) and the operands are computed in order.
_FOLD_MAX = 3.4028234663852886e38
_FOLD_MIN = 1.1754943508222875e-38


_FLOAT_OUT: dict = {}   # a Float's _mpf_ -> _out_of_range


def _out_of_range(number) -> bool:
    if number.is_Rational:
        p, q = number.p, number.q
        # p/q lies in (2**-120, 2**120) when neither has more than 120 bits: the common case
        if p == 0 or (p.bit_length() <= 120 and q.bit_length() <= 120):
            return False
        try:
            v = abs(p / q)
        except OverflowError:
            return True
    elif number.is_Float:
        # remembered per exact value (SymPy's float() of a Float is an mpf conversion, and a
        # large program checks the same few constants of every op it folds)
        hit = _FLOAT_OUT.get(number._mpf_)
        if hit is None:
            v = abs(float(number))
            hit = v != 0.0 and not _FOLD_MIN <= v <= _FOLD_MAX
            if len(_FLOAT_OUT) > 10_000:
                _FLOAT_OUT.clear()
            _FLOAT_OUT[number._mpf_] = hit
        return hit
    else:
        return False
    return not _FOLD_MIN <= v <= _FOLD_MAX


def _shallow_numbers(expr):
    """The numbers among an expression's arguments and their arguments: where SymPy's
    automatic folding puts a new constant (a Mul's coefficient, Number * Add distributed)."""
    out = []
    for a in (expr,) + tuple(expr.args):
        if a.is_Number:
            out.append(a)
        else:
            out.extend(b for b in a.args if b.is_Number)
    return out


def _folded_out_of_range(expr, operands) -> bool:
    """Whether building `expr` from `operands` folded their constants into a number that
    float32 or float64 arithmetic in the user's order would not have produced (out of
    float32's normal range, and in none of the operands)."""
    if not isinstance(expr, sympy.Basic):
        return False
    suspects = [n for n in _shallow_numbers(expr) if _out_of_range(n)]
    if not suspects:
        return False
    have = set()
    for op in operands:
        if isinstance(op, sympy.Basic):
            have |= op.atoms(sympy.Number)
    return any(n not in have for n in suspects)


def _is_tensor_like(value):
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(
        value, SymbolicTensor)


@dataclass(frozen=True)
class TensorSpec:
    """An example input given by shape and dtype only (no data)."""

    shape: tuple[int, ...] | None = None      # None: any shape (generic trace)
    dtype: str = "float32"
