"""The CUDA target: one fused kernel per elementwise region, structural ops through CuPy.

A routine (forward, or backward) is planned as a sequence of items, each either

- a **kernel**: consecutive-in-dependence elementwise steps that share one output shape, with
  the CSE temporaries they need, evaluated per element by one thread. Every value another item
  reads (or the routine returns) is written to memory; the rest stay in registers. A backward
  that is purely elementwise is therefore ONE launch computing every gradient; or
- a **line**: a structural step (reduction, matmul, movement), printed by the NumPy lowerings of
  `symgrad.ops.structural` with `numpy.` spelled `cupy.` (CuPy mirrors NumPy's API).

Files: `<name>_grad.cu` holds every kernel (a standalone translation unit: `nvcc -ptx` compiles
it, and it reads on its own, formulas in comments), `<name>_grad.py` is the loader that runs it
with CuPy. Without CuPy the loader still imports; the first call raises a RuntimeError.

Why `cupy.RawModule`/`RawKernel` and not `cupy.ElementwiseKernel`: an ElementwiseKernel's body is
a fragment that CuPy wraps in code of its own, so the `.cu` file would not be the program that
runs, nor compile by itself. With a raw kernel the generated file is the whole kernel: its
indexing (64-bit grid-stride loop; one specialised variant for C-contiguous operands, where a
full-shape operand is read at `i` and a broadcast one through compile-time strides, and one for
any strides) is visible and testable, and the per-element math is one device function that the
tests also compile for the host and check against the NumPy target.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy

from .._version import __version__
from ..cache import _snake
from ..errors import CompileError
from ..ops import specfun
from ..ops.structural import STRUCTURAL
from . import (grad_output_args, routine_interface, shape_check, shape_check_helper,
               shape_leaves, unread_args)
from .cprinter import CPrinter
from .helpers import STRUCTURAL_HELPERS, required_helpers
from .scan import scan_helpers
from .printers import formula_lines
from .render import render, untrusted
from ..native import load_cuda  # noqa: F401  (SymPy-free, for cache hits)

# dtype -> (storage type in memory, type of the per-element math)
FLOAT_TYPES = {
    "float32": ("float", "float"),
    "float64": ("double", "double"),
    "float16": ("__half", "float"),     # half storage, float math (loads and stores convert)
}
VALUE_TYPES = {"bool": "bool", "int": "long long"}   # cupy bool is 1 byte; int is int64

_C_RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while bool true false class new delete this template typename namespace
operator private public protected virtual friend using try catch throw half
""".split())


class CudaPrinter(CPrinter):
    """CUDA C expressions: device math has C99's names (expf, log1pf, erff, fmaxf, ...), so the
    shared `CPrinter` prints it unchanged; this subclass only marks where CUDA-only spellings
    would go and keeps the C target's printer the single source of the formulas."""

    def __init__(self, float_type="float", settings=None):
        super().__init__(float_type, settings)

    # CUDA is C++: fmax(double, int) resolves to a host-only template, not the device fmax;
    # an integer printed as a literal of the module's type picks the device overload
    def _print_Integer(self, expr):
        return self._literal(float(expr.p))


# --------------------------------------------------------------------------- the plan
@dataclass
class Kernel:
    """One fused launch: what it reads, what it writes, and the per-element code."""

    name: str
    shape: tuple | None                            # None: known at run time (generic trace)
    inputs: list = field(default_factory=list)     # (var, value ctype, storage ctype, shape)
    outputs: list = field(default_factory=list)    # (var, value ctype, storage ctype)
    body: list = field(default_factory=list)       # (ctype, var, C code, comment)
    steps: list = field(default_factory=list)      # var names of the graph values computed
    leaves: list = field(default_factory=list)     # generic: the values whose broadcast shape
                                                   # is the kernel's (inputs, structural results)

    @property
    def size(self):
        if self.shape is None:
            return None
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class Line:
    """One structural step, printed for CuPy."""

    target: str
    code: str
    comment: str


def _cupy(code: str) -> str:
    """NumPy-printed code as CuPy code: CuPy mirrors NumPy's names."""
    return re.sub(r"(?<![\w.])numpy\.", "cupy.", code)


def _c_name(name: str) -> str:
    return name + "_" if name in _C_RESERVED else name


