"""Elementwise primitives whose torch conventions differ from SymPy's.

Each class holds the forward (SymPy semantics), the derivative (`fdiff`, with torch's choice at
kinks and ties) and how every target prints it. Everything else elementwise is a plain SymPy
function (exp, log, sin, ...) or a stable primitive from `symgrad.ops.stable`.
"""
import sympy
from sympy import Mul, Piecewise, S


def c_name(printer, name):
    """`expf` for a float32 C printer, `exp` for double."""
    return name + "f" if getattr(printer, "float_type", "double") == "float" else name


def relation(cls, a, b):
    """The relation cls(a, b) (a sympy.Relational class: Gt, Lt, Ge, Le, Eq, Ne) in a form
    SymPy keeps. SymPy's canonical form of a relation between two multiples of one expression
    oscillates (0.3*d > -0.7*d and 0.7*d > -0.3*d are each other's canonical form), and
    Piecewise canonicalizes its conditions until they stop changing: that recursed without end
    (sg.maximum(q*d, (q - 1)*d), a pinball loss). Such a relation is written as a - b against
    0 (SymPy folds the common operand: d > 0), an exact equivalent in IEEE arithmetic."""
    rel = cls(a, b)
    if not isinstance(rel, sympy.core.relational.Relational):
        return rel            # decided (true / false)
    if rel.has(Piecewise):
        # Piecewise's own canonicalization of a condition over piecewise operands (two
        # multiples of one leaky_relu: sg.maximum(-1.21 * F.leaky_relu(x), F.leaky_relu(x)))
        # rebuilt the Piecewise of the derivative without end (RecursionError, fuzz seed 1616)
        return cls(a - b, 0)
    canonical = rel.canonical
    if canonical.canonical == canonical:
        return rel
    return cls(a - b, 0)


def negation(cond):
    """The condition "not cond" under IEEE comparisons (torch's ~mask): an ordering that is
    False because an operand is NaN is negated to True, so ~(x > 0) is (x <= 0) | isnan(x),
    not SymPy's Not(x > 0) = x <= 0 (False at NaN: sg.where(~(x > 0), a, b) took b there).
    And / Or go through De Morgan so no Not of a relation is left for SymPy to fold."""
    from sympy.core.relational import Eq, Ne, Relational

    if cond is sympy.true or cond is sympy.false:
        return sympy.false if cond is sympy.true else sympy.true
    if isinstance(cond, Eq):
        return Ne(*cond.args)
    if isinstance(cond, Ne):
        return Eq(*cond.args)
    if isinstance(cond, Relational):
        nans = [isnan(side) for side in cond.args if not side.is_number]
        return sympy.Or(cond.negated, *nans)
    if isinstance(cond, sympy.And):
        return sympy.Or(*[negation(c) for c in cond.args])
    if isinstance(cond, sympy.Or):
        return sympy.And(*[negation(c) for c in cond.args])
    if isinstance(cond, sympy.Not):
        return cond.args[0]
    return sympy.Not(cond)


class relu(sympy.Function):
    """relu(x) = max(x, 0). torch conventions: relu'(0) = 0, and relu'(NaN) = 1 (torch's
    backward zeroes the gradient where relu(x) <= 0, which NaN is not)."""

    nargs = 1
    is_real = True

    def fdiff(self, argindex=1):
        x = self.args[0]
        return Piecewise((S.Zero, x <= 0), (S.One, True))

    def _eval_evalf(self, prec):
        x = self.args[0].evalf(prec)
        if x.is_number:
            return sympy.Max(x, 0).evalf(prec)

    def _eval_rewrite_as_Piecewise(self, x, **kwargs):
        return Piecewise((x, x > 0), (S.Zero, True))

    def _numpycode(self, printer):
        return f"numpy.maximum({printer._print(self.args[0])}, 0)"

    def _ccode(self, printer):
        return f"{c_name(printer, 'fmax')}({printer._print(self.args[0])}, {printer._print(S.Zero)})"

    def _latex(self, printer, exp=None):
        # SymPy passes exp= when the function is raised to a power
        out = rf"\operatorname{{relu}}\left({printer._print(self.args[0])}\right)"
        return out if exp is None else rf"{out}^{{{exp}}}"


