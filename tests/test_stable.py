"""symgrad.ops.stable: values, derivatives, evalf, NumPy and C printing of the stable primitives."""

from __future__ import annotations

import shutil
import subprocess

import mpmath
import numpy
import pytest
import sympy
from sympy.printing.c import C99CodePrinter
from sympy.printing.numpy import NumPyPrinter

from symgrad.ops.stable import (
    NUMPY_HELPERS,
    NUMPY_PRINT_METHODS,
    STABLE_OPS,
    c_func,
    erfc,
    expm1,
    log1p,
    log_sigmoid,
    logaddexp,
    logsumexp,
    numpy_helper_namespace,
    required_numpy_helpers,
    sigmoid,
    softplus,
)

x, y, z = sympy.symbols("x y z", real=True)
mpmath.mp.dps = 50

EXTREMES = [-1e300, -1e3, -745.0, -710.0, -700.0, -100.0, -80.0, -37.0, -30.0, -20.0, -1.0,
            -1e-20, 0.0, 1e-20, 1.0, 20.0, 30.0, 37.0, 80.0, 100.0, 700.0, 710.0, 745.0, 1e3,
            1e300]

# op, sympy expression, mpmath reference, float64 relative tolerance
UNARY = [
    ("sigmoid", sigmoid(x), lambda v: 1 / (1 + mpmath.exp(-v)), 4e-16),
    ("softplus", softplus(x), lambda v: mpmath.log1p(mpmath.exp(v)), 4e-16),
    ("log_sigmoid", log_sigmoid(x), lambda v: -mpmath.log1p(mpmath.exp(-v)), 4e-16),
    ("sigmoid_grad", sigmoid(x).diff(x), lambda v: mpmath.exp(-v) / (1 + mpmath.exp(-v)) ** 2,
     1e-15),
    ("softplus_grad2", softplus(x).diff(x, 2), lambda v: 1 / (mpmath.exp(v / 2) + mpmath.exp(-v / 2)) ** 2, 1e-15),
]


class StableNumPyPrinter(NumPyPrinter):
    _print_erf = NUMPY_PRINT_METHODS["_print_erf"]
    _print_erfc = NUMPY_PRINT_METHODS["_print_erfc"]


class FloatCPrinter(C99CodePrinter):
    """Stand-in for the lead's C printer: float32 type aliases and ``float_type``."""

    def __init__(self, float_type):
        real = sympy.codegen.ast.real
        alias = sympy.codegen.ast.float32 if float_type == "float" else sympy.codegen.ast.float64
        super().__init__({"type_aliases": {real: alias}})
        self.float_type = float_type


def numpy_fn(expr, args):
    return sympy.lambdify(args, expr, modules=[numpy_helper_namespace(), "numpy"],
                          printer=StableNumPyPrinter({"fully_qualified_modules": True}))


def mp_float(value):
    """Round an mpmath value to float64 without overflow errors (tiny -> 0, huge -> inf)."""
    return float(value) if abs(value) < mpmath.mpf("1.7976931348623157e308") else float("inf")


# ----------------------------------------------------------------------------- symbolic behaviour


def test_eval_folds_only_trivial_numbers():
    assert sigmoid(0) == sympy.Rational(1, 2)
    assert softplus(0) == sympy.log(2)
    assert log_sigmoid(0) == -sympy.log(2)
    assert logsumexp(x) == x
    assert logaddexp(x, -sympy.oo) == x
    assert erfc(0) == 1
    # symbolic arguments stay as written: no auto-rewrite
    assert isinstance(sigmoid(-x), sigmoid) and sigmoid(-x).args == (-x,)
    assert isinstance(erfc(-x), erfc)  # sympy.erfc(-x) would become 2 - erfc(x)
    assert isinstance(softplus(sympy.log(x)), softplus)


def test_derivatives_are_stable_forms():
    assert sigmoid(x).diff(x) == sigmoid(x) * sigmoid(-x)
    assert softplus(x).diff(x) == sigmoid(x)
    assert log_sigmoid(x).diff(x) == sigmoid(-x)
    assert logaddexp(x, y).diff(x) == sigmoid(x - y)
    assert logaddexp(x, y).diff(y) == sigmoid(-x + y)
    lse = logsumexp(x, y, z)
    assert lse.diff(y) == sympy.exp(y - lse)
    assert log1p(x).diff(x) == 1 / (x + 1)
    assert expm1(x).diff(x) == sympy.exp(x)
    assert erfc(x).diff(x) == -2 * sympy.exp(-x**2) / sympy.sqrt(sympy.pi)


@pytest.mark.parametrize("expr", [sigmoid(x), softplus(x), log_sigmoid(x), logaddexp(x, y),
                                  logsumexp(x, y, z), sigmoid(x).diff(x, 2)])
def test_rewrite_as_exp_is_the_definition(expr):
    naive = expr.rewrite(sympy.exp)
    for point in ({x: 0.3, y: -1.2, z: 2.0}, {x: -4.0, y: 0.5, z: -0.25}):
        assert abs(expr.evalf(30, subs=point) - naive.evalf(30, subs=point)) < 1e-25


