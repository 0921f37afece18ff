"""The native CPU target: the static-shape work of a routine as C functions, one call each.

`emit_c(program)` splits each routine (forward, backward) into *segments*: maximal runs of
steps that C can run, given static shapes. A segment is one C function
(`templates/c/kernels.c.jinja`), called once from Python through ctypes, that runs

- fused loops: consecutive elementwise steps of one output shape (CSE temporaries included)
  are ONE loop with several outputs, an inline element function (one statement per formula)
  called over the shape; operands are read through compile-time strides (0 along broadcast
  dims), and adjacent dims that every operand steps through alike are one loop;
- reductions (sum, mean, max/min, argmax/argmin, sum_to) as loops, sums accumulated in double;
- broadcasts, unreduce, permute and reshape as views (a pointer and strides, no copy);
- the index scatters and gathers of max_dim's adjoint, and 2-D matmuls up to MATMUL_C_MAX
  multiply-adds (larger ones are NumPy calls, between two segments).

Temporaries live in scratch memory the Python loader passes in: one block per thread, kept
between calls (a fresh block page-faults on every call: 40 ms of a 49 ms float64 layer norm at
1e6 elements, in a process whose allocator returns freed memory to the OS). The Python loader
(`templates/c/module.py.jinja`, imports only numpy and ctypes) prints any other step exactly as
the NumPy target does (`numpy_lines`), makes each segment's operands C-contiguous, allocates its
outputs and passes their pointers. Beside it ships the NumPy module of the same program, used
when no C compiler works here.

`load_c(module)` compiles the C file once per (source, compiler, flags) into the disk cache
(`symgrad.cache.directory()/c/`), atomically, and binds the loader to it. A cache hit does not
run the compiler. Math calls vectorize through glibc's libmvec: each function is declared with
`#pragma omp declare simd notinbranch` and built with `-fopenmp-simd -lmvec`, without
`-ffast-math`, so NaN and inf keep their IEEE meaning.
"""
from __future__ import annotations

import ctypes
import functools
import re
from dataclasses import dataclass, field

import numpy
import sympy

from .._version import __version__
from ..cache import _snake
from ..graph import Param
from ..ops import specfun, stable
from ..ops.structural import STRUCTURAL
from ..ops.table import libmvec
from . import (_constants_text, emit_numpy, grad_output_args, numpy_lines, routine_interface,
               shape_check, shape_check_helper)
from .cprinter import CpuPrinter, minmax_c
from .helpers import STRUCTURAL_HELPERS, required_helpers
from .printers import formula_lines
from .render import c_comment, render, untrusted
from .scan import scan_helpers
from ..native import FLAGS, BuildError, build, compiler_and_flags, load_c  # noqa: F401  (API)

C_TYPES = {"bool": "unsigned char", "int": "int64_t"}
NUMPY_TYPES = {"bool": "numpy.bool_", "int": "numpy.int64", "float": "dtype"}

# libm functions with a libmvec variant in glibc >= 2.35 (x86_64): (name, number of arguments).
# Declaring any other function `declare simd` would link against a vector symbol that is absent.
# The op table's entries marked libmvec (symgrad/ops/table.py), and two glibc functions no entry
# names: cbrt (the C99 printer's x**(1/3)) and exp10.
VECTOR_MATH = {**libmvec(), "cbrt": 1, "exp10": 1}

# Names a variable cannot take in C (keywords, and math.h names the kernels may call).
_C_RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool _Complex _Imaginary bool true false NAN INFINITY
fabs fabsf fmax fmaxf fmin fminf sqrt sqrtf copysign copysignf floor floorf ceil ceilf round
j0 j1 jn y0 y1 yn erf erff erfc erfcf gamma lgamma tgamma pow powf main
""".split()) | frozenset(VECTOR_MATH) | frozenset(n + "f" for n in VECTOR_MATH)


# Matmuls up to this many multiply-adds run as C loops inside a fused segment; larger ones are
# NumPy (BLAS) calls, whose fixed cost (~5 us from Python) is then small against the work.
MATMUL_C_MAX = 1 << 18

# Names the generated C functions use for their own locals; a variable with one of these
# names is renamed (suffix "_") in C.
_INTERNAL = re.compile(r"^(?:[ik]\d+|acc\d*|best|seen_nan|at|scratch|val|size|part|r_\w+)$")


@dataclass
class Segment:
    """Consecutive steps that run as one C function: one ctypes call from Python."""

    name: str
    steps: list
    inputs: list = field(default_factory=list)     # names read from arrays made before it
    outputs: list = field(default_factory=list)    # names later steps or the returns read
    leaves: list | None = None   # shape-generic: one fused loop over the broadcast shape of
                                 # these values (see shape_leaves), known when it runs


@dataclass
class Val:
    """A value inside a C function: a pointer and how to index it (strides in elements)."""

    buf: str
    shape: tuple
    strides: tuple
    ctype: str


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


# --------------------------------------------------------------------------- C text
def _cname(name):
    return name + "_" if name in _C_RESERVED or _INTERNAL.match(name) else name


def _contiguous(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _is_contiguous(val):
    return all(n == 1 or s == c for n, s, c in zip(val.shape, val.strides,
                                                    _contiguous(val.shape)))


# The shape of a shape-generic segment's one loop: `size` elements, a parameter of its C function.
GENERIC = ("size",)


def _size(shape):
    if shape == GENERIC:
        return GENERIC[0]
    n = 1
    for d in shape:
        n *= d
    return n


def _broadcast_strides(val, shape):
    """val's strides read as an operand of `shape` (0 along padded and broadcast dims)."""
    pad = len(shape) - len(val.shape)
    return tuple(0 if d < pad or val.shape[d - pad] == 1 else val.strides[d - pad]
                 for d in range(len(shape)))


def _reduced_strides(val, shape, dims, keepdim):
    """Strides over `shape` of a value whose `dims` were reduced away (0 along them)."""
    if keepdim:
        return tuple(0 if d in dims or val.shape[d] == 1 else val.strides[d]
                     for d in range(len(shape)))
    out, j = [], 0
    for d in range(len(shape)):
        if d in dims:
            out.append(0)
        else:
            out.append(0 if val.shape[j] == 1 else val.strides[j])
            j += 1
    return tuple(out)


def _kept_strides(shape, dims):
    """Strides of a C-contiguous reduction result over `shape` reduced along `dims`, per dim
    of `shape` (0 along the reduced dims)."""
    kept = [d for d in range(len(shape)) if d not in dims]
    out = [0] * len(shape)
    for d, st in zip(kept, _contiguous([shape[d] for d in kept])):
        out[d] = st
    return out


def _loops(extents, strides_of, index):
    """Coalesced loop dims: [(extent, [stride per operand])] over the dims of size > 1.

    Adjacent dims merge when every operand steps through them as through one dim.
    """
    groups = []
    for d, n in enumerate(extents):
        if n == 1:
            continue
        st = [s[d] for s in strides_of]
        if groups and all(prev == s * n for prev, s in zip(groups[-1][1], st)):
            groups[-1] = (groups[-1][0] * n, st)
        else:
            groups.append((n, st))
    return [(index.format(k), n, st) for k, (n, st) in enumerate(groups)]


