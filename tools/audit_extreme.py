"""Audit: forward values and gradients of symgrad-compiled formulas at extreme inputs, against
mpmath (50 digits, escalating) and torch, on the NumPy and C targets in float32 and float64.

    python tools/audit_extreme.py [--targets numpy,c] [--only NAME,...] [--verbose]

Each case is a formula over a namespace (SymPy for the truth, symgrad and torch for the code
under test); one module per (case, target, dtype) evaluates every point at once. A finding is
printed where the generated value is off by more than the tolerance (1e-5 float32, 1e-12
float64, relative, with an absolute floor of a few times the dtype's tiny), or non-finite where
the truth is finite and representable. Torch's value is printed alongside, so a finding where
torch agrees with symgrad is visible as such.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import warnings
from types import SimpleNamespace

import mpmath
import numpy as np
import sympy

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("SYMGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="sg-audit-"))

import symgrad as sg  # noqa: E402
from symgrad.numerics_reference import ReferenceError, reference_value  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    torch = None

TOL = {np.float32: 1e-5, np.float64: 1e-12}


# ----------------------------------------------------------------------------- namespaces

def _sympy_ns():
    s = sympy
    return SimpleNamespace(
        exp=s.exp, log=s.log, sin=s.sin, cos=s.cos, tan=s.tan, sqrt=s.sqrt, tanh=s.tanh,
        sinh=s.sinh, cosh=s.cosh, asinh=s.asinh, acosh=s.acosh, atanh=s.atanh, atan=s.atan,
        asin=s.asin, acos=s.acos, atan2=s.atan2, abs=s.Abs, erf=s.erf, erfc=s.erfc,
        log1p=lambda x: s.log(1 + x), expm1=lambda x: s.exp(x) - 1,
        sigmoid=lambda x: 1 / (1 + s.exp(-x)), softplus=lambda x: s.log(1 + s.exp(x)),
        log_sigmoid=lambda x: -s.log(1 + s.exp(-x)), hypot=lambda a, b: s.sqrt(a * a + b * b),
        log2=lambda x: s.log(x) / s.log(2), log10=lambda x: s.log(x) / s.log(10),
        exp2=lambda x: 2 ** x, rsqrt=lambda x: 1 / s.sqrt(x), pi=s.pi,
        xlogy=lambda x, y: x * s.log(y), logit=lambda p: s.log(p / (1 - p)),
        pow=lambda a, b: a ** b, square=lambda x: x * x, reciprocal=lambda x: 1 / x,
        cube=lambda x: x ** 3)


def _sg_ns():
    return SimpleNamespace(
        exp=sg.exp, log=sg.log, sin=sg.sin, cos=sg.cos, tan=sg.tan, sqrt=sg.sqrt, tanh=sg.tanh,
        sinh=sg.sinh, cosh=sg.cosh, asinh=sg.asinh, acosh=sg.acosh, atanh=sg.atanh,
        atan=sg.atan, asin=sg.asin, acos=sg.acos, atan2=sg.atan2, abs=sg.abs, erf=sg.erf,
        erfc=sg.erfc, log1p=sg.log1p, expm1=sg.expm1, sigmoid=sg.sigmoid,
        softplus=sg.softplus, log_sigmoid=sg.log_sigmoid, hypot=sg.hypot, log2=sg.log2,
        log10=sg.log10, exp2=sg.exp2, rsqrt=sg.rsqrt, pi=math.pi, xlogy=sg.xlogy,
        logit=sg.logit, pow=sg.pow, square=sg.square, reciprocal=sg.reciprocal,
        cube=lambda x: x ** 3)


def _torch_ns():
    t = torch
    return SimpleNamespace(
        exp=t.exp, log=t.log, sin=t.sin, cos=t.cos, tan=t.tan, sqrt=t.sqrt, tanh=t.tanh,
        sinh=t.sinh, cosh=t.cosh, asinh=t.asinh, acosh=t.acosh, atanh=t.atanh, atan=t.atan,
        asin=t.asin, acos=t.acos, atan2=t.atan2, abs=t.abs, erf=t.erf, erfc=t.erfc,
        log1p=t.log1p, expm1=t.expm1, sigmoid=t.sigmoid,
        softplus=t.nn.functional.softplus, log_sigmoid=t.nn.functional.logsigmoid,
        hypot=t.hypot, log2=t.log2, log10=t.log10, exp2=t.exp2, rsqrt=t.rsqrt, pi=math.pi,
        xlogy=t.xlogy, logit=t.logit, pow=t.pow, square=t.square, reciprocal=t.reciprocal,
        cube=lambda x: x ** 3)


# ----------------------------------------------------------------------------- cases

def one(*vals):
    return [(v,) for v in vals]


TINY64 = [5e-324, 1e-310, 1e-300, 1e-200, 1e-160, 1e-150, 1e-100, 1e-20, 1e-8, 1e-4]
TINY32 = [1e-45, 1e-40, 1e-38, 1e-30, 1e-20, 1e-10, 1e-4]
SYM = lambda vals: [(v,) for v in vals] + [(-v,) for v in vals]  # noqa: E731

CASES = []


def case(name, n, fn, points, dtypes=("float32", "float64")):
    CASES.append(SimpleNamespace(name=name, n=n, fn=fn, points=points, dtypes=dtypes))


# removable singularities and small-argument ratios
case("sinc", 1, lambda ns, x: ns.sin(x) / x,
     SYM(TINY64 + TINY32 + [0.1, 1.0, 3.0, 100.0, 1e10, 1e30, 1e300]))
case("exprel_naive", 1, lambda ns, x: (ns.exp(x) - 1) / x,
     SYM(TINY64 + TINY32 + [0.1, 1.0, 30.0]) + one(80.0, 700.0, -700.0, -1e4))
case("exprel_expm1", 1, lambda ns, x: ns.expm1(x) / x,
     SYM(TINY64 + TINY32 + [0.1, 1.0, 30.0]) + one(80.0, 700.0, -700.0, -1e4))
case("bernoulli", 1, lambda ns, x: x / (ns.exp(x) - 1),
     SYM(TINY64 + TINY32 + [0.1, 1.0, 30.0, 80.0, 700.0, 1e4]))
case("x_over_expm1", 1, lambda ns, x: x / ns.expm1(x),
     SYM(TINY64 + TINY32 + [0.1, 1.0, 30.0, 80.0, 700.0, 1e4]))
case("sinc_squared", 1, lambda ns, x: (ns.sin(x) / x) ** 2, SYM([1e-300, 1e-20, 1e-4, 0.5, 2.0, 1e10]))
case("sinc_scaled", 1, lambda ns, x: ns.sin(3 * x) / x, SYM([1e-300, 1e-20, 1e-4, 0.5, 2.0, 1e10]))
case("log1p_over_x", 1, lambda ns, x: ns.log1p(x) / x,
     SYM(TINY64 + TINY32 + [0.1, 0.5]) + one(1.0, 30.0, 1e10, 1e300))
case("one_minus_cos_over_x2", 1, lambda ns, x: (1 - ns.cos(x)) / (x * x),
     SYM([1e-150, 1e-20, 1e-8, 1e-4, 0.1, 1.0, 3.0, 1e10]))
case("tan_over_x", 1, lambda ns, x: ns.tan(x) / x, SYM(TINY64 + TINY32 + [0.1, 1.0]))
case("x_over_sinh", 1, lambda ns, x: x / ns.sinh(x),
     SYM(TINY64 + TINY32 + [0.1, 1.0, 30.0, 80.0, 700.0]))
case("xlogx", 1, lambda ns, x: x * ns.log(x),
     one(5e-324, 1e-310, 1e-300, 1e-45, 1e-40, 1e-38, 1e-20, 0.5, 1.0, 1e30, 1e300))
case("xlogy", 2, lambda ns, x, y: ns.xlogy(x, y),
     [(1e-300, 1e-300), (1e-40, 1e-40), (2.0, 1e-300), (1e300, 1e300), (3.0, 0.5)])
# log1mexp
case("log1mexp_naive", 1, lambda ns, x: ns.log(1 - ns.exp(-x)),
     one(1e-300, 1e-40, 1e-20, 1e-8, 1e-4, 0.5, 0.693, 1.0, 30.0, 80.0, 700.0, 1e3, 1e10))
case("log_neg_expm1", 1, lambda ns, x: ns.log(-ns.expm1(-x)),
     one(1e-300, 1e-40, 1e-20, 1e-8, 1e-4, 0.5, 0.693, 1.0, 30.0, 80.0, 700.0, 1e3, 1e10))
case("log1mexp_log1p", 1, lambda ns, x: ns.log1p(-ns.exp(-x)),
     one(1e-300, 1e-40, 1e-20, 1e-8, 1e-4, 0.5, 0.693, 1.0, 30.0, 80.0, 700.0, 1e3))
# logaddexp with huge arguments
case("logaddexp_huge", 2, lambda ns, a, b: ns.log(ns.exp(a) + ns.exp(b)),
     [(1e30, 1e30), (1e30, -1e30), (-1e30, -1e30), (1e300, 1e300), (1e300, -1e300),
      (-1e300, 1.0), (1e4, 1e4 + 1), (-1e4, -1e4), (3e38, 3e38), (1e38, -1e38)])
case("softplus_beta", 1, lambda ns, x: ns.log(1 + ns.exp(10 * x)) / 10,
     SYM([1e4, 1e3, 100.0, 1.0, 1e-20]) + one(1e30, -1e30, 1e300, -1e300))
case("softplus_op", 1, lambda ns, x: ns.softplus(x), SYM([1e4, 1e30, 1e300, 100.0, 1e-20]))
# hypot / norms of two
case("hypot_naive", 2, lambda ns, x, y: ns.sqrt(x * x + y * y),
     [(1e200, 1e200), (1e200, 1.0), (1e-200, 1e-200), (1e-300, 0.0), (3.0, 4.0), (1e30, 1e30),
      (1e20, 1e20), (1e-30, 1e-30), (1e-25, 1e-25), (-1e200, 3e199), (1e-160, 1e-160)])
case("hypot_op", 2, lambda ns, x, y: ns.hypot(x, y),
     [(1e200, 1e200), (1e200, 1.0), (1e-200, 1e-200), (1e-300, 1e-300), (3.0, 4.0),
      (1e30, 1e30), (1e-30, 1e-30), (-1e200, 3e199), (1e-160, 1e-160)])
case("sqrt_x2_plus_1", 1, lambda ns, x: ns.sqrt(x * x + 1), SYM([1e200, 1e30, 1e20, 1.0, 1e-8]))
case("rsqrt_x2_plus_1", 1, lambda ns, x: 1 / ns.sqrt(1 + x ** 2),
     SYM([1e200, 1e30, 1e20, 1.0, 1e-8]))
case("atan2", 2, lambda ns, y, x: ns.atan2(y, x),
     [(1e-300, 1e-300), (1e-200, 1e-200), (1e-40, 1e-40), (1e-30, 1e-30), (1e-20, 1e-20),
      (1e300, 1e300), (1e200, 1e200), (1e30, 1e30), (1e20, 1e20), (1.0, -1e300),
      (-1e-300, -1.0), (1.0, 1e-300), (3.0, -4.0)])
case("atan", 1, lambda ns, x: ns.atan(x), SYM([1e300, 1e200, 1e30, 1e20, 1e10, 1.0, 1e-300]))
# inverse hyperbolics
case("asinh", 1, lambda ns, x: ns.asinh(x),
     SYM([1e300, 1e200, 1e155, 1e38, 1e30, 1e20, 1e10, 1.0, 1e-8, 1e-300, 1e-40]))
case("acosh", 1, lambda ns, x: ns.acosh(x),
     one(1.0 + 2.0 ** -52, 1.0 + 2.0 ** -23, 1.0 + 1e-10, 1.0 + 1e-6, 2.0, 1e10, 1e20, 1e30,
         1e38, 1e155, 1e200, 1e300))
case("atanh", 1, lambda ns, x: ns.atanh(x),
     SYM([1.0 - 2.0 ** -53, 1.0 - 2.0 ** -24, 1.0 - 1e-10, 1.0 - 1e-6, 0.5, 1e-8, 1e-300,
          1e-40]))
case("asin", 1, lambda ns, x: ns.asin(x),
     SYM([1.0 - 2.0 ** -53, 1.0 - 2.0 ** -24, 1.0 - 1e-10, 0.5, 1e-300, 1e-40]))
case("acos", 1, lambda ns, x: ns.acos(x),
     SYM([1.0 - 2.0 ** -53, 1.0 - 2.0 ** -24, 1.0 - 1e-10, 0.5, 1e-300, 1e-40]))
case("asinh_naive", 1, lambda ns, x: ns.log(x + ns.sqrt(x * x + 1)),
     one(1e300, 1e200, 1e30, 1e10, 1.0, 1e-8, 1e-300))
# hyperbolics at large x
case("cosh", 1, lambda ns, x: ns.cosh(x), SYM([1.0, 30.0, 88.0, 89.0, 700.0, 709.0, 710.0]))
case("sinh", 1, lambda ns, x: ns.sinh(x),
     SYM([1e-300, 1e-40, 1e-8, 1.0, 30.0, 88.0, 89.0, 700.0, 709.0, 710.0]))
case("tanh_huge", 1, lambda ns, x: ns.tanh(x), SYM([1e-300, 1e-40, 1e30, 1e300]))
case("sech2_naive", 1, lambda ns, x: 1 / ns.cosh(x) ** 2, SYM([1.0, 30.0, 100.0, 400.0, 800.0]))
# sigmoids and logits in float32
case("sigmoid_naive", 1, lambda ns, x: 1 / (1 + ns.exp(-x)),
     SYM([1e-40, 1.0, 20.0, 40.0, 88.0, 100.0, 200.0, 745.0, 1e4, 1e30, 1e300]))
case("sigmoid_op", 1, lambda ns, x: ns.sigmoid(x),
     SYM([1e-40, 1.0, 20.0, 40.0, 88.0, 100.0, 200.0, 745.0, 1e4, 1e30, 1e300]))
case("log_sigmoid_naive", 1, lambda ns, x: ns.log(1 / (1 + ns.exp(-x))),
     SYM([1e-40, 1.0, 20.0, 40.0, 88.0, 100.0, 745.0, 1e4, 1e30, 1e300]))
case("log_sigmoid_op", 1, lambda ns, x: ns.log(ns.sigmoid(x)),
     SYM([1e-40, 1.0, 20.0, 40.0, 88.0, 100.0, 745.0, 1e4, 1e30, 1e300]))
case("logit_naive", 1, lambda ns, p: ns.log(p / (1 - p)),
     one(1e-300, 1e-40, 1e-20, 1e-8, 0.25, 0.5, 0.75, 1 - 1e-8, 1 - 2.0 ** -24, 1 - 2.0 ** -53))
case("logit_op", 1, lambda ns, p: ns.logit(p),
     one(1e-300, 1e-40, 1e-20, 1e-8, 0.25, 0.5, 0.75, 1 - 1e-8, 1 - 2.0 ** -24, 1 - 2.0 ** -53))
case("logit_two_logs", 1, lambda ns, p: ns.log(p) - ns.log(1 - p),
     one(1e-300, 1e-40, 1e-20, 1e-8, 0.25, 0.5, 0.75, 1 - 1e-8, 1 - 2.0 ** -24, 1 - 2.0 ** -53))
# powers
case("pow_2_5", 1, lambda ns, x: x ** 2.5, one(1e-300, 1e-200, 1e-40, 1e-20, 1.0, 1e30, 1e100))
case("pow_half", 1, lambda ns, x: ns.pow(x, 0.5), one(1e-300, 1e-40, 1.0, 1e30, 1e300))
case("pow_third", 1, lambda ns, x: x ** (1.0 / 3.0), one(1e-300, 1e-40, 1.0, 1e30, 1e300))
case("pow_xy", 2, lambda ns, x, y: x ** y,
     [(1e-300, 0.5), (1e300, 0.5), (1e-300, -0.5), (1e-40, 1.5), (2.0, 1000.0), (2.0, -1000.0),
      (0.5, 1e-300), (1e10, 30.0), (1e-10, 2.5), (3.0, 2.5)])
case("cube", 1, lambda ns, x: ns.cube(x), SYM([1e-110, 1e-15, 1.0, 1e100, 1e12]))
case("square_tiny", 1, lambda ns, x: x * x, SYM([1e-160, 1e-200, 1e-20, 1e150]))
case("exp2", 1, lambda ns, x: ns.exp2(x), SYM([1e-300, 1.0, 100.0, 1000.0, 127.0]))
case("log2_log10", 1, lambda ns, x: ns.log2(x) + ns.log10(x),
     one(5e-324, 1e-300, 1e-40, 1.0, 1e30, 1e300))
case("rsqrt", 1, lambda ns, x: ns.rsqrt(x), one(5e-324, 1e-300, 1e-40, 1e-20, 1.0, 1e30, 1e300))
case("reciprocal", 1, lambda ns, x: ns.reciprocal(x), SYM([1e-300, 1e-154, 1e-20, 1e-19, 1e30]))
# division by tiny
case("div_tiny", 2, lambda ns, x, y: x / y,
     [(1e-300, 1e-300), (1.0, 1e-160), (1e-20, 1e-20), (1e-30, 1e-30), (1e-40, 1e-40),
      (1e300, 1e300), (1e30, 1e30), (1e-300, 1e300), (1e20, 1e-20), (3.0, 7.0)])
case("ratio_of_tinies", 2, lambda ns, x, y: x * y / (x * x + y * y),
     [(1e-200, 1e-200), (1e-30, 1e-30), (1e200, 1e200), (1e30, 1e30), (1.0, 2.0)])
# trig at extremes
case("sin_cos", 1, lambda ns, x: ns.sin(x) * ns.cos(x),
     SYM([1e-300, 1e-40, 1.0, 1e5, 1e10, 1e22, 1e30, 1e300]))
case("tan", 1, lambda ns, x: ns.tan(x), SYM([1e-300, 1e-40, 1.5707963, 1.5707963267948966,
                                            1e10, 1e30]))
# erf family
case("erf", 1, lambda ns, x: ns.erf(x), SYM([1e-300, 1e-40, 1e-20, 0.4, 0.6, 1.0, 3.0, 6.0,
                                            27.0, 1e10]))
case("erfc", 1, lambda ns, x: ns.erfc(x), SYM([1e-300, 1e-40, 0.4, 0.6, 1.0, 3.0, 9.0, 10.0,
                                              26.0, 27.0, 1e10]))
case("gelu_erf", 1, lambda ns, x: 0.5 * x * (1 + ns.erf(x / math.sqrt(2))),
     SYM([1e4, 1e30, 1e300, 10.0, 1e-40, 1e-300]))
case("gelu_tanh", 1,
     lambda ns, x: 0.5 * x * (1 + ns.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3))),
     SYM([1e4, 1e10, 1e20, 1e30, 1e38, 1e100, 1e300, 10.0, 1e-40, 1e-300]))
case("mish", 1, lambda ns, x: x * ns.tanh(ns.log(1 + ns.exp(x))),
     SYM([1e4, 1e30, 1e300, 30.0, 1e-40, 1e-300]))
case("mish_op", 1, lambda ns, x: x * ns.tanh(ns.softplus(x)),
     SYM([1e4, 1e30, 1e300, 30.0, 1e-40, 1e-300]))
case("swish", 1, lambda ns, x: x * ns.sigmoid(x), SYM([1e4, 1e30, 1e300, 1e-40, 1e-300]))
case("elu", 1, lambda ns, x: ns.expm1(x), SYM([1e4, 1e-300, 1e-40, 80.0]) + one(-1e300))
case("softsign", 1, lambda ns, x: x / (1 + ns.abs(x)), SYM([1e300, 1e30, 1e-300, 1e-40]))
case("log_cosh", 1, lambda ns, x: ns.log(ns.cosh(x)), SYM([1e-300, 1e-40, 1e-8, 1e4, 1e30, 1e300]))
case("softclip_tanh", 1, lambda ns, x: 5 * ns.tanh(x / 5), SYM([1e-300, 1e-40, 1e4, 1e300]))
# exp/log at the extremes
case("exp", 1, lambda ns, x: ns.exp(x), SYM([1e-300, 88.0, 88.7, 700.0, 709.0]) + one(-745.0, -103.0))
case("log", 1, lambda ns, x: ns.log(x), one(5e-324, 1e-300, 1e-45, 1e-40, 1.0 + 2.0 ** -52,
                                          1.0 + 2.0 ** -23, 1e300, 3e38))
case("log1p", 1, lambda ns, x: ns.log1p(x), one(-1 + 2.0 ** -53, -1 + 2.0 ** -24, -0.5, 1e-300,
                                              -1e-300, 1e-40, 1e300, 3e38))
case("exp_minus_x2", 1, lambda ns, x: ns.exp(-x * x), SYM([1e-300, 1.0, 26.0, 27.0, 1e155, 1e200]))
case("sqrt", 1, lambda ns, x: ns.sqrt(x), one(5e-324, 1e-310, 1e-300, 1e-45, 1e-40, 1e300, 3e38))
case("abs_sqrt", 1, lambda ns, x: ns.sqrt(ns.abs(x)), SYM([1e-300, 1e-40, 1.0, 1e300]))
case("sqrt_of_square", 1, lambda ns, x: ns.sqrt(x * x), SYM([1e-300, 1e-200, 1e-40, 1e-30,
                                                             1.0, 1e30, 1e200, 1e300]))
case("exp_log", 1, lambda ns, x: ns.exp(ns.log(x) * 0.5), one(1e-300, 1e-40, 1.0, 1e300))


# ----------------------------------------------------------------------------- evaluation

_REF_CACHE: dict = {}


def truth(expr, syms, point):
    key = (expr, point)
    if key not in _REF_CACHE:
        try:
            # escalation alone is fooled when two precisions cancel alike (exp(x) - 1 is 0 at
            # 50 and 120 digits for x = 1e-300): start past the inputs' exponent range
            mags = [abs(math.log10(abs(v))) for v in point if v != 0]
            big = [min(abs(v), 3000.0) / 2.3 for v in point]
            dps = min(int(60 + 2 * max(mags, default=0) + max(big, default=0)), 1000)
            _REF_CACHE[key] = reference_value(expr, dict(zip(syms, point)), prec=dps)
        except (ReferenceError, ValueError, TypeError, ZeroDivisionError, OverflowError):
            _REF_CACHE[key] = None
    return _REF_CACHE[key]


def compile_case(c, target, dtype, xs):
    ns = _sg_ns()
    names = [f"x{i}" for i in range(c.n)]
    fwd = eval(f"lambda {', '.join(names)}: fn(ns, {', '.join(names)})", {"fn": c.fn, "ns": ns})
    return sg.compile(fwd, *xs, target=target, cache_ok=False)


def run_torch(c, dtype, xs):
    if torch is None:
        return None, None
    ns = _torch_ns()
    ts = [torch.tensor(x.astype(dtype), requires_grad=True) for x in xs]
    try:
        y = c.fn(ns, *ts)
        y.sum().backward()
    except Exception as exc:  # noqa: BLE001
        return f"torch error {exc}", None
    return y.detach().numpy(), [t.grad.numpy() if t.grad is not None else None for t in ts]


def classify(got, ref, dtype):
    """None if acceptable, else an error description (relative error or 'nonfinite')."""
    info = np.finfo(dtype)
    if ref is None:
        return None if not math.isfinite(got) else "no truth"  # undefined: judged by hand
    if not math.isfinite(ref) or abs(ref) > float(info.max):
        # truth overflows the dtype: inf of the same sign is right
        if math.isinf(got) and (got > 0) == (ref > 0):
            return None
        if abs(ref) > float(info.max) * 0.99 and math.isfinite(got) and abs(got) >= float(info.max) * 0.99:
            return None
        return f"want {'+' if ref > 0 else '-'}inf"
    if not math.isfinite(got):
        return "nonfinite"
    floor = 4 * float(info.smallest_subnormal) if abs(ref) < float(info.tiny) else 0.0
    tiny_abs = 2 * float(info.tiny) * float(info.eps)
    err = abs(got - ref)
    if err <= TOL[dtype] * abs(ref) + max(floor, tiny_abs):
        return None
    if abs(ref) < float(info.tiny) and err < 2 * float(info.tiny):
        return None  # subnormal truth: a few subnormal steps off is accepted
    rel = err / abs(ref) if ref != 0 else math.inf
    return f"rel {rel:.2e}"


def audit_case(c, targets, verbose=False):
    sy = _sympy_ns()
    syms = sympy.symbols(f"x0:{c.n}", real=True)
    expr = c.fn(sy, *syms)
    grads = [sympy.diff(expr, s) for s in syms]
    findings = []
    for dtype_name in c.dtypes:
        dtype = np.float32 if dtype_name == "float32" else np.float64
        info = np.finfo(dtype)
        pts = []
        for p in c.points:
            q = tuple(float(dtype(v)) for v in p)
            if all(math.isfinite(v) for v in q) and q not in pts:
                pts.append(q)
        if not pts:
            continue
        xs = [np.array([p[i] for p in pts], dtype=dtype) for i in range(c.n)]
        ty, tg = run_torch(c, dtype, xs)
        for target in targets:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    mod = compile_case(c, target, dtype, xs)
                    with np.errstate(all="ignore"):
                        y = mod.forward(*xs)
                        y = y[0] if isinstance(y, tuple) else y
                        g = mod.backward(np.ones_like(xs[0]), *xs)
            except Exception as exc:  # noqa: BLE001
                findings.append(f"{c.name} [{target} {dtype_name}] COMPILE/RUN ERROR {exc!r}")
                continue
            y = np.broadcast_to(np.asarray(y), xs[0].shape)
            for k, p in enumerate(pts):
                rows = [("f", expr, y[k], None if ty is None or isinstance(ty, str) else ty[k])]
                for i in range(c.n):
                    gi = np.broadcast_to(np.asarray(g[i]), xs[0].shape)
                    tv = None
                    if tg is not None and tg[i] is not None:
                        tv = tg[i][k]
                    rows.append((f"d{i}", grads[i], gi[k], tv))
                for what, e, got, tv in rows:
                    ref = truth(e, syms, p)
                    bad = classify(float(got), ref, dtype)
                    if bad or verbose:
                        tbad = None if tv is None else classify(float(tv), ref, dtype)
                        findings.append(
                            f"{c.name:22s} [{target:5s} {dtype_name}] {what} at "
                            f"{', '.join(f'{v:.9g}' for v in p)}: got {float(got):.17g} "
                            f"truth {ref!r} -> {bad}; torch {None if tv is None else float(tv):.17g}"
                            f" ({'ok' if not tbad else tbad})" if tv is not None else
                            f"{c.name:22s} [{target:5s} {dtype_name}] {what} at "
                            f"{', '.join(f'{v:.9g}' for v in p)}: got {float(got):.17g} "
                            f"truth {ref!r} -> {bad}; torch n/a")
    return findings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="numpy,c")
    ap.add_argument("--only", default="")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    targets = args.targets.split(",")
    only = set(filter(None, args.only.split(",")))
    total = 0
    for c in CASES:
        if only and c.name not in only:
            continue
        found = audit_case(c, targets, args.verbose)
        total += len(found)
        for line in found:
            print(line, flush=True)
    print(f"# {total} findings")


if __name__ == "__main__":
    main()
