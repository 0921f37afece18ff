"""compile(): the pipeline in order — trace, differentiate, optimize, emit, load — with caches.

    graph    = trace(fn, *examples)              # stage 1: SymPy expression DAG
    vjp      = differentiate(graph)              # stage 2: reverse mode, again a Graph
    program  = optimize(graph), optimize(vjp)    # stage 3: stabilize + CSE
    files    = emit(program, target)             # stage 4: Jinja templates
    module   = load(files)                       # stage 5: run

A compiled module is cached in memory and on disk, keyed by what determines its text: the
forward's code and what it reads, transitively (not the bytes of its whole file: see
_source_identity), its name, the input signature (shapes and dtypes), the constants, the
target, the dtype, the derivative order and the symgrad version. A cache hit does no
symbolic work and does not import SymPy. The keys (`signature_key`, the forward's source
identity, `watch_list` and `stale`) are `symgrad/_compile_keys.py`; this file re-exports them.
"""
from __future__ import annotations

import gc
import os
import shlex
import sys
import time

import numpy

from . import _profiling, cache
from ._version import __version__
from .cache import _snake  # noqa: F401  (moved to cache.py; cli/ and tests import it from here)
from .native import load_source  # noqa: F401  (moved to native.py; tests import it from here)
from .errors import CompileError
from ._builtin_graphs import builtin_graph
# the cache keys (docs/contributing.md): every name moved out of this file is importable from
# it, as before
from ._compile_keys import (CAPTURED_CONTENT_BYTES, _BY_OBJECT, _MISSING,  # noqa: F401
                            _Unstable, _array_key, _captured, _cells,
                            _class_parts, _code_text, _dependencies, _dependency, _disk_ok,
                            _dtype_name, _global_names, _hash, _is_array, _object_cache,
                            _pseudo_file, _shown_path, _signature_text, _simple,
                            _source_identity, _user_file, _value_key, _value_text, _watched,
                            compiler_fingerprint, signature_key, stale, watch_list)

_MEMORY: dict = {}
TARGETS = ("numpy", "c", "cuda", "torch", "jax")


