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

The target's rooms: `c_loops.py` (type and reserved names, the libmvec list, strides and loop
nests), `c_plan.py` (`plan`: which steps run in C, as segments), `c_segment.py` (a segment as
a C function, interleaved math calls), `c_scan.py` (sg.scan's native loops); this file emits
the loader's lines and the files (`emit_c`), and re-exports every name moved out of it.
"""
from __future__ import annotations

import ctypes
import re

import numpy

from .._version import __version__
from ..cache import _snake
from ..ops import specfun, stable
from . import (_constants_text, emit_numpy, grad_output_args, numpy_lines, routine_interface,
               shape_check, shape_check_helper)
from .c_scan import native_scan
from .cprinter import CpuPrinter, minmax_c
from .helpers import STRUCTURAL_HELPERS, required_helpers
from .printers import formula_lines
from .render import render, untrusted
from .scan import scan_helpers
from ..native import FLAGS, BuildError, build, compiler_and_flags, load_c  # noqa: F401  (API)
# the target's rooms (docs/contributing.md): every name moved out of this file is importable
# from it, as before
from .c_loops import (C_TYPES, GENERIC, MATMUL_C_MAX, NUMPY_TYPES, VECTOR_MATH,  # noqa: F401
                      _C_RESERVED, _INTERNAL, _at, _broadcast_strides, _cname, _contiguous,
                      _is_contiguous, _kept_strides, _loops, _nest, _reduced_strides, _size)
from .c_plan import (Segment, _C_STRUCTURAL, _REDUCTIONS, _basic_view,  # noqa: F401
                     _broadcast, _c_able, _dims, _dtype_of, _elementwise, _generic_able,
                     _generic_groups, _matmul_sizes, _plan_generic, _reads,
                     _shapes_and_dtypes, _uses, plan)
from .c_segment import (INTERLEAVE_DEPTH, INTERLEAVE_MIN_EXTENT, LANES, Val,  # noqa: F401
                        _CHEAP, _SegmentWriter, _call_depth, _idx, _interleaved, _is_call,
                        _share_sigmoid_exps)


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
    trusted = (_trusted(routine, lines, float_args, returns)
               if interface is None and check is not None else None)
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
        "trusted": trusted,
    }


def _trusted(routine, lines, float_args, returns):
    """The template context of a static-shape routine's twin `_<name>_trusted`, which the
    runtime calls instead of it: the same lines without what arrays of the module's dtype, of
    the shapes it was generated for and C-contiguous need not (the shape check, the casts,
    the `_dense` of those arguments, numpy.asarray of the outputs the C functions wrote),
    behind a guard that hands any other argument to the routine itself (equal results
    wherever the guard passes). {"guard": its terms, "lines", "returns"}, or None."""
    shapes = {}
    for a, node in zip(routine.args, routine.graph.inputs):
        if isinstance(node.shape, tuple):
            shapes[a] = tuple(int(k) for k in node.shape)
    if any(a not in shapes for a in float_args):
        return None
    drop = {f"{a} = _dense({a}, {shapes[a]!r})" for a in float_args}
    kept = [line for line in lines if line["text"] not in drop]
    defined = {}
    for line in kept:
        head, sep, _ = line["text"].partition(" = ")
        for t in head.split(", ") if sep else ():
            defined.setdefault(t.rstrip(","), []).append(line["text"])
    bare = []
    for name, node, ret in zip(routine.returns, routine.graph.outputs, returns):
        made = defined.get(name, ())
        if (name is not None and node.dtype == "float" and name not in routine.args
                and len(made) == 1 and made[0].startswith(f"{name} = numpy.empty(")
                and made[0].endswith(", dtype=dtype)")):
            bare.append(name)
        else:
            bare.append(ret)
    guard = ["_lib is None"]
    for a in float_args:
        guard += [f"type({a}) is not numpy.ndarray or {a}.dtype is not _DTYPE",
                  f"{a}.shape != {shapes[a]!r} or not {a}.flags.c_contiguous"]
    return {"guard": guard, "lines": kept, "returns": bare}


def _c_saving_routines(saving, printer):
    """forward_saving and backward_saved of the C target (see _saving_plan.saving_plan), through
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
    stem = _snake(program.name)
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
