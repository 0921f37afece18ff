"""The saving plan (stage 3, optimize, above `optimize.optimize`, which it calls): what a
forward keeps for its backward instead of recomputing it, priced with the optimizer's cost
model (`optimize.OP_COST`, `step_cost`), as `forward_saving` / `backward_saved` routines.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from ._symbols import name_of_symbol
from .graph import Graph
from .ops.structural import STRUCTURAL
from .optimize import Routine, free_symbols, optimize, step_cost
from .trace import symbol_of


SAVED_ARRAY_COST = 3                 # one more write, one more read, memory held between calls
# A saved value is charged SAVED_ARRAY_COST times its size relative to the routine's largest
# array (a reduced row max or sum is ~free to keep), and nothing when it only renames another
# saved value.
# Saving is emitted when it removes at least this fraction of the plain cost (and 4 passes).
# Calibration (1e5 elements, fwd+bwd, float32 / float64, measured gain of forward_saving +
# backward_saved over forward + backward, on a loaded 2-core AVX2 machine, so +-0.1 noise):
#   gelu_erf  model 0.32  measured 0.53 / 0.52     tanh_sin_chain30  0.35  0.34 / 0.35
#   mlp_loss  model 0.38  measured 0.50 / -0.04    exp (built-in)    0.29  0.35 / 0.40
#   tanh      model 0.38  measured -0.8* / 0.21    tan (built-in)    0.32  0.22 / 0.21
#   sigmoid   model 0.21  measured 0.06 / 0.10     swish             0.19  -0.35* / 0.07 (not emitted)
#   pow       model 0.16  measured -0.09 / 0.07 (not emitted)   gelu_tanh 0.08  0.20 / 0.17 (not)
#   rational6 model -0.15 measured -0.05 / -0.19   oscillator8  -0.08  0.07 / 0.14 (not)
# (* outliers of the concurrent load). Below ~0.2 the measured gain is within noise.
MIN_SAVING_FRACTION = 0.2
MIN_SAVING_GAIN = 4
# The torch target prices a saved value at nothing: sg.to_torch keeps it by reference
# (ctx.save_for_backward, as torch's eager autograd keeps its own intermediates), and every
# array a torch step makes is a fresh allocation either way, so keeping one costs no pass.
# Calibration (fwd+bwd through sg.to_torch, float32, every plan forced against none, ratio to
# eager, interleaved best-of-3 on a loaded 2-core machine, 1e5 / 1e6): gelu_tanh 0.68 -> 0.58
# / 0.62 -> 0.60, softplus_b2 0.87 -> 0.79 / 0.72 -> 0.62, swish 0.85 -> 0.73 / equal,
# rational6 0.92 -> 0.84 / noise, lennard_jones 0.47 -> 0.39 / 0.55 -> 0.48, oscillator8
# 1.47 -> 1.30 / 0.73 -> 0.68, mish, tanh_sin_chain30: equal; none slower.
SAVED_ARRAY_COST_BY_TARGET = {"torch": 0}
MIN_SAVING_FRACTION_BY_TARGET = {"torch": 0.02}


@dataclass
class SavingPlan:
    """forward_saving / backward_saved as two routines over one optimized routine's names."""

    forward: Routine          # forward_saving: returns forward outputs, then `saved`
    backward: Routine         # backward_saved: args grads, saved, inputs
    n_outputs: int
    saved: tuple[str, ...]
    costs: dict


def with_forward_outputs(graph: Graph, vjp: Graph) -> Graph:
    """The VJP graph with the forward's outputs as extra outputs (replayed over the VJP's own
    input nodes, so that one optimization shares work between them)."""
    from .differentiate import replay, tracer_of
    from .trace import Tracer, dissolve_bindings

    # a large program's forward is already replayed in the tracer that differentiated it:
    # its outputs are read from there (one replay, and the forward's nodes are the VJP's)
    tr = tracer_of(vjp) if vjp.dag else None
    if tr is None:
        tr = Tracer(generic=vjp.generic)
        nodes = vjp.nodes()
        tr.names = {n.name for n in nodes} | set(vjp.output_names) | set(graph.output_names)
        tr.count = max(n.index for n in nodes)
        tr.symbol_node = {symbol_of(n): n for n in nodes}
        n_grads = len(vjp.inputs) - len(graph.inputs)
        xs = [tr._leaf_value(n) for n in vjp.inputs[n_grads:]]
        replay(graph, tr, xs)
    outs = []
    for o in graph.outputs:
        value = tr.value_of(o)
        node = tr.materialize(value)
        if node in vjp.inputs or node in vjp.outputs or node in outs:
            node = tr.materialize(value, copy=True)
        outs.append(node)
    names = tuple(f"{n}_" if n in set(vjp.output_names) | {i.name for i in vjp.inputs} else n
                  for n in graph.output_names)
    combined = Graph(name=vjp.name, inputs=vjp.inputs, outputs=tuple(vjp.outputs) + tuple(outs),
                     output_names=tuple(vjp.output_names) + names, constants=vjp.constants,
                     source=vjp.source, params=vjp.params, generic=vjp.generic,
                     rewrites=vjp.rewrites, derivative_of=vjp.derivative_of, dag=vjp.dag)
    # the replay's bindings, as differentiate's: inlined for a small program
    return combined if vjp.dag else dissolve_bindings(combined, tr.bindings, float("inf"))