def _at(loops, j, extra=""):
    """Index expression of operand j in the loop nest."""
    terms = []
    for name, _, st in loops:
        if st[j] == 1:
            terms.append(name)
        elif st[j]:
            terms.append(f"{name}*{st[j]}")
    if extra:
        terms.append(extra)
    return " + ".join(terms) or "0"


def _nest(loops, body, inner_pragma="SYMGRAD_SIMD", threads_if=None):
    """Lines of a loop nest around `body`; the innermost loop gets `inner_pragma`, and with
    `threads_if` (an element count) the outermost is split over SYMGRAD_THREADS threads."""
    lines = []
    for k, (name, n, _) in enumerate(loops):
        pad = "    " * k
        innermost = k == len(loops) - 1
        if k == 0 and threads_if is not None:
            simd = " simd" if innermost and inner_pragma else ""
            if str(threads_if).isdigit():
                # a static size decides at compile time: a small loop keeps its plain SIMD
                # form (with an if() clause gcc left a 64-element loop unvectorized)
                lines += [f"#if SYMGRAD_THREADS > 1 && {threads_if} >= SYMGRAD_PARALLEL_MIN",
                          f"#pragma omp parallel for{simd} schedule(static) "
                          f"num_threads(symgrad_threads) if(symgrad_threads > 1)"]
            else:
                lines += ["#if SYMGRAD_THREADS > 1",
                          f"#pragma omp parallel for{simd} schedule(static) "
                          f"num_threads(symgrad_threads) if(symgrad_threads > 1 && "
                          f"{threads_if} >= SYMGRAD_PARALLEL_MIN)"]
            if simd:
                lines += ["#else", pad + inner_pragma]
            lines.append("#endif")
            if simd:
                inner_pragma = None
        if innermost and inner_pragma:
            lines.append(pad + inner_pragma)
        lines.append(pad + f"for (int64_t {name} = 0; {name} < {n}; {name}++) {{")
    pad = "    " * len(loops)
    lines += [pad + b for b in body]
    for k in reversed(range(len(loops))):
        lines.append("    " * k + "}")
    return lines


