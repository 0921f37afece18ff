"""Stage 4 — emit: print a `Program`'s routines and lay them out with a Jinja template.

Python makes every decision here (what each line says, which helpers a module needs);
the templates in `templates/` only loop and substitute.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import sympy
import sympy.logic.boolalg

from .._version import __version__
from ..graph import Param
from ..ops import stable
from ..ops.structural import STRUCTURAL
from .helpers import STRUCTURAL_HELPERS, required_helpers
from .printers import NumpyPrinter, formula_lines
from .render import render, untrusted
from ..optimize import free_symbols
from .statements import (_StructuralPrinter, numpy_lines, _static_shapes, _generic_shape,
                         sigmoid_pair, pair_sigmoids, _print_by_shape)  # noqa: F401
from .scan import scan_helpers


@dataclass
class Program:
    """Everything a target needs: the optimized routines and where they came from."""

    name: str
    source: str
    constants: tuple
    forward: object          # Routine
    backward: object         # Routine
    target: str = "numpy"
    dtype: str | None = None
    saving: object = None    # _saving_plan.SavingPlan: forward_saving / backward_saved, or None
    options: str = ""        # the `symgrad compile` options that regenerate it (--shape, --dtype)
    # per gradient backward returns, the indices of the backward arguments (grad outputs, then
    # inputs) it is a differentiable function of (Graph.dependencies); None: no gradient
    backward_depends: tuple = ()




def unread_args(routine) -> set:
    """A backward's grad_outputs of outputs without a gradient (bool, int): never read, so
    they must not decide the dtype (None, as torch passes for them, made numpy.result_type
    float64) nor be copied to the device."""
    primal = routine.graph.derivative_of
    if primal is None:
        return set()
    return {a for a, out in zip(routine.args, primal.outputs)
            if out is None or out.dtype != "float"}


def shape_leaves(routine) -> dict:
    """A shape-generic trace knows no shapes: an elementwise value (CSE temporaries included)
    then has the broadcast shape of the non-elementwise values (inputs, structural results) it
    reads through elementwise steps, its *leaves*. Values with the same leaves share a shape;
    the C and CUDA targets fuse them into one loop whose shape the loader works out when it
    runs. Per elementwise step target, its leaves (a frozenset of names)."""
    leaves = {}
    for s in routine.steps:
        if s.node is not None and s.node.op != "elementwise":
            continue
        reads = {str(v) for v in free_symbols(s.expr)}
        if s.node is not None and s.node.attr("broadcast"):
            # broadcast to values it does not read (ones_like(x) of a shape-generic x): their
            # shapes are its shape too
            reads |= {routine.names[id(a)] for a in s.node.args if id(a) in routine.names}
        leaves[s.target] = frozenset().union(*(leaves.get(v, {v}) for v in reads))
    return leaves


def grad_output_args(routine) -> set:
    """A backward's grad_outputs: cast to the module's dtype, as torch casts a gradient to its
    tensor's dtype. The other float arguments are the values computed with, which a module of
    a fixed dtype (C, CUDA) refuses in another float dtype instead of casting."""
    primal = routine.graph.derivative_of
    return set() if primal is None else set(routine.args[:len(primal.outputs)])


def routine_interface(routine, cast_float="_asarray({}, dtype)", cast_other="_asarray({})"):
    """(signature, float args, return expressions) of a generated function: what every
    target's Python layer spells the same way."""
    unread = unread_args(routine)
    float_args = [a for a, n in zip(routine.args, routine.graph.inputs)
                  if n.dtype == "float" and a not in unread]
    returns = []
    for name, node in zip(routine.returns, routine.graph.outputs):
        if name is None:
            returns.append("None")
        else:
            returns.append((cast_float if node.dtype == "float" else cast_other).format(name))
    signature = list(routine.args)
    if routine.params:
        signature += ["*"] + list(routine.params)
    return signature, float_args, returns


_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)")


