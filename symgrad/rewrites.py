"""Stabilizing rewrites: naive formulas -> forms that stay finite and accurate in floating point.

Contract:
- A rewrite is a named value (``Rewrite``); ``STABILIZE`` is the ordered tuple of them.
- Every rewrite is an identity over the reals: it never changes a value where the original
  expression is finite. It only removes overflow (``exp(800)/(1 + exp(800))``), cancellation
  (``log(1 + 1e-20)``, ``1 - sigmoid(40)``) and ``0 * inf`` in untaken branches.
- Matching walks the tree bottom-up and inspects SymPy's canonical forms directly
  (``1/(1 + exp(-x))`` is ``Pow(Add(1, exp(-x)), -1)``), rather than relying on Wild patterns.
- ``stabilize(expr)`` runs the tuple to a fixed point and names the rewrites that fired, in
  ``STABILIZE`` order, so generated code can say which rewrite made a line safe.

Apply it to the forward and to every derivative before CSE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy
from sympy import Add, Mul, Pow, exp, log
from sympy.codegen.cfunctions import expm1, log1p

from symgrad.ops.elementwise import hypot
from symgrad.ops.stable import (erfc, log1mexp, log_cosh, log_ndtr, log_sigmoid, logaddexp,
                                logsumexp, sigmoid, softplus)

from symgrad._rewrite_match import (  # noqa: F401  (the walk and the matching helpers)
    MAX_PASSES, _bottom_up, _constant_and_multiple, _exp_term, _factors, _lse, _one_plus_exp,
    _positive_exp_sum, _rebuild_mul, _replace_terms,
)
from symgrad._rewrites_algebraic import (  # noqa: F401
    _common_power, _difference_of_squares, _hypot_form, _piecewise_zero,
    _removable_singularity, _squares,
)
from symgrad._sharing import reuse_hypot, share_sums  # noqa: F401  (the optimizer's; re-exported)

__all__ = ["Rewrite", "STABILIZE", "stabilize"]


@dataclass(frozen=True)
class Rewrite:
    """One stabilizing rewrite.

    Attributes:
        name: short identifier, e.g. "softplus"; shown in generated code.
        description: the identity, as a reviewer reads it.
        apply: whole-expression transform (bottom-up over the tree).
        needs: the SymPy function classes the rewrite matches on: it cannot fire on an
            expression holding none of them, so ``stabilize`` skips its walk there (empty:
            always walked; powers, which hypot and difference_of_squares look at, are
            everywhere).
    """

    name: str
    description: str
    apply: Callable[[sympy.Expr], sympy.Expr]
    needs: tuple = ()


# ----------------------------------------------------------------------------- local rewrites


def _exp_product(node):
    """exp(a) * exp(b)**k -> exp(a + k*b)."""
    if not isinstance(node, Mul):
        return None
    exponents, others = [], []
    for base, power in _factors(node):
        if isinstance(base, exp) and power.is_Integer:
            exponents.append(power * base.args[0])
        else:
            others.append(Pow(base, power))
    if len(exponents) < 2:
        return None
    return Mul(*others, exp(Add(*exponents)))


def _sigmoid_form(node):
    """(1 + exp(u))**-p -> sigmoid(-u)**p; exp(-m v) * sigmoid(v)**p -> sigmoid(-v)**m * ..."""
    if isinstance(node, Pow) and node.exp.is_negative:
        u = _one_plus_exp(node.base)
        if u is not None:
            return sigmoid(-u) ** (-node.exp)
        return None
    if not isinstance(node, Mul):
        return None
    pairs = _factors(node)
    for i, (base, power) in enumerate(pairs):
        if not (isinstance(base, exp)):
            continue
        w = base.args[0]
        for j, (sbase, spower) in enumerate(pairs):
            if not (isinstance(sbase, sigmoid) and spower.is_positive and power == 1):
                continue
            v = sbase.args[0]
            top = int(sympy.floor(spower)) if spower.is_number else 0
            for m in range(top, 0, -1):
                rest = sympy.expand(w + m * v)
                if rest == 0 or not (rest.free_symbols & v.free_symbols):
                    # exp(-m v) * sigmoid(v)**m = sigmoid(-v)**m
                    new = [p for k, p in enumerate(pairs) if k not in (i, j)]
                    new += [(exp(rest), 1), (sigmoid(-v), m), (sbase, spower - m)]
                    return _rebuild_mul(new)
    return None


def _sigmoid_from_normalizer(node):
    """exp(w - k*logaddexp(a, b)) -> exp(r) * sigmoid(a - b)**m * sigmoid(b - a)**(k - m)
    when w = m*a + (k - m)*b + r with r free of a and b (softplus(u) = logaddexp(0, u))."""
    if not isinstance(node, exp):
        return None
    terms = Add.make_args(node.args[0])
    for t in terms:
        coeff, rest = t.as_coeff_Mul()
        if not (coeff.is_Integer and coeff < 0):
            continue
        if isinstance(rest, logaddexp):
            a, b = rest.args
        elif isinstance(rest, softplus):
            a, b = sympy.S.Zero, rest.args[0]
        else:
            continue
        k = int(-coeff)
        w = node.args[0] - t
        symbols = a.free_symbols | b.free_symbols
        for m in range(k, -1, -1):
            r = sympy.expand(w - m * a - (k - m) * b)
            if not (r.free_symbols & symbols):
                d = _simpler(a - b)
                return exp(r) * sigmoid(d) ** m * sigmoid(-d) ** (k - m)
    return None


def _simpler(e: sympy.Expr) -> sympy.Expr:
    """e or its expansion, whichever has fewer operations ((x+1)**2 - (x-1)**2 -> 4*x)."""
    expanded = sympy.expand(e)
    return expanded if sympy.count_ops(expanded) < sympy.count_ops(e) else e


def _expm1_ratio(node):
    """exp(m*u) / expm1(u)**k -> (-expm1(-u))**-m / expm1(u)**(k - m): exp(u)/expm1(u) is
    inf/inf for u > 709, 1/(-expm1(-u)) is not."""
    if not isinstance(node, Mul):
        return None
    pairs = _factors(node)
    for i, (base, power) in enumerate(pairs):
        if not (isinstance(base, exp) and power == 1):
            continue
        w = base.args[0]
        for j, (ebase, epower) in enumerate(pairs):
            if not (isinstance(ebase, expm1) and epower.is_Integer and epower < 0):
                continue
            u = ebase.args[0]
            for m in range(int(-epower), 0, -1):
                r = sympy.expand(w - m * u)
                if r == 0 or not (r.free_symbols & u.free_symbols):
                    new = [p for k, p in enumerate(pairs) if k not in (i, j)]
                    new += [(exp(r), 1), (-expm1(-u), -m), (ebase, epower + m)]
                    return _rebuild_mul(new)
    return None


def _sigmoid_complement(node):
    """A sum that is a polynomial P(s) in s = sigmoid(u) with P(1) = 0 has the factor 1 - s:
    P(s) -> -sigmoid(-u) * Q(s) with P = (s - 1) Q. Covers 1 - s(u) -> s(-u) and
    s - s**2 -> s(u)*s(-u): near s = 1 the difference cancels, the factor s(-u) does not.

    Coefficients are collected by hand and P(1) = 0 is checked structurally (SymPy's Add
    combines equal terms), never with expand or Poly: this runs on every sum of every
    derivative."""
    if not isinstance(node, Add):
        return None
    candidates = []
    for term in node.args:
        for base, power in _factors(term):
            if isinstance(base, sigmoid) and power.is_Integer and power > 0 \
                    and base not in candidates:
                candidates.append(base)
    for s in sorted(candidates, key=sympy.default_sort_key):
        coeffs: dict[int, list[sympy.Expr]] = {}
        for term in node.args:
            degree, rest = 0, []
            for base, power in _factors(term):
                if base == s and power.is_Integer and power > 0:
                    degree = int(power)
                else:
                    rest.append(Pow(base, power))
            cofactor = Mul(*rest)
            if cofactor.has(s):
                break  # s also inside another factor: not a polynomial in s
            coeffs.setdefault(degree, []).append(cofactor)
        else:
            n = max(coeffs)
            if n == 0:
                continue
            poly = [Add(*coeffs.get(k, [])) for k in range(n + 1)]
            count = 0
            while len(poly) > 1 and Add(*poly) == 0:
                # synthetic division by (s - 1): q[k-1] = p[k] + q[k]
                quotient = [sympy.S.Zero] * (len(poly) - 1)
                carry = sympy.S.Zero
                for k in range(len(poly) - 1, 0, -1):
                    carry = poly[k] + carry
                    quotient[k - 1] = carry
                poly, count = quotient, count + 1
            if count == 0:
                continue
            q = Add(*[c * s**k for k, c in enumerate(poly)])
            return (-sigmoid(-s.args[0])) ** count * q
    return None


def _tanh_sigmoid(node):
    """k + k*tanh(u) -> 2k*sigmoid(2u);  k - k*tanh(u) -> 2k*sigmoid(-2u)."""
    if not isinstance(node, Add):
        return None
    match = _constant_and_multiple(node, sympy.tanh)
    if match is None:
        return None
    k, sign, t = match
    return _replace_terms(node, (k, sign * k * t), 2 * k * sigmoid(2 * sign * t.args[0]))


_EXPAND_NODES = 200


def _cancels(d):
    """d == 0: structurally (c*sigmoid(u) - c*sigmoid(-u) makes 0 when SymPy builds the sum),
    else by expand where d is small. expand of a large d -- a second-order adjoint holds
    products of sums inside the arguments of functions, and expand's deep pass multiplies
    them out -- took minutes (fuzz seed 132 of tests/test_fuzz_frameworks.py: a grad_module
    compile that never finished)."""
    if d == 0:
        return True
    for n, _ in enumerate(sympy.preorder_traversal(d)):
        if n > _EXPAND_NODES:
            return False
    return sympy.expand(d) == 0


def _sigmoid_difference(node):
    """c*sigmoid(-u) - c*sigmoid(u) -> -c*tanh(u/2) (c any factor): the difference of two
    numbers near 1/2 cancels at small u, where tanh(u/2) keeps full relative accuracy."""
    if not isinstance(node, Add) or len(node.args) > 12:
        return None
    terms = node.args
    for i, a in enumerate(terms):
        for f in a.atoms(sigmoid):
            u = f.args[0]
            rest = a / f
            g = sigmoid(-u)
            for b in terms[i + 1:]:
                if b.has(g) and _cancels(b / g + rest):
                    # a + b = rest*(sigmoid(u) - sigmoid(-u)) = rest*tanh(u/2)
                    return _replace_terms(node, (a, b), rest * sympy.tanh(u / 2))
    return None


def _erfc_form(node):
    """k + k*erf(u) -> k*erfc(-u);  k - k*erf(u) -> k*erfc(u)."""
    if not isinstance(node, Add):
        return None
    match = _constant_and_multiple(node, sympy.erf)
    if match is None:
        return None
    k, sign, e = match
    return _replace_terms(node, (k, sign * k * e), k * erfc(-sign * e.args[0]))


def _log_of_factors(node, cls, term):
    """log(f(u)**p * rest) -> p*L(u) + log(c**p * rest) for the factors f of class `cls`,
    where term(u) = (L(u), c) with f(u) = c * exp(L(u)). f > 0, so the remaining product is
    positive wherever the log was real; a float remainder becomes its exact rational, so
    log(2 * 0.5) is exactly 0."""
    if not isinstance(node, log):
        return None
    logs, rest = [], []
    for base, power in _factors(node.args[0]):
        if isinstance(base, cls) and power.is_real:
            stable_log, extra = term(base.args[0])
            logs.append(power * stable_log)
            rest.append(Pow(extra, power))
        else:
            rest.append(Pow(base, power))
    if not logs:
        return None
    remaining = Mul(*rest)
    if isinstance(remaining, sympy.Float):
        remaining = sympy.Rational(float(remaining))
    return Add(*logs, log(remaining))


def _log_sigmoid(node):
    """log(sigmoid(u)**p * rest) -> p*log_sigmoid(u) + log(rest)."""
    return _log_of_factors(node, sigmoid, lambda u: (log_sigmoid(u), sympy.S.One))


def _log_exp_factor(node):
    """log(exp(a)**p * rest) -> p*a + log(rest): log(exp(800) * s) was inf (the max-shifted
    sum of exps of a softmax written out, see SymbolicTensor.sum)."""
    return _log_of_factors(node, exp, lambda u: (u, sympy.S.One))


def _log_ndtr_form(node):
    """log(erfc(u)**p * rest) -> p*log_ndtr(-sqrt(2)*u) + log(2**p * rest), since
    erfc(u) = 2*Phi(-sqrt(2)*u): finite where erfc underflows, exact for the probit's 1/2."""
    return _log_of_factors(node, sympy.erfc,
                           lambda u: (log_ndtr(-sympy.sqrt(2) * u), sympy.Integer(2)))


