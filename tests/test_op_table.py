"""One op, one place: the entries of symgrad/ops/table.py (elementwise ops of one and two
operands, structural ops) are where the tracer's methods, sg's functions, the runtime's fast
paths and composites, torch's node names, the built-in generated modules, the optimizer's
costs and the C target's vector math come from. Adding such an op is one entry there; these
tests fail when a list is kept by hand again beside the table, when an entry does not reach
every spelling or target, or when its node name is not torch's; a synthetic op added in one
entry is traced, compiled (NumPy, C) and run, its derivatives checked."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
import sympy

import symgrad as sg
from symgrad import _builtins, _composite_ops, optimize
from symgrad.ops import elementwise as ew
from symgrad.ops import table
from symgrad.ops.table import ELEMENTWISE, builtin_names, costs, traced_formulas
from symgrad.trace import SymbolicTensor

NAMES = [op.name for op in ELEMENTWISE]
SPELLINGS = [(op.name, s) for op in ELEMENTWISE for s in (op.name, *op.aliases)]


def test_entries_are_unique():
    spellings = [s for _, s in SPELLINGS]
    assert len(spellings) == len(set(spellings))


def test_builtin_modules_are_the_tables():
    assert _builtins.UNARY == builtin_names()
    root = os.path.dirname(sg.__file__)
    for name in builtin_names():
        assert os.path.isfile(os.path.join(root, "_generated", f"{name}.py")), name


def test_costs_are_the_tables():
    for key, cost in costs().items():
        assert optimize.OP_COST[key] == cost


def test_numpy_aliases_are_the_tables():
    for name, spelling in SPELLINGS:
        if spelling != name:
            assert _composite_ops.ALIASES[spelling] == name


@pytest.mark.parametrize("name,spelling", SPELLINGS)
def test_every_spelling_exists_everywhere(name, spelling):
    # the traced value, the runtime Tensor and the public function all have every spelling
    assert callable(getattr(SymbolicTensor, spelling))
    assert callable(getattr(sg.Tensor, spelling))
    assert callable(getattr(sg, spelling)) and spelling in sg.__all__


@pytest.mark.parametrize("spelling", sorted(traced_formulas()))
def test_traced_method_is_the_table_formula(spelling):
    module, function = traced_formulas()[spelling]
    fn = getattr({"sympy": sympy, "ew": ew}[module], function)
    graph = sg.trace(lambda x: getattr(x, spelling)(), np.array([0.25, 0.5]))
    (out,) = graph.outputs
    (leaf,) = out.args
    assert out.expr == fn(sympy.Symbol(leaf.name, real=True))


def test_no_unary_method_outside_the_table():
    # a `_unary(...)` method of the traced value is an elementwise op: it needs its entry
    made = {n for n, f in vars(SymbolicTensor).items()
            if getattr(f, "__qualname__", "") == "_unary.<locals>.method"}
    assert made - {"__abs__"} <= {s for _, s in SPELLINGS}


@pytest.mark.parametrize("name,reference,x", [
    ("sinh", np.sinh, [-2.0, 0.5, 3.0]),
    ("arcsinh", np.arcsinh, [-2.0, 0.5, 3.0]),
    ("fix", np.trunc, [-2.5, 0.5, 3.7]),
])
def test_table_made_ops_compute(name, reference, x):
    # values and gradients of table-made spellings, runtime and compiled, against NumPy
    x = np.array(x)
    t = sg.tensor(x, requires_grad=True)
    y = getattr(t, name)()
    np.testing.assert_allclose(y.detach().numpy(), reference(x), rtol=1e-12)
    y.sum().backward()
    h = 1e-6
    fd = (reference(x + h) - reference(x - h)) / (2 * h)
    np.testing.assert_allclose(t.grad.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_runtime_fast_paths_are_table_ops():
    # the runtime's fast-path unary ops (torch node name, saved values) run the table's
    # built-in generated modules: a fast path needs the op's entry (and its module) first
    from symgrad import _runtime_ops

    assert set(_runtime_ops._UNARY) <= set(builtin_names())


# ---------------------------------------------------------------- two operands, structural ops
BINARY_SPELLINGS = [(op.name, s) for op in table.BINARY for s in (op.name, *op.aliases)]
PUBLIC = [s for s in table.public_functions()]


def test_all_entries_are_unique():
    spellings = table.spellings()
    assert len(spellings) == len(set(spellings))
    assert set(table.EXCEPTIONS).isdisjoint(spellings)


@pytest.mark.parametrize("spelling,traced", [
    (s, getattr(op, "traced", True)) for op in (*table.ELEMENTWISE, *table.BINARY,
                                               *table.STRUCTURAL)
    if op.runtime != "ir" and op.function for s in (op.name, *op.aliases)])
def test_every_public_spelling_exists_everywhere(spelling, traced):
    # sg.<name>, the runtime Tensor's method and the traced value's method of every entry
    # that has a public spelling (elementwise of any arity, reductions, movement, products)
    assert spelling in PUBLIC
    assert callable(getattr(sg, spelling)) and spelling in sg.__all__
    assert callable(getattr(sg.Tensor, spelling))
    assert hasattr(SymbolicTensor, spelling) == traced   # as_strided: a runtime op only
    if traced:
        assert callable(getattr(SymbolicTensor, spelling))


@pytest.mark.parametrize("name,reason", sorted(table.EXCEPTIONS.items()))
def test_exceptions_exist_outside_the_table(name, reason):
    # the ops that are code rather than an entry: each is a public function where the
    # reason says, and has no entry
    assert callable(getattr(sg, name)) and name in sg.__all__
    module = reason.split(":")[0]
    assert module.startswith("symgrad.")
    assert name not in table.spellings()


@pytest.mark.parametrize("spelling", sorted(table.traced_formulas(table.BINARY)))
def test_traced_binary_method_is_the_table_formula(spelling):
    from symgrad._trace_elementwise import formula_function

    module, function = table.traced_formulas(table.BINARY)[spelling]
    fn = formula_function(f"{module}.{function}")
    graph = sg.trace(lambda x, y: getattr(x, spelling)(y), np.array([0.25, 0.5]),
                     np.array([1.5, 2.0]))
    (out,) = graph.outputs
    a, b = (sympy.Symbol(n.name, real=True) for n in graph.inputs)
    assert out.expr == fn(a, b)


def test_builtin_binary_modules_are_the_tables():
    assert tuple(_builtins.BINARY) == table.binary_builtin_names()
    root = os.path.dirname(sg.__file__)
    for name in table.binary_builtin_names():
        assert os.path.isfile(os.path.join(root, "_generated", f"{name}.py")), name


def test_derived_lists_are_the_tables():
    from symgrad import _runtime_ops
    from symgrad.emit import c as emit_c

    assert set(_composite_ops.COMPOSITE) == set(table.composite_names())
    assert optimize.STRUCTURAL_COST == table.structural_costs()
    for key, cost in costs().items():
        assert optimize.OP_COST[key] == cost
    assert {k: v for k, v in emit_c.VECTOR_MATH.items() if k not in ("cbrt", "exp10")} \
        == table.libmvec()
    fast = table.runtime("fast")
    assert set(_runtime_ops._UNARY) == {op.name for op in fast if op.arity == 1}
    for op in fast:   # the op layer's function; Tensor's method is it or forwards to it
        method = getattr(sg.Tensor, op.name)
        assert method is getattr(_runtime_ops, op.name) if op.hot else \
            method.__qualname__ == f"Tensor.{op.name}"


def _torch_function(name):
    torch = pytest.importorskip("torch")
    for namespace in (torch, torch.special, torch.nn.functional):
        fn = getattr(namespace, name, None) or getattr(namespace, name.replace("_", ""), None)
        if fn is not None:
            return fn
    return None


_EXTRA_ARGS = {"mvlgamma": {"p": 1}}
_OPERANDS = {"lerp": 3}
_TENSORS_FORM = {"pow": 1}   # the node of an own op's all-tensor call (pow: PowBackward1)


def _node_cases(op):
    """(which operands are tensors, the table's node for that call) of op's calls to check:
    every operand a tensor, and for a composite's node pair the last operand a number."""
    n = _OPERANDS.get(op.name, op.arity)
    node = table.node_name(op)
    if isinstance(node, str):
        return [([True] * n, node)]
    if op.runtime != "composite":
        return [([True] * n, node[_TENSORS_FORM.get(op.name, 0)])]
    return [([True] * n, node[1]), ([True] * (n - 1) + [False], node[0])]


@pytest.mark.parametrize("op", [op for op in (*table.ELEMENTWISE, *table.BINARY)
                                if op.name != "polygamma"], ids=lambda op: op.name)
def test_node_names_are_torchs(op):
    # the entry's node name is what torch's autograd names the op's node, and what symgrad's
    # runtime names it (fast and own ops run here; a composite's node is its Function's)
    torch = pytest.importorskip("torch")
    fn = _torch_function(op.name)
    if fn is None:
        pytest.skip(f"torch has no {op.name}")
    values = [np.array([0.3, 0.7]), np.array([0.6, 0.45]), np.array([0.2, 0.9])]
    for tensors, expected in _node_cases(op):
        args = [torch.tensor(v, requires_grad=True) if t else 0.5
                for v, t in zip(values, tensors)]
        got = fn(*args, **_EXTRA_ARGS.get(op.name, {})).grad_fn.name()
        if got.startswith("torch::"):   # not differentiable in torch (floor_divide)
            continue
        assert got == expected
        if op.runtime == "composite":
            assert _composite_ops.composite(op.name, int(tensors[-1]))._node_name == expected
        else:
            ts = [sg.tensor(v, requires_grad=True) if t else 0.5
                  for v, t in zip(values, tensors)]
            assert getattr(sg, op.name)(*ts).grad_fn.name() == expected


@pytest.mark.parametrize("name,other,node", [
    ("fmod", 2.0, "FmodBackward0"), ("fmod", "tensor", "FmodBackward1"),
    ("xlogy", 2.0, "XlogyBackward2"), ("xlogy", "tensor", "XlogyBackward0"),
    ("clamp_min", "tensor", "ClampMinBackward1"), ("deg2rad", None, "Deg2RadBackward0"),
])
def test_composite_node_names_follow_the_call_form(name, other, node):
    # torch names fmod(a, 2.0) FmodBackward0 and fmod(a, b) FmodBackward1 (its overloads);
    # the runtime's composites too, from the table's node pair (were Backward0 for both)
    x = sg.tensor([0.3, 0.7], requires_grad=True)
    args = () if other is None else \
        (sg.tensor([0.6, 0.45]) if other == "tensor" else other,)
    y = getattr(x, name)(*args)
    assert y.grad_fn.name() == node
    y.sum().backward()
    assert x.grad is not None


# calls of the structural ops the runtime runs itself, by the form their node names follow
_STRUCTURAL_CALLS = {
    "sum": [lambda m, x: x.sum(), lambda m, x: x.sum(0)],
    "mean": [lambda m, x: x.mean(), lambda m, x: x.mean(0)],
    "prod": [lambda m, x: x.prod(), lambda m, x: x.prod(0)],
    "matmul": [lambda m, x: x @ x, lambda m, x: x[0] @ x[1], lambda m, x: x @ x[0],
               lambda m, x: x.reshape(1, 2, 2) @ x],
    "reshape": [lambda m, x: x.reshape(4), lambda m, x: x.t().reshape(4)],
    "view": [lambda m, x: x.view(4)],
    "flatten": [lambda m, x: x.flatten()],
    "permute": [lambda m, x: x.permute(1, 0)],
    "transpose": [lambda m, x: x.transpose(0, 1), lambda m, x: x.swapaxes(0, 1)],
    "swapdims": [lambda m, x: x.swapdims(0, 1)],
    "t": [lambda m, x: x.t()],
    "expand": [lambda m, x: x.unsqueeze(0).expand(3, 2, 2)],
    "squeeze": [lambda m, x: x.unsqueeze(0).squeeze(), lambda m, x: x.unsqueeze(0).squeeze(0),
                lambda m, x: x.unsqueeze(0).squeeze((0,))],
    "unsqueeze": [lambda m, x: x.unsqueeze(0)],
    "split": [lambda m, x: x.split(1)[0], lambda m, x: x.split([1, 1])[0]],
    "chunk": [lambda m, x: x.chunk(2)[0]],
    "unbind": [lambda m, x: x.unbind()[0]],
    "as_strided": [lambda m, x: x.as_strided((2,), (1,))],
    "cat": [lambda m, x: m.cat([x, x])],
    "stack": [lambda m, x: m.stack([x, x])],
}
_FORM = {"matmul": [0, 1, 2, 3], "transpose": [None, None], "split": [0, 1],
         "squeeze": [0, 1, 2], "sum": [0, 1], "mean": [0, 1], "prod": [0, 1],
         "reshape": [0, 1], "flatten": [0]}


@pytest.mark.parametrize("op", [op for op in table.STRUCTURAL if op.runtime == "own"
                                and op.name in _STRUCTURAL_CALLS], ids=lambda op: op.name)
def test_structural_node_names_are_torchs(op):
    # the runtime's own structural ops name their nodes from the table, as torch does
    torch = pytest.importorskip("torch")
    node = table.node_name(op)
    calls = _STRUCTURAL_CALLS[op.name]
    for call, form in zip(calls, _FORM.get(op.name, [None] * len(calls))):
        expected = node if form is None else node[form]
        x = np.array([[0.3, 0.7], [0.6, 0.45]])
        t = torch.tensor(x, requires_grad=True)
        assert call(torch, t).grad_fn.name() == expected
        assert call(sg, sg.tensor(x, requires_grad=True)).grad_fn.name() == expected


def test_every_runtime_structural_op_is_checked():
    # a new structural op the runtime runs itself needs its calls above
    own = {op.name for op in table.STRUCTURAL if op.runtime == "own"}
    assert own - set(_STRUCTURAL_CALLS) == {"argmax", "argmin", "all", "any"}   # no gradient


@pytest.mark.parametrize("op", [op for op in table.STRUCTURAL if op.runtime == "composite"],
                         ids=lambda op: op.name)
def test_structural_composites_have_the_tables_node(op):
    name = table.node_name(op)
    assert _composite_ops.composite(op.name)._node_name == name


def test_spellings_are_consistent_across_targets():
    # every entry's formula prints on each target (NumPy, C, CUDA's C, torch), and the
    # printed NumPy and C name the same function: values agree at a point
    from symgrad._trace_elementwise import formula_function
    from symgrad.emit.cprinter import CpuPrinter
    from symgrad.emit.frameworks import torch_text
    from symgrad.emit.printers import NumpyPrinter
    from symgrad.ops import stable

    torch = pytest.importorskip("torch")
    for op in (*table.ELEMENTWISE, *table.BINARY):
        for alias in op.aliases:   # numpy's spellings
            assert callable(getattr(np, alias)), alias
        if op.formula is None:
            continue
        fn = formula_function(op.formula)
        symbols = sympy.symbols(f"a0:{op.arity}", real=True)
        expr = fn(*symbols)
        numpy_code = NumpyPrinter().doprint(expr)
        c_code = CpuPrinter().doprint(expr)
        assert "Not supported" not in numpy_code + c_code, op.name
        if op.libmvec:   # the C function of the table's name is called (and declared simd)
            assert f"{op.name}(" in c_code, (op.name, c_code)
        first = 1.625 if op.name == "acosh" else 0.375   # in every op's domain
        point = {s: v for s, v in zip(symbols, (first, 1.25))}
        expected = float(expr.subs(point).evalf(30))
        env = {"numpy": np, **{str(s): np.float64(v) for s, v in point.items()}}
        for helper in stable.required_numpy_helpers(numpy_code):   # _hypot, ...: pasted in
            exec(stable.NUMPY_HELPERS[helper], env)   # noqa: S102 (symgrad's own helpers)
        got = eval(numpy_code, env)   # noqa: S307 (our printer's output)
        assert got == pytest.approx(expected, rel=1e-12), op.name
        # the torch target spells every numpy function with one torch has
        torch_code = torch_text(numpy_code)
        assert "numpy." not in torch_code, (op.name, torch_code)
        for spelled in re.findall(r"(torch(?:\.\w+)+)\(", torch_code):
            target = torch
            for part in spelled.split(".")[1:]:
                target = getattr(target, part)
            assert callable(target), spelled


# ---------------------------------------------------------------- a new op in one entry
class synth_mulexp(sympy.Function):
    """a * exp(-b), a test op: forward, derivative and printers in one class, as an op of
    symgrad.ops.elementwise is written."""

    nargs = 2
    is_real = True

    def fdiff(self, argindex=1):
        a, b = self.args
        return sympy.exp(-b) if argindex == 1 else -self

    def _numpycode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"({a}*numpy.exp(-{b}))"

    def _ccode(self, printer):
        a, b = (printer._print(arg) for arg in self.args)
        return f"({a}*{ew.c_name(printer, 'exp')}(-{b}))"


@pytest.fixture
def synthetic_op(monkeypatch, tmp_path):
    """The op table with one more entry, and the layers made from the table made again."""
    from symgrad import trace as trace_module

    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ew, "synth_mulexp", synth_mulexp, raising=False)
    entry = table.Elementwise("synth_mulexp", "ew.synth_mulexp", ("synth_mulexp_alias",),
                              arity=2, cost=9)
    monkeypatch.setattr(table, "BINARY", (*table.BINARY, entry))
    spellings = (entry.name, *entry.aliases)
    try:
        trace_module._install_table_methods()    # SymbolicTensor.<spelling>
        _composite_ops.install(sg.Tensor)        # sg.Tensor.<spelling>
        sg._install_functions_of_table()         # sg.<spelling>
        yield entry
    finally:
        for owner in (SymbolicTensor, sg.Tensor, sg):
            for s in spellings:
                if s in vars(owner):
                    delattr(owner, s)
        _composite_ops._FUNCTIONS.pop(entry.name, None)


