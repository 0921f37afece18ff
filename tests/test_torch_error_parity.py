"""Bad input gets torch's error class and message: tensor data (None, strings, objects,
complex numbers, ragged lists), factory sizes and ranges, indices, gather, autograd.grad's
order of checks, the dtype words of messages. Each case runs on torch (the oracle) and on
symgrad: symgrad's exception must be an instance of torch's class, and carry the fragment
(torch's own wording, unless the case says the fragment is symgrad's)."""

import re

import numpy as np
import pytest

import symgrad as sg

torch = pytest.importorskip("torch")


def _raised(fn, module):
    try:
        fn(module)
    except Exception as exc:   # noqa: BLE001  (the oracle's class is what is checked)
        return exc
    return None


WHERE = "where expected condition to be a boolean tensor, but got a tensor with dtype "

# (id, fn(module), fragment, torchs): torchs True: the fragment is torch's wording; "exact":
# it is torch's whole message, and must be symgrad's (dtype Float, not Float32)
CASES = [
    # tensor data
    ("tensor-None-in-list", lambda m: m.tensor([1, None]), "Could not infer dtype of NoneType",
     True),
    ("tensor-None", lambda m: m.tensor(None), "Could not infer dtype of NoneType", True),
    ("tensor-str", lambda m: m.tensor("abc"), "invalid data type 'str'", True),
    ("tensor-str-in-list", lambda m: m.tensor([1, "a"]), "invalid data type 'str'", True),
    ("tensor-object", lambda m: m.tensor(object()), "Could not infer dtype of object", True),
    ("tensor-dict-in-list", lambda m: m.tensor([1, {}]), "Could not infer dtype of dict", True),
    ("tensor-ragged", lambda m: m.tensor([[1, 2], [3]]),
     "expected sequence of length 2 at dim 1 (got 1)", True),
    ("tensor-ragged-longer", lambda m: m.tensor([[1, 2], [3, 4, 5]]),
     "expected sequence of length 2 at dim 1 (got 3)", True),
    ("tensor-ragged-scalar", lambda m: m.tensor([[1, 2], 3]), "not a sequence", True),
    # factory sizes
    ("randn-negative", lambda m: m.randn(-1),
     "Trying to create tensor with negative dimension -1: [-1]", True),
    ("rand-negative", lambda m: m.rand(2, -1, 3),
     "Trying to create tensor with negative dimension -1: [2, -1, 3]", True),
    ("empty-negative", lambda m: m.empty(-1), "negative dimension -1", True),
    ("full-negative", lambda m: m.full((-1,), 2.0),
     "Trying to create tensor with negative dimension -1: [-1]", True),
    ("zeros-negative", lambda m: m.zeros(2, -3), "negative dimension -3", False),
    ("new_zeros-negative", lambda m: m.ones(2).new_zeros((2, -1)),
     "Trying to create tensor with negative dimension -1: [2, -1]", True),
    ("new_full-negative", lambda m: m.ones(2).new_full((-1,), 1.0), "negative dimension", True),
    ("randint-negative", lambda m: m.randint(0, 5, (-1,)), "negative dimension", True),
    ("zeros-float", lambda m: m.zeros(2.5),
     "zeros(): argument 'size' (position 1) must be tuple of ints, not float", True),
    ("ones-float-in-tuple", lambda m: m.ones((2, 2.0)),
     "ones(): argument 'size' failed to unpack the object at pos 2 with error \"type must be "
     "tuple of ints,but got float\"", True),
    ("zeros-float-arg", lambda m: m.zeros(2, 3.0), "at pos 2", True),
    ("zeros-bool", lambda m: m.zeros(True), "must be tuple of ints, not bool", True),
    ("zeros-None", lambda m: m.zeros(None), "must be tuple of ints, not NoneType", True),
    ("empty-str", lambda m: m.empty("a"),
     "empty(): argument 'size' (position 1) must be tuple of ints, not str", True),
    ("new_ones-float", lambda m: m.ones(2).new_ones(2.5),
     "new_ones(): argument 'size' (position 1) must be tuple of ints, not float", True),
    ("new_empty-str", lambda m: m.ones(2).new_empty("a"),
     "new_empty(): argument 'size' (position 1) must be tuple of ints, not str", True),
    ("new_full-str-fill", lambda m: m.ones(2).new_full((2,), "a"),
     "new_full(): argument 'fill_value' (position 2) must be Number, not str", True),
    ("zeros-str-dtype", lambda m: m.zeros(2, dtype="x"), "argument 'dtype' must be", False),
    ("zeros_like-str-dtype", lambda m: m.zeros_like(m.ones(2), dtype="x"),
     "argument 'dtype' must be", False),
    ("to-list", lambda m: m.ones(2).to([1]), "to() received an invalid combination", True),
    ("full-float-size", lambda m: m.full(2.5, 1.0),
     "full(): argument 'size' (position 1) must be tuple of ints, not float", True),
    ("full-str-fill", lambda m: m.full((2,), "a"),
     "full(): argument 'fill_value' (position 2) must be Number, not str", True),
    ("full_like-str-fill", lambda m: m.full_like(m.ones(2), "a"),
     "full_like(): argument 'fill_value' (position 2) must be Number, not str", True),
    # random ranges
    ("randint-empty-range", lambda m: m.randint(5, 0, (2,)),
     "random_ expects 'from' to be less than 'to', but got from=5 >= to=0", True),
    ("randint-int-size", lambda m: m.randint(0, 5, 3), "randint()", True),
    ("randint-no-size", lambda m: m.randint(5), "randint()", True),
    ("randint_like-empty-range", lambda m: m.randint_like(m.ones(2), 3, 3),
     "random_ expects 'from' to be less than 'to', but got from=3 >= to=3", True),
    # ranges
    ("arange-zero-step", lambda m: m.arange(0, 5, 0), "step must be nonzero", True),
    ("arange-wrong-sign", lambda m: m.arange(0, 5, -1),
     "upper bound and lower bound inconsistent with step sign", True),
    ("arange-wrong-order", lambda m: m.arange(5, 0),
     "upper bound and lower bound inconsistent with step sign", True),
    ("arange-inf", lambda m: m.arange(0, float("inf")), "unsupported range: 0 -> inf", True),
    ("arange-str", lambda m: m.arange("a"),
     "arange(): argument 'end' (position 1) must be Number, not str", True),
    ("linspace-negative", lambda m: m.linspace(0, 1, -2), "number of steps must be non-negative",
     True),
    ("linspace-float-steps", lambda m: m.linspace(0, 1, 2.5),
     "linspace(): argument 'steps' (position 3) must be int, not float", False),
    ("logspace-negative", lambda m: m.logspace(0, 1, -2), "number of steps must be non-negative",
     True),
    ("eye-negative-n", lambda m: m.eye(-2), "n must be greater or equal to 0, got -2", True),
    ("eye-negative-m", lambda m: m.eye(2, -1), "m must be greater or equal to 0, got -1", True),
    ("eye-float", lambda m: m.eye(2.5), "eye(): argument 'n' (position 1) must be int, not float",
     True),
    # indexing
    ("index-float", lambda m: m.ones(3, 4)[1.5],
     "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
     "indices (got float)", True),
    ("index-np-float", lambda m: m.ones(3, 4)[np.float64(1.0)],
     "are valid indices (got numpy.float64)", True),
    ("index-float-second", lambda m: m.ones(3, 4)[1, 1.5], "are valid indices (got float)", True),
    ("index-np-bool", lambda m: m.ones(3, 4)[np.True_], "are valid indices (got numpy.bool)",
     True),
    ("index-float-tensor", lambda m: m.ones(3, 4)[m.tensor(1.5)],
     "tensors used as indices must be long, int, byte or bool tensors", True),
    ("index-long-out-of-range", lambda m: m.ones(3, 4)[m.tensor([5])],
     "index 5 is out of bounds for dimension 0 with size 3", True),
    ("mask-mismatch", lambda m: m.ones(3, 4)[m.tensor([True, False])],
     "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor "
     "[3, 4] at index 0", True),
    ("mask-mismatch-second-dim", lambda m: m.ones(3, 4, 5)[:, m.ones(3, dtype=m.bool)],
     "The shape of the mask [3] at index 0 does not match the shape of the indexed tensor "
     "[3, 4, 5] at index 1", True),
    ("mask-2d-mismatch", lambda m: m.ones(3, 4, 5)[m.ones(3, 5, dtype=m.bool)],
     "The shape of the mask [3, 5] at index 1 does not match the shape of the indexed tensor "
     "[3, 4, 5] at index 1", True),
    ("setitem-mask-mismatch",
     lambda m: m.ones(3, 4).__setitem__(m.tensor([True, False]), 1.0),
     "The shape of the mask [2] at index 0 does not match", True),
    ("gather-out-of-range", lambda m: m.ones(3, 4).gather(1, m.tensor([[5]])),
     "index 5 is out of bounds for dimension 1 with size 4", True),
    ("gather-negative", lambda m: m.ones(3, 4).gather(1, m.tensor([[-1]])),
     "index -1 is out of bounds for dimension 1 with size 4", True),
    # autograd.grad checks the outputs before the inputs
    ("grad-output-first", lambda m: m.autograd.grad((m.ones(2) * 2).sum(), [m.ones(2)]),
     "element 0 of tensors does not require grad and does not have a grad_fn", True),
    # torch's ScalarType words
    ("where-float-cond", lambda m: m.where(m.ones(2), m.ones(2), m.ones(2)),
     WHERE + "Float", "exact"),
    ("where-double-cond",
     lambda m: m.where(m.ones(2, dtype=m.float64), m.ones(2), m.ones(2)),
     WHERE + "Double", "exact"),
    ("where-long-cond", lambda m: m.where(m.ones(2, dtype=m.int64), m.ones(2), m.ones(2)),
     WHERE + "Long", "exact"),
    ("where-int-cond", lambda m: m.where(m.ones(2, dtype=m.int32), m.ones(2), m.ones(2)),
     WHERE + "Int", "exact"),
    ("where-half-cond", lambda m: m.where(m.ones(2, dtype=m.float16), m.ones(2), m.ones(2)),
     WHERE + "Half", "exact"),
    ("dot-dtypes", lambda m: m.ones(2) @ m.ones(2, dtype=m.int64),
     "expected both vectors to have same dtype, but found Float and Long", True),
]