class CompiledModule:
    """A generated module: `forward`, `backward`, its `source`, `write()`, `stats`.

    `forward(*inputs)` returns one array (or a tuple for several outputs); `backward(
    *grad_outputs, *inputs)` returns a tuple of gradients aligned with the inputs.
    """

    def __init__(self, files, main, meta, target, key=None, graph=None, retrace=None):
        self.files = dict(files)
        self.main = main
        self.meta = dict(meta)
        self.target = target
        self.key = key
        self._graph = graph
        self._retrace = retrace
        self._grads = {}   # gradient modules: None (all gradients) or a subset -> module
        self.stats = dict(meta.get("stats", {}))
        rec = _profiling.begin("compile.load", "compile", None, {"target": target}) \
            if _profiling.ON[0] else None
        t0 = time.perf_counter()
        try:
            self.raw = _load(self)
        finally:
            _profiling.end(rec)
        self.stats["load_s"] = time.perf_counter() - t0
        self.n_outputs = int(meta["n_outputs"])
        self.returns_tuple = bool(meta.get("returns_tuple", self.n_outputs != 1))
        self.differentiable_outputs = tuple(meta["differentiable_outputs"])
        self.input_names = tuple(meta["inputs"])
        # per gradient backward returns, per grad output, the indices of the backward
        # arguments its term in that grad output depends on (Graph.dependencies); None:
        # unknown (a cache entry without it)
        depends = meta.get("backward_depends")
        self.backward_depends = None if depends is None else tuple(
            None if d is None else tuple(None if t is None else tuple(t) for t in d)
            for d in depends)
        self.output_names = tuple(meta["outputs"])
        # per output, the indices of the inputs its value depends on; None: unknown
        depends = meta.get("output_depends")
        self.output_depends = None if depends is None else tuple(
            None if d is None else tuple(d) for d in depends)
        # per output, torch's dtype name for inputs of the dtype names input_dtypes; None:
        # unknown (autograd.function._output_casts)
        dtypes = meta.get("output_dtypes")
        self.output_dtypes = None if dtypes is None else tuple(dtypes)
        self.input_dtypes = None if dtypes is None else tuple(meta.get("input_dtypes") or ())
        # arrays the forward captured: the last inputs; where the runtime finds each one
        # (trace.locate_captured), and the trace-time arrays (None after a disk hit)
        self.captured = tuple(None if w is None else tuple(w)
                              for w in meta.get("captured", ()))
        self.captured_values = tuple(v for _, v in graph.captured) \
            if graph is not None and graph.captured else (None,) * len(self.captured)
        self._forward_fn = None   # the forward the captured arrays are read from

    def captured_arrays(self, forward=None):
        """The captured arrays as they are now (read from `forward`'s closure / globals /
        defaults where the trace found them there)."""
        from .trace import resolve_captured

        forward = forward if forward is not None else self._forward_fn
        out = []
        for where, value in zip(self.captured, self.captured_values):
            a = resolve_captured(forward, where, value) if forward is not None else value
            if a is None:
                raise RuntimeError(f"{self.meta.get('name')}: captured array {where} cannot "
                                   "be found")
            out.append(numpy.asarray(getattr(a, "_data", a)))
        return out

    # ---- running
    def forward(self, *inputs, **params):
        if self.captured and len(inputs) == len(self.input_names) - len(self.captured):
            inputs = (*inputs, *self.captured_arrays())
        out = self.raw.forward(*inputs, **params)
        return out if self.returns_tuple else out[0]

    def backward(self, *args, **params):
        k = len(self.captured)
        if k and len(args) == self.n_outputs + len(self.input_names) - k:
            return self.raw.backward(*args, *self.captured_arrays(), **params)[:-k]
        return self.raw.backward(*args, **params)

    # ---- reading
    @property
    def source(self) -> str:
        return self.files[self.main]

    def write(self, path):
        """Write the module (and its companion files, e.g. the .cu kernel) next to `path`."""
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        written = []
        for name, text in self.files.items():
            target = path if name == self.main else os.path.join(folder, name)
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
            written.append(target)
        return written

    @property
    def graph(self):
        """The traced Graph (re-traced on demand when this module came from the disk cache)."""
        if self._graph is None:
            if self._retrace is None:
                raise RuntimeError("this module was loaded without its graph")
            self._graph = self._retrace()
        return self._graph

    def grad_module(self, needed=None) -> "CompiledModule":
        """The module whose forward is this module's backward (second order, and so on).

        `needed`: per input, whether its gradient is wanted (None: all). A module for a
        subset leaves the others out (absent outputs), as torch computes only the gradients
        it needs: its own backward then has no terms in their adjoints, which would be zeros
        times values that may not be finite (pow's log(a) for a constant exponent)."""
        if needed is not None and self.backward_depends is not None:
            # an absent gradient (of a bool input) is left out by every module
            needed = tuple(n or d is None for n, d in zip(needed, self.backward_depends))
        subset = None if needed is None or all(needed) else \
            "".join("1" if n else "0" for n in needed)
        hit = self._grads.get(subset)
        if hit is not None:
            return hit
        key = None if self.key is None else (
            _hash(self.key, "grad") if subset is None else _hash(self.key, "grad", subset))
        parent = self

        def build():
            from dataclasses import replace

            from .differentiate import differentiate

            vjp = differentiate(parent.graph)
            if subset is None:
                return vjp
            return replace(vjp, outputs=tuple(o if keep == "1" else None
                                              for o, keep in zip(vjp.outputs, subset)))

        hit = _cached(key, self.target, retrace=build)
        if hit is None:
            hit = compile_graph(build, self.target, self.meta.get("dtype"), key, retrace=build)
        self._grads[subset] = hit
        return hit

    def jvp_module(self, which=None) -> "CompiledModule":
        """The module whose forward is the Jacobian-vector product (forward-mode AD).

        It is the transpose of the backward: the gradient module of `grad_module(which)` that
        computes only the gradients of its grad outputs, d<t, J^T g>/dg = J t. So the symbolic
        directional derivative comes out of the same differentiate, stabilize, CSE and emit as
        every module, for every target, and its own backward (a tangent that requires grad)
        too. `which`: per input, whether it has a tangent (None: all). Its
        `forward(*tangents, *grad_outputs, *inputs, **params)` returns the output tangents
        (then a None per input); a tangent not in `which` may be None, and the grad outputs
        only give shapes (the result does not depend on their values: pass zeros)."""
        n_in = len(self.input_names)
        return self.grad_module(which).grad_module(
            (True,) * self.n_outputs + (False,) * n_in)

    def formulas(self) -> str:
        return self.meta.get("formulas", "")

    def __repr__(self):
        return (f"<symgrad.CompiledModule {self.meta.get('name')} target={self.target} "
                f"inputs={self.input_names} outputs={self.n_outputs}>")

    def _repr_markdown_(self):
        return (f"**{self.meta.get('name')}** (symgrad, target `{self.target}`)\n\n"
                f"```\n{self.meta.get('formulas', '')}\n```\n")

    def _repr_latex_(self):
        latex = self.meta.get("latex")
        return f"$${latex}$$" if latex else None


