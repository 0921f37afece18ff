"""The overflow probe (`check_finite=True`) and end-to-end numerics through sg.compile."""
import numpy as np
import pytest

import symgrad as sg
from symgrad.numerics import NumericsError, probe_finite


def test_stable_formula_passes_the_probe():
    mod = sg.compile(lambda x: (1 + x.exp()).log(), np.zeros(3), cache_ok=False,
                     check_finite=True)
    assert "every gradient finite" in mod.stats["finite_check"]


def test_probe_catches_a_derivative_that_overflows(monkeypatch):
    import symgrad.differentiate as differentiate
    import symgrad.optimize as optimize

    # without the stabilizing phases, the naive softplus gradient is inf/inf = nan at x = 1000
    monkeypatch.setattr(optimize, "_stabilize", lambda e: (e, ()))
    monkeypatch.setattr(differentiate, "_stabilize_cached", lambda e: (e, ()))
    mod = sg.compile(lambda x: (1 + x.exp()).log(), np.zeros(3), cache_ok=False)
    report = probe_finite(mod)
    assert not report.ok
    assert any(f.point[0] >= 700 and f.reference == pytest.approx(1.0) for f in report.findings)
    with pytest.raises(NumericsError, match="true value"):
        sg.compile(lambda x: (1 + x.exp()).log(), np.zeros(3), cache_ok=False,
                   check_finite=True)


def test_probe_skips_what_it_cannot_reference():
    mod = sg.compile(lambda x: x.exp().sum(), np.zeros(3), cache_ok=False)
    assert probe_finite(mod).skipped


@pytest.mark.parametrize("x", [-1.0, -4.0, 0.0])
def test_where_does_not_leak_nan_from_the_untaken_branch(x):
    # torch and JAX give nan here (the "double where" trap)
    mod = sg.compile(lambda x: sg.where(x > 0, x.sqrt(), 0.0), np.zeros(1), cache_ok=False)
    g = mod.backward(np.ones(1), np.array([x]))[0]
    assert g.tolist() == [0.0]


def test_where_gradient_in_taken_branch_is_exact():
    mod = sg.compile(lambda x: sg.where(x > 0, x.sqrt(), 0.0), np.zeros(2), cache_ok=False)
    g = mod.backward(np.ones(2), np.array([4.0, -4.0]))[0]
    assert g.tolist() == [0.25, 0.0]


def test_float32_gradients_close_to_float64_reference():
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, 1000)
    f = lambda x: x * (x.softplus()).tanh() + (0.5 * x).erf() * x.sigmoid()  # noqa: E731
    mod = sg.compile(f, x.astype(np.float32), cache_ok=False)
    g32 = mod.backward(np.ones(1000, np.float32), x.astype(np.float32))[0]
    g64 = sg.compile(f, x, cache_ok=False).backward(np.ones(1000), x)[0]
    assert g32.dtype == np.float32
    rel = np.abs(g32 - g64) / np.maximum(np.abs(g64), 1e-3)
    assert rel.max() < 1e-4


def test_probe_is_silent_outside_the_real_domain():
    # x**p at x < 0 and non-integer p is nan in the forward (as in torch), so a nan
    # gradient there is right; at integer p the p-derivative x**p*log(x) is complex
    mod = sg.compile(lambda x, p: x ** p, np.ones(1), np.ones(1), cache_ok=False)
    report = probe_finite(mod)
    assert report.ok, str(report)
    assert report.probed > 0
