"""The native CPU target: fused C loops for elementwise work, NumPy for everything else.

`emit_c(program)` turns each routine (forward, backward) into

- C kernels (`templates/c/kernels.c.jinja`): consecutive elementwise steps that share one output
  shape (CSE temporaries included) become ONE loop with several outputs. Each kernel is an
  inline element function (one statement per formula, typed locals) and a loop nest over the
  output shape; inputs of smaller shapes are read through strides (0 on broadcast dims), with a
  vectorized path when every operand is contiguous along the innermost dim.
- a Python loader (`templates/c/module.py.jinja`, imports only numpy and ctypes): structural
  steps (sum, matmul, reshape, ...) are printed exactly as the NumPy target prints them
  (`numpy_lines`), and elementwise groups become one kernel call each.
- the NumPy module of the same program, used when no C compiler works here.

`load_c(module)` compiles the C file once per (source, compiler, flags) into the disk cache
(`symgrad.cache.directory()/c/`), atomically, and binds the loader to it. A cache hit does not
run the compiler. Math calls vectorize through glibc's libmvec: each function is declared with
`#pragma omp declare simd notinbranch` and built with `-fopenmp-simd -lmvec`, without
`-ffast-math`, so NaN and inf keep their IEEE meaning.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass, field

import sympy

from .. import __version__
from ..ops import stable
from . import _constants_text, emit_numpy, numpy_lines, routine_interface
from .cprinter import CpuPrinter, minmax_c
from .helpers import STRUCTURAL_HELPERS, required_helpers
from .printers import formula_lines
from .render import render

C_TYPES = {"bool": "unsigned char", "int": "int64_t"}
NUMPY_TYPES = {"bool": "numpy.bool_", "int": "numpy.int64", "float": "dtype"}

# libm functions with a libmvec variant in glibc >= 2.35 (x86_64): (name, number of arguments).
# Declaring any other function `declare simd` would link against a vector symbol that is absent.
VECTOR_MATH = {
    name: 1 for name in (
        "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "cos", "cosh", "erf", "erfc",
        "exp", "exp10", "exp2", "expm1", "log", "log10", "log1p", "log2", "sin", "sinh", "tan",
        "tanh")
}
VECTOR_MATH.update({"pow": 2, "atan2": 2, "hypot": 2})

# Names a variable cannot take in C (keywords, and math.h names the kernels may call).
_C_RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool _Complex _Imaginary bool true false NAN INFINITY
fabs fabsf fmax fmaxf fmin fminf sqrt sqrtf copysign copysignf floor floorf ceil ceilf round
j0 j1 jn y0 y1 yn erf erff erfc erfcf gamma lgamma tgamma pow powf main
""".split()) | frozenset(VECTOR_MATH) | frozenset(n + "f" for n in VECTOR_MATH)


@dataclass
class Kernel:
    """One fused loop: the steps it computes, what it reads and what it writes."""

    name: str
    shape: tuple
    steps: list                    # Steps, in order
    inputs: list = field(default_factory=list)     # variable names read from arrays
    outputs: list = field(default_factory=list)    # variable names written to arrays


# --------------------------------------------------------------------------- planning
def _shapes_and_dtypes(routine):
    """Static shape and dtype ('float' | 'int' | 'bool') of every variable of a routine."""
    shapes, dtypes = {}, {}
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


def _fusable(step, shapes):
    """Elementwise steps with a static shape go to C; constants and broadcasts stay NumPy."""
    if shapes.get(step.target) is None:
        return False
    if step.node is None:
        return True
    node = step.node
    return (node.op == "elementwise" and bool(step.expr.free_symbols)
            and not node.attr("broadcast")
            and all(shapes.get(str(s)) is not None for s in step.expr.free_symbols))