class AnyFloatModule(CompiledModule):
    """A C or CUDA module compiled without a chosen dtype: the code of those targets is per
    dtype, so a call whose inputs are float64 (or float32) runs the module of that dtype,
    compiled on first use and cached, as the NumPy target computes in its inputs' dtype.
    Everything else (`source`, `write`, `stats`, ...) is the default dtype's module."""

    def __init__(self, module, variant):
        self.__dict__.update(module.__dict__)
        self._by_dtype = {module.meta["dtype"]: module}
        self._variant = variant   # dtype name -> CompiledModule

    def _for(self, inputs) -> CompiledModule:
        floats = [a.dtype for a in inputs if getattr(getattr(a, "dtype", None), "kind", "") == "f"]
        name = numpy.result_type(*floats).name if floats else None
        if name not in ("float32", "float64") or name == self.meta["dtype"]:
            return self._by_dtype[self.meta["dtype"]]   # refuses other dtypes by name
        if name not in self._by_dtype:
            self._by_dtype[name] = self._variant(name)
        return self._by_dtype[name]

    def forward(self, *inputs, **params):
        return self._for(inputs).forward(*inputs, **params)

    def backward(self, *args, **params):
        # backward(*grad_outputs, *inputs): the inputs decide, as the grad outputs are cast
        return self._for(args[len(args) - len(self.input_names):]).backward(*args, **params)


# --------------------------------------------------------------------------- public entry
def compile(fn, *example_inputs, target="numpy", dtype=None, check_finite=False, cache_ok=True,
            **kwargs) -> CompiledModule:
    """Compile a forward into a module implementing forward and backward.

    Args:
        fn: a `Function` subclass with `forward(ctx, ...)`, or a plain function of tensors.
        *example_inputs: example arrays (their shapes and dtypes specialise the module) and
            constants for non-tensor arguments. Without tensor examples the module is
            shape-generic.
        target: "numpy", "c" (fused native loops), "cuda", "torch" or "jax" (the same steps as
            torch / jax.numpy operations; see `symgrad.to_torch` and `symgrad.to_jax`).
        dtype: "float32" or "float64" for the C and CUDA targets (default: the examples').
        check_finite: evaluate the backward at extreme points and raise if it goes
            non-finite where the true derivative is finite.

    Returns:
        A `CompiledModule`.
    """
    if _profiling.ON[0]:   # one event per compile, its stages inside, args: the cache's answer
        return _profiled_compile(fn, example_inputs, target, dtype, check_finite, cache_ok,
                                 kwargs)
    return _compile(fn, example_inputs, target, dtype, check_finite, cache_ok, kwargs)


_COUNTS = {"miss": 0, "disk": 0}   # modules built / loaded from disk: the profiler's cache answer


def _profiled_compile(fn, example_inputs, target, dtype, check_finite, cache_ok, kwargs):
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    rec = _profiling.begin(f"compile: {name}", "compile", _profiling.shapes_of(example_inputs),
                           {"target": target})
    before = dict(_COUNTS)
    try:
        module = _compile(fn, example_inputs, target, dtype, check_finite, cache_ok, kwargs)
    finally:
        rec.args["cache"] = ("miss" if _COUNTS["miss"] != before["miss"] else
                             "disk" if _COUNTS["disk"] != before["disk"] else "memory")
        _profiling.end(rec)
    return module