def saving_plan(graph: Graph, vjp: Graph, forward: Routine, backward: Routine,
                target: str = "numpy"):
    """Split forward+backward into forward_saving and backward_saved when the cost model says
    that keeping the forward's intermediates beats recomputing them; else None.

    Cost model (units: one elementwise multiply pass over the data):
      plain  = cost(forward) + cost(backward)          (backward recomputes the forward)
      saving = cost(forward_saving) + cost(backward_saved) + SAVED_ARRAY_COST * len(saved)
    saving is emitted when plain - saving >= MIN_SAVING_GAIN and >= MIN_SAVING_FRACTION * plain
    (calibration figures beside the constants; `target` "torch" has its own: a saved tensor
    is kept by reference, SAVED_ARRAY_COST_BY_TARGET / MIN_SAVING_FRACTION_BY_TARGET).
    """
    n_out = len(graph.outputs)
    n_grads = len(vjp.inputs) - len(graph.inputs)
    try:
        combined = with_forward_outputs(graph, vjp)
    except Exception:   # a graph that cannot be replayed here keeps the recomputing backward
        return None
    # the backward's node degrees are reused (optimize's `reuse`: the same routine)
    routine = optimize(combined, "backward_saved", count=False, reuse=backward)
    grads = set(routine.args[:n_grads])
    tainted = set(grads)
    fwd_steps, bwd_steps = [], []
    memo: dict = {}   # id(step) -> the names it reads (each step is asked up to three times)

    def reads(step):
        hit = memo.get(id(step))
        if hit is None:
            hit = memo[id(step)] = _reads(step, routine)   # (never changed in place)
        return hit

    for step in routine.steps:
        if reads(step) & tainted:
            tainted.add(step.target)
            bwd_steps.append(step)
        else:
            fwd_steps.append(step)
    grad_returns = routine.returns[:len(vjp.outputs)]
    fwd_returns = routine.returns[len(vjp.outputs):]
    defined = {s.target for s in fwd_steps}
    read_later = set()
    for step in bwd_steps:
        read_later |= reads(step)
    saved = [s.target for s in fwd_steps
             if s.target in read_later or s.target in grad_returns]
    sizes = None   # the other targets price a temporary without a node as full-size
    if target == "c":
        sizes = _sizes(routine)
        saved, bwd_steps = _recompute_cheap(routine, fwd_steps, bwd_steps, saved,
                                            grad_returns, sizes)
    if any(r is not None and r in defined and r not in saved for r in grad_returns):
        return None
    # forward_saving: only what the outputs and the saved values need
    need = set(r for r in fwd_returns if r is not None) | set(saved)
    kept = []
    for step in reversed(fwd_steps):
        if step.target in need:
            kept.append(step)
            need |= reads(step)
    kept.reverse()
    saved_t = tuple(saved)
    costs = {
        "forward": sum(step_cost(s) for s in forward.steps),
        "backward": sum(step_cost(s) for s in backward.steps),
        "forward_saving": sum(step_cost(s) for s in kept),
        "backward_saved": sum(step_cost(s) for s in bwd_steps),
        "saved": len(saved_t),
    }
    costs["plain"] = costs["forward"] + costs["backward"]
    costs["saving"] = (costs["forward_saving"] + costs["backward_saved"]
                       + _saved_cost(routine, saved_t,
                                     SAVED_ARRAY_COST_BY_TARGET.get(target, SAVED_ARRAY_COST),
                                     sizes))
    gain = costs["plain"] - costs["saving"]
    fraction = MIN_SAVING_FRACTION_BY_TARGET.get(target, MIN_SAVING_FRACTION)
    if not saved_t or gain < MIN_SAVING_GAIN or gain < fraction * costs["plain"]:
        return None
    f = Routine(name="forward_saving", graph=graph, args=routine.args[n_grads:],
                params=routine.params, steps=kept, returns=tuple(fwd_returns) + saved_t,
                names=routine.names, rewrites=routine.rewrites)
    b = Routine(name="backward_saved", graph=vjp,
                args=routine.args[:n_grads] + saved_t + routine.args[n_grads:],
                params=routine.params, steps=bwd_steps, returns=tuple(grad_returns),
                names=routine.names, rewrites=routine.rewrites)
    return SavingPlan(f, b, n_out, saved_t, costs)


