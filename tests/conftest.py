"""Shared test options and fixtures.

--update-golden: rewrite golden files (tests/golden/, examples/generated/) instead of comparing.
"""
from __future__ import annotations

import difflib
import os

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
GOLDEN_DIR = os.path.join(TESTS_DIR, "golden")
REPO = os.path.dirname(TESTS_DIR)

# Subprocesses the tests start (`python -m symgrad ...` in a temporary cwd, `python -c ...`,
# the `symgrad` console script) import this checkout, not whichever symgrad is installed: an
# editable install of another checkout or worktree would otherwise be the code under test.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [REPO] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != REPO])

# The suite runs on the NumPy target unless a test chooses (tests/test_tiered.py tests the
# default, tiered one): a background C build per Function signature of every test would
# load the machine and make compile counts and profiles depend on timing.
os.environ.setdefault("SYMGRAD_CPU_TARGET", "numpy")

# The alias packages the ported peer suites import as `autograd` / `torch` hold modules named
# test_*.py (autograd.test_util): they are libraries, not tests, and two of them share a name.
collect_ignore_glob = ["hips_linalg/autograd/*", "peers/hips/_alias/*", "torch_alias/*"]


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files with the current output instead of comparing")


class Golden:
    """Compare text with a checked-in file, byte for byte; rewrite it under --update-golden."""

    def __init__(self, update: bool):
        self.update = update

    def check(self, name: str, text: str, root: str = GOLDEN_DIR) -> None:
        path = os.path.join(root, name)
        if self.update:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            return
        if not os.path.exists(path):
            pytest.fail(f"golden file {os.path.relpath(path)} is missing; "
                        "run pytest with --update-golden to create it")
        with open(path, encoding="utf-8", newline="") as f:
            expected = f.read()
        if text != expected:
            diff = "".join(difflib.unified_diff(
                expected.splitlines(True), text.splitlines(True),
                fromfile=f"{name} (golden)", tofile=f"{name} (now)", n=2))
            pytest.fail(f"{os.path.relpath(path)} is out of date (pytest --update-golden "
                        f"refreshes it):\n{diff[:6000]}")


@pytest.fixture
def golden(request) -> Golden:
    return Golden(request.config.getoption("--update-golden"))
