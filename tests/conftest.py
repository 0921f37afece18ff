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


# Tests the quick run (-m "not slow") leaves to CI: each took 2 s or more of a worker's time in a
# quick run on this 2-core machine (python -m pytest -n 2 -m "not slow" --durations=60, cold
# cache, 2026-11-27); marked here by id, since most are one case of a parametrized test.
_SLOW_IDS = frozenset({
    "tests/test_cli.py::test_c_target_numpy_fallback_says_what_it_is",
    "tests/test_cli.py::test_cache_info_and_clear",
    "tests/test_cli.py::test_check_after_compile_uses_the_cache",
    "tests/test_cli.py::test_check_runs_the_overflow_probe",
    "tests/test_cli.py::test_check_the_c_module",
    "tests/test_cli.py::test_compile_is_deterministic_and_cwd_relative",
    "tests/test_cli.py::test_every_target_names_a_non_ascii_class_by_one_ascii_stem",
    "tests/test_cli.py::test_one_shape_option_may_list_several_inputs",
    "tests/test_cli.py::test_show_softplus_golden",
    "tests/test_cli_unseen.py::test_numpy_scalar_constants_on_either_side[float32]",
    "tests/test_cli_unseen.py::test_numpy_scalar_constants_on_either_side[float64]",
    "tests/test_cli_unseen.py::test_torch_functions_on_traced_values_name_op_and_line",
    "tests/test_cli_unseen.py::test_unwritable_output_is_one_line_naming_the_path",
    "tests/test_cli_unseen_audit.py::test_atanh_of_tanh_is_its_argument",
    "tests/test_cli_unseen_audit.py::test_black_scholes_check_skips_points_outside_the_real_domain",
    "tests/test_cli_unseen_audit.py::test_cosh_squared_minus_sinh_squared_is_one[c]",
    "tests/test_cli_unseen_audit.py::test_cosh_squared_minus_sinh_squared_is_one[numpy]",
    "tests/test_cli_unseen_audit.py::test_logaddexp_and_logaddexp2[float32]",
    "tests/test_cli_unseen_audit.py::test_logaddexp_and_logaddexp2[float64]",
    "tests/test_cli_unseen_more.py::test_a_bool_or_int_outputs_gradient_does_not_decide_the_dtype",
    "tests/test_cli_unseen_more.py::test_check_without_shapes_says_the_default_shape_does_not_fit",
    "tests/test_cli_unseen_more.py::test_inputs_named_like_gradients_or_helpers",
    "tests/test_cli_unseen_more.py::test_module_style_class_partial_and_class_forward_spec",
    "tests/test_cli_unseen_more.py::test_var_positional_forward_takes_shapes_in_order",
    "tests/test_cli_unseen_round3.py::test_random_factories_in_a_forward_name_the_op_and_line",
    "tests/test_cli_unseen_round3.py::test_softplus_with_a_low_threshold_is_linear_above_it",
    "tests/test_compiler_behaviour.py::test_cache_can_be_disabled",
    "tests/test_compiler_behaviour.py::test_editing_a_constant_imported_from_another_module_invalidates_the_cache[from",
    "tests/test_compiler_behaviour.py::test_editing_a_constant_imported_from_another_module_invalidates_the_cache[import",
    "tests/test_compiler_behaviour.py::test_generated_source_is_identical_across_processes_and_hash_seeds",
    "tests/test_dag_ir.py::test_large_derivation_stops_at_its_budget",
    "tests/test_examples.py::test_example_runs_as_a_script[black_scholes]",
    "tests/test_extreme_audit.py::test_removable_singularity_value_and_gradient_near_zero[log1p(x)/x-float32-numpy]",
    "tests/test_fuzz_differential.py::test_fuzz_eager_and_numpy[12]",
    "tests/test_fuzz_differential.py::test_fuzz_eager_and_numpy[24]",
    "tests/test_issue19_cli.py::test_a_cached_compile_imports_no_sympy",
    "tests/test_issue19_cli.py::test_cache_info_lists_entries_and_clear_name_removes_one_function",
    "tests/test_issue19_cli.py::test_version_help_and_cache_import_no_sympy",
    "tests/test_jax_target.py::test_erfc_exp_helper_matches_mpmath_float32",
    "tests/test_jax_target.py::test_gelu_erf_gradient_shares_the_exp_and_stays_accurate",
    "tests/test_jax_target.py::test_more_structural_ops_match_numpy_target",
    "tests/test_jax_target.py::test_shapes_match_jax_grad_first_and_second_order[broadcasting]",
    "tests/test_layers.py::test_every_upward_import_is_a_listed_exception",
    "tests/test_scan_frameworks.py::test_to_jax_matches_jax_grad_first_and_second_order[fori]",
    "tests/test_scan_frameworks.py::test_to_jax_under_vmap",
    "tests/test_target_c_generic.py::test_generic_c_matches_numpy_target[removable-float32]",
    "tests/test_torch_autograd_port.py::TestAutogradOnSymgrad::test_hook_closure_cycle_use_custom_function_False_use_tensor_hook_False",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid in _SLOW_IDS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def auto(tmp_path, monkeypatch):
    """The default CPU target (tiered: NumPy first, C once built) in place of the pinned
    NumPy one, with a cache of its own (no module of an earlier run is found on disk); waits
    for the background builds before restoring. test_tiered.py and test_to_torch_c.py."""
    import symgrad as sg
    from symgrad.autograd import function as fmod

    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))
    previous = sg.set_cpu_target("auto")
    fmod._CC_FOUND.clear()
    fmod._TIER_WARNED.clear()
    yield tmp_path
    sg.wait_for_builds(120)
    sg.set_cpu_target(previous)
    fmod._CC_FOUND.clear()
