"""The NumPy target's speed-motivated forms keep values, dtypes and warnings right."""
import mpmath
import numpy
import pytest
import sympy

from symgrad.emit.printers import NumpyPrinter
from symgrad.ops import stable

x = sympy.Symbol("x", real=True)


def _helper(name):
    ns = stable.numpy_helper_namespace()
    return ns[name]


def test_tanh_softplus_helper_accurate_everywhere():
    f = _helper("_tanh_softplus")
    xs = numpy.concatenate([numpy.linspace(-50, 50, 2001), [-1e300, -700.0, 1e300, 0.0]])
    with numpy.errstate(over="raise", invalid="raise", divide="raise"):
        got = f(xs)
    ref = numpy.array([float(mpmath.tanh(mpmath.log1p(mpmath.exp(v)))) for v in xs])
    assert numpy.all(numpy.abs(got - ref) <= 1e-15 * numpy.abs(ref) + 1e-300)  # a few ulp
    x32 = xs[numpy.abs(xs) < 80].astype(numpy.float32)
    g32 = f(x32)
    assert g32.dtype == numpy.float32
    ref32 = numpy.array([float(mpmath.tanh(mpmath.log1p(mpmath.exp(float(v))))) for v in x32])
    assert numpy.max(numpy.abs(g32 - ref32) / numpy.maximum(numpy.abs(ref32), 1e-30)) < 1e-6
    assert numpy.isnan(f(numpy.array([numpy.nan]))[0])


def test_printer_forms():
    p = NumpyPrinter()
    assert p.doprint(sympy.tanh(stable.softplus(x))) == "_tanh_softplus(x)"
    assert p.doprint(sympy.tanh(x)) == "numpy.tanh(x)"
    assert p.doprint(x**12) == "numpy.square(numpy.square((x*x*x)))"
    assert p.doprint(x**7) == "(numpy.square((x*x*x))*x)"
    # number-valued expressions print as Python floats (weak scalars), never numpy.sqrt(3.14)
    assert p.doprint(sympy.sqrt(sympy.pi) * x) == f"{float(sympy.sqrt(sympy.pi))!r}*x"


@pytest.mark.parametrize("n", [5, 6, 7, 12, 13, 33, 64])
def test_power_by_squaring_values(n):
    code = NumpyPrinter().doprint(x**n)
    v = numpy.linspace(0.5, 1.5, 11)
    got = eval(code, {"numpy": numpy, "x": v})
    numpy.testing.assert_allclose(got, v**n, rtol=1e-14)


def test_generated_module_keeps_float32_and_skips_errstate_where_quiet():
    from symgrad._generated import mul, neg

    a = numpy.linspace(-1, 1, 5, dtype=numpy.float32)
    assert neg.forward(a)[0].dtype == numpy.float32
    assert not hasattr(neg.forward, "__wrapped__")      # negation cannot warn: no errstate
    assert hasattr(mul.forward, "__wrapped__")          # a product can overflow: errstate
    big = numpy.array([3e38], dtype=numpy.float32)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert numpy.isinf(mul.forward(big, big)[0][0])   # overflow stays silent


def test_compiled_float32_backward_stays_float32():
    import symgrad as sg

    def f(v):
        return v * (1 + sg.erf(v * 0.7071067811865476)) * 0.5 + sg.tanh(sg.log(1 + sg.exp(v)))

    v = numpy.linspace(-3, 3, 64, dtype=numpy.float32)
    mod = sg.compile(f, v, target="numpy")
    (g,) = mod.backward(numpy.ones_like(v), v)
    assert g.dtype == numpy.float32