def _softplus_power(node):
    """(1 + exp(u))**p -> exp(p*softplus(u)) for non-integer p: sqrt(1 + exp(2x)) is exp(x) at
    x = 700 instead of inf (integer powers are left to the sigmoid rewrites)."""
    if not isinstance(node, Pow) or not node.exp.is_number or node.exp.is_integer:
        return None
    u = _one_plus_exp(node.base)
    if u is None:
        return None
    return exp(node.exp * softplus(u))


def _logsumexp_form(node):
    """log(sum_i c_i exp(u_i) [* rest]) -> logsumexp(u_i + log c_i) [+ log(rest)];
    log1p(exp(u)) -> softplus(u)."""
    if isinstance(node, log1p) and isinstance(node.args[0], exp):
        return softplus(node.args[0].args[0])
    if not isinstance(node, log):
        return None
    inside = node.args[0]
    exponents = _positive_exp_sum(inside)
    if exponents is not None:
        return _lse(exponents)
    if not isinstance(inside, Mul):
        return None
    pairs = _factors(inside)
    for i, (base, power) in enumerate(pairs):
        exponents = _positive_exp_sum(base)
        if exponents is not None and power.is_real:
            # the sum is positive, so the rest of the product is positive where log is real
            rest = _rebuild_mul(p for k, p in enumerate(pairs) if k != i)
            return power * _lse(exponents) + log(rest)
    return None