class _SegmentWriter:
    """Lowers one Segment to a C function (and the element functions of its fused loops)."""

    def __init__(self, seg, routine, shapes, dtypes, printer, kernel_base):
        self.seg, self.routine, self.shapes, self.dtypes = seg, routine, shapes, dtypes
        self.printer = printer
        self.ftype = printer.float_type
        self.ctype = {"float": self.ftype, **C_TYPES}
        self.vals = {}
        self.temps = []          # (C name, ctype, elements)
        self.body = []
        self.kernels = []        # template contexts of element functions
        self.kernel_base = kernel_base
        self.outputs = set(seg.outputs)
        for name in seg.inputs:
            # a generic segment's loader hands every operand in at the loop's full shape
            shape = GENERIC if seg.leaves is not None else tuple(shapes[name])
            self.vals[name] = Val(_cname(name), shape, _contiguous(shape),
                                  self.ctype[dtypes[name]])

    def lit(self, value):
        return self.printer._literal(value)

    # ---- storage
    def alloc(self, name, shape, ctype=None):
        """A new C-contiguous array for `name`: the caller's output array, or a temporary."""
        ctype = ctype or self.ctype[self.dtypes[name]]
        cn = _cname(name)
        if name not in self.outputs:
            self.temps.append((cn, ctype, _size(shape)))
        val = Val(cn, tuple(shape), _contiguous(shape), ctype)
        self.vals[name] = val
        return val

    def fill(self, dst, value):
        loops = _loops(dst.shape, [dst.strides], "i{}")
        return _nest(loops, [f"{dst.buf}[{_at(loops, 0)}] = {value};"])

    def copy(self, dst, src):
        loops = _loops(src.shape, [dst.strides, src.strides], "i{}")
        return _nest(loops, [f"{dst.buf}[{_at(loops, 0)}] = {src.buf}[{_at(loops, 1)}];"])

    def materialized(self, name, val):
        """val in C order (copied into a temporary when it is a strided view)."""
        if _is_contiguous(val):
            return val
        tmp = self.alloc(name + "_dense", val.shape, val.ctype)
        self.body += [f"/* {name}: a strided view, copied to C order */"] + self.copy(tmp, val)
        return tmp

    # ---- blocks
    def run(self):
        blocks = []
        for step in self.seg.steps:
            if not _elementwise(step):
                blocks.append(("op", step))
                continue
            shape = GENERIC if self.seg.leaves is not None else tuple(self.shapes[step.target])
            reads = set(_reads(step, self.routine))
            home = None
            for kind, item in reversed(blocks):
                if kind == "kernel":
                    if item["shape"] == shape:
                        home = item
                    break
                if item.target in reads:
                    break
            if home is not None:
                home["steps"].append(step)
            else:
                blocks.append(("kernel", {"shape": shape, "steps": [step]}))
        blocks = self._fuse_row_sums(blocks)
        needed_after = []
        later = set(self.seg.outputs)
        for kind, item in reversed(blocks):
            needed_after.append(set(later))
            for s in (item["steps"] if kind == "kernel" else [item]):
                later.update(_reads(s, self.routine))
        needed_after.reverse()
        for (kind, item), after in zip(blocks, needed_after):
            if kind == "kernel":
                self.kernel(item, after)
            else:
                self.op(item)
        for name in self.seg.outputs:
            val = self.vals[name]
            if val.buf != _cname(name) or not _is_contiguous(val):
                dst = Val(_cname(name), val.shape, _contiguous(val.shape), val.ctype)
                self.body += [f"/* {name}: a view above, copied to its output array */"]
                self.body += self.copy(dst, val)
        return self.context()

    def kernel_with_row_sums(self, kernel, shape, inputs, outputs, after, row_sums):
        """A fused loop over (rows, row) that also sums values along each row: the outer loops
        run over the kept dims, the inner (a SIMD reduction) along the summed ones."""
        name = kernel["name"]
        stored = [n for n in outputs if n in after]
        outs = {n: self.alloc(n, shape) for n in stored}
        operands = [self.vals[n] for n in inputs]
        dsts = [self.alloc(step.target, tuple(self.shapes[step.target]))
                for step, _, _, _ in row_sums]
        kept_strides = [_kept_strides(shape, dims) for _, _, _, dims in row_sums]
        strides = [outs[n].strides for n in stored] + \
            [_broadcast_strides(v, shape) for v in operands] + kept_strides
        loops = _loops(shape, strides, "i{}")
        first_sum = len(stored) + len(operands)
        outer = [lp for lp in loops if lp[2][first_sum]]
        inner = [lp for lp in loops if not lp[2][first_sum]]
        local = {n: f"r_{_cname(n)}" for n in outputs}
        args = [f"{v.buf}[{_at(loops, len(stored) + j)}]" for j, v in enumerate(operands)]
        args += [f"&{local[n]}" for n in outputs]
        t = self.ftype
        accs = [f"acc{k}" for k in range(len(row_sums))]
        body = [f"{self.ctype[self.dtypes[n]]} {local[n]};" for n in outputs]
        body.append(f"{name}_element({', '.join(args)});")
        body += [f"{outs[n].buf}[{_at(loops, j)}] = {local[n]};" for j, n in enumerate(stored)]
        for acc, (_, operand, _, _) in zip(accs, row_sums):
            value = local[operand] if t == "double" else f"(double){local[operand]}"
            body.append(f"{acc} += {value};")
        count = _size(lp[1] for lp in inner)
        finals = []
        for k, (acc, dst, (_, _, kind, _)) in enumerate(zip(accs, dsts, row_sums)):
            value = acc if kind == "sum" else f"{acc} / {count}.0"
            value = value if t == "double" else f"({t})({value})"
            finals.append(f"{dst.buf}[{_at(loops, first_sum + k)}] = {value};")
        row = [f"double {' = 0.0, '.join(accs)} = 0.0;"]
        row += _nest(inner, body, f"SYMGRAD_SIMD_WITH(reduction(+:{', '.join(accs)}))")
        row += finals
        sums = ", ".join(f"{step.target} = {kind} of {operand}"
                         for step, operand, kind, _ in row_sums)
        self.body.append(f"/* fused loop over {shape}: {kernel['computes']}; summed along each "
                         f"row as computed: {sums} */")
        if outer:
            self.body += _nest(outer, row, inner_pragma=None, threads_if=_size(shape))
        else:
            self.body += ["{"] + ["    " + line for line in row] + ["}"]

    def _row_sum(self, step):
        """(operand, kind, reduced dims) when `step` sums or averages an array over its
        trailing dims (sum, mean, sum_to); else None."""
        node = step.node
        if node.op not in ("sum", "mean", "sum_to") or id(node.args[0]) not in self.routine.names:
            return None
        name = self.routine.name_of(node.args[0])
        full = tuple(self.shapes[name])
        if node.op == "sum_to":
            like = tuple(node.args[1].shape)
            if len(like) != len(full):
                return None
            dims = tuple(i for i, n in enumerate(like) if n == 1 and full[i] != 1)
        else:
            dims = _dims(node, "dims", len(full))
        big = [d for d, n in enumerate(full) if n != 1]
        kept = [d for d in big if d not in dims]
        reduced = [d for d in big if d in dims]
        if not reduced or (kept and max(kept) > min(reduced)):
            return None
        return name, "mean" if node.op == "mean" else "sum", tuple(reduced)

    def _fuse_row_sums(self, blocks):
        """Move each row sum or mean of a fused loop's value into that loop: the loop then adds
        the values up as it computes them, and stores them only if something else reads them
        (layer norm's backward: three arrays and three passes fewer)."""
        defined_in, out = {}, []
        for kind, item in blocks:
            if kind == "kernel":
                item["row_sums"] = []
                for step in item["steps"]:
                    defined_in[step.target] = item
            else:
                found = self._row_sum(item)
                home = defined_in.get(found[0]) if found else None
                # one loop nest sums along one set of dims
                if home is not None and self.dtypes[found[0]] == "float" and \
                        tuple(self.shapes[found[0]]) == home["shape"] and \
                        all(r[3] == found[2] for r in home["row_sums"]):
                    home["row_sums"].append((item, *found))
                    continue
            out.append((kind, item))
        return out

    def kernel(self, item, after):
        steps, shape = item["steps"], item["shape"]
        name = f"{self.routine.name}_k{self.kernel_base + len(self.kernels)}"
        rename = {}
        inputs, defined = [], []
        for step in steps:
            for s in sorted(step.expr.free_symbols, key=str):
                if str(s) not in defined and str(s) not in inputs:
                    inputs.append(str(s))
                if _cname(str(s)) != str(s):
                    rename[s] = sympy.Symbol(_cname(str(s)), **s.assumptions0)
            defined.append(step.target)
        row_sums = item.get("row_sums", [])
        summed = {name for _, name, _, _ in row_sums}
        outputs = [t for t in defined if t in after or t in summed]
        statements = []
        exprs = [step.expr.xreplace(rename) if rename else step.expr for step in steps]
        taken = {_cname(n) for n in inputs + defined} | set(inputs + defined)
        exprs, shared = _share_sigmoid_exps(exprs, taken)
        for i, (step, expr) in enumerate(zip(steps, exprs)):
            for sym, value in shared.get(i, ()):
                what = ("e = exp(-|u|), shared by sigmoid(u) and sigmoid(-u)"
                        if isinstance(value, sympy.exp) else
                        "s = sigmoid(|u|); sigmoid(-|u|) = e*s")
                statements.append({"ctype": self.ftype, "name": str(sym), "expr": value,
                                   "code": self.printer.doprint(value), "comment": what})
            node = step.node
            comment = untrusted(f"from {node.site}") if node is not None and node.site else ""
            cn = _cname(step.target)
            statements.append({"ctype": self.ctype[self.dtypes[step.target]], "name": cn,
                               "expr": expr, "code": self.printer.doprint(expr),
                               "comment": comment})
            if step.target in outputs:
                statements.append({"ctype": None, "name": f"*out_{cn}", "code": cn,
                                   "comment": ""})
        params = [f"const {self.vals[n].ctype} {_cname(n)}" for n in inputs]
        params += [f"{self.ctype[self.dtypes[n]]} *restrict out_{_cname(n)}" for n in outputs]
        over = (f"the broadcast shape of {', '.join(self.seg.leaves)}"
                if shape == GENERIC else repr(shape))
        kernel = {"name": name, "shape": over,
                  "computes": ", ".join(s.target for s in steps),
                  "element_params": ", ".join(params) or "void",
                  "statements": statements, "lanes": None}
        self.kernels.append(kernel)
        if row_sums:
            self.kernel_with_row_sums(kernel, shape, inputs, outputs, after, row_sums)
            return
        outs = [self.alloc(n, shape) for n in outputs]
        operands = [self.vals[n] for n in inputs]
        strides = [o.strides for o in outs] + [_broadcast_strides(v, shape) for v in operands]
        loops = _loops(shape, strides, "i{}")

        def at(j, offset):
            if isinstance(offset, str):   # a generic loop's lane: every operand dense
                return _at(loops, j, offset)
            step = loops[-1][2][j] * offset if offset else 0
            return _at(loops, j, str(step) if step else "")

        def call(fn, offsets=(0,)):
            args = []
            for off in offsets:
                args += [f"{v.buf}[{at(len(outs) + j, off)}]" for j, v in enumerate(operands)]
                args += [f"&{o.buf}[{at(j, off)}]" for j, o in enumerate(outs)]
            return f"{fn}({', '.join(args)});"

        self.body.append(f"/* fused loop over {over}: {', '.join(s.target for s in steps)} */")
        lanes = 1
        if loops and (shape == GENERIC or loops[-1][1] >= LANES * INTERLEAVE_MIN_EXTENT) and \
                _call_depth(statements) >= INTERLEAVE_DEPTH:
            lanes = LANES
        if lanes == 1:
            self.body += _nest(loops, [call(f"{name}_element")], threads_if=_size(shape))
            return
        # latency-bound (a long chain of dependent math calls): LANES elements per call,
        # statement by statement, so the CPU overlaps their calls; the rest one at a time
        iname, n, st = loops[-1]
        kernel["lanes"] = _interleaved(statements, inputs, outputs, params, lanes, taken,
                                       self.printer)
        if shape == GENERIC:   # the lanes' length is known when it runs
            self.body.append(f"const int64_t part = {n} / {lanes};")
            part, offsets, start = "part", [0] + [f"{k}*part" if k > 1 else "part"
                                                  for k in range(1, lanes)], f"{lanes}*part"
        else:
            part = n // lanes
            offsets, start = [k * part for k in range(lanes)], part * lanes
        lane_call = call(f"{name}_x{lanes}", offsets)
        rest = [f"for (int64_t {iname} = {start}; {iname} < {n}; {iname}++) "
                + call(f"{name}_element")]
        main = [(iname, part, st)]
        if len(loops) == 1:
            self.body += _nest(main, [lane_call], threads_if=_size(shape)) + rest
        else:
            inner = _nest(main, [lane_call]) + rest
            self.body += _nest(loops[:-1], inner, inner_pragma=None, threads_if=_size(shape))

    def op(self, step):
        node, target = step.node, step.target
        args = [self.vals.get(self.routine.name_of(a)) if id(a) in self.routine.names else None
                for a in node.args]
        shape = tuple(node.shape)
        # pasted into C comments of the body: the user's path escaped here
        what = f"{target} = {node.op}" + (f", from {c_comment(node.site)}" if node.site else "")
        op = node.op
        if op in ("sum", "mean", "amax", "amin"):
            x = args[0]
            self.reduce(what, op, x, _dims(node, "dims", len(x.shape)), target, shape)
        elif op in ("max_dim", "min_dim", "argmax", "argmin"):
            x = args[0]
            kind = {"max_dim": "amax", "min_dim": "amin"}.get(op, op)
            self.reduce(what, kind, x, _dims(node, "dim", len(x.shape)), target, shape)
        elif op == "sum_to":
            x = args[0]
            like = tuple(node.args[1].shape)
            if x.shape == like:
                self.vals[target] = x
                self.body.append(f"/* {what}: already of shape {like} (no copy) */")
                return
            lead = len(x.shape) - len(like)
            dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(like)
                                              if n == 1 and x.shape[lead + i] != 1)
            self.reduce(what, "sum", x, dims, target, shape)
        elif op == "unreduce":
            g = args[0]
            dims = _dims(node, "dims", len(shape))
            if node.attr("mean"):
                count = _size(shape[d] for d in dims) if shape else 1
                scaled = self.alloc(target + "_mean", g.shape, g.ctype)
                loops = _loops(g.shape, [scaled.strides, g.strides], "i{}")
                self.body.append(f"/* {what}: the mean's 1/{count}, then a view */")
                self.body += _nest(loops, [f"{scaled.buf}[{_at(loops, 0)}] = "
                                           f"{g.buf}[{_at(loops, 1)}] / {self.lit(count)};"])
                g = scaled
            else:
                self.body.append(f"/* {what}: a broadcast view of {self.routine.name_of(node.args[0])} */")
            strides = _reduced_strides(g, shape, dims, node.attr("keepdim") or not shape)
            self.vals[target] = Val(g.buf, shape, strides, g.ctype)
        elif op in ("broadcast_like", "expand"):
            g = args[0]
            self.body.append(f"/* {what}: a broadcast view */")
            self.vals[target] = Val(g.buf, shape, _broadcast_strides(g, shape), g.ctype)
        elif op == "permute":
            x = args[0]
            dims = node.attr("dims")
            dims = tuple(reversed(range(len(x.shape)))) if dims is None else \
                tuple(d % len(x.shape) for d in dims)
            self.body.append(f"/* {what}: a strided view */")
            self.vals[target] = Val(x.buf, shape, tuple(x.strides[d] for d in dims), x.ctype)
        elif op in ("reshape", "reshape_like", "stop_gradient"):
            x = self.materialized(target, args[0]) if op != "stop_gradient" else args[0]
            self.body.append(f"/* {what}: the same array */")
            self.vals[target] = Val(x.buf, shape, _contiguous(shape), x.ctype) \
                if op != "stop_gradient" else x
        elif op == "zeros_like":
            dst = self.alloc(target, shape)
            self.body += [f"/* {what} */"] + self.fill(dst, "0")
        elif op == "getitem":         # ints and slices (_basic_view): a strided view
            x = self.materialized(target, args[0])
            offset, kept = _basic_view(node.attr("index"), x.shape)
            self.body.append(f"/* {what}: a strided view */")
            self.vals[target] = Val(f"({x.buf} + {offset})" if offset else x.buf, shape,
                                    tuple(x.strides[d] * step for d, step in kept), x.ctype)
        elif op == "index_put_zeros":  # the adjoint of that: zeros, g in the view
            g = args[0]
            offset, kept = _basic_view(node.attr("index"), shape)
            dst = self.alloc(target, shape)
            self.body += [f"/* {what}: zeros with {self.routine.name_of(node.args[0])} in a "
                          "strided view */"] + self.fill(dst, "0")
            view = Val(f"({dst.buf} + {offset})" if offset else dst.buf, g.shape,
                       tuple(dst.strides[d] * step for d, step in kept), dst.ctype)
            self.body += self.copy(view, g)
        elif op == "scan_part":       # sg.scan's packed result: a part is a slice of it
            x = self.materialized(target, args[0])
            o = node.attr("offset")
            self.body.append(f"/* {what}: elements {o}.. of the loop's result */")
            self.vals[target] = Val(f"({x.buf} + {o})" if o else x.buf, shape,
                                    _contiguous(shape), x.ctype)
        elif op == "scan_part_back":  # its adjoint: zeros but for that slice
            g, o = args[0], node.attr("offset")
            dst = self.alloc(target, shape)
            self.body += [f"/* {what}: zeros, {self.routine.name_of(node.args[0])} at {o}.. */"]
            self.body += self.fill(dst, "0")
            part = Val(f"({dst.buf} + {o})" if o else dst.buf, g.shape, _contiguous(g.shape),
                       dst.ctype)
            self.body += self.copy(part, g)
        elif op == "index_back":
            g, idx = args[0], args[1]
            dim = node.attr("dim") % max(len(shape), 1)
            keep = node.attr("keepdim")
            dst = self.alloc(target, shape)
            gs = _reduced_strides(g, shape, (dim,), keep) if shape else (0,) * len(shape)
            xs = _reduced_strides(idx, shape, (dim,), keep) if shape else ()
            kept = tuple(1 if d == dim else n for d, n in enumerate(shape))
            loops = _loops(kept, [dst.strides, gs, xs], "i{}")
            place = f"{idx.buf}[{_at(loops, 2)}]*{dst.strides[dim]}" if shape else ""
            self.body += [f"/* {what}: zeros with {self.routine.name_of(node.args[0])} "
                          f"at the indices */"] + self.fill(dst, "0")
            self.body += _nest(loops, [f"{dst.buf}[{_at(loops, 0, place)}] = "
                                       f"{g.buf}[{_at(loops, 1)}];"], inner_pragma=None)
        elif op == "take_dim":
            u, idx = args
            if not u.shape:
                self.body.append(f"/* {what}: a 0-d value is its own pick */")
                self.vals[target] = u
                return
            dim = node.attr("dim") % max(len(u.shape), 1)
            keep = node.attr("keepdim")
            dst = self.alloc(target, shape)
            full = u.shape
            kept = tuple(1 if d == dim else n for d, n in enumerate(full))
            ds = _reduced_strides(dst, full, (dim,), keep)
            xs = _reduced_strides(idx, full, (dim,), keep)
            loops = _loops(kept, [ds, u.strides, xs], "i{}")
            place = f"{idx.buf}[{_at(loops, 2)}]*{u.strides[dim]}"
            self.body.append(f"/* {what}: values at the indices */")
            self.body += _nest(loops, [f"{dst.buf}[{_at(loops, 0)}] = "
                                       f"{u.buf}[{_at(loops, 1, place)}];"], inner_pragma=None)
        elif op in ("matmul", "matmul_grad_a", "matmul_grad_b"):
            if op == "matmul":
                a, b = args
            elif op == "matmul_grad_a":      # g @ b^T
                g, _, b = args
                a, b = g, Val(b.buf, b.shape[::-1], b.strides[::-1], b.ctype)
            else:                             # a^T @ g
                g, a, _ = args
                a, b = Val(a.buf, a.shape[::-1], a.strides[::-1], a.ctype), g
            self.matmul(what, a, b, self.alloc(target, shape))
        else:  # pragma: no cover - _c_able admits only the ops above
            raise AssertionError(op)

    def reduce(self, what, kind, x, dims, target, shape):
        """sum / mean / amax / amin / argmax / argmin of x over dims into a new array."""
        dst = self.alloc(target, shape)
        full = x.shape
        ost = _kept_strides(full, dims)
        inner = max((d for d, n in enumerate(full) if n != 1), default=None)
        t, f = x.ctype, self.ftype
        self.body.append(f"/* {what} */")
        if kind in ("sum", "mean") and inner is not None and inner not in dims:
            # columns: the innermost dim is kept, so the inner loop adds whole rows (in the
            # array's type, as NumPy does along a non-contiguous axis)
            self.body += self.fill(dst, "0")
            loops = _loops(full, [ost, x.strides], "i{}")
            self.body += _nest(loops, [f"{dst.buf}[{_at(loops, 0)}] += "
                                       f"{x.buf}[{_at(loops, 1)}];"])
            if kind == "mean":
                count = self.lit(_size(full[d] for d in dims))
                self.body += [f"for (int64_t i0 = 0; i0 < {_size(shape)}; i0++) "
                              f"{dst.buf}[i0] = {dst.buf}[i0] / {count};"]
            return
        # rows: one accumulator per output element, the reduced dims innermost
        out_loops = _loops([1 if d in dims else n for d, n in enumerate(full)],
                           [ost, x.strides], "i{}")
        red_loops = _loops([n if d in dims else 1 for d, n in enumerate(full)],
                           [x.strides], "k{}")
        o = _at(out_loops, 0)
        base = _at(out_loops, 1)
        src = f"{x.buf}[{_at(red_loops, 0, '' if base == '0' else base)}]"
        if kind in ("sum", "mean"):
            read = src if t == "double" else f"(double){src}"
            count = _size(full[d] for d in dims)
            final = "acc" if kind == "sum" else f"acc / {count}.0"
            final = final if t == "double" else f"({t})({final})"
            body = ["double acc = 0.0;"]
            body += _nest(red_loops, [f"acc += {read};"], "SYMGRAD_SIMD_WITH(reduction(+:acc))")
            body.append(f"{dst.buf}[{o}] = {final};")
        else:
            big = "INFINITY" if kind in ("amin", "argmin") else "-INFINITY"
            cmp = "<" if kind in ("amin", "argmin") else ">"
            red = "min" if kind in ("amin", "argmin") else "max"
            body = [f"{t} best = {big};", "int seen_nan = 0;"]
            body += _nest(red_loops, [f"const {t} val = {src};",
                                      f"best = val {cmp} best ? val : best;",
                                      "seen_nan |= val != val;"],
                          f"SYMGRAD_SIMD_WITH(reduction({red}:best) reduction(|:seen_nan))")
            if kind in ("amax", "amin"):
                body.append(f"{dst.buf}[{o}] = seen_nan ? NAN : best;")
            else:
                # the first index holding the extreme (or the first NaN), as numpy.argmax
                (k, n, st), = red_loops or [("k0", 1, [0])]
                at = f"{x.buf}[{k}*{st[0]}{'' if base == '0' else ' + ' + base}]"
                body += ["int64_t at = 0;",
                         f"for (int64_t {k} = 0; {k} < {n}; {k}++) {{",
                         f"    const {t} val = {at};",
                         f"    if (seen_nan ? val != val : val == best) {{ at = {k}; break; }}",
                         "}", f"{dst.buf}[{o}] = at;"]
        self.body += _nest(out_loops, body, inner_pragma=None) if out_loops else \
            ["{"] + ["    " + b for b in body] + ["}"]

    def matmul(self, what, a, b, dst):
        """dst (M, N) = a (M, K) @ b (K, N), operands read through their strides."""
        (m, k), n = a.shape, b.shape[1]
        t = a.ctype
        A = lambda i, kk: f"{a.buf}[{_idx([(i, a.strides[0]), (kk, a.strides[1])])}]"  # noqa: E731
        B = lambda kk, j: f"{b.buf}[{_idx([(kk, b.strides[0]), (j, b.strides[1])])}]"  # noqa: E731
        self.body.append(f"/* {what}: ({m}, {k}) @ ({k}, {n}) */")
        if n >= 8 and b.strides[1] == 1:
            # rows of b scaled and added: the inner loop runs along contiguous rows
            row = f"{dst.buf}[{_idx([('i0', n), ('i1', 1)])}]"
            self.body += [
                f"for (int64_t i0 = 0; i0 < {m}; i0++) {{",
                "    SYMGRAD_SIMD",
                f"    for (int64_t i1 = 0; i1 < {n}; i1++) {row} = 0;",
                f"    for (int64_t k0 = 0; k0 < {k}; k0++) {{",
                f"        const {t} acc = {A('i0', 'k0')};",
                "        SYMGRAD_SIMD",
                f"        for (int64_t i1 = 0; i1 < {n}; i1++) {row} += acc*{B('k0', 'i1')};",
                "    }", "}"]
        else:
            # dot products of rows of a with columns of b
            self.body += [
                f"for (int64_t i0 = 0; i0 < {m}; i0++) {{",
                f"    for (int64_t i1 = 0; i1 < {n}; i1++) {{",
                f"        {t} acc = 0;",
                "        SYMGRAD_SIMD_WITH(reduction(+:acc))",
                f"        for (int64_t k0 = 0; k0 < {k}; k0++) acc += {A('i0', 'k0')}*{B('k0', 'i1')};",
                f"        {dst.buf}[{_idx([('i0', n), ('i1', 1)])}] = acc;",
                "    }", "}"]

    def context(self):
        seg = self.seg
        params = [f"const {self.vals[n].ctype if n in self.vals else self.ctype[self.dtypes[n]]} "
                  f"*restrict {_cname(n)}" for n in seg.inputs]
        params += [f"{self.ctype[self.dtypes[n]]} *restrict {_cname(n)}" for n in seg.outputs]
        head, scratch = [], 0
        if self.temps:
            offsets = []
            for cn, ctype, count in self.temps:
                offsets.append(scratch)
                scratch += -(-count * (4 if ctype == "float" else 8 if ctype in ("double", "int64_t")
                                       else 1) // 64) * 64
            params.insert(0, "char *restrict scratch")
            names = ", ".join(cn for cn, _, _ in self.temps)
            head.append(f"/* temporaries in the caller's {scratch} bytes of scratch: {names} */")
            for (cn, ctype, _), off in zip(self.temps, offsets):
                head.append(f"{ctype} *const {cn} = ({ctype} *)(scratch + {off});")
        if seg.leaves is not None:
            params.append(f"const int64_t {GENERIC[0]}")
        return {"name": seg.name, "params": ", ".join(params) or "void",
                "steps": ", ".join(s.target for s in seg.steps),
                "body": head + self.body, "scratch": scratch,
                "kernels": self.kernels}


# Interleaving: a fused loop whose element function is a chain of at least INTERLEAVE_DEPTH
# dependent math calls (libmvec calls are latency-bound: each waits for the previous) runs LANES
# elements per call, statement by statement, so the CPU overlaps independent calls. Measured on
# the 30-deep tanh/sin chain (float32, 1e5, AVX2): 1 lane 6.3 ms, 2 lanes 4.1 ms, 3 lanes 3.6 ms,
# 4 lanes 3.6 ms.
LANES = 3
INTERLEAVE_DEPTH = 6
INTERLEAVE_MIN_EXTENT = 16   # elements per lane below which the plain loop is kept
_CHEAP = (sympy.Abs, sympy.sign, sympy.Max, sympy.Min, sympy.Piecewise, sympy.floor,
          sympy.ceiling, sympy.Heaviside)


def _is_call(e):
    """Whether `e` is printed as a math call: any function but a select, abs, sign, floor or
    ceiling; or a non-integer power other than sqrt."""
    if isinstance(e, sympy.Function):
        return not isinstance(e, _CHEAP)
    return e.is_Pow and not e.exp.is_Integer and abs(e.exp) != sympy.S.Half


def _call_depth(statements):
    """The longest chain of dependent math calls through the statements of an element
    function."""
    depth = {}

    @functools.lru_cache(maxsize=None)
    def walk(e):     # memoized: a subexpression shared within a formula is walked once
        if e.is_Symbol:
            return depth.get(str(e), 0)
        return max((walk(a) for a in e.args), default=0) + _is_call(e)

    for s in statements:
        if s["ctype"]:
            depth[s["name"]] = walk(s["expr"])
    return max(depth.values(), default=0)


def _interleaved(statements, inputs, outputs, params, lanes, taken, printer):
    """The element function on `lanes` elements at once: its parameters and statements.

    Each math call gets its own statement (so one nested formula is several), and each
    statement is repeated for every lane with its variables suffixed: consecutive calls are
    independent, and the CPU runs them side by side.
    """
    taken = set(taken)
    flat = []
    for s in statements:
        if not s["ctype"]:
            flat.append(s)
            continue
        calls = []

        def split(e):
            if e.is_Atom:
                return e
            if _is_call(e) and printer.doprint(e).startswith("symgrad_"):
                args = e.args    # an inline function of a pattern (tanh(softplus(u)), ...)
            else:
                args = [split(a) for a in e.args]
            e = e.func(*args) if e.args else e
            if _is_call(e):
                name = f"{s['name']}_c{len(calls)}"
                while name in taken:
                    name += "_"
                taken.add(name)
                sym = sympy.Symbol(name, real=True)
                calls.append((sym, e))
                return sym
            return e

        expr = split(s["expr"])
        if calls and expr == calls[-1][0]:
            expr = calls.pop()[1]
        flat += [{"ctype": s["ctype"], "name": str(sym), "code": printer.doprint(e)}
                 for sym, e in calls]
        flat.append({"ctype": s["ctype"], "name": s["name"], "code": printer.doprint(expr)})
    local = [_cname(n) for n in inputs] + [f"out_{_cname(n)}" for n in outputs]
    local += [s["name"] for s in flat if s["ctype"]]
    taken |= set(local)
    base = "_l"
    while any(f"{v}{base}{k}" in taken for v in local for k in range(lanes)):
        base = "_" + base
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, local), key=len, reverse=True))
                      + r")\b(?!\s*\()")

    def on(text, k):
        return word.sub(lambda m: f"{m.group(1)}{base}{k}", text)

    return {"count": lanes,
            "params": ", ".join(on(p, k) for k in range(lanes) for p in params),
            "statements": [{"ctype": s["ctype"], "name": on(s["name"], k),
                            "code": on(s["code"], k)}
                           for s in flat for k in range(lanes)]}