def test_a_new_binary_op_is_one_entry(synthetic_op):
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 5)
    f = x * np.exp(-y)
    h = 1e-6
    fd = (lambda fn: [(fn(x + h, y) - fn(x - h, y)) / (2 * h),
                      (fn(x, y + h) - fn(x, y - h)) / (2 * h)])(lambda a, b: a * np.exp(-b))

    # the tracer's method and its alias: the entry's formula
    for spelling in ("synth_mulexp", "synth_mulexp_alias"):
        graph = sg.trace(lambda a, b: getattr(a, spelling)(b), x, y)
        a, b = (sympy.Symbol(n.name, real=True) for n in graph.inputs)
        assert graph.outputs[0].expr == synth_mulexp(a, b)

    # sg.<name> compiled for NumPy and for C: values and the derivative (the class's fdiff)
    # against finite differences
    for target in ("numpy", "c"):
        m = sg.compile(lambda a, b: sg.synth_mulexp(a, b), x, y, target=target,
                       cache_ok=False)
        np.testing.assert_allclose(m.forward(x, y), f, rtol=1e-14)
        grads = m.backward(np.ones(5), x, y)
        for g, d in zip(grads, fd):
            np.testing.assert_allclose(g, d, rtol=1e-6, atol=1e-9)
        if target == "c":
            assert "fallback" not in m.stats
            c_file = next(text for name, text in m.files.items() if name.endswith(".c"))
            assert "exp(-" in c_file
        else:
            assert "numpy.exp(-" in m.source

    # the runtime Tensor's method (a composite: torch's node name made from the entry's name)
    # and the function, gradients of the first and second order
    t, u = sg.tensor(x, requires_grad=True), sg.tensor(y, requires_grad=True)
    out = t.synth_mulexp(u)
    assert out.grad_fn.name() == "SynthMulexpBackward0"
    np.testing.assert_allclose(out.detach().numpy(), f, rtol=1e-14)
    gx, gy = sg.autograd.grad(sg.synth_mulexp(t, u).sum(), (t, u), create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), fd[0], rtol=1e-6)
    np.testing.assert_allclose(gy.detach().numpy(), fd[1], rtol=1e-6, atol=1e-9)
    (ggy,) = sg.autograd.grad(gy.sum(), (u,))
    np.testing.assert_allclose(ggy.numpy(), f, rtol=1e-12)      # d2/dy2 a exp(-b) = a exp(-b)
    assert t.synth_mulexp_alias(u).grad_fn.name() == "SynthMulexpBackward0"
