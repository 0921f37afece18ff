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
