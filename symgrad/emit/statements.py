"""A routine's statements printed for NumPy (`numpy_lines`: one (target, code, comment) per
step, structural ops through their `numpy()` lowering) and the sigmoid pairing pass run before
it (`pair_sigmoids`). The NumPy module, the C target's loader, the CUDA target and the scan
loops (emit/scan.py, emit/framework_scan.py) all print their statements here."""
from __future__ import annotations

import functools
import re

import sympy

from .. import _fastsym
from ..ops import stable
from ..optimize import free_symbols, name_of_symbol
from ..ops.structural import STRUCTURAL
from .printers import NumpyPrinter
from .render import untrusted


class _StructuralPrinter:
    """What a structural op's `numpy()` lowering may ask: operand shapes and parameters."""

    def __init__(self, routine, module="numpy"):
        self.routine = routine
        self.module = module

    def shape_of(self, node):
        if node.shape is not None:
            return repr(tuple(node.shape))
        return f"numpy.shape({self.routine.name_of(node)})"

    def param(self, node, key):
        value = node.attr(key)
        return repr(value)


_PLACEHOLDER_NAME = re.compile(r"_p\d+_[0-9a-f]{8}")


def _print_by_shape(printer, memo, expr):
    """printer.doprint(expr) of a large program's formula, printed once per shape: the
    formula over placeholders in its own argument order (`_fastsym.rename`, canonical=False),
    printed with the same arrays counted as full-size, and the placeholders' names replaced
    by the symbols' printed names. The same text as printing `expr` (the large program's
    printer prints sums and products in their stored order)."""
    if not isinstance(expr, sympy.Basic) or not expr.args:
        return printer.doprint(expr)
    key, symbols = _shape_key(expr)
    full = printer.full_symbols
    full_key = None if full is None else frozenset(
        i for i, s in enumerate(symbols) if name_of_symbol(s) in full)
    hit = memo.get((key, full_key))
    if hit is None:
        holders = {s: _fastsym._placeholder(i, s) for i, s in enumerate(symbols)}
        printer.full_symbols = None if full is None else frozenset(
            holders[symbols[i]].name for i in full_key)
        try:
            text = printer.doprint(_fastsym.rename(expr, holders, {}, canonical=False))
        finally:
            printer.full_symbols = full
        index = {h.name: i for i, h in enumerate(holders.values())}
        # the text split at the placeholders' names (as _PLACEHOLDER_NAME.sub would replace
        # them): literal text, then (the number of the symbol, literal text) per name
        rest, at = [], 0
        for m in _PLACEHOLDER_NAME.finditer(text):
            if rest:
                rest[-1][1] = text[at:m.start()]
            else:
                head = text[:m.start()]
            rest.append([index[m.group(0)], ""])
            at = m.end()
        if rest:
            rest[-1][1] = text[at:]
        hit = memo[(key, full_key)] = (head if rest else text, tuple(map(tuple, rest)))
    head, rest = hit
    if not rest:
        return head
    names = memo.get(_NAMES)
    if names is None:
        names = memo[_NAMES] = {}
    out = [head]
    for i, literal in rest:
        s = symbols[i]
        hit = names.get(id(s))   # (by identity, the symbol kept: SymPy's hash is a call)
        if hit is None or hit[0] is not s:
            if len(names) > 100_000:   # a long-running process: forget, do not grow
                names.clear()
            hit = names[id(s)] = (s, printer._print(s))
        out.append(hit[1])
        out.append(literal)
    return "".join(out)


def _shape_key(expr):
    """(a key of expr's structure, its symbols in order of first appearance (preorder, left
    to right, as `_fastsym._structure` orders them)). The key is the preorder sequence of its
    nodes: (class, number of arguments) per node with arguments, per symbol its number in
    that order (and at its first appearance its assumptions' number), per number its exact
    value, any other atom itself. A prefix code with arities: equal keys are the same formula
    up to a renaming of its symbols that keeps their assumptions. One walk without the
    nested per-node keys of `_fastsym._structure` (most of emit's time for a large program
    whose thousands of formulas have a few hundred shapes)."""
    kinds = _fastsym._KIND_ID
    key = []
    index: dict = {}
    stack = [expr]
    pop, push, add = stack.pop, stack.extend, key.append
    while stack:
        e = pop()
        args = e.args
        if args:
            add((type(e), len(args)))
            push(args[::-1])
        elif e.is_Symbol:
            i = index.get(e)
            if i is None:
                kind = kinds.get(e)
                if kind is None:
                    if len(kinds) > 200_000:
                        kinds.clear()
                    kind = kinds[e] = _fastsym._kind_number(e)
                i = index[e] = len(index)
                add(("s", i, kind))
            else:
                add(i)
        elif e.is_Float:
            add(("f", e._mpf_, e._prec))
        elif e.is_Rational:
            add(("q", e.p, e.q))
        else:
            add(("a", e))
    return tuple(key), list(index)