class maximum(sympy.Function):
    """Elementwise max of two values. torch convention: at a tie each side gets half the gradient."""

    nargs = 2
    is_real = True

    def fdiff(self, argindex=1):
        a, b = self.args if argindex == 1 else self.args[::-1]
        return Piecewise((S.One, relation(sympy.StrictGreaterThan, a, b)),
                         (S.Zero, relation(sympy.StrictLessThan, a, b)), (S.Half, True))

    def _eval_evalf(self, prec):
        return sympy.Max(*self.args).evalf(prec)

    def _eval_rewrite_as_Piecewise(self, a, b, **kwargs):
        return Piecewise((a, relation(sympy.GreaterThan, a, b)), (b, True))

    def _numpycode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"numpy.maximum({a}, {b})"

    def _ccode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"{c_name(printer, 'fmax')}({a}, {b})"


class minimum(sympy.Function):
    """Elementwise min of two values. torch convention: at a tie each side gets half the gradient."""

    nargs = 2
    is_real = True

    def fdiff(self, argindex=1):
        a, b = self.args if argindex == 1 else self.args[::-1]
        return Piecewise((S.One, relation(sympy.StrictLessThan, a, b)),
                         (S.Zero, relation(sympy.StrictGreaterThan, a, b)), (S.Half, True))

    def _eval_evalf(self, prec):
        return sympy.Min(*self.args).evalf(prec)

    def _eval_rewrite_as_Piecewise(self, a, b, **kwargs):
        return Piecewise((a, relation(sympy.LessThan, a, b)), (b, True))

    def _numpycode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"numpy.minimum({a}, {b})"

    def _ccode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"{c_name(printer, 'fmin')}({a}, {b})"


class _NanIgnoring(sympy.Function):
    """fmax / fmin: the larger / smaller of two values, ignoring a NaN operand (NaN only where
    both are). torch's derivative: the whole gradient to the selected operand, `a` at a tie
    and where `b` is NaN (derivatives.yaml: a's mask (a >= b) | isnan(b), b's its negation),
    where maximum / minimum split a tie in halves."""

    nargs = 2
    is_real = True
    keeps = None          # the relation under which `a` is selected (GreaterThan: fmax)
    numpy_name = ""

    def selects_a(self):
        a, b = self.args
        return sympy.Or(relation(type(self).keeps, a, b), isnan(b))

    def fdiff(self, argindex=1):
        if argindex not in (1, 2):
            raise sympy.ArgumentIndexError(self, argindex)
        first, second = (S.One, S.Zero) if argindex == 1 else (S.Zero, S.One)
        return Piecewise((first, self.selects_a()), (second, True))

    def _eval_rewrite_as_Piecewise(self, a, b, **kwargs):
        return Piecewise((a, self.selects_a()), (b, True))

    def _numpycode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"numpy.{self.numpy_name}({a}, {b})"

    def _ccode(self, printer):
        # the selection itself, not C's fmax: the CPU target renames fmax( to its
        # NaN-propagating maximum (symgrad.emit.cprinter.CpuPrinter)
        a, b = (printer.parenthesize(arg, 0) for arg in self.args)
        op = ">=" if type(self).keeps is sympy.GreaterThan else "<="
        return f"(({b} != {b} || {a} {op} {b}) ? {a} : {b})"


class fmax(_NanIgnoring):
    """torch.fmax: max(a, b), the other operand where one is NaN (numpy.fmax, C fmax)."""

    keeps = sympy.GreaterThan
    numpy_name = "fmax"

    def _eval_evalf(self, prec):
        a, b = (arg.evalf(prec) for arg in self.args)
        return b if a is sympy.nan else a if b is sympy.nan else sympy.Max(a, b).evalf(prec)