def plan(routine):
    """The routine as items: ("numpy", index) for a step printed for NumPy, ("kernel", Kernel)."""
    shapes, dtypes = _shapes_and_dtypes(routine)
    items = []
    for i, step in enumerate(routine.steps):
        if not _fusable(step, shapes):
            items.append(("numpy", i))
            continue
        shape = tuple(shapes[step.target])
        # join the latest kernel of this shape when the NumPy steps since then do not define
        # anything this step reads (steps are pure, so moving it earlier is safe)
        reads = {str(s) for s in step.expr.free_symbols}
        home = None
        for kind, item in reversed(items):
            if kind == "kernel":
                if item.shape == shape:
                    home = item
                break
            if routine.steps[item].target in reads:
                break
        if home is not None:
            home.steps.append(step)
        else:
            kernel = Kernel(f"{routine.name}_k{sum(1 for k, _ in items if k == 'kernel')}",
                            shape, [step])
            items.append(("kernel", kernel))
    # which values each kernel reads from arrays and must write back to arrays
    reads_after: list[set] = []
    later: set = {r for r in routine.returns if r is not None}
    for kind, item in reversed(items):
        reads_after.append(set(later))
        steps = [routine.steps[item]] if kind == "numpy" else item.steps
        for step in steps:
            if step.node is not None and step.node.op != "elementwise":
                later.update(routine.name_of(a) for a in step.node.args
                             if id(a) in routine.names)
            elif step.expr is not None:
                later.update(str(s) for s in step.expr.free_symbols)
    reads_after.reverse()
    for (kind, kernel), after in zip(items, reads_after):
        if kind != "kernel":
            continue
        defined = []
        for step in kernel.steps:
            for s in sorted(step.expr.free_symbols, key=str):
                name = str(s)
                if name not in defined and name not in kernel.inputs:
                    kernel.inputs.append(name)
            defined.append(step.target)
        kernel.outputs = [t for t in defined if t in after]
    return items, shapes, dtypes


# --------------------------------------------------------------------------- C text
def _cname(name):
    return name + "_" if name in _C_RESERVED else name


