"""The stabilizing rewrites of algebraic forms (symgrad/rewrites.py lists them in STABILIZE):
sqrt(a**2 + b**2) -> hypot, (1 - u**2)**p as a product, removable singularities (sin(u)/u ->
sinc(u), ...), a factor moved into a Piecewise's branch, a common power kept as a quotient's."""
from __future__ import annotations

import math

import sympy
from sympy import Add, Mul, Pow
from sympy.codegen.cfunctions import expm1, log1p

from symgrad.ops.elementwise import hypot, one_minus_square, quotient
from symgrad._rewrite_match import _factors, _rebuild_mul
from symgrad.ops.stable import taylor_op


def _squares(add):
    """a**2 + b**2 + ..., with at most one positive number c among the terms: [a, b, ...]
    (sqrt(c) for c), else None."""
    if not isinstance(add, Add):
        return None
    roots = []
    for term in add.args:
        if term.is_Number:
            if not term.is_positive:
                return None
            roots.append(sympy.sqrt(term))
            continue
        coeff, rest = term.as_coeff_Mul()
        if not (coeff.is_positive and isinstance(rest, Pow) and rest.exp == 2):
            return None
        roots.append(sympy.sqrt(coeff) * rest.base)
    return sorted(roots, key=sympy.default_sort_key)


def _hypot_form(node):
    """(a**2 + b**2 + ...)**(n/2) -> hypot(a, b, ...)**n for odd n (sqrt, 1/sqrt, ...), also
    with a positive number among the terms: the squares overflow (a = 1e200; 1e20 in float) or
    underflow (1e-200) where the root does not (asinh's derivative 1/sqrt(x**2 + 1) was 0 at
    x = 1e300, truly 1e-300; a 3-vector's norm was inf from 1e154)."""
    if not (isinstance(node, Pow) and node.exp.is_Rational and node.exp.q == 2):
        return None
    roots = _squares(node.base)
    if roots is None:
        return None
    return hypot(*roots) ** (2 * node.exp)


def _difference_of_squares(node):
    """(1 - u**2)**p -> ((1 - u)*(1 + u))**p for a negative or fractional p (the derivatives of
    asin, acos, atanh): 1 - u*u has a relative error of eps/(1 - |u|) near |u| = 1 (5e-11 at
    u = 1 - 1e-6), (1 - u)*(1 + u) a few ulp (1 - u is exact there)."""
    if not (isinstance(node, Pow) and isinstance(node.base, Add) and len(node.base.args) == 2
            and (node.exp.is_negative or node.exp.is_integer is False)):
        return None
    if sympy.S.One not in node.base.args:
        return None
    other = node.base.args[0] if node.base.args[1] == 1 else node.base.args[1]
    coeff, rest = other.as_coeff_Mul()
    if coeff != -1 or not (isinstance(rest, Pow) and rest.exp == 2):
        return None
    u = rest.base
    return Pow(one_minus_square(u), node.exp)


# f with f(0) = 0 -> the family of f(u)/u (symgrad.ops.stable.taylor_op), and of u/f(u) where
# 1/(f(u)/u) would overflow to inf/inf in its derivative (expm1, sinh: u/f(u) -> 0 far out)
_RATIO_FAMILIES = {sympy.sin: "sinc", expm1: "exprel", log1p: "log1prel", sympy.sinh: "sinhc",
                   sympy.tan: "tanc", sympy.tanh: "tanhc"}
_INVERSE_FAMILIES = {expm1: "inv_exprel", sympy.sinh: "inv_sinhc"}


def _one_minus_cos(base):
    """1 - cos(w) -> (w, 1); cos(w) - 1 -> (w, -1); else None."""
    if not isinstance(base, Add) or len(base.args) != 2:
        return None
    for k, sign in ((sympy.S.One, 1), (sympy.S.NegativeOne, -1)):
        if k in base.args:
            other = base.args[0] if base.args[1] == k else base.args[1]
            coeff, rest = other.as_coeff_Mul()
            if coeff == -sign and isinstance(rest, sympy.cos):
                return rest.args[0], sign
    return None


def _same_up_to_factor(w, b):
    """The number c with w = c*b (c != 0), or None."""
    ratio = w / b
    if not ratio.is_number and w.free_symbols == b.free_symbols and isinstance(w, Add):
        ratio = sympy.cancel(ratio)
    if ratio.is_number and ratio.is_nonzero and ratio.is_finite:
        return ratio
    return None