def _idx(terms):
    out = []
    for name, stride in terms:
        if stride == 1:
            out.append(name)
        elif stride:
            out.append(f"{name}*{stride}")
    return " + ".join(out) or "0"


def _share_sigmoid_exps(exprs, taken):
    """One exp and one division for sigmoid(u) and sigmoid(-u) in one element function.

    swish's and gelu_tanh's derivatives hold both. With e = exp(-|u|) and s = 1/(1 + e):
    the sigmoid of the non-negative one of u, -u is s, the other's is e*s (selected on
    u >= 0). exp never overflows, so the small side keeps its subnormal values (and x*sigmoid(x)
    its normal ones: swish(-89) = -2e-37 in float) where 1/(1 + exp(89)) is 0; NaN stays NaN.
    e*s adds half an ulp to the two roundings of s. Returns the rewritten
    expressions and {index: [(symbol, expression)]}, the temporaries to define before the
    expression at that index.
    """
    first, signs = {}, {}
    for i, expr in enumerate(exprs):
        for f in sorted(expr.atoms(stable.sigmoid), key=sympy.default_sort_key):
            u = f.args[0]
            neg = u.could_extract_minus_sign()
            key = -u if neg else u
            first.setdefault(key, i)
            signs.setdefault(key, set()).add(neg)
    pairs = [k for k in sorted(first, key=sympy.default_sort_key) if len(signs[k]) == 2]
    if not pairs:
        return exprs, {}

    def fresh(stem):
        name = stem
        while name in taken:
            name += "_"
        taken.add(name)
        return sympy.Symbol(name, real=True)

    subs, at = {}, {}
    for n, key in enumerate(pairs):
        e, s = fresh(f"e{n}"), fresh(f"s{n}")
        up = sympy.GreaterThan(key, 0, evaluate=False)
        subs[stable.sigmoid(key)] = sympy.Piecewise((s, up), (e * s, True))
        subs[stable.sigmoid(-key)] = sympy.Piecewise((e * s, up), (s, True))
        at.setdefault(first[key], []).extend([(e, sympy.exp(-sympy.Abs(key))), (s, 1 / (1 + e))])
    return [x.xreplace(subs) for x in exprs], at