def _kernel_c(kernel, routine, shapes, dtypes, printer):
    """Template context of one kernel: element function and loop nest."""
    ftype = printer.float_type
    ctype = {"float": ftype, **C_TYPES}
    rename = {}
    for step in kernel.steps:
        for s in step.expr.free_symbols:
            if _cname(str(s)) != str(s):
                rename[s] = sympy.Symbol(_cname(str(s)), **s.assumptions0)
    outputs = set(kernel.outputs)
    statements = []
    for step in kernel.steps:
        expr = step.expr.xreplace(rename) if rename else step.expr
        code = printer.doprint(expr)
        node = step.node
        comment = f"from {node.site}" if node is not None and node.site else ""
        name = _cname(step.target)
        t = ctype[dtypes[step.target]]
        statements.append({"ctype": t, "name": name, "code": code, "comment": comment})
        if step.target in outputs:
            statements.append({"ctype": None, "name": f"*out_{name}", "code": name,
                               "comment": ""})
    element_params = [f"const {ctype[dtypes[n]]} {_cname(n)}" for n in kernel.inputs]
    element_params += [f"{ctype[dtypes[n]]} *restrict out_{_cname(n)}" for n in kernel.outputs]

    # the loop nest: dims of size 1 are dropped (every operand is at index 0 there)
    shape = kernel.shape
    dims = [d for d, n in enumerate(shape) if n != 1]
    rank = len(shape)
    params, strided, dense_inner = [], [], []
    for name in kernel.inputs:
        cn = _cname(name)
        params.append(f"const {ctype[dtypes[name]]} *restrict {cn}")
        params += [f"int64_t {cn}_s{k}" for k in range(len(dims))]
        in_shape = (1,) * (rank - len(shapes[name])) + tuple(shapes[name])
        # per loop dim: does this operand move along it? (statically broadcast dims do not)
        moves = [in_shape[d] != 1 for d in dims]
        strided.append((cn, moves))
    params += [f"{ctype[dtypes[n]]} *restrict {_cname(n)}" for n in kernel.outputs]
    out_strides = []
    step_ = 1
    for d in reversed(dims):
        out_strides.append(step_)
        step_ *= shape[d]
    out_strides.reverse()
    index = [f"i{k}" for k in range(len(dims))]

    def operand(cn, moves, unit_inner):
        terms = []
        for k, move in enumerate(moves):
            if not move:
                continue
            if unit_inner and k == len(moves) - 1:
                terms.append(index[k])
            else:
                terms.append(f"{index[k]}*{cn}_s{k}")
        return f"{cn}[{' + '.join(terms) if terms else '0'}]"

    out_index = " + ".join(f"{i}*{s}" if s != 1 else i for i, s in zip(index, out_strides)) \
        or "0"

    def call(unit_inner):
        args = [operand(cn, moves, unit_inner) for cn, moves in strided]
        args += [f"&{_cname(n)}[o]" for n in kernel.outputs]
        return f"{kernel.name}_element({', '.join(args)});"

    lines = []
    total = 1
    for n in shape:
        total *= n
    threads = "#pragma omp parallel for schedule(static) num_threads(SYMGRAD_THREADS) " \
        f"if({total} >= SYMGRAD_PARALLEL_MIN)"
    for k in range(len(dims) - 1):
        if k == 0:
            lines += ["#if SYMGRAD_THREADS > 1", threads, "#endif"]
        lines.append("    " * k + f"for (int64_t i{k} = 0; i{k} < {shape[dims[k]]}; i{k}++) {{")
    inner = len(dims) - 1
    pad = "    " * max(inner, 0)
    if not dims:
        lines += ["const int64_t o = 0;", call(False)]
    else:
        movers = [f"{cn}_s{inner} == 1" for cn, moves in strided if moves[inner]]
        loop = f"for (int64_t i{inner} = 0; i{inner} < {shape[dims[inner]]}; i{inner}++) {{"
        body = [f"    const int64_t o = {out_index};"]
        simd = "SYMGRAD_SIMD"
        if inner == 0:
            simd_lines = ["#if SYMGRAD_THREADS > 1",
                          threads.replace("parallel for", "parallel for simd"), "#else", simd, "#endif"]
        else:
            simd_lines = [simd]
        if movers:
            lines.append(pad + f"if ({' && '.join(movers)}) {{  /* contiguous: vectorized */")
            lines += [pad + "    " + s if not s.startswith("#") else s for s in simd_lines]
            lines += [pad + "    " + loop] + [pad + "    " + b for b in body]
            lines += [pad + "        " + call(True), pad + "    }", pad + "} else {"]
            lines += [pad + "    " + loop] + [pad + "    " + b for b in body]
            lines += [pad + "        " + call(False), pad + "    }", pad + "}"]
        else:
            lines += [s if s.startswith("#") else pad + s for s in simd_lines]
            lines += [pad + loop] + [pad + b for b in body]
            lines += [pad + "    " + call(False), pad + "}"]
    for k in reversed(range(len(dims) - 1)):
        lines.append("    " * k + "}")
    return {
        "name": kernel.name,
        "shape": repr(tuple(shape)),
        "computes": ", ".join(s.target for s in kernel.steps),
        "element_params": ", ".join(element_params) or "void",
        "statements": statements,
        "params": ", ".join(params) or "void",
        "loop": lines,
        "dims": dims,
        "n_inputs": len(kernel.inputs),
    }


def _vector_math_decls(code, float_type):
    """`declare simd` prototypes for the libm functions the code calls that libmvec has."""
    suffix = "f" if float_type == "float" else ""
    decls = []
    for name, nargs in sorted(VECTOR_MATH.items()):
        fn = name + suffix
        if re.search(rf"(?<![\w.]){fn}\(", code):
            args = ", ".join([float_type] * nargs)
            decls.append(f"{float_type} {fn}({args});")
    return decls