def release_after(lines, keep):
    """For each printed line, the variables to `del` after it: those it reads (or defines)
    for the last time. Freed intermediates go back to the allocator, which hands the same
    (cache-warm) memory to the next temporary of that size instead of fresh pages: a routine
    with many shared terms (oscillator8: ~80) otherwise holds them all until it returns."""
    last = {}
    order = {}
    for i, (target, code, _) in enumerate(lines):
        for name in _NAME.findall(code):
            if name in order:
                last[name] = i
        for t in target.split(", "):   # `a, b = f(...)` defines both
            order[t] = i
            last.setdefault(t, i)
    dels = [[] for _ in lines]
    for name, i in sorted(last.items(), key=lambda kv: order[kv[0]]):
        if name not in keep and i < len(lines) - 1:   # the return frees the rest
            dels[i].append(name)
    return dels




def shape_check(routine, checked=None, saved=()):
    """The entry check of a static-shape routine: {"test": a cheap condition true when an
    input's shape is not the one generated for, "args": the (name, value, shape) tuples
    _check_shapes reads to say which}; None for a shape-generic routine. `checked`: the
    arguments to check (default: all but the grad outputs, which the runtime gives in the
    outputs' shapes and a caller may give as a broadcastable 1.0). `saved`: arguments that are
    not graph inputs (backward_saved's saved values, between the grad outputs and the
    inputs); the graph's inputs pair with the other arguments. A static module would
    broadcast a (1,) input to its (64,) silently, with wrong values."""
    skip = grad_output_args(routine)
    args = [a for a in routine.args if a not in saved]
    pairs = [(a, n) for a, n in zip(args, routine.graph.inputs)
             if (a in checked if checked is not None else a not in skip)]
    pairs = [(a, tuple(int(k) for k in n.shape)) for a, n in pairs
             if isinstance(n.shape, tuple)]
    if not pairs:
        return None
    return {"test": " or ".join(f'getattr({a}, "shape", None) != {s!r}' for a, s in pairs),
            "args": "(" + " ".join(f'("{a}", {a}, {s!r}),' for a, s in pairs) + ")"}


def shape_check_helper(program, target) -> str:
    """_check_shapes(routine, inputs): the ValueError of a wrong-shaped input, naming it, the
    shape generated for and the shape given, and the command that regenerates the module."""
    import shlex

    # user text in generated code: the name and command as Python literals (repr escapes
    # quotes, line breaks and every non-printable character), the source one shell word
    name = program.name
    command = f"symgrad compile {shlex.quote(program.source)} --target {target}"
    return f'''_MODULE = {name!r}
_REGENERATE = {command!r}


def _check_shapes(routine, inputs):
    """Refuse an input of another shape than this module was generated for: its loops and
    reshapes are for those shapes only (a smaller input would broadcast, with wrong values).
    A block of a blocked call (the routine run on slices of inputs checked whole: a frame
    holding _sg_blocks a few levels up) is not refused."""
    frame = __import__("sys")._getframe(2)
    for _ in range(3):
        if frame is None:
            break
        if "_sg_blocks" in frame.f_locals:
            return
        frame = frame.f_back
    for name, a, shape in inputs:
        given = None if a is None else tuple(numpy.shape(a))
        if given is not None and given != shape:
            new = " ".join(f"--shape {{n}}={{','.join(str(k) for k in numpy.shape(v))}}"
                           for n, v, _ in inputs if v is not None)
            raise ValueError(
                f"{{_MODULE}}.{{routine}}: input '{{name}}' has shape {{given}}, but this module "
                f"was generated for shape {{shape}} (a static-shape module). Regenerate it for "
                f"the new shapes: {{_REGENERATE}} {{new}} (or sg.compile(fn, *arrays of the new "
                "shapes); sg.compile(fn) with no example arrays gives a shape-generic module)")'''


