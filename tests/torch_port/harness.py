"""The helpers torch's test files call, re-implemented once over NumPy.

torch's `TestCase` (torch/testing/_internal/common_utils.py) is private and pulls in most of
torch; the ported suites (tests/torch_port/*_suite.py) get these instead, so that the same
checks run when the suite is executed against torch and against symgrad.  Nothing here
imports torch or symgrad: tensors are recognised by their attributes and compared through
NumPy, with torch's rules (torch.testing._comparison, v2.6):

- tensor vs tensor (or ndarray): same shape, same dtype unless ``exact_dtype=False``, values
  close with ``|a - b| <= atol + rtol * |b|`` (NaN equal to NaN); default tolerances by dtype:
  float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5), float32 / complex64 (1.3e-6, 1e-5),
  float64 / complex128 (1e-7, 1e-7), other dtypes exact; with mixed dtypes the larger.
- a number against a number or a one-element tensor: the tensor's ``item()``; tolerance of
  float32 for floats, exact for ints and bools (torch's RelaxedNumberPair).
- a tensor against a list / tuple: the sequence becomes an array of the tensor's dtype.
- sequences and mappings element by element; strings, sets, types and other objects by ``==``.
"""
from __future__ import annotations

import contextlib
import enum
import functools
import gc
import importlib
import math
import re
import sys
import unittest
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

IS_WINDOWS = sys.platform == "win32"
IS_MACOS = sys.platform == "darwin"

_PRECISIONS = {
    "float16": (1e-3, 1e-5), "half": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5), "float": (1.3e-6, 1e-5), "complex64": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7), "double": (1e-7, 1e-7), "complex128": (1e-7, 1e-7),
}


class _Missing:
    """A public torch name the backend under test does not have: using it raises, naming it."""

    def __init__(self, name):
        self._name = name

    def _raise(self, *args, **kwargs):
        raise AttributeError(f"the backend under test has no {self._name}")

    __call__ = _raise

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._raise()

    def __mro_entries__(self, bases):
        self._raise()


def public_name(module, attr=None):
    """`module.attr` of the backend being loaded (sys.modules is aliased while a suite loads)."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return _Missing(module if attr is None else f"{module}.{attr}")
    if attr is None:
        return mod
    try:
        return getattr(mod, attr)
    except AttributeError:
        return _Missing(f"{module}.{attr}")


# ------------------------------------------------------------------ decorators torch's tests use
def _identity_factory(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


skipIfTorchDynamo = skipIfMPS = skipIfWindows = skipIfNoLapack = xfailIfS390X = _identity_factory


def slowTest(fn):
    import pytest

    return pytest.mark.slow(fn)


def parametrize(arg_name, arg_values, name_fn=None):
    """torch's @parametrize: instantiate_parametrized_tests makes test_x_<arg>_<value> methods."""
    def deco(fn):
        params = list(getattr(fn, "_torch_port_params", []))
        params.append((arg_name, list(arg_values), name_fn))
        fn._torch_port_params = params
        return fn
    return deco


class subtest:
    """torch's ``subtest(value, name=...)``: one named value of a @parametrize (a tuple of
    values when the parameter names are comma-separated, "vectorize,ctors")."""

    def __init__(self, arg_values, name=None, decorators=None):
        self.arg_values = arg_values
        self.name = name
        self.decorators = decorators or []


def _param_case(arg_name, value, name_fn):
    """(name suffix, keyword arguments) of one value of a @parametrize."""
    names = [n.strip() for n in arg_name.split(",")]
    if isinstance(value, subtest):
        values = value.arg_values if len(names) > 1 else (value.arg_values,)
        suffix = value.name if value.name else "_".join(
            f"{n}_{v}" for n, v in zip(names, values))
        return suffix, dict(zip(names, values))
    if len(names) > 1:
        return "_".join(f"{n}_{v}" for n, v in zip(names, value)), dict(zip(names, value))
    return (name_fn(value) if name_fn else f"{arg_name}_{value}"), {arg_name: value}


def instantiate_parametrized_tests(cls):
    for name, fn in list(vars(cls).items()):
        params = getattr(fn, "_torch_port_params", None)
        if not params:
            continue
        delattr(cls, name)
        combos = [((), {})]
        for arg_name, values, name_fn in reversed(params):
            combos = [(suffix + (case[0],), {**kw, **case[1]}) for suffix, kw in combos
                      for case in (_param_case(arg_name, v, name_fn) for v in values)]
        for suffix, kw in combos:
            test_name = "_".join((name,) + suffix)

            def test(self, _fn=fn, _kw=kw):
                return _fn(self, **_kw)
            test.__name__ = test.__qualname__ = test_name
            setattr(cls, test_name, test)
    return cls