# --------------------------------------------------------------------------- emit
def emit_c(program):
    """The files of the C target: (files {name: text}, name of the main file).

    The main file is the Python loader; beside it are the C kernels and the NumPy module of
    the same program (the fallback where no C compiler works).
    """
    from ..compiler import _snake

    float_type = "float" if str(program.dtype) == "float32" else "double"
    printer = CpuPrinter(float_type)
    stem = re.sub(r"[^A-Za-z0-9_]", "_", _snake(program.name)).strip("_") or "module"
    c_name, py_name, np_name = f"{stem}_kernels.c", f"{stem}_grad_c.py", f"{stem}_grad.py"
    routines, kernels = [], []
    for routine, title in ((program.forward, "Forward"),
                           (program.backward, "Backward: the vector-Jacobian product")):
        items, shapes, dtypes = plan(routine)
        printed = numpy_lines(routine)
        lines = []
        ks = []
        for kind, item in items:
            if kind == "numpy":
                target, code, comment = printed[item]
                lines.append({"kind": "numpy", "target": target, "code": code,
                              "comment": comment})
                continue
            ctx = _kernel_c(item, routine, shapes, dtypes, printer)
            ks.append(ctx)
            outs = ", ".join(item.outputs)
            lines.append({"kind": "kernel", "target": f"({outs},)" if item.outputs else "_",
                          "code": f"{item.name}({', '.join(item.inputs)})",
                          "comment": f"fused loop over {item.shape}: "
                                     f"{', '.join(s.target for s in item.steps)}"})
            kernels.append({
                "name": item.name,
                "shape": repr(tuple(item.shape)),
                "dims": repr(tuple(ctx["dims"])),
                "in_types": "(" + "".join(f"{NUMPY_TYPES[dtypes[n]]}, " for n in item.inputs)
                            + ")",
                "out_types": "(" + "".join(f"{NUMPY_TYPES[dtypes[n]]}, "
                                           for n in item.outputs) + ")",
            })
        formulas = formula_lines(routine.graph)
        ks_formula = formulas
        for ctx in ks:
            ctx["formulas"] = ks_formula
        signature, float_args, returns = routine_interface(
            routine, "numpy.asarray({}, dtype=dtype)", "numpy.asarray({})")
        routines.append({
            "name": routine.name,
            "signature": ", ".join(signature),
            "doc_title": title,
            "formulas": formulas,
            "casts": float_args,
            "lines": lines,
            "returns": returns,
            "kernels": ks,
            "ops_before": routine.ops_before,
            "ops_after": routine.ops_after,
        })
    all_kernels = [k for r in routines for k in r["kernels"]]
    code = "\n".join(s["code"] for k in all_kernels for s in k["statements"])
    header = {
        "version": __version__,
        "name": program.name,
        "source": program.source,
        "constants": _constants_text(program.constants),
        "target": "c",
    }
    c_text = render("c/kernels.c.jinja", dict(
        header, float_type=float_type, routines=routines, minmax=minmax_c(float_type),
        vector_math=_vector_math_decls(code, float_type)))
    body = "\n".join(line["code"] for r in routines for line in r["lines"])
    helpers = [STRUCTURAL_HELPERS[h] for h in required_helpers(body)]
    math_helpers = stable.required_numpy_helpers(body + "\n".join(helpers))
    helpers = [stable.NUMPY_HELPERS[h] for h in math_helpers] + helpers
    rewrites = list(dict.fromkeys(program.forward.rewrites + program.backward.rewrites))
    py_text = render("c/module.py.jinja", dict(
        header, routines=routines, kernels=kernels, helpers=helpers, rewrites=rewrites,
        dtype=f"numpy.{'float32' if float_type == 'float' else 'float64'}",
        c_name=c_name, n_outputs=len(program.forward.returns),
        inputs=list(program.forward.args)))
    files = {py_name: py_text, c_name: c_text, np_name: emit_numpy(program)}
    return files, py_name


# --------------------------------------------------------------------------- build and load
_WARNED: set = set()


class BuildError(RuntimeError):
    """The C kernels could not be compiled here (the message says why)."""


