"""Defects found by tools/audit_extreme.py (forward values and gradients at extreme inputs, NumPy
and C targets, float32 and float64, against mpmath at 50+ digits and torch's conventions): each
test pins one fix against mpmath truth or torch."""
import math
import os
import shutil

import mpmath
import numpy as np
import pytest
import sympy

import symgrad as sg
from symgrad.emit.cprinter import print_c

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
TARGETS = ["numpy", pytest.param("c", marks=pytest.mark.skipif(not HAVE_CC, reason="no C compiler"))]
DTYPES = [np.float32, np.float64]
RTOL = {np.float32: 4e-6, np.float64: 2e-14}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path))


def _run(fn, xs, target):
    """forward and gradients (of sum) of fn at the arrays xs."""
    mod = sg.compile(fn, *xs, target=target, cache_ok=False)
    with np.errstate(all="ignore"):
        y = mod.forward(*xs)
        y = y[0] if isinstance(y, tuple) else y
        grads = mod.backward(np.ones_like(np.asarray(y)), *xs)
    assert np.asarray(y).dtype == xs[0].dtype
    return np.asarray(y), [np.asarray(g) for g in grads]


def _mp(values):
    return [mpmath.mpf(float(v)) for v in values]


def _close(got, ref, dtype, rtol=None):
    ref = np.asarray([float(r) for r in ref])
    tiny = float(np.finfo(dtype).tiny)
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=rtol or RTOL[dtype],
                               atol=4 * tiny)


# ----------------------------------------------------------------------------- C constants

def test_c_prints_number_valued_expressions_as_one_literal():
    # SymPy's C printer wrote log(2) as M_LN2 (a double in float code) and sqrt(pi) as
    # sqrtf(3.1415927f) (pi rounded before the root)
    x = sympy.Symbol("x")
    text = print_c(x - sympy.log(2) + x / sympy.sqrt(sympy.pi) + sympy.log(10) * x, "float")
    assert "M_" not in text and "sqrtf" not in text and "logf" not in text
    assert "0.6931472f" in text and "1.7724539f" in text and "2.3025851f" in text
    assert "0.6931471805599453" in print_c(x - sympy.log(2), "double")


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_c_float_log_cosh_is_exactly_zero_at_zero():
    # log(cosh(x)) -> logaddexp(x, -x) - log(2): with a double M_LN2 the float kernel gave
    # 1.9e-9 at x = 0 (log1pf(1) - M_LN2 evaluated in double)
    x = np.asarray([0.0, -0.0, 1e-30, 0.25, 3.0, 50.0], np.float32)
    y, g = _run(lambda x: sg.log(x.cosh()), [x], "c")
    yn, gn = _run(lambda x: sg.log(x.cosh()), [x], "numpy")
    assert y[0] == 0 and y[1] == 0 and y[2] == 0
    np.testing.assert_allclose(y, yn, rtol=4e-7, atol=0)
    ref = [mpmath.log(mpmath.cosh(v)) for v in _mp(x[3:])]
    _close(y[3:], ref, np.float32, rtol=1e-6)


# ----------------------------------------------------------------------------- a*b**-2

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_quotient_gradient_does_not_square_the_divisor(dtype, target):
    # d(x/y)/dy = -x/y**2 was printed -x/(y*y): y*y underflows (1e-300; 1e-30 in float) or
    # overflows (1e200; 1e30) where -(x/y)/y, torch's form, is finite
    big, small = (1e30, 1e-30) if dtype == np.float32 else (1e300, 1e-300)
    x = np.asarray([small, big, 1.0, small, 3.0], dtype)
    y = np.asarray([small, big, small ** 0.5, 1.0, 7.0], dtype)
    _, (gx, gy) = _run(lambda x, y: x / y, [x, y], target)
    xs, ys = _mp(x), _mp(y)
    _close(gx, [1 / b for b in ys], dtype)
    _close(gy, [-a / b ** 2 for a, b in zip(xs, ys)], dtype)


def test_numpy_divides_twice_only_by_full_size_arrays():
    # a/b/b is as many NumPy passes as a/(b*b) only when b is as large as the result: the row
    # sums of a softmax keep b*b (computed on the small array)
    x = np.ones((4, 8))
    src = sg.compile(lambda x, y: x / y, x, x, cache_ok=False).source
    assert "/y/y" in src and "(y*y)" not in src
    src = sg.compile(lambda x: x / x.sum(-1, keepdim=True), x, cache_ok=False).source
    import re
    assert not re.search(r"/(\w+)/\1\b", src)