def _compile(fn, example_inputs, target, dtype, check_finite, cache_ok, kwargs):
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    any_float = dtype is None and target in ("c", "cuda") and not any(
        "float" in str(getattr(a, "dtype", "")) for a in example_inputs)
    dtype = _dtype_name(dtype, example_inputs)
    key = signature_key(fn, example_inputs, kwargs, target, dtype) if cache_ok else None

    def build():
        from .trace import trace

        return trace(fn, *example_inputs, **kwargs)

    by_object = None
    if key is None and cache_ok:
        # no stable key (e.g. a closure over an object without a stable repr): cache in
        # memory on the function object itself, never on disk
        by_object = _object_cache(fn)
        sig = _signature_text(example_inputs, kwargs, target, dtype)
        hit = by_object.get(sig) if by_object is not None else None
        # the globals it reads rebound since (a helper, a constant): compiled again
        module = hit[0] if hit is not None and not stale(hit[1]) else None
    else:
        module = _cached(key, target)
    if module is None:
        module = compile_graph(build, target, dtype, key, retrace=build,
                               options=lambda graph: regenerate_options(fn, graph, target, dtype))
        if by_object is not None:
            by_object[sig] = (module, watch_list(fn))
    elif module._graph is None and module._retrace is None:
        module._retrace = build   # a disk hit re-traces on demand (.graph, grad_module())
    if module.captured:
        from .trace import forward_of

        module._forward_fn = forward_of(fn)[0]
    if check_finite:
        from .numerics import check_finite as probe

        module.stats["finite_check"] = str(probe(module))
    if any_float:
        return AnyFloatModule(module, lambda name: compile(
            fn, *example_inputs, target=target, dtype=name, check_finite=check_finite,
            cache_ok=cache_ok, **kwargs))
    return module


def compile_graph(build_graph, target, dtype, key=None, retrace=None,
                  options=None) -> CompiledModule:
    """Run stages 1-4 on a graph (given as a thunk) and load the result. `options(graph)`:
    the `symgrad compile` options the header's regenerate command needs.

    A RecursionError (SymPy rebuilding a deeply nested or self-canonicalizing expression)
    never escapes with its thousand-frame traceback: it is a CompileError naming the op and
    the user's line being worked on."""
    try:
        return _compile_graph(build_graph, target, dtype, key, retrace, options)
    except RecursionError as exc:
        raise CompileError(_recursion_message(exc)) from None


def _recursion_message(exc) -> str:
    """What a RecursionError in the compiler was working on: the innermost traced node (its op
    and user line) held by a symgrad frame of its traceback, else the user's innermost line."""
    from .graph import Node

    here = os.path.dirname(os.path.abspath(__file__))
    stage, node, user = None, None, None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        path = os.path.abspath(frame.f_code.co_filename)
        if path.startswith(here + os.sep):
            name = os.path.splitext(os.path.relpath(path, here))[0].replace(os.sep, ".")
            if name in ("trace", "differentiate", "optimize", "rewrites") or \
                    name.startswith("emit"):
                stage = name.split(".")[0]
            # the node differentiate is working on (optimize names its own, see there)
            value = frame.f_locals.get("node") if name == "differentiate" else None
            if isinstance(value, Node) and value.op != "input":
                node = value
        elif "site-packages" not in path and not path.startswith(sys.prefix) and \
                not frame.f_code.co_filename.startswith("<frozen"):
            user = f"{os.path.basename(path)}:{tb.tb_lineno}"
        tb = tb.tb_next
    what = {"trace": "tracing", "differentiate": "differentiating", "optimize": "optimizing",
            "rewrites": "rewriting", "emit": "emitting"}.get(stage, "compiling")
    if node is not None:
        where = f" {node.op}" + (f" (at {node.site})" if node.site else "")
    else:
        where = f" the forward (at {user})" if user else " the forward"
    return (f"{what}{where}: the expression is nested too deeply for SymPy (RecursionError); "
            "split it into smaller steps (a reduction or reshape between them ends a region)")


def _compile_graph(build_graph, target, dtype, key, retrace, options) -> CompiledModule:
    _COUNTS["miss"] += 1
    t0 = time.perf_counter()
    if gc.isenabled():
        # a compile allocates millions of SymPy objects (a large program's) and few cycles:
        # the cyclic collector's passes over them were 7% of an RK4-64 compile after the
        # trace, and 15% of an RK4-100 trace (they grow with the program); its cycles are
        # collected once the compile is done
        gc.disable()
        try:
            graph = build_graph()
            return _compile_built(graph, t0, target, dtype, key, retrace, options)
        finally:
            gc.enable()
    graph = build_graph()
    return _compile_built(graph, t0, target, dtype, key, retrace, options)


