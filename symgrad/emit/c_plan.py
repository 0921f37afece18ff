"""The C target's planner: which steps of a routine run in C, grouped into segments.

`plan(routine)` gives the routine as items: a step printed for NumPy, or a `Segment` (a run
of steps that C can run given static shapes: one C function, one ctypes call). A
shape-generic routine's elementwise steps are ordered level by level so that they fuse into
loops over the broadcast shape of their leaves (`_plan_generic`). Moved verbatim out of
`symgrad/emit/c.py` (which re-exports every name); the segment writer (`emit/c_segment.py`),
the emitter (`emit/c.py`) and the native scan loops (`emit/c_scan.py`) use it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..graph import Param
from ..ops.structural import STRUCTURAL
from .c_loops import MATMUL_C_MAX, _contiguous


@dataclass
class Segment:
    """Consecutive steps that run as one C function: one ctypes call from Python."""

    name: str
    steps: list
    inputs: list = field(default_factory=list)     # names read from arrays made before it
    outputs: list = field(default_factory=list)    # names later steps or the returns read
    leaves: list | None = None   # shape-generic: one fused loop over the broadcast shape of
                                 # these values (see shape_leaves), known when it runs



# --------------------------------------------------------------------------- planning
def _shapes_and_dtypes(routine, known=None):
    """Static shape and dtype ('float' | 'int' | 'bool') of every variable of a routine.
    `known`: {argument: (shape, dtype)} where the arguments are not the graph's inputs one
    for one (backward_saved: grad outputs, saved values, inputs)."""
    shapes, dtypes = {}, {}
    if known is not None:
        for name, (shape, dt) in known.items():
            shapes[name], dtypes[name] = shape, dt
    else:
        for name, node in zip(routine.args, routine.graph.inputs):
            shapes[name] = node.shape
            dtypes[name] = node.dtype
    for step in routine.steps:
        if step.node is not None:
            shapes[step.target] = step.node.shape
            dtypes[step.target] = step.node.dtype
            continue
        free = [str(s) for s in step.expr.free_symbols]
        known = [shapes.get(s) for s in free]
        shapes[step.target] = None if any(k is None for k in known) else _broadcast(known)
        dtypes[step.target] = _dtype_of(step.expr, [dtypes.get(s, "float") for s in free])
    return shapes, dtypes


def _broadcast(shapes):
    out = ()
    for shape in shapes:
        n = max(len(out), len(shape))
        a = (1,) * (n - len(out)) + tuple(out)
        b = (1,) * (n - len(shape)) + tuple(shape)
        out = tuple(x if y == 1 else y for x, y in zip(a, b))
    return out


def _dtype_of(expr, operand_dtypes):
    if isinstance(expr, sympy.logic.boolalg.Boolean) and not isinstance(expr, sympy.Symbol):
        return "bool"
    if operand_dtypes and all(d == "int" for d in operand_dtypes) and expr.is_integer:
        return "int"
    return "float"


def _elementwise(step):
    return step.node is None or step.node.op == "elementwise"


def _reads(step, routine):
    """Variable names a step reads values of (operands read only for their shape excluded)."""
    if _elementwise(step):
        return sorted(str(s) for s in step.expr.free_symbols)
    skip = STRUCTURAL[step.node.op].shape_args
    return [routine.name_of(a) for i, a in enumerate(step.node.args)
            if i not in skip and id(a) in routine.names]


def _uses(step, routine):
    """Variable names a step of a shape-generic routine needs to exist when it runs: those it
    reads values of, and the operands a structural step reads only for their shape (which
    a generic loader takes from the arrays: numpy.shape(v))."""
    if _elementwise(step):
        return _reads(step, routine)
    return [routine.name_of(a) for a in step.node.args if id(a) in routine.names]


def _dims(node, key, rank):
    """A reduction's dims attribute as a sorted tuple of non-negative ints (None: all)."""
    dims = node.attr(key)
    if dims is None:
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = (dims,)
    return tuple(sorted({d % max(rank, 1) for d in dims}))


def _matmul_sizes(node):
    """(M, K, N) of a 2-D x 2-D matmul or its gradients, else None."""
    if node.op == "matmul":
        a, b = node.args
    else:
        _, a, b = node.args
    if len(a.shape) != 2 or len(b.shape) != 2:
        return None
    return a.shape[0], a.shape[1], b.shape[1]


_REDUCTIONS = {"sum", "mean", "amax", "amin", "max_dim", "min_dim", "argmax", "argmin"}
_C_STRUCTURAL = _REDUCTIONS | {
    "unreduce", "sum_to", "broadcast_like", "expand", "index_back", "take_dim", "matmul",
    "matmul_grad_a", "matmul_grad_b", "reshape", "reshape_like", "permute", "stop_gradient",
    "zeros_like", "scan_part", "scan_part_back", "getitem", "index_put_zeros"}


def _c_able(step, routine, shapes, dtypes):
    """Whether a step runs in C: static shapes, and an op the C lowering knows."""
    if shapes.get(step.target) is None:
        return False
    if _elementwise(step):
        return all(shapes.get(str(s)) is not None for s in step.expr.free_symbols)
    node = step.node
    if node.op not in _C_STRUCTURAL or any(a.shape is None for a in node.args):
        return False
    if any(isinstance(v, Param) for _, v in node.attrs):
        return False
    if node.op in _REDUCTIONS | {"matmul", "matmul_grad_a", "matmul_grad_b"}:
        if any(a.dtype != "float" for a in node.args):
            return False
    if node.op in ("matmul", "matmul_grad_a", "matmul_grad_b"):
        sizes = _matmul_sizes(node)
        return sizes is not None and sizes[0] * sizes[1] * sizes[2] <= MATMUL_C_MAX
    if node.op in ("getitem", "index_put_zeros"):
        source = node.args[0] if node.op == "getitem" else node
        return _basic_view(node.attr("index"), tuple(source.shape)) is not None
    return True