def plan_routine(routine, dtype: str, prefix: str):
    """The routine as an ordered list of `Kernel`s and `Line`s (see the module docstring)."""
    from . import numpy_lines

    storage, math_t = FLOAT_TYPES[dtype]
    printer = CudaPrinter(math_t)
    temps = {s.target: s.expr for s in routine.steps if s.node is None}
    nodes = {routine.names[id(n)]: n for n in routine.graph.inputs if id(n) in routine.names}
    for s in routine.steps:
        if s.node is not None:
            nodes[s.target] = s.node
    structural_code = {t: (c, m) for t, c, m in numpy_lines(routine)}

    def refs(expr):
        return sorted(str(s) for s in expr.free_symbols)

    closure_memo: dict = {}

    def temp_closure(names):
        """Temps reachable from `names` (through temps), and the non-temp vars they read."""
        ts, vs = set(), set()
        stack = list(names)
        while stack:
            v = stack.pop()
            if v in temps:
                if v in ts:
                    continue
                ts.add(v)
                if v not in closure_memo:
                    closure_memo[v] = refs(temps[v])
                stack.extend(closure_memo[v])
            else:
                vs.add(v)
        return ts, vs

    # dependencies of every graph step (temps expanded) and its level: 1 + the levels of the
    # structural steps it waits for, so that steps of one level and shape may share a kernel;
    # in a shape-generic trace, steps of the same leaves (shape_leaves) share a shape
    deps, level, leaves = {}, {}, shape_leaves(routine)
    for s in routine.steps:
        if s.node is None:
            continue
        if s.node.op == "elementwise":
            _, vs = temp_closure(refs(s.expr))
            if s.node.attr("broadcast"):
                vs = vs | {routine.names[id(a)] for a in s.node.args if id(a) in routine.names}
            deps[s.target] = sorted(vs)
            level[s.target] = max((level.get(v, 0) for v in vs), default=0)
        else:
            vs = [routine.names[id(a)] for a in s.node.args if id(a) in routine.names]
            deps[s.target] = vs
            level[s.target] = 1 + max((level.get(v, 0) for v in vs), default=0)

    def shape_key(target):
        shape = nodes[target].shape
        return ("static", tuple(shape)) if shape is not None else ("leaves", leaves[target])

    groups: list[list] = []          # per level, in order: lists of step targets
    group_of: dict = {}
    order: list = []                 # ("line", target) or ("kernel", group index)
    for lv in sorted(set(level.values())):
        for s in routine.steps:
            if s.node is not None and s.node.op != "elementwise" and level[s.target] == lv:
                order.append(("line", s.target))
        first = len(groups)
        for s in routine.steps:
            if s.node is None or s.node.op != "elementwise" or level[s.target] != lv:
                continue
            latest = max((group_of[v] for v in deps[s.target] if v in group_of), default=-1)
            home = None
            for g in range(len(groups) - 1, max(first, latest) - 1, -1):
                if shape_key(groups[g][0]) == shape_key(s.target):
                    home = g
                    break
            if home is None:
                groups.append([])
                home = len(groups) - 1
                order.append(("kernel", home))
            groups[home].append(s.target)
            group_of[s.target] = home

    # which values leave their kernel: read by another item, or returned
    read_outside: set = {r for r in routine.returns if r is not None}
    for t, d in deps.items():
        for v in d:
            if v in group_of and group_of.get(t, -1) != group_of[v]:
                read_outside.add(v)

    items = []
    for kind, ref in order:
        if kind == "line":
            code, comment = structural_code[ref]
            items.append(Line(ref, _cupy(code), comment))
            continue
        members = groups[ref]
        shape = nodes[members[0]].shape
        kernel = Kernel(name=f"{prefix}_{len([i for i in items if isinstance(i, Kernel)])}",
                        shape=None if shape is None else tuple(shape), steps=list(members))
        if shape is None:
            kernel.leaves = sorted(leaves[members[0]], key=_input_order(routine))
        exprs = [next(s.expr for s in routine.steps if s.target == m) for m in members]
        ts, vs = temp_closure([str(x) for e in exprs for x in e.free_symbols])
        inside = set(members)
        for v in sorted(vs - inside, key=_input_order(routine)):
            kind_ = nodes[v].dtype
            value_t = math_t if kind_ == "float" else VALUE_TYPES[kind_]
            store_t = storage if kind_ == "float" else VALUE_TYPES[kind_]
            kernel.inputs.append((v, value_t, store_t,
                                  None if nodes[v].shape is None else tuple(nodes[v].shape)))
        rename = {}
        for e in list(exprs) + [temps[t] for t in ts]:
            for sym in e.free_symbols:
                if sym.name in _C_RESERVED:
                    rename[sym] = sympy.Symbol(_c_name(sym.name), **sym.assumptions0)
        code_of = {}
        # temps and steps in the routine's order: a temp may read a step of this kernel (a
        # binding of a large program, Graph.dag), so all temps first would read it undefined
        member_expr = dict(zip(members, exprs))
        inside_read = any(v in inside for t in ts for v in closure_memo.get(t, ()))
        ordered = ([s for s in routine.steps if s.node is None]
                   + [s for s in routine.steps if s.node is not None]) if not inside_read \
            else routine.steps
        for step in ordered:
            t = step.target
            if step.node is None:
                if t in ts:
                    e = temps[t].xreplace(rename) if rename else temps[t]
                    ctype = "bool" if isinstance(e, sympy.logic.boolalg.Boolean) else math_t
                    kernel.body.append((ctype, t, printer.doprint(e), ""))
                continue
            if t not in member_expr:
                continue
            m, e = t, member_expr[t]
            node = nodes[m]
            e = e.xreplace(rename) if rename else e
            ctype = math_t if node.dtype == "float" else VALUE_TYPES[node.dtype]
            comment = untrusted(f"from {node.site}") if node.site else ""
            kernel.body.append((ctype, _c_name(m), printer.doprint(e), comment))
            code_of[m] = e
            if m in read_outside:
                store_t = storage if node.dtype == "float" else VALUE_TYPES[node.dtype]
                kernel.outputs.append((m, ctype, store_t))
        items.append(kernel)
    return items