_NAMES = ("printed names",)   # a _print_by_shape memo's {id(symbol): (symbol, its text)}


def _remembered(doprint, printer, texts, expr):
    key = (expr, printer.full_symbols)
    text = texts.get(key)
    if text is None:
        text = texts[key] = doprint(expr)
    return text


def numpy_lines(routine, printer=None, copy_all=True, outputs=None, texts=None):
    """(target, code, comment) per statement of a routine, printed for NumPy.

    A value equal to another variable is copied (`_copy`) when it is an output, which must not
    alias an input; other such values are plain aliases unless `copy_all` (the C loader's
    kernels may write into their arguments).

    `texts`: a dict shared by the routines of one module (emit_numpy's), where the text of each
    expression printed is kept: a function of the expression, the arrays printed as full-size
    and the printer's settings (one per `dag`), so that forward, backward, forward_saving and
    backward_saved, which share most of their steps, print each once."""
    if printer is None:
        printer = NumpyPrinter(dag=routine.graph.dag)
    else:
        texts = None   # `texts` holds the default printer's texts
    # a large program's formulas are printed once per shape (_print_by_shape)
    shapes_memo = {} if texts is None else texts.setdefault("shapes", {})
    doprint = functools.partial(_print_by_shape, printer, shapes_memo) if routine.graph.dag \
        and isinstance(printer, NumpyPrinter) else printer.doprint
    if texts is not None:
        doprint = functools.partial(_remembered, doprint, printer,
                                    texts.setdefault(bool(routine.graph.dag), {}))
    sp = _StructuralPrinter(routine)
    outputs = set(routine.returns if outputs is None else outputs)
    shapes = _static_shapes(routine)
    lines = []
    for step in routine.steps:
        node = step.node
        comment = untrusted(f"from {node.site}") if node is not None and node.site else ""
        shape = shapes.get(step.target)
        printer.full_symbols = None if shape is None else frozenset(
            n for n in map(name_of_symbol, free_symbols(step.expr))
            if shapes.get(n) == shape)
        if node is None:
            code = doprint(step.expr)
        elif node.op == "elementwise":
            code = doprint(step.expr)
            if not free_symbols(step.expr):
                shape = sp.shape_of(node) if node.shape is not None else _generic_shape(routine, node)
                code = f"numpy.full({shape}, {code}, dtype=dtype)"
            elif node.attr("broadcast"):
                # also a folded value (y + z - z is y): it keeps the broadcast shape of its
                # operands (an output equal to an input is copied, not an alias of it)
                shape = sp.shape_of(node) if node.shape is not None else _generic_shape(routine, node)
                code = f"numpy.broadcast_to({code}, {shape})"
                if isinstance(step.expr, sympy.Symbol) and (copy_all or step.target in outputs):
                    code = f"_copy({code})"
            elif isinstance(step.expr, sympy.Symbol):
                if copy_all or step.target in outputs:
                    code = f"_copy({code})"   # an output equal to an input must not alias it
        else:
            args = [routine.name_of(a) if id(a) in routine.names else "None" for a in node.args]
            code = STRUCTURAL[node.op].numpy(node, args, sp)
            comment = untrusted(f"{node.op}" + (f", from {node.site}" if node.site else ""))
        lines.append((step.target, code, comment))
    return lines