class fmin(_NanIgnoring):
    """torch.fmin: min(a, b), the other operand where one is NaN (numpy.fmin, C fmin)."""

    keeps = sympy.LessThan
    numpy_name = "fmin"

    def _eval_evalf(self, prec):
        a, b = (arg.evalf(prec) for arg in self.args)
        return b if a is sympy.nan else a if b is sympy.nan else sympy.Min(a, b).evalf(prec)


class toward_zero(sympy.Function):
    """nextafter(x, 0): the next value of x's float dtype towards 0. At x = +-inf it is the
    dtype's largest / lowest finite value (torch.nan_to_num's default posinf / neginf) in
    whichever dtype the module runs: a shape- and dtype-generic module needs no finfo
    constant. Used only where x is infinite (its derivative, 0, is selected away)."""

    nargs = 1
    is_real = True

    def fdiff(self, argindex=1):
        return S.Zero

    def _eval_evalf(self, prec):
        x = self.args[0].evalf(prec)
        if x in (sympy.oo, -sympy.oo):
            return sympy.Float(1.7976931348623157e308 if x > 0 else -1.7976931348623157e308)
        return x if x.is_number else None

    def _numpycode(self, printer):
        return f"numpy.nextafter({printer._print(self.args[0])}, 0)"

    def _ccode(self, printer):
        return f"{c_name(printer, 'nextafter')}({printer._print(self.args[0])}, " \
               f"{printer._print(S.Zero)})"


class clamp(sympy.Function):
    """clamp(x, lo, hi) = min(max(x, lo), hi); lo or hi may be -oo / oo (absent).

    torch convention: x gets the gradient where lo <= x <= hi (bounds inclusive), lo where
    x < lo < hi, hi where x > hi or hi < lo (then the result is hi, whatever x is).
    """

    nargs = 3
    is_real = True

    def fdiff(self, argindex=1):
        x, lo, hi = self.args
        if argindex == 1:
            return Piecewise((S.One, sympy.And(relation(sympy.GreaterThan, x, lo),
                                               relation(sympy.LessThan, x, hi))), (S.Zero, True))
        if argindex == 2:
            return Piecewise((S.One, sympy.And(relation(sympy.StrictLessThan, x, lo),
                                               relation(sympy.StrictLessThan, lo, hi))),
                             (S.Zero, True))
        return Piecewise((S.One, sympy.Or(relation(sympy.StrictGreaterThan, x, hi),
                                          relation(sympy.StrictLessThan, hi, lo))), (S.Zero, True))

    def _eval_evalf(self, prec):
        x, lo, hi = self.args
        return sympy.Min(sympy.Max(x, lo), hi).evalf(prec)

    def _eval_rewrite_as_Piecewise(self, x, lo, hi, **kwargs):
        return Piecewise((lo, relation(sympy.StrictLessThan, x, lo)),
                         (hi, relation(sympy.StrictGreaterThan, x, hi)), (x, True))

    def _numpycode(self, printer):
        x, lo, hi = self.args
        out = printer._print(x)
        if lo is not S.NegativeInfinity:
            out = f"numpy.maximum({out}, {printer._print(lo)})"
        if hi is not S.Infinity:
            out = f"numpy.minimum({out}, {printer._print(hi)})"
        return out

    def _ccode(self, printer):
        x, lo, hi = self.args
        out = printer._print(x)
        if lo is not S.NegativeInfinity:
            out = f"{c_name(printer, 'fmax')}({out}, {printer._print(lo)})"
        if hi is not S.Infinity:
            out = f"{c_name(printer, 'fmin')}({out}, {printer._print(hi)})"
        return out


class _Stepwise(sympy.Function):
    """A piecewise-constant function: its derivative is 0 wherever it exists (torch's choice)."""

    nargs = 1
    is_real = True
    numpy_name = c_base = ""

    def fdiff(self, argindex=1):
        return S.Zero

    def _numpycode(self, printer):
        return f"numpy.{self.numpy_name}({printer._print(self.args[0])})"

    def _ccode(self, printer):
        return f"{c_name(printer, self.c_base)}({printer._print(self.args[0])})"


