"""A second round of forwards written by torch users, through the command line and the tracer.

Each scenario here exposed a defect (the docstrings say what happened before). Command-line
tests write a file into a temporary cwd and run `python -m symgrad.cli` in a subprocess, as
tests/test_cli_unseen.py does; numbers are compared with torch autograd where torch is
installed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgrad as sg
from symgrad.errors import ShapeError, TraceError

from test_cli_unseen import ROOT, cli, one_line_error, write  # noqa: E402,F401


def trace_error(fn, *inputs, kind=TraceError):
    with pytest.raises(kind) as info:
        sg.compile(fn, *inputs, cache_ok=False)
    return " ".join(str(info.value).split())


def against_torch(fn, torch_fn, *xs, generic=False):
    """forward and backward of sg.compile(fn) against torch autograd (float64)."""
    torch = pytest.importorskip("torch")
    mod = sg.compile(fn, cache_ok=False) if generic else sg.compile(fn, *xs, cache_ok=False)
    txs = [torch.tensor(x, requires_grad=True) for x in xs]
    want = torch_fn(*txs)
    want = want if isinstance(want, tuple) else (want,)
    got = mod.raw.forward(*xs)
    rng = np.random.default_rng(1)
    seeds = [rng.standard_normal(tuple(w.shape)) for w in want]
    grads = mod.backward(*seeds, *xs)
    wgrads = torch.autograd.grad(want, txs, [torch.tensor(s) for s in seeds], allow_unused=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-10, atol=1e-12)
    for g, w in zip(grads, wgrads):
        w = np.zeros(np.shape(g)) if w is None else w.numpy()
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


X23 = np.random.default_rng(0).standard_normal((2, 3))


# --------------------------------------------------------------------------- shape errors
SHAPES = """\
import symgrad as sg


def add(x, y):
    return x + y


def mm(x, w):
    return (x @ w).sum()


def resh(x):
    return x.reshape(5, 5)
"""


@pytest.mark.parametrize("name, shapes, fragments", [
    ("add", ["x=3", "y=4"], ["add: shapes (3,) and (4,) cannot be broadcast", "shp.py:5"]),
    ("mm", ["x=2,3", "w=4,5"], ["matmul: shapes (2, 3) and (4, 5)", "shp.py:9"]),
    ("resh", ["x=2,3"], ["reshape: shape (5, 5) is invalid for input of size 6", "shp.py:13"]),
])
def test_shape_errors_name_the_users_line(tmp_path, name, shapes, fragments):
    """Before: 'ShapeError: add: shapes (3,) and (4,) cannot be broadcast together (size 3 vs 4
    at dimension -1)' with no line; so were matmul, reshape, expand, indexing, where, clamp."""
    write(tmp_path, "shp.py", SHAPES)
    args = [a for s in shapes for a in ("--shape", s)]
    proc = cli("compile", f"shp.py:{name}", *args, cwd=tmp_path)
    one_line_error(proc, *fragments, status=1)


@pytest.mark.parametrize("fn, inputs, fragment", [
    (lambda x: x.expand(3, 4), (np.ones(2),), "expand: the expanded size"),
    (lambda x: x[5], (np.ones(2),), "index 5 is out of bounds"),
    (lambda x: x[:, :, 0], (X23,), "too many indices"),
    (lambda x, y: sg.where(x > 0, x, y), (np.ones(2), np.ones(3)), "where: shapes (2,) and (3,)"),
    (lambda x, y: x.clamp(min=y), (np.ones(2), np.ones(3)), "clamp: shapes (2,) and (3,)"),
    (lambda x: x.T @ x[0], (X23,), "matmul: shapes (3, 2) and (3,)"),
])
def test_every_shape_error_names_the_line(fn, inputs, fragment):
    message = trace_error(fn, *inputs, kind=ShapeError)
    assert fragment in message and "(at tests/test_cli_unseen_more.py:" in message, message