def _compile_built(graph, t0, target, dtype, key, retrace, options) -> CompiledModule:
    from .differentiate import differentiate
    from .emit import Program
    from .optimize import optimize

    t1 = time.perf_counter()
    vjp = differentiate(graph)
    t2 = time.perf_counter()

    program = Program(name=graph.name, source=graph.source, constants=graph.constants,
                      forward=optimize(graph, "forward"), backward=optimize(vjp, "backward"),
                      target=target, dtype=dtype,
                      options=options(graph) if options is not None else "",
                      backward_depends=_backward_depends(graph, vjp))
    if target in ("numpy", "torch", "c"):
        from ._saving_plan import saving_plan

        program.saving = saving_plan(graph, vjp, program.forward, program.backward,
                                     target)
    t3 = time.perf_counter()
    files, main = emit(program, target)
    t4 = time.perf_counter()
    if _profiling.ON[0]:
        for stage, start, stop in (("trace", t0, t1), ("differentiate", t1, t2),
                                   ("optimize", t2, t3), ("emit", t3, t4)):
            _profiling.span(f"compile.{stage}", "compile", start, stop)
    from .emit.printers import formula_latex, formula_text

    deps = cache.dependency_digests(graph.root().deps)
    meta = {
        "deps": deps,
        "name": graph.name,
        "source": graph.source,
        "dtype": dtype,
        "n_outputs": len(graph.outputs),
        "returns_tuple": graph.returns_tuple,
        "differentiable_outputs": [n is not None and n.dtype == "float" for n in graph.outputs],
        "backward_depends": [None if d is None else [None if t is None else list(t) for t in d]
                             for d in program.backward_depends],
        "inputs": [n.name for n in graph.inputs],
        # per output, the inputs it is a differentiable function of (Graph.dependencies):
        # the runtime gives an output of mixed-dtype inputs the dtype of those it reads
        "output_depends": [list(d) if d is not None else None
                           for d in graph.dependencies()],
        # per output, torch's dtype for the trace's input dtypes (op by op): the runtime
        # gives an output that dtype when a call's inputs have those dtypes
        "output_dtypes": list(graph.output_dtypes) if graph.output_dtypes else None,
        "input_dtypes": list(graph.input_dtypes) if graph.output_dtypes else None,
        # what `symgrad cache info` shows: the inputs' shapes, or generic
        "signature": "generic" if graph.generic else ", ".join(
            f"{n.name}{'(*)' if n.shape is None else tuple(n.shape)}" for n in graph.inputs),
        "captured": [None if w is None else list(w) for w, _ in graph.captured],
        "outputs": list(graph.output_names),
        "formulas": formula_text(graph) + "\n" + formula_text(vjp),
        # a large program's LaTeX is made on request (`symgrad show --latex`), not per compile
        "latex": None if graph.dag else formula_latex(graph),
        "stats": {
            "trace_s": t1 - t0, "differentiate_s": t2 - t1, "optimize_s": t3 - t2,
            "emit_s": t4 - t3, "compile_s": t4 - t0,
            "ops": {"forward": {"before": program.forward.ops_before,
                                "after": program.forward.ops_after},
                    "backward": {"before": program.backward.ops_before,
                                 "after": program.backward.ops_after}},
            "rewrites": list(dict.fromkeys(program.forward.rewrites + program.backward.rewrites)),
            "cse_s": program.forward.timings["cse"] + program.backward.timings["cse"],
            "saving": None if program.saving is None else {
                "saved": list(program.saving.saved), "costs": program.saving.costs},
            "cache": "miss",
        },
    }
    module = CompiledModule(files, main, meta, target, key=key, graph=graph, retrace=retrace)
    if key is not None:
        _MEMORY[key] = module
        if deps is not None and _disk_ok(graph):   # unknown dependencies: never from disk
            cache.store(key, {"files": files, "main": main, "meta": meta, "target": target})
    return module


def _backward_depends(graph, vjp):
    """Per gradient, per grad output, the backward arguments its term depends on
    (Graph.dependencies). Where torch's backward is differentiable in its mask's operand
    (graph.mask_orders), every operand counts; and where that backward takes the input itself
    for its first order (`*_backward(grad, self)`: a finite mask_orders), the input counts
    too: nll_loss_backward(grad, self, ...) reads self for its shape only, yet its result
    requires grad when self does. (relu's, threshold_backward(grad, result), takes its
    result: every order, no more.)"""
    n_out = len(graph.outputs)
    depends = vjp.dependencies(n_out, graph.mask_orders > 0)
    if not 0 < graph.mask_orders < float("inf"):
        return depends
    return tuple(None if d is None else tuple(
        None if term is None else tuple(sorted(set(term) | {n_out + i})) for term in d)
        for i, d in enumerate(depends))