def _input_order(routine):
    position = {a: i for i, a in enumerate(routine.args)}
    return lambda v: (position.get(v, len(position)), v)


def _strides(shape):
    """C-contiguous element strides of `shape`."""
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _index_lines(shape, used):
    """C statements computing the coordinates sg_c<d> (d in `used`) of flat index sg_i."""
    if not used:
        return []
    lowest = min(used)
    lines = ["long long sg_r = sg_i;"]
    for d in range(len(shape) - 1, lowest - 1, -1):
        if d in used:
            value = f"sg_r % {shape[d]}LL" if d > 0 else "sg_r"
            lines.append(f"const long long sg_c{d} = {value};")
        if d > lowest:
            lines.append(f"sg_r /= {shape[d]}LL;")
    return lines


def _offsets(kernel):
    """Per input: its offset expression in the contiguous variant ('sg_i' when it has the
    kernel's shape), and the coordinates that those offsets read."""
    if kernel.shape is None:   # generic: the loader hands every operand in at full shape
        return ["sg_i"] * len(kernel.inputs), set()
    nd = len(kernel.shape)
    offs, used = [], set()
    for _, _, _, shape in kernel.inputs:
        if tuple(shape) == kernel.shape:
            offs.append("sg_i")
            continue
        lead = nd - len(shape)
        terms = []
        for d, (n, st) in enumerate(zip(shape, _strides(shape))):
            if n != 1:
                terms.append(f"sg_c{lead + d}*{st}LL" if st != 1 else f"sg_c{lead + d}")
                used.add(lead + d)
        offs.append(" + ".join(terms) if terms else "0")
    return offs, used


# 16-byte vector types of the storage types a `<kernel>_vec` variant loads and stores
_VECTORS = {"float": ("float4", ("x", "y", "z", "w")), "double": ("double2", ("x", "y"))}


def _vector(kernel, offs):
    """(vector type, lanes) when every operand of `kernel` is read at the kernel's own shape
    (no broadcast offsets) and inputs and outputs share one float storage type that is also
    their math type (no half storage): its `_vec` variant moves 16 bytes a load. Else None."""
    types = {(vt, st) for _, vt, st, _ in kernel.inputs} | {(vt, st) for _, vt, st in kernel.outputs}
    if not kernel.inputs or any(o != "sg_i" for o in offs) or len(types) != 1:
        return None
    vt, st = next(iter(types))
    return _VECTORS.get(st) if vt == st else None


def _kernel_context(kernel):
    offs, used = _offsets(kernel)
    generic = kernel.shape is None
    nd = 0 if generic else len(kernel.shape)
    vec = _vector(kernel, offs)
    return {
        "vec": None if vec is None else {"type": vec[0], "lanes": vec[1], "width": len(vec[1])},
        "name": kernel.name,
        "shape": kernel.shape,
        "size": kernel.size,
        "generic": generic,
        "leaves": kernel.leaves,
        "ndim": nd,
        "dims": list(range(nd)),
        "inputs": [{"var": _c_name(v), "name": v, "value_t": vt, "store_t": st, "shape": sh,
                    "offset": off, "arg": f"sg_in{k}"}
                   for k, ((v, vt, st, sh), off) in enumerate(zip(kernel.inputs, offs))],
        "outputs": [{"var": _c_name(v), "name": v, "value_t": vt, "store_t": st,
                     "arg": f"sg_out{k}"} for k, (v, vt, st) in enumerate(kernel.outputs)],
        "body": kernel.body,
        "index_contiguous": _index_lines(kernel.shape, used),   # none read when generic
        # every coordinate, read by the strided offsets of the inputs (a kernel without
        # inputs, a fill or an iota of its own index, reads none)
        "index_strided": [] if generic or not kernel.inputs
        else _index_lines(kernel.shape, set(range(nd))),
    }