class rint(_Stepwise):
    """torch.round: to the nearest integer, halves to even (numpy.rint, C rint)."""

    numpy_name = c_base = "rint"

    def _eval_evalf(self, prec):
        x = self.args[0].evalf(prec)
        if x.is_number:
            return sympy.Float(round(float(x)), prec)   # Python rounds halves to even too


class trunc(_Stepwise):
    """torch.trunc: towards zero."""

    numpy_name = c_base = "trunc"

    def _eval_evalf(self, prec):
        x = self.args[0].evalf(prec)
        if x.is_number:
            return sympy.Integer(int(x)).evalf(prec)


class hypot(sympy.Function):
    """sqrt(a**2 + b**2 + ...) without overflow or underflow of the squares (numpy.hypot, C
    hypot), of two or more arguments: hypot(a, b, c) is computed as hypot(hypot(a, b), c).

    Derivative a / hypot(a, b, ...), kept as one division (a quotient): nan at (0, 0), as in
    torch. Flat over every argument: through the nesting, (h1/h2)*(a/h1) is 0/0 at (0, 0, 1)
    where a/h is 0. grad_out * (a / h) rather than a * (grad_out / h), which overflowed where
    1/h does (float32 a = 1e-40: inf for 1, nan for 0), and whose second derivative a * h**-2
    was 0 * inf = nan at (0, 1e-300) (1e300) and inf / inf at (0, 1e300) (0).
    """

    is_real = True

    @classmethod
    def eval(cls, *args):
        if len(args) < 2:
            raise TypeError(f"hypot takes at least 2 arguments ({len(args)} given)")
        return None

    def fdiff(self, argindex=1):
        return quotient(self.args[argindex - 1], self)

    def _eval_evalf(self, prec):
        return sympy.sqrt(sum(arg.evalf(prec) ** 2 for arg in self.args)).evalf(prec)

    def _numpycode(self, printer):
        # numpy.hypot only where the squares leave their range
        out = printer._print(self.args[0])
        for arg in self.args[1:]:
            out = f"_hypot({out}, {printer._print(arg)})"
        return out

    def _ccode(self, printer):
        out = printer._print(self.args[0])
        for arg in self.args[1:]:
            out = f"{c_name(printer, 'hypot')}({out}, {printer._print(arg)})"
        return out


class quotient(sympy.Function):
    """a / b kept as one division: SymPy merges (x/h)/h into x*h**-2, which CSE may then evaluate
    as (1/h**2)*x, where h**2 under- or overflows and (x/h)/h does not. Its derivatives are
    quotients again (d/db = -(a/b)/b)."""

    nargs = 2
    is_real = True

    def fdiff(self, argindex=1):
        a, b = self.args
        if argindex == 1:
            return 1 / b
        return -quotient(self, b)

    def _eval_evalf(self, prec):
        a, b = (arg.evalf(prec) for arg in self.args)
        return (a / b).evalf(prec)

    def _numpycode(self, printer):
        a, b = (printer.parenthesize(arg, 50) for arg in self.args)
        return f"({a}/{b})"

    def _ccode(self, printer):
        a, b = (printer.parenthesize(arg, 50) for arg in self.args)
        return f"({a}/{b})"