# --------------------------------------------------------------------------- dims
@pytest.mark.parametrize("fn, fragment", [
    (lambda x: x.transpose(0, 2), "transpose: dimension out of range (expected to be in range "
                                  "of [-2, 1], but got 2)"),
    (lambda x: x.transpose(-3, 0), "but got -3"),
    (lambda x: x.unsqueeze(3), "unsqueeze: dimension out of range (expected to be in range of "
                               "[-3, 2], but got 3)"),
    (lambda x: x.unsqueeze(-4), "but got -4"),
    (lambda x: x.flatten(0, 5), "flatten: dimension out of range"),
    (lambda x: x.mean(dim=(0, 0)), "mean: dim 0 appears multiple times in the list of dims"),
    (lambda x: x.sum(dim=1.0), "sum: dim must be an int"),
])
def test_dims_out_of_range_are_errors_as_in_torch(fn, fragment):
    """Before: transpose(0, 2) of a 2-d value compiled to the identity (2 % 2 == 0),
    unsqueeze(3) to unsqueeze(0), flatten(0, 5) to a wrong reshape, mean(dim=(0, 0)) to
    mean(dim=0); sum(dim=1.0) was "TypeError: 'float' object is not iterable"."""
    message = trace_error(fn, X23, kind=(ShapeError, TraceError))
    assert fragment in message and "(at tests/test_cli_unseen_more.py:" in message, message


def test_numpy_integer_dims_are_dims():
    mod = sg.compile(lambda x: x.sum(np.int64(1)), X23, cache_ok=False)
    np.testing.assert_allclose(mod.forward(X23), X23.sum(1))


# --------------------------------------------------------------------------- returned constants
def test_returning_a_number_is_an_error_with_or_without_shapes(tmp_path):
    """Before: with --shape, `return 1.0` compiled to a module whose forward is the constant
    1 and whose gradient is zeros (without --shape it was already an error)."""
    write(tmp_path, "const.py", """\
        def const(x):
            return 1.0
        """)
    for extra in ([], ["--shape", "x=3"]):
        proc = cli("compile", "const.py:const", *extra, cwd=tmp_path)
        one_line_error(proc, "const returned a constant", "1.0", "const.py:1", status=1)


# --------------------------------------------------------------------------- torch spellings
def test_torch_keyword_aliases_axis_keepdims_and_alpha():
    """torch accepts x.sum(axis=1, keepdims=True) and x.add(y, alpha=2); the tracer raised
    "SymbolicTensor.sum() got an unexpected keyword argument 'axis'"."""
    def f(x, y):
        return (x.sum(axis=1, keepdims=True) * x.add(y, alpha=2).sub(x, alpha=0.5)
                + x.softmax(axis=-1) + x.mean(axis=(0, 1)))

    def tf(x, y):
        return (x.sum(1, keepdim=True) * x.add(y, alpha=2).sub(x, alpha=0.5)
                + x.softmax(-1) + x.mean((0, 1)))

    against_torch(f, tf, X23, X23[::-1].copy())
    with pytest.raises(TypeError, match="both 'dim' and its alias 'axis'"):
        sg.compile(lambda x: x.sum(dim=0, axis=0), X23, cache_ok=False)


def test_chunk_split_unbind_masked_fill_view_as():
    """GLU-style `a, b = x.chunk(2, dim=-1)`, split, unbind, masked_fill, view_as, type_as:
    each was "unsupported op" in a traced forward."""
    def f(x):
        a, b = x.chunk(2, dim=-1)
        parts = x.split([1, 3], 0)
        rows = x.unbind(0)
        return (a * b.sigmoid(), parts[1].sum() * parts[0],
                sum(r * (i + 1) for i, r in enumerate(rows)),
                x.masked_fill(x > 0.5, 0.5).sin().type_as(x),
                x.T.reshape_as(x) * x.view_as(x), x.split(4, dim=1)[1].exp())

    def tf(x):
        a, b = x.chunk(2, dim=-1)
        parts = x.split([1, 3], 0)
        rows = x.unbind(0)
        return (a * b.sigmoid(), parts[1].sum() * parts[0],
                sum(r * (i + 1) for i, r in enumerate(rows)),
                x.masked_fill(x > 0.5, 0.5).sin().type_as(x),
                x.T.reshape_as(x) * x.view_as(x), x.split(4, dim=1)[1].exp())

    against_torch(f, tf, np.random.default_rng(2).standard_normal((4, 6)))


