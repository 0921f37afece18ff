"""(file, test, mode) -> (the documented difference an expected failure hits, the exception it
raises). Mode "*" is both. Each is xfail(strict=True, raises=...): a test that starts passing,
or fails another way, is reported. docs/peer-suites.md lists the differences."""
from autograd.test_util import ComplexUnsupported
from symgrad.errors import TraceError

COMPLEX = ("complex numbers: symgrad has no complex dtype (README Limitations); every "
           "real-valued check of the test before its complex inputs passed", ComplexUnsupported)
COMPLEX_ONLY = ("complex numbers: np.imag / np.angle of a real Tensor go to NumPy, which "
                "refuses a Tensor that requires grad; symgrad has no complex dtype",
                RuntimeError)
NUMPY_PROTOCOL = ("NumPy's own functions on a Tensor (numpy.sum(t)) are not dispatched to "
                  "symgrad (no __array_function__), as with torch", TypeError)
NUMPY_ATTRS = ("Tensors have torch's methods and attributes, not NumPy's: x.size is a "
               "method (numel()), .astype is .to(dtype)")
TO_NUMPY = ("converting a Tensor that requires grad to NumPy (np.int64(W[:, -1])) is refused, "
            "as torch refuses .numpy() on it", RuntimeError)
LINSPACE = ("np.linspace with Tensor endpoints: symgrad's linspace, like torch.linspace, takes "
            "numbers", RuntimeError)
R_SLICES = ("np.r_ with slice directives on Tensors: the alias maps np.r_ / np.c_ of arrays "
            "only", NotImplementedError)
NO_OP = ("no symgrad op: {} (the alias leaves it to NumPy, which computes on the values without "
         "a derivative)")

CONSTANT_OUTPUT = ("a forward-only Function's forward must return traced values: an output "
                   "that does not depend on the inputs is refused (README: Errors)", TraceError)

_BOTH = "*"
EXPECTED = {
    ("test_numpy", "test_plain_numpy_reductions_on_box", "runtime"): NUMPY_PROTOCOL,
    ("test_numpy", "test_plain_numpy_reductions_on_box", "compiled"): (NUMPY_PROTOCOL[0],
                                                                       TraceError),
    ("test_numpy", "test_scalar_array_box_attributes", _BOTH): (NUMPY_ATTRS, AssertionError),
    ("test_numpy", "test_astype", "runtime"): (NUMPY_ATTRS, AttributeError),
    ("test_numpy", "test_astype", "compiled"): (NUMPY_ATTRS, TraceError),
    ("test_numpy", "test_r_slicing", _BOTH): R_SLICES,
    ("test_numpy", "test_cast_to_int", "runtime"): TO_NUMPY,
    ("test_numpy", "test_cast_to_int", "compiled"): (TO_NUMPY[0], TraceError),
    ("test_numpy", "test_linspace", "runtime"): LINSPACE,
    ("test_numpy", "test_linspace", "compiled"): (LINSPACE[0], TraceError),
    ("test_numpy", "test_gradient", "runtime"): (NO_OP.format("np.gradient (torch.gradient)"),
                                                 AssertionError),
    ("test_numpy", "test_gradient", "compiled"): (NO_OP.format("np.gradient (torch.gradient)"),
                                                  TraceError),
    ("test_numpy", "test_nan_to_num", "compiled"): (
        "a traced forward is algebra before it is arithmetic (README Limitations): SymPy folds "
        "the NaN test x != x to False, so nan_to_num keeps the NaN; x.isnan() as a where "
        "condition does not trace yet", AssertionError),
    ("test_numpy", "test_no_relation", "compiled"): CONSTANT_OUTPUT,
    # autograd 1.9.1's test_binary_ops compares x < x: a constant (0) output
    ("test_binary_ops", "test_comparison_grads", "compiled"): CONSTANT_OUTPUT,
    ("test_numpy", "test_r_no_relation", "compiled"): CONSTANT_OUTPUT,
}
# the same differences in both modes; a traced forward names the NumPy function (TraceError)
for _name, _why, _runtime_exc in (
        ("test_gradient", NO_OP.format("np.gradient (torch.gradient)"), AssertionError),
        ("test_partition", NO_OP.format("np.partition"), AssertionError),
        ("test_pad", NO_OP.format("np.pad (F.pad)"), AssertionError),
        ("test_imag", COMPLEX_ONLY[0], RuntimeError),
        ("test_angle", COMPLEX_ONLY[0], RuntimeError)):
    EXPECTED[("test_systematic", _name, "runtime")] = (_why, _runtime_exc)
    EXPECTED[("test_systematic", _name, "compiled")] = (_why, TraceError)
for _name in (
    "test_max test_mean test_min test_sum test_prod test_var test_std test_sin test_abs "
    "test_absolute test_arccosh test_arcsinh test_arctanh test_cos test_cosh test_exp "
    "test_exp2 test_expm1 test_log test_log10 test_log1p test_log2 test_sinh test_sqrt test_tan "
    "test_tanh test_real test_real_ic test_conj test_conjugate test_add test_op_mul test_op_add "
    "test_op_sub test_kron test_dot test_outer test_matmul test_tensordot_1 "
    "test_einsum_matmult").split():
    EXPECTED[("test_systematic", _name, _BOTH)] = COMPLEX