class one_minus_square(sympy.Function):
    """1 - u**2, computed as (1 - u)*(1 + u) (the derivatives of asin, acos, atanh: 1 - u*u has a
    relative error of eps/(1 - |u|) near |u| = 1, the product a few ulp), with the derivative
    -2u. Differentiated as the product it is printed as, the derivative was (1 - u) - (1 + u):
    0 at u = 1e-30 (asin'' = u/(1 - u**2)**1.5 is 1e-30), 5e-10 off at u = 1e-8, and asin''
    at u = 1 was inf - inf = nan (truly inf)."""

    nargs = 1
    is_real = True

    @classmethod
    def eval(cls, u):
        if u.is_Number:
            return 1 - u * u
        return None

    def fdiff(self, argindex=1):
        return -2 * self.args[0]

    def product(self):
        u = self.args[0]
        return Mul(1 - u, 1 + u, evaluate=False)

    def _eval_evalf(self, prec):
        u = self.args[0].evalf(prec)
        if u.is_number:
            return ((1 - u) * (1 + u)).evalf(prec)

    def _eval_rewrite_as_Pow(self, u, **kwargs):
        return 1 - u ** 2

    def _numpycode(self, printer):
        return f"({printer._print(self.product())})"

    def _ccode(self, printer):
        return f"({printer._print(self.product())})"


class atan2(sympy.atan2):
    """atan2(y, x), with torch's derivative: d/dy = x / (x**2 + y**2), d/dx = -y / (x**2 + y**2),
    0 at (0, 0). Computed as (x/h)/h with h = hypot(x, y): x**2 + y**2 underflowed at
    x = y = 1e-200 (the gradient was inf, truly 5e199) and overflowed at 1e200 (0, truly
    5e-201)."""

    def fdiff(self, argindex=1):
        y, x = self.args
        if argindex not in (1, 2):
            raise sympy.ArgumentIndexError(self, argindex)
        h = hypot(x, y)
        d = quotient(quotient(x, h), h) if argindex == 1 else -quotient(quotient(y, h), h)
        return Piecewise((S.Zero, sympy.Eq(h, 0)), (d, True))


class norm_root(sympy.Function):
    """s**(1/p): the root of a p-norm's sum s = sum(|x|**p) (p = 2: sqrt; also std's root of the
    variance), with torch's subgradient: the derivative is 0 where s = 0 (a zero vector's norm,
    a constant's std), where (1/p) * s**(1/p - 1) is inf and its product with the inner
    derivative, 0, was nan."""

    nargs = 2
    is_real = True
    numpy_cost = 12   # as the Pow (sqrt) it stands for, in optimize.OP_COST units

    def fdiff(self, argindex=1):
        s, p = self.args
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return norm_root_grad(self, p)

    def _eval_evalf(self, prec):
        s, p = (arg.evalf(prec) for arg in self.args)
        return (s ** (1 / p)).evalf(prec)

    # parenthesized: s**(1/p) may print as a product (sqrt(15)*sqrt(v)/15), and a function
    # call is not parenthesized by its callers (0.5/norm_root(...) must divide by all of it)
    def _numpycode(self, printer):
        s, p = self.args
        return f"({printer._print(sympy.Pow(s, 1 / p))})"

    def _ccode(self, printer):
        s, p = self.args
        return f"({printer._print(sympy.Pow(s, 1 / p))})"


class norm_term(sympy.Function):
    """|x|**p, a p-norm's term for p < 1, with torch's subgradient: the derivative is 0 at
    x = 0, where p * |x|**(p - 1) * sign(x) is inf * 0 = nan. Printed as the power itself."""

    nargs = 2
    is_real = True
    numpy_cost = 12   # as the Pow it stands for

    def fdiff(self, argindex=1):
        x, p = self.args
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        # p * |x|**(p - 1) * sign(x), written with the term itself so it is shared
        return Piecewise((S.Zero, sympy.Eq(x, 0)), (p * sympy.sign(x) * self / sympy.Abs(x), True))

    def power(self):
        x, p = self.args
        return sympy.sqrt(sympy.Abs(x)) if p == S.Half else sympy.Abs(x) ** p

    def _eval_evalf(self, prec):
        return self.power().evalf(prec)

    def _numpycode(self, printer):
        return f"({printer._print(self.power())})"

    def _ccode(self, printer):
        return f"({printer._print(self.power())})"