def _removable_singularity(node):
    """f(c*u**k)**p * u**q with f(0) = 0 (sin, expm1, log1p) and integers p, q of opposite
    signs -> (c*F(w))**(s*m) * f(w)**(p - s*m) * u**(q + s*k*m), w = c*u**k, F(w) = f(w)/w
    (sinc, exprel, log1prel), m = min(|p|, max(|q| // k, 1)), s = sign(p); u/expm1(u) ->
    inv_exprel(u). The quotient is 0/0 at u = 0 and its derivative cancels near 0; F is exact
    there (a Taylor branch)."""
    if not isinstance(node, Mul):
        return None
    pairs = _factors(node)
    for i, (base, power) in enumerate(pairs):
        # (1 - cos(w))**p / u**q -> (2 sin(w/2)**2)**p / u**q, then sinc below: 1 - cos(w) is 0
        # at w = 1e-8 (truly 5e-17), (1 - cos(x))/x**2 was 0 there instead of 1/2
        versine = _one_minus_cos(base) if power.is_Integer and power > 0 else None
        if versine is not None:
            w, sign = versine
            if any(q.is_Integer and q < 0 and not b.is_number
                   and any(_same_up_to_factor(w, b ** k) is not None for k in range(1, 5))
                   for n, (b, q) in enumerate(pairs) if n != i):
                new = list(pairs)
                new[i] = (sign * 2 * sympy.sin(w / 2) ** 2, power)
                return _rebuild_mul(new)
        family = _RATIO_FAMILIES.get(type(base))
        if family is None or not power.is_Integer:
            continue
        w = base.args[0]
        for j, (b, q) in enumerate(pairs):
            if j == i or b.is_number or not q.is_Integer or (q > 0) == (power > 0):
                continue
            for k in range(1, 5):   # w = c*b**k: log1p(y**2)/y**2, log1p(y**2)/y
                c = _same_up_to_factor(w, b ** k)
                if c is not None:
                    break
            else:
                continue
            s = 1 if power > 0 else -1
            m = min(abs(int(power)), max(abs(int(q)) // k, 1))
            if s < 0 and type(base) in _INVERSE_FAMILIES:   # u/expm1(u), u/sinh(u)
                ratio = taylor_op(_INVERSE_FAMILIES[type(base)])(w) ** m / c ** m
            else:
                ratio = (c * taylor_op(family)(w)) ** (s * m)
            new = [p for n, p in enumerate(pairs) if n not in (i, j)]
            new += [(base, power - s * m), (b, q + s * k * m)]
            return ratio * _rebuild_mul(new)
    return None


def _piecewise_zero(node):
    """a * Piecewise((e, c), (0, True)) -> Piecewise((a*e, c), (0, True)): the factor moves
    inside the branches, so an infinite factor in an untaken branch cannot make 0*inf = nan."""
    if not isinstance(node, Mul):
        return None
    args = node.args
    for k, arg in enumerate(args):
        if isinstance(arg, sympy.Piecewise) and any(e == 0 for e, _ in arg.args):
            factor = Mul(*(args[:k] + args[k + 1:]))
            if not factor.free_symbols:
                return None  # a constant factor cannot be infinite
            return sympy.Piecewise(*[(factor * e, c) for e, c in arg.args])
    return None


def _common_power(node):
    """a**(m*p) * b**(-m*q) * ... -> quotient(a**p, b**q)**m (m >= 2, the gcd of the powers'
    numerators): SymPy distributes a power over a product, so the user's (a/b)**3 is traced
    as a**3 * b**-3, and the chain rule's (x**2/t)**2 (d/dx x**3/(x**2 + 1)) reaches the
    derivative as x**4 * t**-2. The distributed form overflows where the quotient does not
    (x**4 at x = 1e100; a dihedral's cos(phi)**3 = dot**3/(|n1||n2|)**3 at coordinates of
    1e60). Only powers with a numerator of 2 or more take part (a/b, x/y**2 are kept: the
    printers divide those without forming the power), and both signs must be present."""
    if not isinstance(node, Mul):
        return None
    group, rest = [], []
    for base, power in _factors(node):
        if (not base.is_number and power.is_Rational and power.q in (1, 2)
                and abs(power.p) >= 2):
            group.append((base, power))
        else:
            rest.append(Pow(base, power))
    if not (any(p > 0 for _, p in group) and any(p < 0 for _, p in group)):
        return None
    m = 0
    for _, p in group:
        m = math.gcd(m, abs(int(p.p)))
    if m < 2:
        return None
    top = Mul(*[Pow(b, p / m) for b, p in group if p > 0])
    bottom = Mul(*[Pow(b, -p / m) for b, p in group if p < 0])
    return Mul(*rest, Pow(quotient(top, bottom), m))