# the libm functions each inline math function calls
_INLINE_MATH_CALLS = {"tanh_softplus": ("exp",), "tanh": ("expm1",)}


def _inline_math_used(code, float_type):
    suffix = "f" if float_type == "float" else ""
    return {name for name in CpuPrinter.INLINE_MATH
            if re.search(rf"(?<![\w.])symgrad_{name}{suffix}\(", code)}


def inline_math_c(float_type, wanted):
    """C definitions of the inline math functions in `wanted` (names without suffix)."""
    if not wanted:
        return ""
    return render("c/vector_math.c.jinja", {"float_type": float_type,
                                            "wanted": sorted(wanted)}).rstrip("\n")


def _vector_math_decls(code, float_type):
    """`declare simd` prototypes for the libm functions the code calls that libmvec has."""
    suffix = "f" if float_type == "float" else ""
    decls = []
    for name, nargs in sorted(VECTOR_MATH.items()):
        fn = name + suffix
        if re.search(rf"(?<![\w.]){fn}\(", code):
            args = ", ".join([float_type] * nargs)
            # const (-fno-math-errno: no side effect): a call gcc must assume writes memory
            # stops the if-conversion of every select in the loop, and so its vectorization
            decls.append(f"SYMGRAD_CONST {float_type} {fn}({args});")
    return decls