def test_evalf_at_extreme_points():
    assert sigmoid(x).evalf(50, subs={x: -800}) == pytest.approx(float(mpmath.exp(-800)), rel=1e-15)
    assert float(softplus(x).evalf(50, subs={x: 800})) == 800.0
    value = logsumexp(x, y, z).evalf(50, subs={x: 1000, y: 1000, z: -1000})
    assert abs(value - (1000 + sympy.log(2))) < 1e-40
    assert float(sigmoid(x).diff(x).evalf(50, subs={x: 30})) == pytest.approx(
        float(mpmath.exp(-30) / (1 + mpmath.exp(-30)) ** 2), rel=1e-15)


def test_stable_ops_table_names():
    assert set(STABLE_OPS) == {"sigmoid", "softplus", "log_sigmoid", "logaddexp", "logsumexp",
                               "log1p", "expm1", "erfc", "erfcx", "log_ndtr", "log1mexp", "sinc", "exprel",
                               "log1prel", "inv_exprel", "sinhc", "inv_sinhc", "tanc", "tanhc",
                               "log_cosh"}


# ----------------------------------------------------------------------------- NumPy printing


@pytest.mark.parametrize("name, expr, ref, rtol", UNARY, ids=[u[0] for u in UNARY])
def test_numpy_unary_accurate_and_finite_everywhere(name, expr, ref, rtol):
    fn = numpy_fn(expr, [x])
    points = numpy.array(EXTREMES)
    with numpy.errstate(over="raise", invalid="raise", divide="raise"):
        got = fn(points)
    assert numpy.all(numpy.isfinite(got))
    for v, g in zip(points, got):
        expected = mp_float(ref(mpmath.mpf(v)))
        assert g == pytest.approx(expected, rel=rtol, abs=1e-300), (name, v)


@pytest.mark.parametrize("expr", [sigmoid(x), softplus(x), log_sigmoid(x), logaddexp(x, y),
                                  logsumexp(x, y, z), sigmoid(x).diff(x), sympy.erf(x),
                                  erfc(x)], ids=str)
def test_numpy_keeps_float32(expr):
    args = [x, y, z][: len(expr.free_symbols)]
    fn = numpy_fn(expr, args)
    arrays = [numpy.linspace(-100, 100, 7, dtype=numpy.float32) for _ in args]
    with numpy.errstate(over="raise", invalid="raise", divide="raise"):
        out = fn(*arrays)
    assert out.dtype == numpy.float32
    assert numpy.all(numpy.isfinite(out))


def test_numpy_binary_and_nary():
    lae = numpy_fn(logaddexp(x, y), [x, y])
    lse = numpy_fn(logsumexp(x, y, z), [x, y, z])
    dlse = numpy_fn(logsumexp(x, y, z).diff(x), [x, y, z])
    cases = [(1000.0, 1000.0, -1000.0), (-1000.0, -999.0, -1001.0), (0.0, 1e-20, -1e-20),
             (700.0, -700.0, 0.0)]
    for a, b, c in cases:
        ma, mb, mc = map(mpmath.mpf, (a, b, c))
        assert lae(a, b) == pytest.approx(mp_float(mpmath.log(mpmath.exp(ma) + mpmath.exp(mb))),
                                          rel=4e-16)
        ref = mpmath.log(mpmath.exp(ma) + mpmath.exp(mb) + mpmath.exp(mc))
        assert lse(a, b, c) == pytest.approx(mp_float(ref), rel=1e-15)
        assert dlse(a, b, c) == pytest.approx(mp_float(mpmath.exp(ma - ref)), rel=1e-12, abs=1e-300)


def test_numpy_prints_through_module_names():
    printer = StableNumPyPrinter()
    assert printer.doprint(softplus(x)) == "_softplus(x)"
    assert printer.doprint(logaddexp(x, y)) == "numpy.logaddexp(x, y)"
    assert printer.doprint(logsumexp(x, y, z)) == "_logsumexp(x, y, z)"
    assert printer.doprint(sigmoid(x)) == "_sigmoid(x)"
    assert printer.doprint(sympy.erf(x)) == "_erf(x)"


def test_required_helpers_in_dependency_order():
    printer = StableNumPyPrinter()
    source = printer.doprint(sigmoid(x) + sympy.erf(y) * logsumexp(x, y, z))
    needed = required_numpy_helpers(source)
    assert {"_sigmoid", "_logsumexp", "_erfc_tail", "_erf_small", "_erf"} <= set(needed)
    assert needed == required_numpy_helpers(source)  # deterministic
    assert needed.index("_erfc_tail") < needed.index("_erf")  # dependencies first
    assert needed.index("_erf_small") < needed.index("_erf")
    assert "_softplus" not in needed
    assert required_numpy_helpers("numpy.exp(x)") == ()
    # every helper a helper calls is itself included
    module = "\n".join(NUMPY_HELPERS[name] for name in needed)
    for name in NUMPY_HELPERS:
        if f"{name}(" in module.replace(f"def {name}(", ""):
            assert name in needed, name
    for name, text in NUMPY_HELPERS.items():
        assert text.startswith(f"def {name}(")
        assert "import" not in text  # the generated module imports numpy once, nothing else