def regenerate_options(fn, graph, target, dtype) -> str:
    """' --dtype float64 --shape x=3,4 ...': what `symgrad compile FILE.py:NAME --target T`
    needs besides to write this module again. --shape for a module specialised to shapes
    other than those of the Function's own `example_inputs` (which the command line uses),
    --dtype for the C and CUDA targets (whose code is per dtype) when it is not float32."""
    parts = []
    if target in ("c", "cuda") and dtype not in (None, "float32"):
        parts.append(f"--dtype {dtype}")
    if not graph.generic and len(graph.arg_names) == len(graph.inputs):
        shapes = [tuple(n.shape) for n in graph.inputs]
        if shapes != _example_shapes(fn):
            parts += ["--shape " + shlex.quote(f"{name}={','.join(str(k) for k in shape)}")
                      for name, shape in zip(graph.arg_names, shapes)]
    return "".join(f" {p}" for p in parts)


def _example_shapes(fn):
    """The shapes of the tensors in `fn.example_inputs`, or None."""
    examples = getattr(fn, "example_inputs", None)
    try:
        examples = examples() if callable(examples) else examples
    except Exception:
        return None
    if examples is None:
        return None
    examples = examples if isinstance(examples, (tuple, list)) else (examples,)
    return [tuple(int(k) for k in a.shape) for a in examples
            if hasattr(a, "shape") and hasattr(a, "dtype")]


def emit(program, target):
    """(files, main file name) of a program for a target."""
    if target == "numpy":
        from .emit import emit_numpy

        name = f"{_snake(program.name)}_grad.py"
        return {name: emit_numpy(program)}, name
    if target == "c":
        from .emit.c import emit_c

        return emit_c(program)
    if target in ("torch", "jax"):
        from .emit import frameworks

        name = f"{_snake(program.name)}_grad_{target}.py"
        emitter = frameworks.emit_torch if target == "torch" else frameworks.emit_jax
        return {name: emitter(program)}, name
    from .emit.cuda import emit_cuda

    return emit_cuda(program)


def _cached(key, target, retrace=None):
    if key is None:
        return None
    hit = _MEMORY.get(key)
    if hit is not None and cache.dependencies_current(hit.meta.get("deps")):
        return hit
    t0 = time.perf_counter()
    entry = cache.load(key)
    if entry is None or entry.get("target") != target:
        return None
    if not cache.dependencies_current(entry["meta"].get("deps")):
        return None   # a helper module the forward calls was edited: compile afresh
    try:
        module = CompiledModule(entry["files"], entry["main"], entry["meta"], target, key=key,
                                retrace=retrace)
    except Exception:  # a stale or damaged entry is recompiled, never fatal
        return None
    module.stats["cache"] = "disk"
    _COUNTS["disk"] += 1
    module.stats["cache_hit_s"] = time.perf_counter() - t0
    _MEMORY[key] = module
    return module


# --------------------------------------------------------------------------- runtime hooks
class RuntimeModule:
    """What the autograd runtime calls: tuple-returning forward/backward and grad_module()."""

    __slots__ = ("compiled", "forward", "backward", "forward_saving", "backward_saved",
                 "n_outputs", "differentiable_outputs", "returns_tuple", "BACKWARD_DEPENDS",
                 "_grad")

    def __init__(self, compiled: CompiledModule):
        self.compiled = compiled
        self.forward = compiled.raw.forward
        self.backward = compiled.raw.backward
        # forward_saving(*inputs) -> (outputs, saved); backward_saved(*grad_outputs, *saved,
        # *inputs) -> grads: emitted only where keeping intermediates beats recomputing them
        self.forward_saving = getattr(compiled.raw, "forward_saving", None)
        self.backward_saved = getattr(compiled.raw, "backward_saved", None)
        self.n_outputs = compiled.n_outputs
        self.differentiable_outputs = compiled.differentiable_outputs
        self.returns_tuple = compiled.returns_tuple
        # per gradient, the backward arguments it depends on (as the NumPy module's constant)
        self.BACKWARD_DEPENDS = compiled.backward_depends
        self._grad = {}   # None (all gradients) or a subset -> RuntimeModule

    def grad_module(self, needed=None) -> "RuntimeModule":
        """The gradient module (of the gradients in `needed`, see CompiledModule)."""
        key = None if needed is None or all(needed) else tuple(bool(n) for n in needed)
        hit = self._grad.get(key)
        if hit is None:
            hit = self._grad[key] = RuntimeModule(self.compiled.grad_module(key))
        return hit

    def jvp_module(self, which=None) -> "RuntimeModule":
        """The Jacobian-vector product module (see CompiledModule.jvp_module)."""
        key = ("jvp", None if which is None or all(which) else tuple(bool(w) for w in which))
        hit = self._grad.get(key)
        if hit is None:
            hit = self._grad[key] = RuntimeModule(self.compiled.jvp_module(key[1]))
        return hit