def _exp_ratio(node):
    """(sum_i c_i exp(u_i))**-p -> exp(-p * logsumexp(...)); then exp(z) * (sum of exps)
    -> sum of exp(u_i + z), so that every exponent is bounded."""
    if isinstance(node, Pow) and node.exp.is_negative:
        exponents = _positive_exp_sum(node.base)
        if exponents is not None:
            return exp(node.exp * _lse(exponents))
        return None
    if not isinstance(node, Mul):
        return None
    # A product whose exp-bearing factors include a normalizer exp(... - logsumexp(...)):
    # multiply out, so that each exp meets its normalizer in one exponent (exp_product merges).
    exp_factors = [f for f in node.args if _exp_bearing(f)]
    if len(exp_factors) >= 2 and any(_has_normalizer(f) for f in exp_factors):
        expanded = sympy.expand_mul(node)
        if expanded != node:
            return expanded
    return None


def _normalizer(e: sympy.Expr) -> bool:
    return e.has(logaddexp, logsumexp, softplus)


def _has_normalizer(factor: sympy.Expr) -> bool:
    return any(isinstance(e, exp) and _normalizer(e.args[0]) for e in factor.atoms(exp))


def _exp_bearing(factor: sympy.Expr) -> bool:
    """exp(u), or a sum whose every term has exactly one exp factor."""
    if isinstance(factor, exp):
        return True
    if isinstance(factor, Add):
        return all(sum(isinstance(f, exp) for f in Mul.make_args(t)) == 1 for t in factor.args)
    return False