def test_in_place_ops_say_in_place_and_give_the_out_of_place_spelling(tmp_path):
    """Before: "unsupported op 'add_' on a traced value ... Supported: T, abs, ..." (1600
    characters listing every op), and pow_ said 'Python control flow cannot depend on tensor
    values'."""
    write(tmp_path, "inpl.py", """\
        def inpl(x):
            y = x * 2
            y.add_(1)
            return y


        def zero(x):
            return x.exp().zero_()


        def cummax(x):
            return x.cummax(0)
        """)
    line = one_line_error(cli("compile", "inpl.py:inpl", cwd=tmp_path),
                          "in-place op 'add_'", "inpl.py:3", "x.add(...)", status=1)
    assert "Supported:" not in line
    one_line_error(cli("compile", "inpl.py:zero", cwd=tmp_path), "in-place op 'zero_'",
                   "inpl.py:8", "sg.zeros_like", status=1)
    message = trace_error(lambda x: x.pow_(2), X23)
    assert "in-place op 'pow_'" in message and "x.pow(...)" in message, message
    message = trace_error(lambda x: x.sigmod(), X23)
    assert "unsupported op 'sigmod'" in message and "Did you mean sigmoid?" in message
    assert "Supported:" not in message      # the correction alone, not 200 names after it
    message = trace_error(lambda x: x.frobnicate(), X23)
    assert "unsupported op 'frobnicate'" in message and "Supported, by group: " \
        "elementwise math" in message     # grouped (issue 19), not one run of ~200 names
    assert "reductions and scans" in message and "shape and indexing" in message


# --------------------------------------------------------------------------- shape-generic var
def test_var_and_std_are_shape_generic():
    """Before: x.var(dim=0) / x.std() without example inputs failed with 'the rank of this
    value is unknown in a shape-generic trace' (the count was taken from the shape)."""
    def f(x):
        return x.std(dim=1) + x.var() + x.var(0, unbiased=False, keepdim=True).sum()

    def tf(x):
        return x.std(dim=1) + x.var() + x.var(0, unbiased=False, keepdim=True).sum()

    for shape in [(3, 5), (4, 2)]:
        against_torch(f, tf, np.random.default_rng(3).standard_normal(shape), generic=True)


# --------------------------------------------------------------------------- *args, classes
VARARGS = """\
import functools

import symgrad as sg


class VarArgs(sg.Function):
    @staticmethod
    def forward(ctx, *xs):
        return sum(x.sin() for x in xs)


class Net:
    def __init__(self):
        self.w = 2.0

    def forward(self, x):
        return x * self.w


class Cube(sg.Function):
    @staticmethod
    def forward(ctx, x):
        return x * x * x


def _base(x, p):
    return (x.abs() + 1) ** p


cube_abs = functools.partial(_base, p=3)
"""