def routine_context(routine, doc_title, interface=None, formulas=None, outputs=None,
                    checked=None, check=False, texts=None):
    """`check`: the entry check to use (None: none) where the routine's arguments are not its
    graph's inputs one for one (backward_saved); by default shape_check(routine, checked).
    `texts`: the printed expressions of a module's routines (numpy_lines)."""
    check = shape_check(routine, checked) if check is False else check
    routine = pair_sigmoids(routine)
    lines = numpy_lines(routine, copy_all=False, outputs=outputs, texts=texts)
    signature, float_args, returns = interface or routine_interface(routine)
    dels = release_after(lines, set(routine.returns) | set(routine.args))
    lines = [(t, c, m, d) for (t, c, m), d in zip(lines, dels)]
    return {
        "name": routine.name,
        "signature": ", ".join(signature),
        "doc_title": doc_title,
        "formulas": untrusted(formula_lines(routine.graph) if formulas is None else formulas),
        "lines": lines,
        "dtype_args": ", ".join(float_args) if float_args else "numpy.float64",
        "returns": returns,
        "returns_text": _returns_text(returns),
        "ops_before": routine.ops_before,
        "ops_after": routine.ops_after,
        "n_temps": sum(1 for s in routine.steps if s.node is None),
        "quiet": not _cannot_warn(routine),
        "blocked": _blocking(routine),
        "shape_check": check,
    }


# Elementwise routines on large NumPy arrays run in blocks of 65536 elements (_in_blocks), so
# that their temporaries stay in cache. Measured on the benchmark functions (AVX2, 32 MiB L3,
# fwd+bwd time blocked / whole): at 1e6 elements float64 0.65-0.90 for every function but the
# transcendental-bound tanh/sin chain (1.0); float32 0.74-0.91 where the routine costs 30
# passes or more, 1.06-1.14 below that (softplus, swish, Lennard-Jones: few temporaries,
# where the extra copy into the result costs more than the cache saves); at 1e5 elements
# (under 1 MiB an array) 1.05-1.2 for all. Those cheap routines at 7.6 MiB an array (float64
# 1e6, float32 2e6) measured 0.72-0.91 (swish, gelu-tanh, Lennard-Jones; softplus 0.94-0.96),
# at 3.8 MiB (float64 5e5, float32 1e6) 0.96-1.11: the bytes decide, not the dtype. Hence:
# from 6 MiB an array, or from 2 MiB for a routine of at least BLOCK_MIN_COST passes
# (optimize.step_cost); never below BLOCK_MIN_COST / 3.
BLOCK_MIN_COST = 30
BLOCK_MIN_BYTES = (2 << 20, 6 << 20)


def _blocking(routine):
    """{"args": the array arguments, "call": the call of _in_blocks, "min_bytes": ...} for a
    routine that may run in blocks (only elementwise steps on its arguments: no reduction,
    no broadcast to or fill of a shape), else None."""
    from ..optimize import step_cost

    cost = ops = 0
    for step in routine.steps:
        node = step.node
        if node is not None and node.op != "elementwise":
            return None
        # (a SymPy expression has free_symbols: its property, a walk, is not called to ask)
        if step.expr is None or ((isinstance(step.expr, sympy.Basic)
                                  or hasattr(step.expr, "free_symbols"))
                                 and not free_symbols(step.expr)):
            return None
        if node is not None and node.attr("broadcast"):
            return None
    # costed only once eligible, operations counted only where they decide (both walk every
    # step's tree: seconds of a large program's compile, which a reduction makes ineligible)
    cost = sum(step_cost(step) for step in routine.steps)
    if cost < BLOCK_MIN_COST:
        for step in routine.steps:
            ops += sympy.count_ops(step.expr)
            if ops >= 4:
                break
    # a routine of one or two ufunc calls (most built-in ops) has no temporaries to keep in
    # cache: blocks would only add the copy into the result
    if cost * 3 < BLOCK_MIN_COST or (ops < 4 and cost < BLOCK_MIN_COST) or not routine.args:
        return None
    args = ", ".join(routine.args)
    kwargs = "{" + ", ".join(f"{p!r}: {p}" for p in routine.params) + "}"
    min_bytes = BLOCK_MIN_BYTES[0] if cost >= BLOCK_MIN_COST else BLOCK_MIN_BYTES[1]
    # one attribute read decides for small arrays (built-in ops on tiny tensors pay ~0.8 us for
    # the full check): the size of the last float argument, an input (its shape is all shapes)
    floats = [a for a, n in zip(routine.args, routine.graph.inputs) if n.dtype == "float"]
    guard = f"getattr({(floats or routine.args)[-1]}, 'size', 0) >= {min_bytes // 8} and "
    return {"args": args, "min_bytes": min_bytes, "guard": guard,
            "call": f"_in_blocks({routine.name}, ({args},), {kwargs})"}