def _times_exp(term: sympy.Expr, z: sympy.Expr) -> sympy.Expr | None:
    """term * exp(z) with the exponents merged, if term has exactly one exp factor."""
    factors = Mul.make_args(term)
    exps = [f for f in factors if isinstance(f, exp)]
    if len(exps) != 1:
        return None
    others = [f for f in factors if f is not exps[0]]
    return Mul(*others, exp(exps[0].args[0] + z))


def _hyperbolic(node):
    """log(cosh(u)) -> log_cosh(u) (logaddexp(u, -u) - log(2), a Taylor branch near 0);
    sinh(u)/cosh(u) -> tanh(u); log(u + sqrt(u**2 + 1)) -> asinh(u);
    c*cosh(u)**2 - c*sinh(u)**2 -> c; atanh(tanh(u)) and asinh(sinh(u)) -> u."""
    if isinstance(node, log) and isinstance(node.args[0], sympy.cosh):
        return log_cosh(node.args[0].args[0])
    if isinstance(node, (sympy.atanh, sympy.asinh)) and isinstance(
            node.args[0], sympy.tanh if isinstance(node, sympy.atanh) else sympy.sinh):
        return node.args[0].args[0]   # atanh(tanh(30)) was atanh(1.0) = inf
    if isinstance(node, log) and isinstance(node.args[0], Add) and len(node.args[0].args) == 2:
        # log(u + hypot(1, u)) (the hypot rewrite's sqrt(u**2 + 1)): log(1 + tiny) lost u
        # (0 at u = 1e-300) and hypot(1, u) + u cancels for u -> -oo
        a, b = node.args[0].args
        for h, u in ((a, b), (b, a)):
            if isinstance(h, hypot) and len(h.args) == 2 and sympy.S.One in h.args:
                v = h.args[0] if h.args[1] == 1 else h.args[1]
                if u == v or u == -v:
                    return sympy.asinh(u)
    if isinstance(node, Add):
        # c*cosh(u)**2 - c*sinh(u)**2 -> c: both overflow from |u| ~ 355 (inf - inf) and
        # cancel every digit well before
        for term in node.args:
            for factor in Mul.make_args(term):
                if isinstance(factor, Pow) and factor.exp == 2 and \
                        isinstance(factor.base, sympy.cosh):
                    c = term / factor
                    partner = -c * sympy.sinh(factor.base.args[0]) ** 2
                    if partner in node.args:
                        return _replace_terms(node, (term, partner), c)
    if isinstance(node, Mul):
        pairs = _factors(node)
        for i, (base, power) in enumerate(pairs):
            if isinstance(base, sympy.sinh) and power.is_positive and power.is_Integer:
                for j, (other, opower) in enumerate(pairs):
                    if isinstance(other, sympy.cosh) and other.args == base.args and opower.is_negative:
                        m = min(power, -opower)
                        new = [p for k, p in enumerate(pairs) if k not in (i, j)]
                        new += [(sympy.tanh(base.args[0]), m), (base, power - m), (other, opower + m)]
                        return _rebuild_mul(new)
    return None