# --------------------------------------------------------------------------- emit
def _c_routine(routine, title, printer, functions, known=None, interface=None, check=None,
               scan_routines=None):
    """The template context of one routine (its segments' C functions appended to
    `functions`). `known`: see _shapes_and_dtypes; `interface`: (signature, casts, returns,
    returns_text) where the routine's arguments are not its graph's inputs one for one;
    `scan_routines`: where an sg.scan whose body runs in C puts its loop (else NumPy's loop)."""
    items, shapes, dtypes = plan(routine, known)
    printed = numpy_lines(routine)
    lines, segs = [], []
    n_kernels = 0
    uses_numpy = False
    for kind, item in items:
        if kind == "numpy" and scan_routines is not None and _native_loop(
                routine.steps[item], routine, printer, lines, functions, scan_routines):
            continue   # sg.scan with a C body: one call runs every step (emit/c_scan.py)
        if kind == "numpy":
            target, code, comment = printed[item]
            lines.append({"text": f"{target} = {code}", "comment": comment})
            uses_numpy = True
            continue
        writer = _SegmentWriter(item, routine, shapes, dtypes, printer, n_kernels)
        ctx = writer.run()
        n_kernels += len(ctx["kernels"])
        segs.append(ctx)
        if item.leaves is not None:
            lines += _generic_call(item, dtypes)
            functions.append({"name": item.name, "n_args": len(item.inputs + item.outputs),
                              "sized": True})
            continue
        for name in item.inputs:
            t = "" if dtypes[name] == "float" else f", {NUMPY_TYPES[dtypes[name]]}"
            lines.append({"text": f"{name} = _dense({name}, {tuple(shapes[name])!r}{t})",
                          "comment": ""})
        for name in item.outputs:
            t = NUMPY_TYPES[dtypes[name]]
            lines.append({"text": f"{name} = numpy.empty({tuple(shapes[name])!r}, "
                                  f"dtype={t})", "comment": ""})
        pointers = [f"_ptr({n})" for n in item.inputs + item.outputs]
        if ctx["scratch"]:
            pointers.insert(0, f"_scratch({ctx['scratch']})")
        lines.append({"text": f"_{item.name}({', '.join(pointers)})",
                      "comment": f"C: {ctx['steps']}"})
        functions.append({"name": item.name, "n_args": len(pointers), "sized": False})
    if interface is None:
        signature, float_args, returns = routine_interface(
            routine, "numpy.asarray({}, dtype=dtype)", "numpy.asarray({})")
        casts = [(a, a not in grad_output_args(routine)) for a in float_args]
        returns_text = None
        check = shape_check(routine)
    else:
        signature, casts, returns, returns_text = interface   # and `check` as given
    return {
        "name": routine.name,
        "signature": ", ".join(signature),
        "call": ", ".join([a for a in signature if a != "*"][:len(routine.args)]
                          + [f"{p}={p}" for p in routine.params]),
        "doc_title": title,
        "formulas": untrusted(formula_lines(routine.graph)) if interface is None else [],
        "casts": casts,
        "shape_check": check,
        "lines": lines,
        "errstate": uses_numpy,
        "returns": returns,
        "returns_text": returns_text,
        "segments": segs,
        "ops_before": routine.ops_before,
        "ops_after": routine.ops_after,
    }


