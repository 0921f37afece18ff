"""Issue 19, item 4: a static-shape generated module checks its inputs' shapes at entry and
raises a ValueError naming the argument, the shape generated for, the shape given and how
to regenerate; it never broadcasts a wrong-shaped input silently. The check is cheap."""
import re
import shutil
import timeit

import numpy as np
import pytest

import symgrad as sg


def energy(x, y, w):
    return ((x * y).sin() * w).sum()


def _module(target, shapes=((64,), (64,), (64,))):
    kw = {"dtype": "float64"} if target != "numpy" else {}
    return sg.compile(energy, *(np.full(s, 0.5) for s in shapes), target=target, **kw)


TARGETS = ["numpy", pytest.param("c", marks=pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler"))]


@pytest.mark.parametrize("target", TARGETS)
def test_a_smaller_input_is_refused_not_broadcast(target):
    m = _module(target)
    ones = np.ones(64)
    with pytest.raises(ValueError) as err:
        m.backward(np.float64(1.0), np.ones(1), ones, ones)
    text = str(err.value)
    assert "'x'" in text and "(1,)" in text and "(64,)" in text
    assert "symgrad compile" in text and f"--target {target}" in text
    assert "--shape x=1 --shape y=64 --shape w=64" in text
    with pytest.raises(ValueError, match=r"input 'w' has shape \(1,\)"):
        m.forward(ones, ones, np.ones(1))


@pytest.mark.parametrize("target", TARGETS)
def test_a_non_broadcastable_input_gets_the_documented_error_not_numpys(target):
    m = _module(target, shapes=((1, 8, 3), (1, 8, 3), (1, 8, 3)))
    good = np.ones((1, 8, 3))
    with pytest.raises(ValueError, match=r"input 'y' has shape \(15,\), but this module was "
                                         r"generated for shape \(1, 8, 3\)"):
        m.forward(good, np.ones(15), good)
    # the right shapes still give the right numbers
    x = np.linspace(0.1, 1.0, 24).reshape(1, 8, 3)
    gx, gy, gw = m.backward(np.float64(1.0), x, good, good)
    np.testing.assert_allclose(gx, np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(gw, np.sin(x), rtol=1e-12)


def test_a_list_of_the_right_shape_and_absent_inputs_pass_the_check():
    m = _module("numpy", shapes=((3,), (3,), (3,)))
    x = [0.1, 0.2, 0.3]
    np.testing.assert_allclose(m.forward(np.asarray(x), np.ones(3), np.ones(3)),
                               np.sin(x).sum(), rtol=1e-12)
    # _check_shapes itself: a sequence is measured, None (an absent tangent) skipped
    m.raw._check_shapes("forward", (("x", x, (3,)), ("y", None, (3,))))


def test_a_shape_generic_module_has_no_check():
    m = sg.compile(energy)
    assert "_check_shapes" not in m.source
    for n in (1, 5):
        np.testing.assert_allclose(m.forward(np.ones(n), np.ones(n), np.ones(n)),
                                   n * np.sin(1.0), rtol=1e-12)


def test_cuda_source_checks_shapes_too():
    files, main = _cuda_files()
    source = files[main]
    assert 'if getattr(x, "shape", None) != (64,)' in source
    assert "def _check_shapes(" in source
    namespace = {}
    exec(compile(source, main, "exec"), namespace)   # imports without CuPy
    with pytest.raises(ValueError, match=r"input 'x' has shape \(1,\)"):
        namespace["forward"](np.ones(1), np.ones(64), np.ones(64))


def _cuda_files():
    from symgrad import compiler
    from symgrad.differentiate import differentiate
    from symgrad.emit import Program
    from symgrad.optimize import optimize
    from symgrad.trace import trace

    graph = trace(energy, np.ones(64), np.ones(64), np.ones(64))
    vjp = differentiate(graph)
    program = Program(name=graph.name, source=graph.source, constants=graph.constants,
                      forward=optimize(graph, "forward"), backward=optimize(vjp, "backward"),
                      target="cuda", dtype="float64")
    return compiler.emit(program, "cuda")


def test_the_check_costs_under_a_microsecond():
    m = _module("numpy", shapes=((1000,), (1000,), (1000,)))
    source = m.source[m.source.index("\ndef backward("):]
    test = re.search(r"\n    if (getattr\(.*\)):\n        _check_shapes", source).group(1)
    scope = {"grad_out": np.float64(1.0), "x": np.ones(1000), "y": np.ones(1000),
             "w": np.ones(1000)}
    # many short runs: their minimum is the uncontended cost on a shared machine
    cost = min(timeit.repeat(test, globals=scope, number=1000, repeat=200)) / 1000
    assert cost < 1e-6, f"the entry check costs {cost * 1e9:.0f} ns"