# Structural ops that only move, select or compare values: they never raise a floating-point
# warning, so a routine made of them (and of the elementwise forms below) needs no errstate.
_QUIET_STRUCTURAL = frozenset({
    "reshape", "reshape_like", "permute", "permute_back", "expand", "getitem", "squeeze",
    "unsqueeze", "amax", "amin", "argmax", "argmin", "max_dim", "min_dim", "index_back",
    "take_dim", "index_put_zeros", "zeros_like", "stop_gradient", "broadcast_like"})


def _quiet_expr(expr):
    """True when printing expr can raise no floating-point warning: symbols, numbers, negation,
    abs, sign, comparisons and where-selections of those."""
    if expr.is_Atom:
        return True
    if isinstance(expr, (sympy.Abs, sympy.sign, sympy.core.relational.Relational,
                         sympy.logic.boolalg.Boolean)):
        return all(_quiet_expr(a) for a in expr.args)
    if isinstance(expr, sympy.Mul) and len(expr.args) == 2 and expr.args[0] == -1:
        return _quiet_expr(expr.args[1])
    if isinstance(expr, sympy.Piecewise):
        return all(_quiet_expr(e) and _quiet_expr(c) for e, c in expr.args)
    return False


def _cannot_warn(routine):
    """Whether every step of a routine is free of floating-point warnings, so that its function
    can skip numpy.errstate (a few microseconds a call, which built-in ops pay on every op)."""
    for step in routine.steps:
        node = step.node
        if node is not None and node.op != "elementwise":
            if node.op not in _QUIET_STRUCTURAL:
                return False
        elif step.expr is not None and not _quiet_expr(step.expr):
            return False
    return True


def _returns_text(returns):
    if isinstance(returns, str):
        return returns
    return "(" + " ".join(f"{r}," for r in returns) + ")"


def saving_contexts(plan, texts=None):
    """The template contexts of forward_saving and backward_saved (see _saving_plan.saving_plan);
    `texts`: as routine_context's."""
    f, b = plan.forward, plan.backward
    fwd_graph = f.graph
    float_in = [a for a, n in zip(f.args, fwd_graph.inputs) if n.dtype == "float"]
    outs = []
    for name, node in zip(f.returns[:plan.n_outputs], fwd_graph.outputs):
        outs.append("None" if name is None else
                    (f"_asarray({name}, dtype)" if node.dtype == "float" else f"_asarray({name})"))
    saved = list(plan.saved)
    fsig = list(f.args) + (["*"] + list(f.params) if f.params else [])
    ftext = f"({_returns_text(outs)}, {_returns_text(saved)})"
    n_grads = len(b.args) - len(saved) - len(f.args)
    grads = list(b.args[:n_grads])
    bsig = list(b.args) + (["*"] + list(b.params) if b.params else [])
    bouts = []
    for name, node in zip(b.returns, b.graph.outputs):
        bouts.append("None" if name is None else
                     (f"_asarray({name}, dtype)" if node.dtype == "float" else f"_asarray({name})"))
    note = ("Forward, also returning the intermediate values that backward_saved reads "
            f"instead of recomputing them: saved = ({', '.join(saved)},).")
    fctx = routine_context(f, note, (fsig, float_in, outs), formulas=[],
                           outputs=f.returns[:plan.n_outputs], texts=texts)
    fctx["returns_text"] = ftext
    bnote = ("Backward from saved values: backward_saved(*grad_outputs, *saved, *inputs) "
             "equals backward(*grad_outputs, *inputs).")
    # backward_saved's arguments are grads, saved values, inputs; its graph's inputs are grads
    # and inputs: the inputs are checked against the forward's nodes (pairing the arguments
    # with the graph's inputs by position checked a saved value against an input's shape)
    bctx = routine_context(b, bnote, (bsig, grads + float_in, bouts), formulas=[],
                           check=shape_check(f), texts=texts)
    costs = plan.costs
    cost_note = (
        f"Saving pays by the cost model (multiply-passes): forward {costs['forward']} + backward "
        f"{costs['backward']} = {costs['plain']} vs forward_saving {costs['forward_saving']} + "
        f"backward_saved {costs['backward_saved']} + {costs['saved']} saved arrays = "
        f"{costs['saving']}.")
    fctx["doc_title"] = _paragraphs(note, cost_note)
    bctx["doc_title"] = _paragraphs(bnote)
    return fctx, bctx


