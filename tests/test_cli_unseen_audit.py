"""The command line on forwards from an audit against torch at ordinary and extreme inputs.

As in test_cli_unseen.py: each test writes a forward file into a temporary cwd, runs
`python -m symgrad.cli` on it in a subprocess (this checkout first on PYTHONPATH), and checks
the written module's numbers in a fresh interpreter that imports nothing of symgrad. Expected
values are closed forms evaluated with NumPy / math here.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from test_cli_unseen import cli, one_line_error, run_module, write


def _ndtr(z):
    return 0.5 * math.erfc(-z / math.sqrt(2))


# --------------------------------------------------------------------------- Black-Scholes
BS = """\
import symgrad as sg


def call(S, K, T, r=0.05, sigma=0.2):
    d1 = (sg.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * sg.sqrt(T))
    d2 = d1 - sigma * sg.sqrt(T)
    N = lambda z: 0.5 * (1 + sg.erf(z / 2 ** 0.5))
    return S * N(d1) - K * sg.exp(-r * T) * N(d2)
"""


def _bs(S, K, T, r=0.05, sigma=0.2):
    d1 = (math.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * math.sqrt(T))
    d2 = d1 - sigma * math.sqrt(T)
    return (S * _ndtr(d1) - K * math.exp(-r * T) * _ndtr(d2), _ndtr(d1),
            -math.exp(-r * T) * _ndtr(d2))


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_black_scholes_at_the_money_near_expiry(tmp_path, target):
    """The backward shared 1/K and computed log(S*(1/K)): at S = K = 49, 49*(1/49) is
    1 - 2**-53, so d1 was -1.1e-16 / (sigma*sqrt(T)) instead of ~0, and at T = 1e-30 the
    delta dV/dS came out 0.29 instead of N(0) = 0.5 (at S = K = T = 1e-300 it was 0).
    A reciprocal of a name that is a product's only divisor is now printed as a division."""
    write(tmp_path, "bs.py", BS)
    proc = cli("compile", "bs.py:call", "--target", target, "--shape", "S=3", "--shape", "K=3",
               "--shape", "T=3", "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    S = np.array([49.0, 98.0, 100.0])
    K = np.array([49.0, 98.0, 90.0])
    T = np.array([1e-30, 1e-24, 0.5])
    res = run_module(tmp_path / "out" / "call_grad.py", [S, K, T])
    want = [_bs(*p) for p in zip(S, K, T)]
    np.testing.assert_allclose(res["out"][0], [w[0] for w in want], rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(res["grad"][0], [w[1] for w in want], rtol=1e-12)
    np.testing.assert_allclose(res["grad"][1], [w[2] for w in want], rtol=1e-12)


def test_black_scholes_check_skips_points_outside_the_real_domain(tmp_path):
    """`symgrad check` failed the overflow probe at S = -30: log(S/K) is complex there, but
    the reference's erf of that complex d1 is 1 up to 1e-79i, so it took -30.49 as the true
    value of a forward that is nan (in torch too). A point where any function or power of
    the forward is complex is now outside the domain and skipped."""
    write(tmp_path, "bs.py", BS)
    proc = cli("check", "bs.py:call", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "overflow probe:" in proc.stdout and "every gradient finite" in proc.stdout, \
        proc.stdout


def test_probe_still_reports_a_real_overflow(tmp_path):
    """The domain test must not hide findings: cosh(x)/sinh(x) is real everywhere, and
    inf/inf = nan at x = 1000 where the true value is 1."""
    write(tmp_path, "ov.py", """\
        import symgrad as sg


        def coth(x):
            return sg.cosh(x) / sg.sinh(x)
        """)
    proc = cli("check", "ov.py:coth", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "out at (1000): generated nan, true value 1.0" in proc.stdout + proc.stderr


# --------------------------------------------------------------------------- cosh^2 - sinh^2
HYPER = """\
import symgrad as sg


def hyper(x):
    return sg.sinh(x) / sg.cosh(x) + sg.cosh(x) ** 2 - sg.sinh(x) ** 2 + sg.asinh(x)


def scaled(x, y):
    return 3 * y * x.cosh().pow(2) - 3 * y * x.sinh().pow(2)
"""


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_cosh_squared_minus_sinh_squared_is_one(tmp_path, target):
    """cosh(x)**2 - sinh(x)**2 cancelled every digit (7.397 at x = 300 where the value is
    8.397) and was inf - inf = nan from |x| ~ 355; torch is wrong the same way. The
    `hyperbolic` rewrite now folds c*cosh(u)**2 - c*sinh(u)**2 to c."""
    write(tmp_path, "hyp.py", HYPER)
    proc = cli("compile", "hyp.py:hyper", "--target", target, "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    x = np.array([0.0, 0.5, -2.0, 300.0, 800.0, -800.0, 1e30])
    res = run_module(tmp_path / "out" / "hyper_grad.py", [x])
    np.testing.assert_allclose(res["out"][0], np.tanh(x) + 1 + np.arcsinh(x), rtol=1e-13)
    np.testing.assert_allclose(res["grad"][0], 1 - np.tanh(x) ** 2 + 1 / np.hypot(1, x),
                               rtol=1e-13)
    proc = cli("check", "hyp.py:hyper", "--target", target, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cosh_sinh_identity_with_a_common_factor(tmp_path):
    write(tmp_path, "hyp.py", HYPER)
    proc = cli("compile", "hyp.py:scaled", "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    x, y = np.array([1.0, 400.0, -1e3]), np.array([2.0, -0.5, 1.5])
    res = run_module(tmp_path / "out" / "scaled_grad.py", [x, y])
    np.testing.assert_allclose(res["out"][0], 3 * y, rtol=1e-15)
    np.testing.assert_array_equal(res["grad"][0], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(res["grad"][1], [3.0, 3.0, 3.0], rtol=1e-15)
    text = (tmp_path / "out" / "scaled_grad.py").read_text()
    assert "numpy.cosh" not in text and "numpy.sinh" not in text


# --------------------------------------------------------------------------- logaddexp
LAE = """\
import symgrad as sg


def lae(x, y):
    return sg.logaddexp(x, y) + x.logaddexp2(y)
"""


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_logaddexp_and_logaddexp2(tmp_path, dtype):
    """torch.logaddexp / logaddexp2 (function and method) were a one-line error: "module
    'symgrad' has no attribute 'logaddexp'"."""
    write(tmp_path, "lae.py", LAE)
    proc = cli("compile", "lae.py:lae", "--dtype", dtype, "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    x = np.array([-1000.0, 0.5, 80.0, 2.0])
    y = np.array([-1000.0, 3.0, 80.5, -40.0])
    res = run_module(tmp_path / "out" / "lae_grad.py", [x, y], dtype)
    m = np.maximum(x, y)
    d = np.abs(x - y)
    want = (m + np.log1p(np.exp(-d))) + (m + np.log1p(2.0 ** -d) / np.log(2))
    sx, sy = 1 / (1 + np.exp(y - x)), 1 / (1 + np.exp(x - y))   # d logaddexp / dx, dy
    sx2, sy2 = 1 / (1 + 2.0 ** (y - x)), 1 / (1 + 2.0 ** (x - y))   # logaddexp2's
    tol = dict(rtol=1e-12) if dtype == "float64" else dict(rtol=2e-6)
    np.testing.assert_allclose(res["out"][0], want, **tol)
    np.testing.assert_allclose(res["grad"][0], sx + sx2, **tol)
    np.testing.assert_allclose(res["grad"][1], sy + sy2, **tol)
    proc = cli("check", "lae.py:lae", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_logaddexp_misspelled_is_still_a_one_line_error(tmp_path):
    write(tmp_path, "bad.py", """\
        import symgrad as sg


        def f(x, y):
            return sg.logaddexpp(x, y)
        """)
    proc = cli("compile", "bad.py:f", cwd=tmp_path)
    one_line_error(proc, "logaddexpp", "bad.py:5")


def test_atanh_of_tanh_is_its_argument(tmp_path):
    """atanh(tanh(x)) was atanh(1.0) = inf from x ~ 19 (torch too); the hyperbolic rewrite
    folds it (and asinh(sinh(x))) to x."""
    write(tmp_path, "at.py", """\
        import symgrad as sg


        def f(x):
            return sg.atanh(sg.tanh(x)) + sg.asinh(sg.sinh(2 * x))
        """)
    proc = cli("compile", "at.py:f", "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    x = np.array([-700.0, -30.0, 0.25, 30.0, 1e3])
    res = run_module(tmp_path / "out" / "f_grad.py", [x])
    np.testing.assert_array_equal(res["out"][0], 3 * x)
    np.testing.assert_array_equal(res["grad"][0], [3.0] * 5)
    proc = cli("check", "at.py:f", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- symgrad check
CHECKED = """\
import symgrad as sg


def lj(r, eps=1.0, sigma=1.0):
    sr6 = (sigma / r) ** 6
    return 4 * eps * (sr6 ** 2 - sr6)


def binary_entropy(p):
    return -(p * sg.log(p) + (1 - p) * sg.log(1 - p))
"""


def test_check_lennard_jones_at_random_points(tmp_path):
    """gradcheck summed <v, f(x +- eps)> over all entries before differencing: at a random
    r near 0, one entry's 1/r**12 (~1e20) swallowed every other entry's change, and the
    finite differences of those were 0 (FAILED, 'backward -0.486886, finite differences 0').
    Each entry's change is now formed before the sum."""
    write(tmp_path, "pot.py", CHECKED)
    proc = cli("check", "pot.py:lj", "--shape", "r=8", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gradcheck pot.py:lj: ok" in proc.stdout
    assert "gradgradcheck pot.py:lj: ok" in proc.stdout


def test_check_finds_points_inside_0_1(tmp_path):
    """A forward defined on (0, 1) only (log(p) + log(1 - p)) had no random point where it
    was finite: 'FAILED ... over 0 point(s), 3 skipped'. Random points now fall back to
    positive and then (0, 1) draws where the forward is not finite."""
    write(tmp_path, "pot.py", CHECKED)
    proc = cli("check", "pot.py:binary_entropy", "--shape", "p=6", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "over 3 point(s)" in proc.stdout and "skipped (not finite)" not in proc.stdout


# --------------------------------------------------------------------------- torch names
def test_more_torch_names(tmp_path):
    """torch.sinc, deg2rad, rad2deg, sgn, absolute, addcmul, addcdiv were AttributeErrors."""
    write(tmp_path, "names.py", """\
        import symgrad as sg


        def f(x, y, z):
            return (sg.sinc(x) + x.deg2rad() * y.rad2deg() + sg.sgn(x) * sg.absolute(y)
                    + sg.addcmul(x, y, z, value=0.5) + y.addcdiv(x, z, value=2))
        """)
    proc = cli("compile", "names.py:f", "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    x = np.array([0.0, 1e-300, 0.5, -2.0, 3.0])
    y = np.array([1.0, -2.0, 0.3, 4.0, -1e-8])
    z = np.array([2.0, 0.5, -1.0, 3.0, 7.0])
    res = run_module(tmp_path / "out" / "f_grad.py", [x, y, z])
    px = np.pi * x
    small = np.abs(x) < 1e-4           # the Taylor polynomial: sinc = 1 - (pi x)**2/6
    safe = np.where(small, 1.0, px)
    sinc = np.where(small, 1 - px ** 2 / 6, np.sin(px) / safe)
    dsinc = np.where(small, -np.pi * px / 3, np.pi * (np.cos(px) * safe - np.sin(px)) / safe ** 2)
    want = sinc + x * y + np.sign(x) * np.abs(y) + x + 0.5 * y * z + y + 2 * x / z
    np.testing.assert_allclose(res["out"][0], want, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(res["grad"][0], dsinc + y + 1 + 2 / z, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(res["grad"][1], x + np.sign(x) * np.sign(y) + 0.5 * z + 1,
                               rtol=1e-14)
    np.testing.assert_allclose(res["grad"][2], 0.5 * y - 2 * x / z ** 2, rtol=1e-14)