class norm_root_grad(sympy.Function):
    """d/ds norm_root(s, p) in terms of the root r = norm_root(s, p) (so the forward's value is
    reused): r**(1 - p) / p, and 0 at r = 0 (torch's subgradient). One op rather than a
    Piecewise: it lives on the reduced shape (a norm's or std's sum), where the selection is
    nearly free, and the saving plan's cost model charges it as the power it stands for."""

    nargs = 2
    is_real = True
    numpy_cost = 12   # as the Pow it stands for (the selection is on the reduced shape)

    def fdiff(self, argindex=1):
        r, p = self.args
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return Piecewise((S.Zero, sympy.Eq(r, 0)), ((1 - p) / p * r ** (-p), True))

    def _eval_evalf(self, prec):
        r, p = (arg.evalf(prec) for arg in self.args)
        return S.Zero if r == 0 else (r ** (1 - p) / p).evalf(prec)

    def _numpycode(self, printer):
        r, p = self.args
        return f"numpy.where({printer._print(r)} == 0, 0, {printer._print(r ** (1 - p) / p)})"

    def _ccode(self, printer):
        r, p = self.args
        return (f"({printer._print(r)} == 0 ? {printer._print(S.Zero)} : "
                f"{printer._print(r ** (1 - p) / p)})")


class _Predicate(sympy.core.function.Application, sympy.logic.boolalg.Boolean):
    """A test of one number (isnan, isfinite, isinf): an opaque condition to SymPy, a
    Boolean but not a BooleanFunction, so that SymPy's logic treats it as one variable (as a
    BooleanFunction, simplify_logic took isnan(x) for a function of a boolean x and folded
    isnan(x) | (x <= 0) to True: a wrong derivative of relu(where(~isnan(x), x, 0)) * ...).
    Piecewise folding asks conditions for the set of x they hold on (`as_set`) and falls
    back when that is NotImplementedError (an AttributeError aborted the derivative of relu /
    clamp / maximum of a where on isnan); negation normal form keeps the test as a literal
    (SymPy's raised "Illegal operator isnan")."""

    def _eval_as_set(self):
        raise NotImplementedError(f"{type(self).__name__} has no set form")

    def to_nnf(self, simplify=True):
        return self


def _not_to_nnf(self, simplify=True, _sympy_not_to_nnf=sympy.Not.to_nnf):
    """SymPy's Not.to_nnf, with the negation of a _Predicate kept as a literal: SymPy knows
    only its own operators there and raised ValueError("Illegal operator isnan in
    expression") when Piecewise folding put ``~isnan(x)`` in negation normal form (the
    derivative of a relu / clamp / maximum of ``sg.where(~x.isnan(), ...)``)."""
    if isinstance(self.args[0], _Predicate):
        return self
    return _sympy_not_to_nnf(self, simplify)


sympy.Not.to_nnf = _not_to_nnf


class isfinite(_Predicate):
    """The condition "x is finite" (numpy.isfinite, C isfinite); SymPy takes real symbols as
    finite, so a Relational against oo would fold to True."""

    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_number:
            return sympy.true if x.is_finite else sympy.false
        return None

    def _numpycode(self, printer):
        return f"numpy.isfinite({printer._print(self.args[0])})"

    def _ccode(self, printer):
        return f"isfinite({printer._print(self.args[0])})"


class isnan(_Predicate):
    """The condition "x is NaN" (numpy.isnan, C isnan); x != x would fold to False."""

    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_number:
            return sympy.true if x is sympy.nan else sympy.false
        return None

    def _numpycode(self, printer):
        return f"numpy.isnan({printer._print(self.args[0])})"

    def _ccode(self, printer):
        return f"isnan({printer._print(self.args[0])})"