def test_var_positional_forward_takes_shapes_in_order(tmp_path):
    """Before: a forward(ctx, *xs) could not be compiled from the command line: --shape xs=3
    was 'the forward has no argument', and without --shape the error was 'returned a constant
    (its output is 0)'."""
    write(tmp_path, "va.py", VARARGS)
    proc = cli("compile", "va.py:VarArgs", cwd=tmp_path)
    one_line_error(proc, "VarArgs.forward has no tensor inputs", "--shape xs0=3", status=1)
    proc = cli("compile", "va.py:VarArgs", "--shape", "xs0=3", "--shape", "xs1=3", "-o",
               "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "out" / "var_args_grad.py").read_text()
    assert "def forward(xs0, xs1):" in text
    one_line_error(cli("compile", "va.py:VarArgs", "--shape", "xs1=3", cwd=tmp_path),
                   "missing xs0", status=2)
    one_line_error(cli("compile", "va.py:VarArgs", "--shape", "ys=3", cwd=tmp_path),
                   "no argument 'ys'", "xs0, xs1, ...", status=2)


def test_module_style_class_partial_and_class_forward_spec(tmp_path):
    """Before: an nn.Module-style class was traced with ctx as self ("AttributeError:
    'TraceCtx' object has no attribute 'w'"), FILE.py:Cls.forward traced ctx as an input
    ("unsupported op 'save_for_backward'"), and a functools.partial was "not a function"."""
    write(tmp_path, "va.py", VARARGS)
    one_line_error(cli("compile", "va.py:Net", cwd=tmp_path),
                   "va.py:Net.forward is an instance method", "nn.Module", status=2)
    proc = cli("compile", "va.py:Cube.forward", "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "def forward(x):" in (tmp_path / "out" / "cube_grad.py").read_text()
    proc = cli("compile", "va.py:cube_abs", "-o", "out/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "va.py:cube_abs" in (tmp_path / "out" / "cube_abs_grad.py").read_text()


def test_missing_name_lists_functions_too_and_suggests(tmp_path):
    """Before: a file with a Function class listed only the classes as candidates, so a
    mistyped function name got no useful hint."""
    write(tmp_path, "va.py", VARARGS)
    line = one_line_error(cli("compile", "va.py:cube_ab", cwd=tmp_path),
                          "va.py has no name 'cube_ab'", "did you mean 'cube_abs'?", status=2)
    assert "VarArgs" in line and "Cube" in line


# --------------------------------------------------------------------------- provenance header
HEADER = """\
import functools

import symgrad as sg

square = lambda x: x * x  # noqa: E731


def make_scaled(k):
    def scaled(x):
        return x * k
    return scaled


scaled3 = make_scaled(3.0)


class Norm(sg.Function):
    @staticmethod
    def forward(ctx, x, w, eps=1e-5):
        return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + eps).sqrt() * w
"""


@pytest.mark.parametrize("spec, options, regenerate", [
    ("hd.py:Norm", ["--target", "cuda", "--dtype", "float64", "--shape", "x=2,3", "--shape",
                    "w=3"],
     "symgrad compile hd.py:Norm --target cuda --dtype float64 --shape x=2,3 --shape w=3"),
    ("hd.py:square", ["--shape", "x=4"], "symgrad compile hd.py:square --target numpy "
                                          "--shape x=4"),
    ("hd.py:scaled3", [], "symgrad compile hd.py:scaled3 --target numpy"),
])
def test_the_headers_regenerate_command_writes_the_same_files(tmp_path, spec, options,
                                                               regenerate):
    """Before: the header said 'Regenerate with: symgrad compile hd.py:Norm --target cuda'
    for a module compiled with --shape and --dtype float64 (that command writes a
    shape-generic float32 module), and 'hd.py:<lambda>' / 'hd.py:make_scaled.<locals>.scaled'
    for names bound at module level, which the command line cannot resolve."""
    write(tmp_path, "hd.py", HEADER)
    proc = cli("compile", spec, *options, "-o", "a/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    lines = [line for text in first.values() for line in text.decode().splitlines()
             if "Regenerate with:" in line]
    assert lines and all(line.split("Regenerate with: ")[1] == regenerate for line in lines), \
        lines
    proc = cli(*regenerate.split()[1:], "-o", "b/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "b").iterdir()} == first


# --------------------------------------------------------------------------- input names
NAMES = """\
def grads(x, grad_x):
    return x * grad_x ** 2


def helpers(_sum, _asarray, _sigmoid, x):
    return (_sum * _asarray + _sigmoid * x).sigmoid()


def outs(x, out0, out1):
    return x * 2, out0 + x, out1.exp()
"""


def test_inputs_named_like_gradients_or_helpers(tmp_path):
    """forward(x, grad_x): the backward assigned x's gradient to `grad_x`, then read the
    input `grad_x` again for grad_grad_x: silently wrong ([0.294, 0.384] for [0.42, -0.96]);
    the C target did not compile (two parameters named grad_x). An input named `_sum` or
    `_sigmoid` shadowed the module's helper: "'numpy.ndarray' object is not callable". With
    inputs named out0, out1 the forward assigned output 0 to out0 before reading the input
    out0: forward output 1 was wrong ([0.9, 3.6] for [1.0, 0.8])."""
    torch = pytest.importorskip("torch")
    write(tmp_path, "nm.py", NAMES)
    rng = np.random.default_rng(4)
    for name, n in (("grads", 2), ("helpers", 4), ("outs", 3)):
        proc = cli("compile", f"nm.py:{name}", "-o", "out/", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        sys.path.insert(0, str(tmp_path / "out"))
        try:
            mod = __import__(f"{name}_grad")
        finally:
            sys.path.pop(0)
        xs = [rng.uniform(0.5, 1.5, 3) for _ in range(n)]
        txs = [torch.tensor(x, requires_grad=True) for x in xs]
        namespace = {}
        exec(NAMES, namespace)
        want = namespace[name](*txs)
        want = want if isinstance(want, tuple) else (want,)
        sum(w.sum() for w in want).backward()
        for got, w in zip(mod.forward(*xs), want):
            np.testing.assert_allclose(got, w.detach().numpy(), rtol=1e-12)
        for g, t in zip(mod.backward(*[np.ones(3)] * len(want), *xs), txs):
            np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12)
    from symgrad.native import compiler_and_flags
    if compiler_and_flags()[1] is not None:
        namespace = {}
        exec(NAMES, namespace)
        xs = [np.array([0.3, 1.2]), np.array([0.7, -0.4])]
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # no fallback to NumPy: the C compiles
            mod = sg.compile(namespace["grads"], *xs, target="c", cache_ok=False)
            np.testing.assert_allclose(mod.backward(np.ones(2), *xs)[1], [0.42, -0.96])


# --------------------------------------------------------------------------- gradient dtype
def test_a_bool_or_int_outputs_gradient_does_not_decide_the_dtype(tmp_path):
    """forward returning (y, x > 0) or (values, argmax): backward(grad_y, None, x) in float32
    returned float64, because numpy.result_type(grad_out0, grad_out1, x) read the None that
    torch passes for a gradient a bool output does not have (built-in max_dim too)."""
    write(tmp_path, "bo.py", """\
        def bool_out(x):
            return x.exp(), x > 0


        def argmax_out(x):
            return x.max(dim=1).values, x.argmax(dim=1)
        """)
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    for name in ("bool_out", "argmax_out"):
        for target in ("numpy", "cuda"):
            proc = cli("compile", f"bo.py:{name}", "--target", target, "-o", f"{target}/",
                       cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
        text = (tmp_path / "numpy" / f"{name}_grad.py").read_text()
        assert "numpy.result_type(grad_out0, x)" in text
        assert "grad_out1" not in (tmp_path / "cuda" / f"{name}_grad.py").read_text().split(
            "def backward(grad_out0, grad_out1, x):")[1].split("return")[0].replace(
            "def backward(grad_out0, grad_out1, x):", "")
        sys.path.insert(0, str(tmp_path / "numpy"))
        try:
            mod = __import__(f"{name}_grad")
        finally:
            sys.path.pop(0)
        out = mod.forward(x)
        (grad,) = mod.backward(np.ones_like(out[0]), None, x)
        assert grad.dtype == np.float32
    values, indices = sg.tensor(x, requires_grad=True).max(dim=1)
    assert indices.dtype == sg.int64


# --------------------------------------------------------------------------- check
def test_check_without_shapes_says_the_default_shape_does_not_fit(tmp_path):
    """Before: `symgrad check f.py:rowsum` of x.sum(dim=1) without --shape printed
    'cannot compile f.py:rowsum: AxisError: axis 1 is out of bounds for array of dimension 1
    (--traceback for details)': the (8,) inputs check uses, not the forward, were the
    problem."""
    write(tmp_path, "f.py", """\
        def rowsum(x):
            return x.exp().sum(dim=1)
        """)
    one_line_error(cli("check", "f.py:rowsum", cwd=tmp_path),
                   "every input has shape (8,)", "AxisError", "--shape NAME=2,3", status=2)
    proc = cli("check", "f.py:rowsum", "--shape", "x=2,3", cwd=tmp_path)
    assert proc.returncode == 0 and "gradcheck f.py:rowsum: ok" in proc.stdout, proc.stdout


# --------------------------------------------------------------------------- cache
@pytest.mark.slow  # over 10 s: the quick run leaves it to CI
def test_editing_a_helper_in_another_file_recompiles(tmp_path):
    """The disk-cache key covered the forward's own file, code and closure, not what it
    imports: after editing helpers.py (a constant, then the helper's body) `symgrad compile`
    wrote the old module again, silently."""
    write(tmp_path, "helpers.py", """\
        SCALE = 2.0


        def act(x):
            return x.tanh() * SCALE
        """)
    write(tmp_path, "consts.py", "SHIFT = 1.0\n")
    write(tmp_path, "model.py", """\
        import helpers
        from consts import SHIFT


        def f(x):
            return helpers.act(x) + SHIFT
        """)

    def formula():
        proc = cli("compile", "model.py:f", "-o", "out/", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        text = (tmp_path / "out" / "f_grad.py").read_text()
        return text.split('"""Forward.')[1].split('"""')[0].strip()

    assert formula() == "out = 2*tanh(x) + 1"
    write(tmp_path, "helpers.py", (tmp_path / "helpers.py").read_text().replace("2.0", "5.0"))
    assert formula() == "out = 5*tanh(x) + 1"
    write(tmp_path, "helpers.py", (tmp_path / "helpers.py").read_text().replace("tanh",
                                                                                 "sigmoid"))
    assert formula() == "out = 5*sigmoid(x) + 1"
    write(tmp_path, "consts.py", "SHIFT = 3.0\n")
    assert formula() == "out = 5*sigmoid(x) + 3"
    assert "entries: 4" in cli("cache", "info", cwd=tmp_path).stdout
    assert formula() == "out = 5*sigmoid(x) + 3"      # unchanged files still hit the cache
    assert "entries: 4" in cli("cache", "info", cwd=tmp_path).stdout


# --------------------------------------------------------------------------- torch keywords
@pytest.mark.parametrize("spell", [
    "x.pow(exponent=3)", "x.mul(other=x)", "x.div(1.5, rounding_mode='floor')",
    "x.div(-1.5, rounding_mode='trunc')", "x.permute(dims=(1, 0))",
    "x.reshape(shape=(3, 2))", "x.view(size=(3, 2))", "x[:, :1].expand(size=(2, 3))",
    "x.softmax(dim=1, dtype=None)", "x.log_softmax(1, dtype=None)", "x.norm(p='fro')",
    "x.norm(p=float('inf'), dim=1)", "x.norm(p=0)", "x.norm(p=1, dim=0, keepdim=True)",
    "sg.exp(input=x)", "sg.sigmoid(input=x)", "sg.relu(input=x)",
    "sg.softmax(input=x, dim=1)",
])
def test_torch_keyword_spellings_trace(spell):
    """Each but norm(p=1, ...) (a control) was a TypeError ('SymbolicTensor.__pow__() got an
    unexpected keyword argument 'exponent'', '_method.<locals>.op() missing 1 required
    positional argument: 'x''), or for norm(p='fro') (torch's default spelling) 'cannot use
    a str in a traced forward', or for p=inf / p=0 a wrong value or a ZeroDivisionError."""
    torch = pytest.importorskip("torch")
    fn = eval(f"lambda x: {spell}", {"sg": sg})
    tfn = eval(f"lambda x: {spell}", {"sg": torch})
    against_torch(fn, tfn, X23.copy())


def test_permute_dims_out_of_range():
    """Before: x.permute(0, 5) of a 2-d value was permute(0, 1) (5 % 2)."""
    message = trace_error(lambda x: x.permute(0, 5), X23, kind=ShapeError)
    assert "permute: dimension out of range" in message and "but got 5" in message


# --------------------------------------------------------------------------- CUDA, generic
def test_cuda_generic_constant_broadcast_to_an_input(tmp_path):
    """A shape-generic CUDA module of sg.ones_like(x).sum(0) (and of x.var(0), which counts
    that way) launched the constant's kernel with shape numpy.broadcast_shapes() = (), so the
    sum failed with 'AxisError: axis 0 is out of bounds for array of dimension 0'. Run with
    the host harness of tests/test_target_cuda.py (NumPy as CuPy, gcc-compiled kernels)."""
    from test_target_cuda import _host_module

    def f(x):
        return sg.ones_like(x).sum(0) * x.sum(0) + x.var(0)

    mod = sg.compile(f, target="cuda", dtype="float64", cache_ok=False)
    host = _host_module(mod, tmp_path)
    for shape in [(3, 4), (5, 2)]:
        x = np.random.default_rng(6).standard_normal(shape)
        np.testing.assert_allclose(host.forward(x)[0],
                                   shape[0] * x.sum(0) + x.var(0, ddof=1), rtol=1e-12)
        grad = host.backward(np.ones(shape[1]), x)[0]
        want = shape[0] + 2 * (x - x.mean(0)) / (shape[0] - 1)
        np.testing.assert_allclose(grad, want, rtol=1e-12)


def test_runaway_recursion_names_the_function_and_its_line(tmp_path):
    """Before: 'recursion.forward recursed too deeply while being traced' for a plain
    function (no .forward), without a line."""
    write(tmp_path, "rec.py", """\
        def recursion(x):
            return recursion(x * 2)
        """)
    line = one_line_error(cli("compile", "rec.py:recursion", cwd=tmp_path),
                          "recursion recursed too deeply", "rec.py:1", status=1)
    assert ".forward" not in line