def _paragraphs(*texts):
    """Docstring paragraphs, wrapped and indented for a function body."""
    import textwrap

    return "\n\n    ".join("\n    ".join(textwrap.wrap(t, 92)) for t in texts)


def emit_numpy(program: Program, fallback_of: str | None = None) -> str:
    """The standalone NumPy module of a program (imports only numpy); `fallback_of` names the
    C target's loader module when this one is its fallback (the header then says so)."""
    texts: dict = {}   # each expression printed once for the module's routines
    fwd = routine_context(program.forward, "Forward", texts=texts)
    bwd = routine_context(program.backward, "Backward: the vector-Jacobian product",
                          texts=texts)
    routines = [fwd, bwd]
    if program.saving is not None:
        routines += list(saving_contexts(program.saving, texts))
    body = "\n".join([code for r in routines for _, code, _, _ in r["lines"]]
                     + [r["returns_text"] for r in routines]
                     + [r["blocked"]["call"] for r in routines if r["blocked"]])
    loops = scan_helpers(body)   # sg.scan's loop functions (symgrad/emit/scan.py)
    body = "\n".join([body] + loops)
    helpers = [STRUCTURAL_HELPERS[h] for h in required_helpers(body)]
    math_helpers = stable.required_numpy_helpers(body + "\n".join(helpers))
    helpers = [stable.NUMPY_HELPERS[h] for h in math_helpers] + helpers + loops
    if any(r["shape_check"] for r in routines):
        # the C loader checks first (before its fallback runs): the fallback's code is the
        # NumPy target's, to the letter
        helpers.append(shape_check_helper(program, "numpy"))
    rewrites = list(dict.fromkeys(program.forward.rewrites + program.backward.rewrites))
    return render("numpy/module.py.jinja", {
        "version": __version__,
        "name": untrusted(program.name),
        "source": untrusted(program.source),
        "options": untrusted(program.options),
        "constants": untrusted(_constants_text(program.constants)),
        "target": "numpy",
        "fallback_of": fallback_of,
        "forward": fwd,
        "backward": bwd,
        "routines": routines,
        "rewrites": rewrites,
        "helpers": helpers,
        "n_outputs": len(program.forward.returns),
        "inputs": untrusted(list(program.forward.args)),
        "depends": depends_context(program),
    })


def depends_context(program):
    """(comment lines, value text) of a module's BACKWARD_DEPENDS, or None without one: per
    gradient backward returns, per grad output, the backward arguments (indices) its term in
    that grad output is a differentiable function of (None: no term). With create_graph the
    runtime makes a gradient require grad only when one of those, for the grad outputs that
    arrived, does (torch: the gradient of 3*x + w has no grad_fn; x*w's w-gradient depends on
    x)."""
    import textwrap

    depends = program.backward_depends
    if not depends:
        return None
    args = program.backward.args
    named = []
    for name, dep in zip(program.backward.graph.output_names, depends):
        if dep is not None:
            terms = [f"[{', '.join(args[i] for i in t)}]" for t in dep if t is not None]
            named.append(f"{name} <- {' + '.join(terms) or 'nothing'}")
    text = ("What each gradient is a differentiable function of, a [term] per grad output "
            "(create_graph: it requires grad only when one of those does): "
            + "; ".join(named) + ".")
    value = repr(tuple(None if d is None else tuple(None if t is None else tuple(t) for t in d)
                       for d in depends))
    return untrusted(textwrap.wrap(text, 97)), value


def _constants_text(constants):
    return ", ".join(f"{k}={v!r}" for k, v in constants) if constants else "none"