class isinf(_Predicate):
    """The condition "x is +inf or -inf" (numpy.isinf, C isinf)."""

    nargs = 1
    sign = 0          # isposinf: +1, isneginf: -1

    @classmethod
    def eval(cls, x):
        if x.is_number:
            if x is sympy.nan:
                return sympy.false
            hit = x in (sympy.oo, -sympy.oo) if cls.sign == 0 else x == cls.sign * sympy.oo
            return sympy.true if hit else sympy.false
        return None

    def _numpycode(self, printer):
        x = printer._print(self.args[0])
        if self.sign == 0:
            return f"numpy.isinf({x})"
        return f"numpy.{'isposinf' if self.sign > 0 else 'isneginf'}({x})"

    def _ccode(self, printer):
        x = printer._print(self.args[0])
        if self.sign == 0:
            return f"isinf({x})"
        return f"(isinf({x}) && ({x}) {'>' if self.sign > 0 else '<'} 0)"


class isposinf(isinf):
    """The condition "x is +inf" (numpy.isposinf)."""

    sign = 1


class isneginf(isinf):
    """The condition "x is -inf" (numpy.isneginf)."""

    sign = -1


class _Modulo(sympy.Function):
    """a - rounding(a / b) * b: d/da = 1, d/db = -rounding(a / b)."""

    nargs = 2
    is_real = True
    rounding = None       # the SymPy function that rounds the quotient
    numpy_name = ""

    def fdiff(self, argindex=1):
        a, b = self.args
        return S.One if argindex == 1 else -type(self).rounding(a / b)

    def _eval_evalf(self, prec):
        a, b = (arg.evalf(prec) for arg in self.args)
        return (a - type(self).rounding(a / b) * b).evalf(prec)

    def _numpycode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"numpy.{self.numpy_name}({a}, {b})"


class fmod(_Modulo):
    """torch.fmod: a - trunc(a / b) * b, the sign of a (numpy.fmod, C fmod)."""

    rounding = trunc
    numpy_name = "fmod"

    def _ccode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"{c_name(printer, 'fmod')}({a}, {b})"


class remainder(_Modulo):
    """torch.remainder: a - floor(a / b) * b, the sign of b (numpy.remainder)."""

    rounding = sympy.floor
    numpy_name = "remainder"

    def _ccode(self, printer):
        # fmod, then moved into the divisor's sign (torch's CPU kernel does the same)
        a, b = (printer._print(arg) for arg in self.args)
        m = f"{c_name(printer, 'fmod')}({a}, {b})"
        return f"(({m} != 0 && (({m} < 0) != ({b} < 0))) ? {m} + {b} : {m})"


class xlogy(sympy.Function):
    """torch.xlogy: x * log(y), 0 where x == 0 (unless y is nan). Its x-derivative is log(y),
    and 0 where x == 0 and y <= 0, as torch's (log(0) = -inf there)."""

    nargs = 2
    is_real = True

    def fdiff(self, argindex=1):
        x, y = self.args
        if argindex == 1:
            return Piecewise((S.Zero, sympy.And(sympy.Eq(x, 0), y <= 0)), (sympy.log(y), True))
        return x / y

    def _eval_evalf(self, prec):
        x, y = (arg.evalf(prec) for arg in self.args)
        return S.Zero if x == 0 else (x * sympy.log(y)).evalf(prec)

    def _numpycode(self, printer):
        x, y = (printer._print(arg) for arg in self.args)
        return f"numpy.where(({x} == 0) & ({y} == {y}), 0, {x}*numpy.log({y}))"

    def _ccode(self, printer):
        x, y = (printer._print(arg) for arg in self.args)
        zero = printer._print(S.Zero)
        return f"(({x} == 0 && {y} == {y}) ? {zero} : {x}*{c_name(printer, 'log')}({y}))"


# Every SymPy function class that generated code may contain, by name (printers and the
# disk cache's unpickling of nothing: kept as a table so one place lists them).
CUSTOM = {cls.__name__: cls for cls in (relu, maximum, minimum, fmax, fmin, toward_zero, clamp,
                                         rint, trunc,
                                         hypot, fmod, remainder, xlogy, atan2, quotient, one_minus_square,
                                         norm_root, norm_term, norm_root_grad, isfinite, isnan,
                                         isinf, isposinf, isneginf)}