_FUNCTIONS: dict = {}


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return ("repr", type(value).__name__, repr(value))


def _call_signature(args, kwargs):
    """The in-memory key of a call: per argument its (shape, dtype), or the constant itself
    (its repr where it cannot be hashed); a keyword constant may be a list
    (x.flip(dims=[0, 1])): its repr keys it."""
    sig = [("kw", tuple(sorted((k, _hashable(v)) for k, v in kwargs.items())))] if kwargs \
        else []
    for a in args:
        shape = getattr(a, "shape", None)
        if shape is not None and hasattr(a, "dtype"):
            sig.append((tuple(shape), str(a.dtype)))
        else:
            try:
                hash(a)
                sig.append(("const", type(a).__name__, a))
            except TypeError:
                sig.append(("const", repr(a)))
    return sig


def compile_function(fn, args, target="numpy", kwargs=None) -> RuntimeModule:
    """The runtime module of a forward-only Function for one call signature (`kwargs`: the
    forward's keyword-only and **kwargs constants)."""
    sig = _call_signature(args, kwargs)
    fast = (fn, target, tuple(sig))
    hit = _FUNCTIONS.get(fast)
    if hit is None or stale(hit[1]):
        module = _dynamic_module(fn, args, target, kwargs, sig)
        if module is None:
            module = RuntimeModule(compile(fn, *args, target=target, **(kwargs or {})))
        hit = (module, watch_list(fn))
        _FUNCTIONS[fast] = hit
    return hit[0]


def cached_function(fn, args, target, kwargs=None):
    """The runtime module of `fn` for this call signature when it is ready without any work:
    in memory, or in the disk cache with its C library already built (the compiler never
    runs, nothing is traced); else None. The tiered CPU target asks it first, so that a
    process after the one that built a C module runs it from its first call."""
    from . import native

    sig = _call_signature(args, kwargs)
    fast = (fn, target, tuple(sig))
    hit = _FUNCTIONS.get(fast)
    if hit is not None and not stale(hit[1]):
        return hit[0]
    if not any("float" in str(getattr(a, "dtype", "")) for a in args):
        return None
    try:
        key = signature_key(fn, args, kwargs or {}, target, _dtype_name(None, args))
    except Exception:   # noqa: BLE001 - a probe: no key, no hit
        return None
    if key is None:
        return None
    with native.cache_only():
        module = _cached(key, target)
    if module is None or module.captured:
        return None
    if module._graph is None and module._retrace is None:
        def retrace():
            from .trace import trace

            return trace(fn, *args, **(kwargs or {}))

        module._retrace = retrace   # a disk hit re-traces on demand (.graph, grad_module())
    runtime = RuntimeModule(module)
    _FUNCTIONS[fast] = (runtime, watch_list(fn))
    return runtime


def wait_for_builds(timeout=None) -> bool:
    """Wait for the C modules being built in the background (the tiered CPU target, see
    docs/fast-by-default.md); True when none is pending. See `symgrad._tiers`."""
    from ._tiers import wait_for_builds as _wait

    return _wait(timeout)


# Automatic dynamic shapes: per Function, target, constants and per tensor argument (rank,
# dtype), the static shapes compiled so far and the shape-generic module (None: not made
# yet; False: the forward does not trace without shapes, so every shape stays static).
_FAMILIES: dict = {}
# How many static shapes a family compiles before its shape-generic module serves the rest.
# NumPy: 1 (generic costs 1.0-1.3x a static module per call, measured fwd+bwd at 16x4 to
# 1000x16; a compile costs 0.2-1 s). C and CUDA: 8 (a generic C module ran 4-25x slower than
# the static one, whose loops have fixed trip counts: a few recurring shapes stay static; a
# loader of many lengths still stops compiling after 8).
_STATIC_SHAPES = {"numpy": 1, "c": 8, "cuda": 8}


