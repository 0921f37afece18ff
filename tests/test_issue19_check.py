"""Issue 19, item 5: `symgrad check` draws points that exercise the forward (all-zero
examples too), skips and reports draws outside its domain, prints the point of the worst
error, and never reports a pass where nothing was compared."""
import copy
import textwrap

import numpy as np
import pytest

import symgrad.cli as cli_main
from symgrad.cli import gradcheck as gc

MODEL = textwrap.dedent('''\
    import numpy as np


    class Cube:
        @staticmethod
        def forward(ctx, x):
            return (x ** 3).sum()

        @staticmethod
        def example_inputs():
            return (np.zeros(1000),)        # the README's idiom


    class LogSum:
        @staticmethod
        def forward(ctx, x):
            return x.log().sum()

        @staticmethod
        def example_inputs():
            return (np.zeros(5),)


    class Flat:
        @staticmethod
        def forward(ctx, x):
            return (x * 0.0).sum()

        @staticmethod
        def example_inputs():
            return (np.zeros(4),)
''')


class _Wrong:
    """A module's raw functions with a backward twice the true one."""

    def __init__(self, raw):
        self.forward = raw.forward
        self._backward = raw.backward

    def backward(self, *args):
        return tuple(None if g is None else 2.0 * g for g in self._backward(*args))


@pytest.fixture
def work(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SYMGRAD_NO_PROGRESS", "1")
    return tmp_path


def _run(capsys, *args):
    status = cli_main.main(list(args))
    return status, capsys.readouterr().out


def test_all_zero_examples_still_catch_a_wrong_backward(work, capsys, monkeypatch):
    real = cli_main._compile

    def wrong(*a, **k):
        module = copy.copy(real(*a, **k))
        module.raw = _Wrong(module.raw)
        return module

    monkeypatch.setattr(cli_main, "_compile", wrong)
    status, out = _run(capsys, "check", "model.py:Cube", "--no-second-order", "--points", "2")
    assert status == 1, out
    assert "gradcheck model.py:Cube: FAILED" in out, out
    # the worst error is at a random point (the example's gradient is 0 == 2 * 0), named
    assert "worst: grad_x[" in out and "(random): x = [" in out, out
    assert "at point 1: grad_x[" in out or "at point 2: grad_x[" in out, out


def test_all_zero_examples_pass_with_the_right_backward_at_distinct_points(work, capsys):
    status, out = _run(capsys, "check", "model.py:Cube", "--points", "2")
    assert status == 0, out
    assert "gradcheck model.py:Cube: ok" in out and "over 3 point(s)" in out, out
    assert "max abs error 0.00e+00" not in out.splitlines()[0], out


def test_draws_outside_the_domain_are_skipped_and_reported(work, capsys):
    status, out = _run(capsys, "check", "model.py:LogSum", "--no-second-order")
    assert status == 0, out
    first = out.splitlines()[0]
    assert "gradcheck model.py:LogSum: ok" in first and "skipped (not finite)" in first, out
    assert "outside the forward's domain skipped" in first, out
    assert "over 3 point(s)" in first    # the three random points, all with x > 0


def test_a_check_that_compared_only_zeros_is_no_pass(work, capsys):
    status, out = _run(capsys, "check", "model.py:Flat", "--no-second-order")
    assert status == 1, out
    assert "NOT CHECKED" in out and "nothing was checked" in out, out


def test_library_check_draws_distinct_points_from_zero_examples():
    import symgrad as sg

    def cube(x):
        return (x ** 3).sum()

    m = sg.compile(cube, np.zeros(6))
    rng = np.random.default_rng(0)
    points, outside = gc.draw_points(m, [np.zeros(6)], 3, rng)
    assert outside == 0 and len(points) == 3
    assert all(np.abs(p[0]).min() > 0 for p in points)
    assert not np.allclose(points[0][0], points[1][0])
    wrong = copy.copy(m)
    wrong.raw = _Wrong(m.raw)
    lines = []
    assert gc.check(m, np.zeros(6), second_order=False, out=lines.append)
    assert not gc.check(wrong, np.zeros(6), second_order=False, out=lines.append)
    assert any("worst: grad_x[" in l for l in lines)