def _log1p_form(node):
    """log(1 + u) -> log1p(u); log(1 - exp(u)) -> log(-expm1(u)) (log1p(-exp(u)) is -inf
    for u -> 0-, while -expm1(u) keeps every digit there)."""
    if isinstance(node, log) and isinstance(node.args[0], Add) and sympy.S.One in node.args[0].args:
        rest = node.args[0] - 1
        if isinstance(-rest, exp):
            return log(-expm1((-rest).args[0]))
        return log1p(rest)
    return None


def _log1mexp_form(node):
    """log(-expm1(u)) -> log1mexp(-u); log1p(-exp(u)) -> log1mexp(-u) (log(1 - exp(u)), u < 0):
    each spelling alone loses one end (0 instead of -exp(-37) at u = -37; -inf at u = -1e-20).
    log(expm1(u)) -> u + log1mexp(u) (the inverse softplus log(exp(u) - 1), u > 0): expm1
    overflows from u = 710 (89 in float32) where the value is u."""
    if isinstance(node, log):
        inner = node.args[0]
        coeff, rest = inner.as_coeff_Mul()
        if coeff == -1 and isinstance(rest, expm1):
            return log1mexp(-rest.args[0])
        if isinstance(inner, expm1):
            return inner.args[0] + log1mexp(inner.args[0])
        return None
    if isinstance(node, log1p):
        coeff, rest = node.args[0].as_coeff_Mul()
        if coeff == -1 and isinstance(rest, exp):
            return log1mexp(-rest.args[0])
    return None


def _log_power_term(term):
    """p*log(u) for u**p with a number p (p*log(|u|) for an even p); 2*log(hypot(a, b)) for
    a**2 + b**2 (no constant: log(1 + x**2) keeps log1p, exact for small x); else None."""
    if isinstance(term, Pow) and term.exp.is_Number and term.exp.is_real and term.exp != 0:
        p, u = term.exp, term.base
        if p == int(p) and int(p) % 2 == 0:
            return p * log(sympy.Abs(u))
        return p * log(u)
    if isinstance(term, Add) and not any(t.is_Number for t in term.args):
        roots = _squares(term)
        if roots is not None:
            return 2 * log(hypot(*roots))
    return None