def _c_saving_routines(saving, printer):
    """forward_saving and backward_saved of the C target (see optimize.saving_plan), through
    the same plan as the NumPy target's: ([contexts], [C functions])."""
    f, b = saving.forward, saving.backward
    fshapes, fdtypes = _shapes_and_dtypes(f)
    saved = list(saving.saved)
    if any(fshapes.get(n) is None for n in saved):
        return None   # shape-generic: the loader would need the saved values' shapes
    n_grads = len(b.args) - len(saved) - len(f.args)
    inputs = b.graph.inputs           # grad outputs, then the forward's inputs
    known = {}
    for name, node in zip(b.args[:n_grads], inputs[:n_grads]):
        known[name] = (node.shape, node.dtype)
    for name in saved:
        known[name] = (fshapes[name], fdtypes[name])
    for name, node in zip(b.args[n_grads + len(saved):], inputs[n_grads:]):
        known[name] = (node.shape, node.dtype)

    def cast(name, node):
        if name is None:
            return "None"
        return f"numpy.asarray({name}, dtype=dtype)" if node.dtype == "float" else \
            f"numpy.asarray({name})"

    float_in = [a for a, n in zip(f.args, f.graph.inputs) if n.dtype == "float"]

    def read_by(routine):
        names = {r for r in routine.returns if r is not None}
        for step in routine.steps:
            names.update(_reads(step, routine))
        return names

    f_read, b_read = read_by(f), read_by(b)
    fsig = list(f.args) + (["*"] + list(f.params) if f.params else [])
    outs = [cast(n, node) for n, node in zip(f.returns[:saving.n_outputs], f.graph.outputs)]
    ftext = "((" + " ".join(f"{o}," for o in outs) + "), (" + \
        " ".join(f"{n}," for n in saved) + "))"
    grads = list(b.args[:n_grads])
    bsig = list(b.args) + (["*"] + list(b.params) if b.params else [])
    bouts = [cast(n, node) for n, node in zip(b.returns, b.graph.outputs)]
    functions = []
    fctx = _c_routine(f, "Forward, also returning the intermediate values that backward_saved "
                      f"reads instead of recomputing them: saved = ({', '.join(saved)},)",
                      printer, functions, interface=(fsig, [(a, True) for a in float_in
                                                            if a in f_read], outs, ftext),
                      check=shape_check(f))
    bctx = _c_routine(b, "Backward from saved values: backward_saved(*grad_outputs, *saved, "
                      "*inputs) equals backward(*grad_outputs, *inputs)", printer, functions,
                      known=known, interface=(bsig, [(a, False) for a in grads]
                                              + [(a, True) for a in float_in if a in b_read],
                                              bouts, None),
                      check=shape_check(f))   # the inputs, against the forward's nodes
    return [fctx, bctx], functions