def _sizes(routine):
    """Per name of the routine (arguments, step targets), its element count, or None where
    unknown (shape-generic): a temporary without a node (an elementwise expression) has its
    operands' broadcast size (a row statistic's (781, 1), not the data's (781, 128))."""
    sizes = {}
    for a, node in zip(routine.args, routine.graph.inputs):
        sizes[a] = _size(node)
    for step in routine.steps:
        if step.node is not None:
            sizes[step.target] = _size(step.node)
        else:
            got = [sizes.get(r) for r in _reads(step, routine)]
            sizes[step.target] = None if any(n is None for n in got) else max(got, default=1)
    return sizes


def _recompute_cheap(routine, fwd_steps, bwd_steps, saved, grad_returns, sizes):
    """The C target's choice of what to save: a full-size elementwise value that costs less
    than keeping it (step_cost < SAVED_ARRAY_COST) is recomputed in backward_saved, from
    its operands (saved in its place, or recomputed in turn), instead of saved. C fuses the
    recomputation into the backward's loop (register work, no pass of its own), while a saved
    full-size array is one more write and read; what is left to save are the reductions and
    the values as small as theirs (layer norm's row means and variances: a pass over the data
    each, when recomputed, for a few bytes per row kept), and the costly elementwise values
    (erf, tanh). Returns (saved, backward steps), in the routine's order."""
    known = [n for n in sizes.values() if n is not None]
    if not known or any(sizes.get(s.target) is None for s in fwd_steps):
        return saved, bwd_steps   # shape-generic: sizes unknown
    full = max(known)
    by_target = {s.target: s for s in fwd_steps}
    returned = set(grad_returns)
    recompute = set()
    while True:
        # what the backward (and the values it recomputes) reads the values of: a static
        # operand read for its shape only (sum_to's, unreduce's `like`) is printed as a
        # literal shape, neither kept nor recomputed
        read_later = set()
        for step in bwd_steps + [s for s in fwd_steps if s.target in recompute]:
            read_later |= _value_reads(step, routine)
        saved = [s.target for s in fwd_steps if s.target not in recompute
                 and (s.target in read_later or s.target in returned)]
        cheap = [n for n in saved if n not in returned and sizes[n] >= full
                 and (by_target[n].node is None or by_target[n].node.op == "elementwise")
                 and step_cost(by_target[n]) < SAVED_ARRAY_COST]
        if not cheap:
            break
        recompute.update(cheap)
    if not recompute:
        return saved, bwd_steps
    return saved, [s for s in fwd_steps if s.target in recompute] + bwd_steps


def _value_reads(step, routine):
    """_reads without the static operands a structural step reads for their shape only."""
    node = step.node
    if node is None or node.op == "elementwise" or node.op not in STRUCTURAL:
        return _reads(step, routine)
    skip = STRUCTURAL[node.op].shape_args
    out = {name_of_symbol(s) for s in free_symbols(step.expr)} if step.expr is not None \
        else set()
    for i, a in enumerate(node.args):
        if id(a) in routine.names and not (i in skip and a.shape is not None):
            out.add(routine.names[id(a)])
    return out


def _saved_cost(routine, saved, per_array=SAVED_ARRAY_COST, by_name=None):
    """`per_array` (SAVED_ARRAY_COST) per saved array, scaled by its size (see
    SAVED_ARRAY_COST). `by_name`: the sizes of _sizes (the C target's); without them a
    temporary that has no node counts as full-size."""
    by_target = {s.target: s for s in routine.steps}
    sizes = [_size(s.node) for s in routine.steps if s.node is not None]
    full = max([n for n in sizes if n is not None] or [None], key=lambda n: n or 0)
    total = 0.0
    for name in saved:
        step = by_target.get(name)
        if step is not None and isinstance(step.expr, sympy.Symbol) and str(step.expr) in saved:
            continue   # an alias of another saved value
        size = _size(step.node) if step is not None and step.node is not None else None
        if size is None and by_name is not None:
            size = by_name.get(name)
        total += per_array * (1.0 if size is None or not full else min(size / full, 1.0))
    total = round(total, 2)
    return int(total) if total == int(total) else total


def _size(node):
    if node.shape is None:
        return None
    n = 1
    for d in node.shape:
        n *= int(d)
    return n


def _reads(step, routine):
    """Variable names a step reads."""
    out = set()
    if step.expr is not None:
        out |= {name_of_symbol(s) for s in free_symbols(step.expr)}
    node = step.node
    if node is not None and (node.op != "elementwise" or node.attr("broadcast")
                             or step.expr is None or not free_symbols(step.expr)):
        for a in node.args:   # structural operands; shape sources of a broadcast or constant
            if id(a) in routine.names:
                out.add(routine.names[id(a)])
    return out