def _log_power(node):
    """log(u**p) -> p*log(u) (p*log|u| for an even integer p); log(a**2 + b**2) ->
    2*log(hypot(a, b)); times a positive number c: + log(c). The power or the squares under-
    or overflow where the log does not: log(sigma**2) at sigma = 1e-200 was -inf (truly -921),
    log(2*pi*sigma**2) at 1e200 inf. Only one factor besides the number: log(u*v) is not
    log(u) + log(v) where both are negative."""
    if not isinstance(node, log):
        return None
    inner = node.args[0]
    coeff, rest = inner.as_coeff_Mul() if isinstance(inner, Mul) else (sympy.S.One, inner)
    if isinstance(rest, Mul):
        numbers = [f for f in rest.args if f.is_number]
        others = [f for f in rest.args if not f.is_number]
        if len(others) != 1 or not all(f.is_positive for f in numbers):
            return None
        coeff, rest = coeff * Mul(*numbers), others[0]
    if not coeff.is_positive:
        return None
    out = _log_power_term(rest)
    if out is None:
        return None
    return out if coeff == 1 else log(coeff) + out


def _expm1_form(node):
    """k*exp(u) - k -> k*expm1(u)."""
    if not isinstance(node, Add):
        return None
    constants = [t for t in node.args if t.is_Number]
    if len(constants) != 1:
        return None
    k = -constants[0]
    for term in node.args:
        coeff, rest = term.as_coeff_Mul()
        if isinstance(rest, exp) and coeff == k:
            return _replace_terms(node, (term, -k), k * expm1(rest.args[0]))
    return None