def num_threads() -> int:
    try:
        return max(1, int(os.environ.get("SYMGRAD_NUM_THREADS", "1")))
    except ValueError:
        return 1


def _march() -> str:
    """x86-64-v3 (AVX2 + FMA: 8 float lanes) where this CPU has it, else x86-64-v2.

    Never -march=native: the level is part of the flags, hence of the cache key, so a cached
    library moved to an older machine is rebuilt rather than run with illegal instructions.
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
            else:
                flags = set()
    except OSError:
        flags = set()
    v3 = {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"}
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return ""
    return "-march=x86-64-v3" if v3 <= flags else "-march=x86-64-v2"


def compiler_and_flags():
    """(compiler path, flags): CC (default cc), the flags, and the threads setting."""
    cc = os.environ.get("CC", "cc")
    path = shutil.which(cc)
    flags = ["-O3", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off",
             "-DSYMGRAD_OPENMP_SIMD",
             # gcc fuses sin(t) and cos(t) of one argument into a scalar sincos, which has no
             # libmvec variant and de-vectorizes the loop (30-deep tanh/sin chain: 6x slower);
             # as plain functions they keep their `omp declare simd` vector variants
             "-fno-builtin-sin", "-fno-builtin-cos", "-fno-builtin-sinf", "-fno-builtin-cosf"]
    march = _march()
    if march:
        flags.append(march)
    threads = num_threads()
    if threads > 1:
        flags += ["-fopenmp", f"-DSYMGRAD_THREADS={threads}"]
    else:
        flags += ["-fopenmp-simd"]
    return cc, path, flags


def _compiler_identity(path):
    """The compiler binary's identity without running it: real path, size, mtime."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def build(c_source: str, name: str) -> str:
    """Path of the shared library of `c_source`, compiled on the first call (disk-cached)."""
    from .. import cache

    cc, path, flags = compiler_and_flags()
    if path is None:
        raise BuildError(f"no C compiler: {cc!r} not found (set CC to a C compiler)")
    key = hashlib.sha256("\0".join([c_source, _compiler_identity(path), *flags,
                                    __version__]).encode()).hexdigest()[:32]
    folder = os.path.join(cache.directory(), "c")
    stem = re.sub(r"[^A-Za-z0-9_]", "_", os.path.splitext(name)[0])
    lib = os.path.join(folder, f"{stem}-{key}.so")
    if os.path.exists(lib):
        return lib
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        src = os.path.join(tmp, name)
        with open(src, "w", encoding="utf-8") as f:
            f.write(c_source)
        out = os.path.join(tmp, "lib.so")
        cmd = [path, *flags, src, "-o", out, "-lmvec", "-lm"]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            raise BuildError(f"{cc} could not run: {e}") from None
        if run.returncode != 0:
            first = (run.stderr or run.stdout).strip().splitlines()[:5]
            raise BuildError(f"{cc} failed ({' '.join(cmd)}): " + " | ".join(first))
        os.replace(out, lib)   # atomic: readers see no library or the whole one
    return lib


def load_c(module):
    """The runnable module of a C-target CompiledModule (NumPy fallback with one warning)."""
    from ..compiler import load_source

    files = module.files
    c_name = next(n for n in files if n.endswith(".c"))
    loader = load_source(files[module.main], f"<symgrad:{module.key or module.main}>")
    try:
        lib = build(files[c_name], c_name)
        loader.bind(lib)
        module.stats["library"] = lib
        return loader
    except (BuildError, OSError) as e:
        reason = str(e)
        if reason not in _WARNED:
            _WARNED.add(reason)
            warnings.warn(f"symgrad: target 'c' is unavailable, using the NumPy target "
                          f"instead: {reason}", RuntimeWarning, stacklevel=4)
        module.stats["fallback"] = reason
        np_name = next(n for n in files if n.endswith(".py") and n != module.main)
        return load_source(files[np_name], f"<symgrad:{module.key or np_name}>")


__all__ = ["emit_c", "load_c", "build", "BuildError", "plan", "compiler_and_flags",
           "ctypes"]