@contextlib.contextmanager
def disable_gc():
    if gc.isenabled():
        try:
            gc.disable()
            yield
        finally:
            gc.enable()
    else:
        yield


# ------------------------------------------------------------------ comparison
def _is_tensor(x):
    return (not isinstance(x, np.ndarray) and hasattr(x, "requires_grad") and hasattr(x, "dtype")
            and hasattr(x, "shape") and hasattr(x, "detach"))


def _dtype_name(x):
    return str(x.dtype).rsplit(".", 1)[-1]


def _to_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    t = x.detach()
    if hasattr(t, "cpu"):
        t = t.cpu()
    if getattr(t, "is_conj", lambda: False)():
        t = t.resolve_conj()
    if _dtype_name(t) == "bfloat16":
        return np.asarray(t.float().numpy())
    return np.asarray(t.numpy())


class _Mismatch(AssertionError):
    pass


def _fail(path, message):
    where = f" at {path}" if path else ""
    raise _Mismatch(f"{message}{where}")


def _tolerances(names, atol, rtol):
    if (atol is None) != (rtol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, "
                         f"but got no {'rtol' if rtol is None else 'atol'}.")
    if atol is not None:
        return rtol, atol
    pairs = [_PRECISIONS.get(n, (0.0, 0.0)) for n in names]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _close_arrays(a, b, rtol, atol, equal_nan, path):
    if a.dtype == np.bool_ or b.dtype == np.bool_ or (rtol == 0 and atol == 0):
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            ok = (a == b) | (np.isnan(a) & np.isnan(b) if equal_nan else False)
        else:
            ok = a == b
    else:
        a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        b64 = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            ok = np.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=equal_nan)
            # np.isclose treats inf == inf; torch too (same sign)
    ok = np.asarray(ok)
    if not ok.all():
        bad = int((~ok).sum())
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64)) if a.dtype.kind != "c" \
                else np.abs(a - b)
        _fail(path, f"Tensor-likes are not close!\n\nMismatched elements: {bad} / {ok.size}\n"
                    f"Greatest absolute difference: {np.nanmax(diff) if diff.size else 0} "
                    f"(up to {atol} allowed, rtol {rtol})\nactual: {a!r}\nexpected: {b!r}")


def _compare_tensors(x, y, atol, rtol, equal_nan, exact_dtype, path):
    names = [_dtype_name(v) if _is_tensor(v) else str(v.dtype) for v in (x, y)]
    a, b = _to_numpy(x), _to_numpy(y)
    if tuple(a.shape) != tuple(b.shape):
        _fail(path, f"The values for attribute 'shape' do not match: {tuple(a.shape)} != "
                    f"{tuple(b.shape)}.")
    if exact_dtype and names[0] != names[1]:
        _fail(path, f"The values for attribute 'dtype' do not match: {names[0]} != {names[1]}.")
    rtol, atol = _tolerances(names, atol, rtol)
    _close_arrays(a, b, rtol, atol, equal_nan, path)


def _is_number(x):
    return isinstance(x, (bool, int, float, complex, enum.Enum, np.number, np.bool_))


def _number(x, path):
    if _is_tensor(x) or isinstance(x, np.ndarray):
        size = int(np.prod(x.shape))
        if size != 1:
            raise ValueError(f"Only single element tensor-likes can be compared against a number. "
                             f"Got {size} elements instead.")
        x = x.item()
    if isinstance(x, enum.Enum):
        return int(x)
    if isinstance(x, (np.number, np.bool_)):
        return x.item()
    return x


def _compare_numbers(x, y, atol, rtol, equal_nan, path):
    a, b = _number(x, path), _number(y, path)
    if isinstance(a, bool) and isinstance(b, bool):
        if a != b:
            _fail(path, f"Booleans mismatch: {a} is not {b}")
        return
    names = ["float32" if isinstance(v, (float, complex)) else "int64" for v in (a, b)]
    rtol, atol = _tolerances(names, atol, rtol)
    if equal_nan and isinstance(a, float) and isinstance(b, float) and math.isnan(a) \
            and math.isnan(b):
        return
    if a == b:
        return
    if not (abs(a - b) <= atol + rtol * abs(b)):
        _fail(path, f"Scalars are not close!\n\nExpected {b} but got {a}.\n"
                    f"Absolute difference: {abs(a - b)} (up to {atol} allowed)")