STABILIZE: tuple[Rewrite, ...] = (
    Rewrite("exp_product", "exp(a) * exp(b) -> exp(a + b)  (exp(a)/exp(b) -> exp(a - b))",
            _bottom_up(_exp_product),
            needs=(exp,)),
    Rewrite("sigmoid", "1/(1 + exp(-u)) and exp(u)/(1 + exp(u)) -> sigmoid(u); "
            "exp(u)**m / (1 + exp(u))**n -> sigmoid(u)**m * sigmoid(-u)**(n-m)",
            _bottom_up(_sigmoid_form),
            needs=(exp,)),
    Rewrite("sigmoid_complement", "1 - sigmoid(u) -> sigmoid(-u); s - s**2 -> s * sigmoid(-u); "
            "any polynomial in s = sigmoid(u) vanishing at s = 1 -> sigmoid(-u) * quotient",
            _bottom_up(_sigmoid_complement),
            needs=(sigmoid,)),
    Rewrite("tanh_sigmoid", "1 + tanh(u) -> 2*sigmoid(2u); 1 - tanh(u) -> 2*sigmoid(-2u)",
            _bottom_up(_tanh_sigmoid),
            needs=(sympy.tanh,)),
    Rewrite("sigmoid_difference", "c*sigmoid(u) - c*sigmoid(-u) -> c*tanh(u/2)",
            _bottom_up(_sigmoid_difference),
            needs=(sigmoid,)),
    Rewrite("erfc", "1 + erf(u) -> erfc(-u); 1 - erf(u) -> erfc(u)",
            _bottom_up(_erfc_form),
            needs=(sympy.erf,)),
    Rewrite("log_sigmoid", "log(sigmoid(u)) -> log_sigmoid(u)",
            _bottom_up(_log_sigmoid),
            needs=(log,)),
    Rewrite("log_ndtr", "log(erfc(u)) -> log_ndtr(-sqrt(2)*u) + log(2)  (log of the normal CDF)",
            _bottom_up(_log_ndtr_form),
            needs=(log,)),
    Rewrite("log_exp", "log(exp(a) * b) -> a + log(b)", _bottom_up(_log_exp_factor),
            needs=(log,)),
    Rewrite("logsumexp", "log(1 + exp(u)) -> softplus(u); log(exp(a) + exp(b)) -> logaddexp(a, b); "
            "log(sum of exps) -> logsumexp(...)",
            _bottom_up(_logsumexp_form),
            needs=(log, log1p)),
    Rewrite("softplus_power", "(1 + exp(u))**p -> exp(p*softplus(u)) for non-integer p",
            _bottom_up(_softplus_power),
            needs=(exp,)),
    Rewrite("exp_ratio", "exp(a) / (exp(a) + exp(b)) -> exp(a - logaddexp(a, b))",
            _bottom_up(_exp_ratio),
            needs=(exp,)),
    Rewrite("hyperbolic", "log(cosh(u)) -> log_cosh(u); sinh(u)/cosh(u) -> tanh(u); "
            "log(u + sqrt(u**2 + 1)) -> asinh(u); cosh(u)**2 - sinh(u)**2 -> 1; "
            "atanh(tanh(u)) -> u",
            _bottom_up(_hyperbolic),
            needs=(log, sympy.sinh, sympy.atanh)),
    Rewrite("sigmoid_normalizer", "exp(a - logaddexp(a, b)) -> sigmoid(a - b)",
            _bottom_up(_sigmoid_from_normalizer),
            needs=(exp,)),
    Rewrite("log1p", "log(1 + u) -> log1p(u)", _bottom_up(_log1p_form),
            needs=(log,)),
    Rewrite("log_power", "log(c*u**p) -> log(c) + p*log(u) (p*log|u| for even p); "
            "log(a**2 + b**2) -> 2*log(hypot(a, b))", _bottom_up(_log_power),
            needs=(log,)),
    Rewrite("expm1", "exp(u) - 1 -> expm1(u)", _bottom_up(_expm1_form),
            needs=(exp,)),
    Rewrite("log1mexp", "log(1 - exp(-x)) -> log1mexp(x) (log(-expm1(-x)) below log 2, "
            "log1p(-exp(-x)) above); log(exp(x) - 1) -> x + log1mexp(x)", _bottom_up(_log1mexp_form),
            needs=(log, log1p)),
    Rewrite("expm1_ratio", "exp(u) / expm1(u) -> 1 / (-expm1(-u))", _bottom_up(_expm1_ratio),
            needs=(expm1,)),
    Rewrite("hypot", "sqrt(a**2 + b**2) -> hypot(a, b), also a**2 + c and any odd power of the "
            "root (1/sqrt(x**2 + 1) -> 1/hypot(x, 1))", _bottom_up(_hypot_form)),
    Rewrite("difference_of_squares", "(1 - u**2)**p -> ((1 - u)*(1 + u))**p for p < 0 or "
            "fractional (asin', acos', atanh')", _bottom_up(_difference_of_squares)),
    Rewrite("removable_singularity",
            "sin(u)/u -> sinc(u); expm1(u)/u -> exprel(u); log1p(u)/u -> log1prel(u); "
            "sinh, tan, tanh likewise; u/expm1(u) -> inv_exprel(u); u/sinh(u) -> inv_sinhc(u); "
            "(1 - cos(u))/u**2 -> sinc(u/2)**2/2 (Taylor branch at 0; also f(c*u)**p * u**q)",
            _bottom_up(_removable_singularity),
            needs=(sympy.sin, sympy.cos, expm1, log1p, sympy.sinh, sympy.tan, sympy.tanh)),
    Rewrite("piecewise_zero", "a * Piecewise((e, c), (0, True)) -> Piecewise((a*e, c), (0, True))",
            _bottom_up(_piecewise_zero),
            needs=(sympy.Piecewise,)),
    Rewrite("common_power", "a**(m*p) * b**(-m*q) -> (a**p / b**q)**m: the quotient keeps its "
            "scale ((x**2/t)**2, not x**4/t**2)", _bottom_up(_common_power)),
)


def _heads(expr) -> set[type]:
    """The classes of the nodes of expr (each shared subtree walked once)."""
    seen, heads, stack = set(), set(), [expr]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        heads.add(type(e))
        stack.extend(e.args)
    return heads


def stabilize(expr: sympy.Expr) -> tuple[sympy.Expr, tuple[str, ...]]:
    """Apply ``STABILIZE`` until nothing changes.

    Args:
        expr: a SymPy expression (forward or derivative) over real symbols.

    Returns:
        The rewritten expression and the names of the rewrites that fired, in ``STABILIZE``
        order.
    """
    fired: set[str] = set()
    heads = _heads(expr)
    for _ in range(MAX_PASSES):
        changed = False
        for rewrite in STABILIZE:
            if rewrite.needs and not any(issubclass(h, rewrite.needs) for h in heads):
                continue   # nothing it matches on: the walk would change nothing
            new = rewrite.apply(expr)
            if new != expr:
                fired.add(rewrite.name)
                expr = new
                heads = _heads(expr)
                changed = True
        if not changed:
            break
    return expr, tuple(r.name for r in STABILIZE if r.name in fired)