# ----------------------------------------------------------------------------- erf helper


def test_erf_helper_within_one_ulp():
    ns = numpy_helper_namespace()
    rng = numpy.random.default_rng(0)
    xs = numpy.concatenate([rng.uniform(-6, 6, 3000), rng.uniform(-1.1, 1.1, 3000),
                            [0.0, 1e-300, -1e-20, 0.46875, 1.0, 4.0, 6.0, 27.0, 1e300, -1e300]])
    with numpy.errstate(over="raise", invalid="raise", divide="raise"):
        got = ns["_erf"](xs)
    ref = numpy.array([float(mpmath.erf(v)) for v in xs])
    ulps = numpy.abs(got - ref) / numpy.spacing(numpy.maximum(numpy.abs(ref), 1e-300))
    assert ulps.max() <= 1.0
    assert numpy.max(numpy.abs(got - ref) / numpy.maximum(numpy.abs(ref), 1e-300)) <= 2.3e-16


def test_erfc_helper_relative_in_tail():
    ns = numpy_helper_namespace()
    xs = numpy.linspace(-6, 26, 4001)
    with numpy.errstate(over="raise", invalid="raise", divide="raise"):
        got = ns["_erfc"](xs)
        assert list(ns["_erfc"](numpy.array([-1e300, 1e300]))) == [2.0, 0.0]
    ref = numpy.array([mp_float(mpmath.erfc(v)) for v in xs])
    assert numpy.max(numpy.abs(got - ref) / ref) < 1e-15


def test_erf_helper_float32():
    ns = numpy_helper_namespace()
    xs = numpy.linspace(-5, 5, 1001, dtype=numpy.float32)
    got = ns["_erf"](xs)
    assert got.dtype == numpy.float32
    ref = numpy.array([float(mpmath.erf(float(v))) for v in xs])
    assert numpy.max(numpy.abs(got - ref)) < 2.5e-7


# ----------------------------------------------------------------------------- C printing


def test_c_func_by_precision():
    assert c_func(FloatCPrinter("float"), "exp") == "expf"
    assert c_func(FloatCPrinter("double"), "log1p") == "log1p"
    assert c_func(C99CodePrinter(), "fmax") == "fmax"


def test_c_code_names_follow_float_type():
    f32, f64 = FloatCPrinter("float"), FloatCPrinter("double")
    assert f32.doprint(softplus(x)) == "(fmaxf((x), 0) + log1pf(expf(-fabsf((x)))))"
    assert f64.doprint(softplus(x)) == "(fmax((x), 0) + log1p(exp(-fabs((x)))))"
    assert "expf" in f32.doprint(sigmoid(x)) and "expf" not in f64.doprint(sigmoid(x))
    assert "erfcf" in f32.doprint(erfc(x))
    assert f32.doprint(log1p(x)) == "log1pf(x)"  # SymPy's class, printed from type_aliases


C_CASES = [sigmoid(x), softplus(x), log_sigmoid(x), logaddexp(x, y), logsumexp(x, y, z),
           sigmoid(x).diff(x), erfc(x), logsumexp(x, y, z).diff(z)]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("float_type", ["double", "float"])
def test_c_code_compiles_and_is_finite(tmp_path, float_type):
    printer = FloatCPrinter(float_type)
    lines = [f"#include <math.h>", "#include <stdio.h>", "int main(void) {",
             f"  {float_type} pts[] = {{-1e3, -745, -100, -30, -1, 0, 1e-20, 1, 30, 100, 745, 1e3}};",
             "  for (int i = 0; i < 12; i++) { for (int j = 0; j < 12; j += 5) {",
             f"    {float_type} x = pts[i], y = pts[j], z = pts[(i + j) % 12];"]
    for expr in C_CASES:
        lines.append(f'    printf("%.17g\\n", (double)({printer.doprint(expr)}));')
    lines += ["  } }", "  return 0;", "}"]
    src = tmp_path / "t.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-std=c99", "-O2", "-Wall", "-Werror", "-Wno-unused-variable",
                    str(src), "-o", str(exe), "-lm"], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    values = numpy.array([float(v) for v in out])
    assert values.size == 12 * 3 * len(C_CASES)
    assert numpy.all(numpy.isfinite(values))
    # spot-check against mpmath in double
    if float_type == "double":
        first = values[: len(C_CASES)]  # x = -1e3, y = -1e3, z = pts[0] = -1e3
        assert first[0] == 0.0 and first[1] == 0.0 and first[2] == -1e3
        assert first[3] == pytest.approx(-1e3 + float(mpmath.log(2)), rel=1e-15)
        assert first[4] == pytest.approx(-1e3 + float(mpmath.log(3)), rel=1e-15)