def compare(x, y, *, atol=None, rtol=None, equal_nan=True, exact_dtype=True, path=""):
    """Raise AssertionError unless x and y are equal under torch's assertEqual rules."""
    if x is None or y is None:
        if x is not y:
            _fail(path, f"None mismatch: {x!r} is not {y!r}")
        return
    if _is_tensor(x) and isinstance(y, Sequence) and not isinstance(y, (str, bytes)):
        y = np.asarray(y, dtype=_to_numpy(x).dtype)
        return _compare_tensors(x, y, atol, rtol, equal_nan, False, path)
    if _is_tensor(y) and isinstance(x, Sequence) and not isinstance(x, (str, bytes)):
        x = np.asarray(x, dtype=_to_numpy(y).dtype)
        return _compare_tensors(x, y, atol, rtol, equal_nan, False, path)
    x_arr, y_arr = _is_tensor(x) or isinstance(x, np.ndarray), \
        _is_tensor(y) or isinstance(y, np.ndarray)
    if x_arr and y_arr:
        return _compare_tensors(x, y, atol, rtol, equal_nan, exact_dtype, path)
    if (_is_number(x) and (_is_number(y) or y_arr)) or (_is_number(y) and x_arr):
        return _compare_numbers(x, y, atol, rtol, equal_nan, path)
    if isinstance(x, (str, bytes)) or isinstance(y, (str, bytes)) or isinstance(x, (set, type)):
        if x != y:
            _fail(path, f"{type(x).__name__.title()} comparison failed: {x!r} != {y!r}")
        return
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        if set(x) != set(y):
            _fail(path, f"The keys of the mappings do not match: {sorted(map(repr, x))} != "
                        f"{sorted(map(repr, y))}")
        for k in x:
            compare(x[k], y[k], atol=atol, rtol=rtol, equal_nan=equal_nan,
                    exact_dtype=exact_dtype, path=f"{path}[{k!r}]")
        return
    if isinstance(x, Sequence) and isinstance(y, Sequence):
        if len(x) != len(y):
            _fail(path, f"The length of the sequences mismatch: {len(x)} != {len(y)}")
        for i, (a, b) in enumerate(zip(x, y)):
            compare(a, b, atol=atol, rtol=rtol, equal_nan=equal_nan, exact_dtype=exact_dtype,
                    path=f"{path}[{i}]")
        return
    if x_arr or y_arr:
        _fail(path, f"Comparing {type(x).__name__} and {type(y).__name__} is not supported")
    if not (x == y):
        _fail(path, f"Object comparison failed: {x!r} != {y!r}")


class TestCase(unittest.TestCase):
    """unittest.TestCase with torch's assertEqual family (see the module docstring)."""

    precision = 0.0
    rel_tol = 0.0
    longMessage = True

    def assertEqual(self, x, y, msg=None, *, atol=None, rtol=None, equal_nan=True,
                    exact_dtype=True, exact_device=False, exact_layout=False,
                    exact_stride=False, exact_is_coalesced=False):
        __tracebackhide__ = True
        try:
            compare(x, y, atol=atol, rtol=rtol, equal_nan=equal_nan, exact_dtype=exact_dtype)
        except _Mismatch as e:
            text = str(e) if msg is None else (msg(str(e)) if callable(msg) else f"{e}\n{msg}")
            raise self.failureException(text) from None

    def assertNotEqual(self, x, y, msg=None, *, atol=None, rtol=None, **kwargs):
        with self.assertRaises(AssertionError, msg=msg):
            self.assertEqual(x, y, msg, atol=atol, rtol=rtol, **kwargs)

    def assertEqualIgnoreType(self, *args, **kwargs):
        return self.assertEqual(*args, exact_dtype=False, **kwargs)

    def assertExpectedInline(self, actual, expect, skip=0, ignore_comments=False,
                             ignore_empty_lines=False):
        def norm(s):
            lines = s.splitlines()
            if ignore_comments:
                lines = [re.sub(r"#.*", "", ln).rstrip() for ln in lines]
            if ignore_empty_lines:
                lines = [ln for ln in lines if ln.strip()]
            return "\n".join(lines).strip()
        self.assertEqual(norm(actual), norm(expect))

    def assertNotWarn(self, callable, msg=""):
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            callable()
            self.assertTrue(len(ws) == 0, msg)

    @contextlib.contextmanager
    def assertWarnsOnceRegex(self, category, regex=""):
        pattern = re.compile(regex)
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            yield
            if len(ws) == 0:
                self.fail("no warning caught")
            self.assertTrue(type(ws[0].message) is category)
            self.assertTrue(re.match(pattern, str(ws[0].message)))

    def assertLeaksNoCudaTensors(self, name=None):
        return contextlib.nullcontext()


__all__ = [
    "IS_MACOS", "IS_WINDOWS", "TestCase", "compare", "disable_gc",
    "instantiate_parametrized_tests", "parametrize", "public_name",
    "skipIfMPS", "skipIfNoLapack", "skipIfTorchDynamo", "skipIfWindows", "slowTest",
    "xfailIfS390X",
]