def _basic_view(index, shape):
    """(element offset, [(dim, step) per kept dim]) of x[index] for an index of ints and
    slices with positive steps (a strided view in C), or None for any other index."""
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) > len(shape):
        return None
    offset, kept, strides = 0, [], _contiguous(shape)
    for d, n in enumerate(shape):
        k = index[d] if d < len(index) else slice(None)
        if isinstance(k, bool) or not isinstance(k, (int, slice)):
            return None
        if isinstance(k, int):
            if not -n <= k < n:
                return None
            offset += (k % n) * strides[d]
            continue
        start, stop, step = k.indices(n)
        if step <= 0 or stop <= start:
            return None
        offset += start * strides[d]
        kept.append((d, step))
    return offset, kept


def _generic_able(step, routine, shapes, leaves):
    """Whether a step of a shape-generic trace runs in a generic C loop: elementwise, of no
    static shape, reading no keyword parameter, and with leaves to take its shape from."""
    return (_elementwise(step) and shapes.get(step.target) is None
            and bool(leaves.get(step.target))
            and not any(str(v) in routine.params for v in step.expr.free_symbols))


def _generic_groups(run, routine, leaves, exported):
    """The generic elementwise steps of one level (`run`) as groups of one shape each, in an
    order that keeps every value before its readers.

    Steps of the same leaves share a shape (one loop). A value read only inside one group of
    more leaves, and not `exported` (read outside the run or returned), is computed in that
    group's loop instead (at the group's broadcast shape, where it is only read): a backward's
    recomputed forward values then fuse with the gradients that read them. A group's leaves
    contain those of every value it reads, so groups ordered by their number of leaves have
    their operands computed before them."""
    group = {s.target: leaves[s.target] for s in run}
    readers = {s.target: set() for s in run}
    for s in run:
        for v in _reads(s, routine):
            if v in readers and v != s.target:
                readers[v].add(s.target)
    for s in reversed(run):
        homes = {group[r] for r in readers[s.target]}
        if s.target not in exported and len(homes) == 1:
            home = homes.pop()
            if leaves[s.target] < home:
                group[s.target] = home
    order = list(dict.fromkeys(group[s.target] for s in run))
    order.sort(key=len)   # stable: first appearance among groups of as many leaves
    return [(key, [s for s in run if group[s.target] == key]) for key in order]


def _plan_generic(routine, shapes, place, segment):
    """A shape-generic routine's steps, in an order that fuses its elementwise steps.

    Each step gets a level: a structural step (or an elementwise one that cannot run in a
    generic loop) is one above the steps it needs; an elementwise step is at the level of the
    steps it reads. Level by level, the structural steps come first, then the elementwise
    ones as generic loops (`_generic_groups`): so `grad_y`'s loop does not wait for the
    `sum_to` of `grad_x`, and both are one loop."""
    from . import shape_leaves

    leaves = shape_leaves(routine)
    position = {a: i for i, a in enumerate(routine.args)}
    level, index, generic = {}, {}, {}
    for i, step in enumerate(routine.steps):
        index[step.target] = i
        generic[step.target] = _generic_able(step, routine, shapes, leaves)
        below = max((level.get(v, 0) for v in _uses(step, routine)), default=0)
        level[step.target] = below if generic[step.target] else below + 1
    exported = {r for r in routine.returns if r is not None}
    for step in routine.steps:
        for v in _uses(step, routine):
            if v in level and (level[v] != level[step.target] or not generic[step.target]):
                exported.add(v)
    for lv in sorted(set(level.values())):
        at = [s for s in routine.steps if level[s.target] == lv]
        for step in at:
            if not generic[step.target]:
                place(index[step.target], step)
        run = [s for s in at if generic[s.target]]
        for key, steps in _generic_groups(run, routine, leaves, exported):
            segment(steps, sorted(key, key=lambda v: (position.get(v, len(position)), v)))


def plan(routine, known=None):
    """The routine as items: ("numpy", index) for a step printed for NumPy, ("c", Segment).
    `known`: see _shapes_and_dtypes."""
    shapes, dtypes = _shapes_and_dtypes(routine, known)
    items = []

    def segment(steps, leaves=None):
        n = sum(1 for kind, _ in items if kind == "c")
        items.append(("c", Segment(f"{routine.name}_c{n}", list(steps), leaves=leaves)))

    def place(i, step):
        if not _c_able(step, routine, shapes, dtypes):
            items.append(("numpy", i))
        elif items and items[-1][0] == "c" and items[-1][1].leaves is None:
            items[-1][1].steps.append(step)
        else:
            segment([step])

    generic = any(v is None for v in shapes.values())
    if not generic:
        for i, step in enumerate(routine.steps):
            place(i, step)
    else:
        _plan_generic(routine, shapes, place, segment)
    # what each segment reads from arrays, and what it must leave in arrays
    later: set = {r for r in routine.returns if r is not None}
    for kind, item in reversed(items):
        steps = [routine.steps[item]] if kind == "numpy" else item.steps
        if kind == "c":
            defined = [s.target for s in steps]
            item.outputs = [t for t in defined if t in later]
            inside = set()
            for s in steps:
                for name in _reads(s, routine):
                    if name not in inside and name not in item.inputs:
                        item.inputs.append(name)
                inside.add(s.target)
        for s in steps:
            later.update(_uses(s, routine) if generic else _reads(s, routine))
    return items, shapes, dtypes