def _routine_context(routine, items, doc_title, dtype):
    kernels = [_kernel_context(i) for i in items if isinstance(i, Kernel)]
    by_name = {k["name"]: k for k in kernels}
    lines = []
    for item in items:
        if isinstance(item, Line):
            lines.append({"kind": "line", "target": item.target, "code": item.code,
                          "comment": item.comment})
        else:
            lines.append({"kind": "kernel", "kernel": by_name[item.name]})
    # CuPy arrays come back as they are: the kernels already wrote the module's dtype
    signature, float_args, returns = routine_interface(routine, "{}", "{}")
    return {
        "name": routine.name,
        "signature": ", ".join(signature),
        "args": [a for a in routine.args if a not in unread_args(routine)],
        "float_args": float_args,
        "checked_args": [a for a in float_args if a not in grad_output_args(routine)],
        "shape_check": shape_check(routine),
        "doc_title": doc_title,
        "formulas": untrusted(formula_lines(routine.graph)),
        "kernels": kernels,
        "lines": lines,
        "returns": returns,
        "ops_before": routine.ops_before,
        "ops_after": routine.ops_after,
        "n_launches": len(kernels),
    }


def program_context(program):
    """Everything the CUDA templates read, decided here (STYLE rule 5)."""
    dtype = program.dtype or "float32"
    if dtype not in FLOAT_TYPES:
        raise CompileError(f"the CUDA target supports {', '.join(FLOAT_TYPES)}, not {dtype}")
    storage, math_t = FLOAT_TYPES[dtype]
    base = f"{_snake(program.name)}_grad"
    fwd = _routine_context(program.forward, plan_routine(program.forward, dtype, "forward"),
                           "Forward", dtype)
    bwd = _routine_context(program.backward, plan_routine(program.backward, dtype, "backward"),
                           "Backward: the vector-Jacobian product", dtype)
    kernel_code = "\n".join(code for r in (fwd, bwd) for k in r["kernels"]
                            for _, _, code, _ in k["body"])
    body = "\n".join(l["code"] for r in (fwd, bwd) for l in r["lines"] if l["kind"] == "line")
    loops = scan_helpers(body)   # sg.scan's loops: CuPy calls per step (symgrad/emit/scan.py)
    body = "\n".join([body] + loops)
    helpers = [_cupy(STRUCTURAL_HELPERS[h]) for h in required_helpers(body)]
    if loops:   # a loop body's elementwise statements call the math helpers (_sigmoid, ...)
        from ..ops import stable

        math = stable.required_numpy_helpers("\n".join(loops + helpers))
        helpers = [_cupy(stable.NUMPY_HELPERS[h]) for h in math] + helpers
    helpers += [_cupy(text) for text in loops]
    if fwd["shape_check"] or bwd["shape_check"]:
        helpers.append(shape_check_helper(program, "cuda"))
    rewrites = list(dict.fromkeys(program.forward.rewrites + program.backward.rewrites))
    constants = (", ".join(f"{k}={v!r}" for k, v in program.constants)
                 if program.constants else "none")
    return {
        "version": __version__,
        "name": untrusted(program.name),
        "source": untrusted(program.source),
        "options": untrusted(program.options),
        "constants": untrusted(constants),
        "target": "cuda",
        "dtype": dtype,
        "storage_t": storage,
        "math_t": math_t,
        "half": storage == "__half",
        "cu_file": f"{base}.cu",
        "py_file": f"{base}.py",
        "forward": fwd,
        "backward": bwd,
        "routines": [fwd, bwd],
        "helpers": helpers,
        # device functions of the special functions the kernels call (lgamma, digamma, ...)
        "math_helpers": specfun.c_definitions(kernel_code, "SG_DEVICE"),
        "generic": any(k["generic"] for r in (fwd, bwd) for k in r["kernels"]),
        "rewrites": rewrites,
        "inputs": untrusted(list(program.forward.args)),
        "n_outputs": len(program.forward.returns),
    }


def emit_cuda(program):
    """(files, main file name): the `.cu` kernels and the CuPy loader of a program."""
    ctx = program_context(program)
    files = {
        ctx["py_file"]: render("cuda/module.py.jinja", ctx),
        ctx["cu_file"]: render("cuda/kernel.cu.jinja", ctx),
    }
    return files, ctx["py_file"]


def host_check_source(program) -> str:
    """C source that runs every kernel's per-element function on the host (for tests): the
    same device-function text as the `.cu` file, behind `host_<kernel>(n, inputs..., outputs...)`
    loops over pre-broadcast contiguous arrays."""
    ctx = program_context(program)
    if ctx["half"]:
        raise CompileError("float16 kernels have no host check (C has no half type)")
    return render("cuda/host_check.c.jinja", ctx)