def _static_shapes(routine):
    """Variable name -> its static shape (a tuple), for the inputs, the steps with a node and the
    CSE temps (the broadcast of what they read); absent where the shape is known only at run
    time (a shape-generic module)."""
    import numpy

    shapes = {}
    for name, node in zip(routine.args, routine.graph.inputs):
        if isinstance(node.shape, tuple):
            shapes[name] = node.shape
    for step in routine.steps:
        if step.node is not None:
            if isinstance(step.node.shape, tuple):
                shapes[step.target] = step.node.shape
        elif step.expr is not None:
            operands = [shapes.get(name_of_symbol(s)) for s in free_symbols(step.expr)]
            if all(o is not None for o in operands):
                try:
                    shapes[step.target] = tuple(numpy.broadcast_shapes(*operands)) if operands \
                        else ()
                except ValueError:
                    pass
    return shapes


def _generic_shape(routine, node):
    shapes = ", ".join(f"numpy.shape({routine.name_of(a)})" for a in node.args)
    return f"numpy.broadcast_shapes({shapes})" if len(node.args) != 1 else \
        f"numpy.shape({routine.name_of(node.args[0])})"


class sigmoid_pair(sympy.Function):
    """(sigmoid(u), sigmoid(-u)) as one step of a NumPy routine: `_sigmoid2(u)` computes both
    from one exp(-|u|) and one division, where two `_sigmoid` calls pay for each twice."""

    nargs = 1
    numpy_cost = 14   # optimize.OP_COST units: one sigmoid (10) and the second numerator

    def _numpycode(self, printer):
        return f"_sigmoid2({printer._print(self.args[0])})"


def pair_sigmoids(routine):
    """The routine with each sigmoid(u) / sigmoid(-u) pair (swish's backward, ...) computed by
    one `s0, s0n = _sigmoid2(u)` step, placed before the first step that reads either."""
    import dataclasses

    from ..optimize import Step

    args = set()
    for step in routine.steps:
        if step.expr is not None and (step.node is None or step.node.op == "elementwise"):
            args.update(f.args[0] for f in _sigmoids(step.expr))
    if len(args) < 2:
        return routine
    keys = []
    for a in sorted(args, key=sympy.default_sort_key):
        if -a in args and not a.could_extract_minus_sign() and a not in keys:
            keys.append(a)
    if not keys:
        return routine
    taken = set(routine.names.values()) | set(routine.args) | set(routine.params) | \
        {s.target for s in routine.steps}
    pairs, k = [], 0
    for key in keys:
        while f"s{k}" in taken or f"s{k}n" in taken:
            k += 1
        pairs.append((key, sympy.Symbol(f"s{k}"), sympy.Symbol(f"s{k}n")))
        k += 1
    subs = {}
    # per pair, its two sigmoids, built once (not per step read: LSTM-50's 100 pairs over
    # its 1 800 steps were most of its emit)
    sigmoids = []
    for key, pos, neg in pairs:
        both = (stable.sigmoid(key), stable.sigmoid(-key))
        subs[both[0]] = pos
        subs[both[1]] = neg
        sigmoids.append(both)
    steps, pending = [], list(zip(pairs, sigmoids))
    for step in routine.steps:
        if step.expr is None or not (step.node is None or step.node.op == "elementwise"):
            steps.append(step)
            continue
        atoms = _sigmoids(step.expr)
        for entry in [e for e in pending if atoms and (e[1][0] in atoms or e[1][1] in atoms)]:
            key, pos, neg = entry[0]
            steps.append(Step(f"{pos}, {neg}", sigmoid_pair(key.xreplace(subs))))
            pending.remove(entry)
        steps.append(dataclasses.replace(step, expr=step.expr.xreplace(subs)))
    return dataclasses.replace(routine, steps=steps)


_SIGMOIDS: dict = {}   # id(expression) -> (the expression, its sigmoid atoms): _sigmoids


def _sigmoids(expr):
    """expr.atoms(stable.sigmoid) as a frozenset, remembered per expression object (bounded):
    the forward's and backward's routines and the saving plan's, which share their steps, are
    each searched, and SymPy's atoms walks the tree."""
    if not isinstance(expr, sympy.Basic):
        return frozenset(expr.atoms(stable.sigmoid))
    hit = _SIGMOIDS.get(id(expr))
    if hit is not None:
        return hit[1]
    if len(_SIGMOIDS) > 200_000:   # a long-running process: forget, do not grow
        _SIGMOIDS.clear()
    found = set()
    seen: set = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, stable.sigmoid):
            found.add(e)
        stack.extend([a for a in e.args if a.args])   # (an atom is no sigmoid)
    out = frozenset(found)
    _SIGMOIDS[id(expr)] = (expr, out)
    return out