@pytest.mark.parametrize("fn, fragment, torchs", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_torchs_class_and_message(fn, fragment, torchs):
    expected = _raised(fn, torch)
    assert expected is not None, "torch accepts this input: not a parity case"
    if torchs:
        assert fragment in str(expected), f"the fragment is not torch's: {expected}"
    got = _raised(fn, sg)
    assert got is not None, "symgrad accepted the input"
    assert isinstance(got, type(expected)), (type(got), got, type(expected), expected)
    assert fragment in str(got), str(got)
    if torchs == "exact":
        assert str(got) == str(expected) == fragment


COMPLEX = [
    ("scalar", lambda: sg.tensor(1 + 2j)),
    ("list", lambda: sg.tensor([1, 1 + 2j])),
    ("nested", lambda: sg.tensor([[1.0], [1 + 2j]])),
    ("numpy-array", lambda: sg.tensor(np.array([1 + 2j]))),
    ("numpy-scalar", lambda: sg.tensor(np.complex128(1 + 2j))),
    ("array-in-list", lambda: sg.tensor([np.array([1 + 2j])])),
    ("as_tensor", lambda: sg.as_tensor(np.array([1 + 2j]))),
    ("from_numpy", lambda: sg.from_numpy(np.array([1 + 2j]))),
    ("new_tensor", lambda: sg.ones(2).new_tensor([1 + 2j])),
    ("full", lambda: sg.full((2,), 1 + 2j)),
]


@pytest.mark.parametrize("fn", [c[1] for c in COMPLEX], ids=[c[0] for c in COMPLEX])
def test_complex_values_are_refused_never_truncated(fn):
    """symgrad has no complex dtypes: a complex value is a TypeError saying so (torch builds a
    complex tensor; NumPy's astype would silently drop the imaginary part)."""
    with pytest.raises(TypeError, match=re.escape(
            "symgrad tensors are real: complex values are not supported (got 1+2j)")):
        fn()


def test_numpy_dtype_spellings_convert_or_are_refused_never_ignored():
    assert sg.ones(2).to(np.float64).dtype == sg.float64   # was silently ignored
    assert sg.zeros(2, dtype=np.int32).dtype == sg.int32
    with pytest.raises(TypeError, match="complex dtypes are not supported"):
        sg.zeros(2, dtype=np.complex64)
    with pytest.raises(TypeError, match="must be a symgrad dtype"):
        sg.tensor([1, 2], dtype=np.uint16)


def test_valid_data_still_builds_the_same_tensors_as_torch():
    for data in ([1, 2], [[1.5, 2], [3, 4]], [True, False], 3, 2.5, [], [[]],
                 [np.float32(1), 2], [sg.tensor(1.0), 2.0], np.array([1, 2], np.uint16)):
        ours = sg.tensor(data)
        theirs = torch.tensor(data if not isinstance(data, list) or not data
                              or not isinstance(data[0], sg.Tensor) else [1.0, 2.0])
        assert list(ours.shape) == list(theirs.shape), data
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert sg.zeros(np.int64(2), sg.tensor(3)).shape == (2, 3)
    assert sg.zeros(()).shape == ()
    assert tuple(sg.ones(3, 4)[[]].shape) == tuple(torch.ones(3, 4)[[]].shape) == (0, 4)
    assert sg.arange(5, 5).shape == (0,)
    np.testing.assert_allclose(sg.logspace(0, 2, 3, base=2.0).numpy(),
                               torch.logspace(0, 2, 3, base=2.0).numpy())


def test_where_reads_a_uint8_condition_as_torch_does_with_its_warning():
    values = []
    for m in (torch, sg):
        with pytest.warns(UserWarning, match="where received a uint8 condition tensor"):
            values.append(m.where(m.tensor([0, 2], dtype=m.uint8), m.ones(2),
                                  m.zeros(2)).numpy())
    np.testing.assert_array_equal(values[0], values[1])
    np.testing.assert_array_equal(values[1], [0.0, 1.0])


def test_scalar_type_name_is_torchs_word_for_every_dtype():
    from symgrad.errors import scalar_type_name

    for name, word in [("float16", "Half"), ("float32", "Float"), ("float64", "Double"),
                       ("int64", "Long"), ("int32", "Int"), ("int16", "Short"),
                       ("int8", "Char"), ("uint8", "Byte"), ("bool", "Bool")]:
        assert scalar_type_name(getattr(sg, name)) == word
        assert scalar_type_name(np.dtype(name)) == word
        assert scalar_type_name(name) == word
        assert str(getattr(torch, name)).endswith(name)


# ------------------------------------------------------------------ the same in a traced forward
X34 = np.ones((3, 4))


@pytest.mark.parametrize("fn, kind, fragment", [
    (lambda x: x[1.5], IndexError, "only integers, slices"),
    (lambda x: x[sg.tensor([True, False])], IndexError,
     "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor "
     "[3, 4] at index 0"),
])
def test_traced_indexing_names_the_users_line(fn, kind, fragment):
    """The tracer refuses the same indices, naming the user's line (its class may be one of
    symgrad's: a ShapeError is a RuntimeError)."""
    with pytest.raises((kind, RuntimeError)) as info:
        sg.compile(fn, X34, cache_ok=False)
    assert fragment in str(info.value)
    assert "test_torch_error_parity.py:" in str(info.value)


@pytest.mark.parametrize("fn, kind, fragment", [
    (lambda x: x + sg.zeros(-1), RuntimeError, "negative dimension -1"),
    (lambda x: x + sg.zeros(2.5), TypeError, "must be tuple of ints, not float"),
    (lambda x: x + sg.arange(0, 4, 0), RuntimeError, "step must be nonzero"),
    (lambda x: x + sg.tensor([1.0, None, 2.0, 3.0]), RuntimeError, "Could not infer dtype"),
    (lambda x: sg.full_like(x, "a"), TypeError, "must be Number, not str"),
])
def test_factories_in_a_traced_forward_refuse_as_at_runtime(fn, kind, fragment):
    with pytest.raises(kind, match=re.escape(fragment)):
        sg.compile(fn, X34, cache_ok=False)


def test_a_compiled_gathers_bad_index_is_also_torchs_runtime_error():
    mod = sg.compile(lambda x, i: x.gather(1, i), X34, np.zeros((3, 4), np.int64),
                     cache_ok=False)
    bad = np.zeros((3, 4), np.int64)
    bad[0, 0] = 5
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1"):
        mod.forward(X34, bad)