def _dynamic_module(fn, args, target, kwargs, sig):
    """The shape-generic RuntimeModule for this call, or None for a static one.

    A Function's first shape gets a module specialised to it (static shapes: reshapes and
    loop bounds are constants, the C target's loops have fixed trip counts; it keeps serving
    that shape). Once a second shape of the same ranks and dtypes arrives (a last partial
    batch, variable sequence lengths), one shape-generic module serves every further shape of
    that family: one compile instead of one per shape, and one disk-cache entry (C and CUDA:
    after 8 static shapes, see _STATIC_SHAPES). A class
    attribute `dynamic_shapes` chooses: True (generic from the first call), False (always
    static), None (automatic, the default)."""
    choice = getattr(fn, "dynamic_shapes", None)
    if choice is False:
        return None
    tensors = [i for i, a in enumerate(args)
               if getattr(a, "shape", None) is not None and hasattr(a, "dtype")]
    if not tensors:
        return None
    family = (fn, target, tuple(
        ("T", len(a.shape), str(a.dtype)) if i in tensors else s
        for i, (a, s) in enumerate(zip(args, sig[len(sig) - len(args):]))),
        sig[0] if len(sig) > len(args) else None)
    try:
        state = _FAMILIES.setdefault(family, {"shapes": set(), "generic": None})
    except TypeError:   # an unhashable constant
        return None
    shapes = tuple(tuple(args[i].shape) for i in tensors)
    if choice is not True and (shapes in state["shapes"] or
                               len(state["shapes"]) < _STATIC_SHAPES.get(target, 1)):
        state["shapes"].add(shapes)
        return None
    module = state["generic"]
    if module is not None and module is not False and stale(state["watch"]):
        module = None
    if module is None:
        from .trace import TensorSpec

        specs = [TensorSpec(None, str(a.dtype)) if i in tensors else a
                 for i, a in enumerate(args)]
        try:
            module = RuntimeModule(compile(fn, *specs, target=target, **(kwargs or {})))
        except Exception:   # a forward that needs its shapes (x.shape[0] in Python, ...)
            module = False
        state["generic"], state["watch"] = module, watch_list(fn)
    if module is False:
        state["shapes"].add(shapes)
        return None
    return module


def builtin_compiled(op: str):
    """The CompiledModule of a built-in op (compiled on demand; used for higher orders)."""
    # the compiler's fingerprint too: a cached module is reused only by the compiler that
    # wrote it (its gradient modules' keys derive from this one)
    key = _hash(__version__, compiler_fingerprint(), "builtin", op)

    def build():
        return builtin_graph(op)

    hit = _cached(key, "numpy", retrace=build)
    return hit if hit is not None else compile_graph(build, "numpy", None, key, retrace=build)


def _runtime_of(module) -> "RuntimeModule":
    """The RuntimeModule of a generated module: its own compiled module, or a built-in op's."""
    compiled = getattr(module, "compiled", None)
    if isinstance(compiled, CompiledModule):
        return RuntimeModule(compiled)
    if not getattr(module, "SOURCE", "").startswith("symgrad/_builtins.py:"):
        raise TypeError(f"{module!r} is not a symgrad-generated module")
    return RuntimeModule(builtin_compiled(module.NAME))


def grad_module(module, needed=None):
    """Second-order module of a built-in op's generated module (compiled lazily, cached);
    `needed`: per input, whether its gradient is wanted (None: all)."""
    return _runtime_of(module).grad_module(needed)


def jvp_module(module, which=None):
    """Jacobian-vector product module of a built-in op's generated module (compiled lazily,
    cached; see CompiledModule.jvp_module); `which`: per input, whether it has a tangent."""
    return _runtime_of(module).jvp_module(which)


# --------------------------------------------------------------------------- loading
def _load(module: CompiledModule):
    if module.target == "c":
        from .native import load_c

        return load_c(module)
    if module.target == "cuda":
        from .native import load_cuda

        return load_cuda(module)
    if module.target in ("torch", "jax") and not _importable(module.target):
        return _MissingFramework(module.target)   # its source is there; running it is not
    return load_source(module.files[module.main], f"<symgrad:{module.key or module.main}>")


def _importable(name) -> bool:
    import importlib.util

    return name in sys.modules or importlib.util.find_spec(name) is not None


class _MissingFramework:
    """The loaded form of a torch or JAX module where that framework is not installed: its
    source can be generated, read and written; calling it says what to install."""

    def __init__(self, target):
        self.target = target

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise ModuleNotFoundError(
            f"this module's target is {self.target!r}, but {self.target} is not installed: "
            f"pip install 'symgrad[{self.target}]' (or {self.target} itself) to run it")