def _generic_call(seg, dtypes):
    """The loader's lines that run a shape-generic segment: its shape (the broadcast of its
    leaves' shapes, known only now), its inputs broadcast to it in C order, its outputs."""
    shape = f"{seg.name}_shape"
    leaves = [f"numpy.shape({v})" for v in seg.leaves]
    inputs = [f"_dense({v}, {shape}" + ("" if dtypes[v] == "float" else
                                         f", {NUMPY_TYPES[dtypes[v]]}") + ")"
              for v in seg.inputs]
    types = [NUMPY_TYPES[dtypes[v]] for v in seg.outputs]
    one = "," if len(seg.outputs) == 1 else ""
    value = "numpy.broadcast_shapes(" + ", ".join(leaves) + ")" if len(leaves) > 1 else leaves[0]
    return [{"text": f"{shape} = {value}", "comment": "known when it runs (shape-generic)"},
            {"text": f"{', '.join(seg.outputs)}{one} = _call(_{seg.name}, {shape}, "
                     f"({', '.join(inputs)}{',' if len(inputs) == 1 else ''}), "
                     f"({', '.join(types)}{one}))",
             "comment": f"C: {', '.join(s.target for s in seg.steps)}"}]


def emit_c(program):
    """The files of the C target: (files {name: text}, name of the main file).

    The main file is the Python loader; beside it are the C functions and the NumPy module of
    the same program (the fallback where no C compiler works).
    """
    float_type = "float" if str(program.dtype) == "float32" else "double"
    printer = CpuPrinter(float_type)
    stem = re.sub(r"[^A-Za-z0-9_]", "_", _snake(program.name)).strip("_") or "module"
    c_name, py_name, np_name = f"{stem}_kernels.c", f"{stem}_grad_c.py", f"{stem}_grad.py"
    routines, functions, scan_routines = [], [], []
    for routine, title in ((program.forward, "Forward"),
                           (program.backward, "Backward: the vector-Jacobian product")):
        routines.append(_c_routine(routine, title, printer, functions, scan_routines=scan_routines))
    # a program whose loops run natively keeps one copy of each loop function: no saving pair
    if program.saving is not None and not scan_routines:
        try:
            saving = _c_saving_routines(program.saving, printer)
        except Exception:   # noqa: BLE001 - saving is an optimization: without it, recompute
            saving = None
        if saving is not None:
            routines += saving[0]
            functions += saving[1]
    code = "\n".join(s["code"] for r in scan_routines + routines for seg in r["segments"]
                     for k in seg["kernels"]
                     for s in k["statements"] + (k["lanes"]["statements"] if k["lanes"] else []))
    header = {
        "version": __version__,
        "name": untrusted(program.name),
        "source": untrusted(program.source),
        "options": untrusted(program.options),
        "constants": untrusted(_constants_text(program.constants)),
        "target": "c",
    }
    inline = _inline_math_used(code, float_type)
    suffix = "f" if float_type == "float" else ""
    calls = "".join(f" {fn}{suffix}(" for name in sorted(inline) for fn in _INLINE_MATH_CALLS[name])
    # lgamma, digamma, erfinv, ...: double-precision helpers (float ones round their result),
    # scalar code with loops (gcc leaves such a loop unvectorized); the libm functions they call
    # are double ones, declared as such
    special = specfun.c_definitions(code, "SYMGRAD_INLINE")
    decls = _vector_math_decls(code + calls, float_type)
    if special:
        decls += [d for d in _vector_math_decls(specfun.C_CALLS, "double") if d not in decls]
    inline_text = "\n".join(t for t in (inline_math_c(float_type, inline), special) if t)
    c_text = render("c/kernels.c.jinja", dict(
        header, float_type=float_type, routines=scan_routines + routines,
        minmax=minmax_c(float_type),
        vector_math=decls, inline_math=inline_text))
    body = "\n".join(line["text"] for r in routines for line in r["lines"])
    loops = scan_helpers(body)   # sg.scan's loop functions (symgrad/emit/scan.py)
    body = "\n".join([body] + loops)
    helpers = [STRUCTURAL_HELPERS[h] for h in required_helpers(body)]
    math_helpers = stable.required_numpy_helpers(body + "\n".join(helpers))
    helpers = [stable.NUMPY_HELPERS[h] for h in math_helpers] + helpers + loops
    if any(r["shape_check"] for r in routines):
        helpers.append(shape_check_helper(program, "c"))
    rewrites = list(dict.fromkeys(program.forward.rewrites + program.backward.rewrites))
    py_text = render("c/module.py.jinja", dict(
        header, routines=routines, functions=functions, helpers=helpers, rewrites=rewrites,
        global_names=", ".join([f"_{f['name']}" for f in functions] + ["_lib"]),
        dtype=f"numpy.{'float32' if float_type == 'float' else 'float64'}",
        c_name=c_name, np_name=np_name, flags=FLAGS, n_outputs=len(program.forward.returns),
        inputs=untrusted(list(program.forward.args))))
    files = {py_name: py_text, c_name: c_text, np_name: emit_numpy(program, fallback_of=py_name)}
    return files, py_name


def _native_loop(step, routine, printer, lines, functions, scan_routines) -> bool:
    """The loader lines of a scan step whose body runs in C (`c_scan.native_scan`): operands
    made dense, the packed result allocated, one call; False for any other step."""
    node = step.node
    if node is None or node.op != "scan" or any(a.shape is None for a in node.args):
        return False
    from .c_scan import native_scan

    native = native_scan(node, printer)
    if native is None:
        return False
    c_routine, fname, n_args, scratch, _, size = native
    if all(r["name"] != c_routine["name"] for r in scan_routines):
        scan_routines.append(c_routine)
        functions.append({"name": fname, "n_args": n_args, "sized": False})
    names = [routine.name_of(a) for a in node.args]
    for name, a in zip(names, node.args):
        t = "" if a.dtype == "float" else f", {NUMPY_TYPES[a.dtype]}"
        lines.append({"text": f"{name} = _dense({name}, {tuple(a.shape)!r}{t})", "comment": ""})
    lines.append({"text": f"{step.target} = numpy.empty(({size},), dtype=dtype)",
                  "comment": ""})
    pointers = ([f"_scratch({scratch})"] if scratch else []) + \
        [f"{n}.ctypes.data" for n in names] + [f"{step.target}.ctypes.data"]
    lines.append({"text": f"_{fname}({', '.join(pointers)})",
                  "comment": f"C: the loop of sg.scan ({node.attr('length')} steps)"})
    return True


# --------------------------------------------------------------------------- build and load
__all__ = ["emit_c", "load_c", "build", "BuildError", "plan", "compiler_and_flags",
           "ctypes"]
