"""`sg.to_torch` on the C target: CPU tensors run the fused C module of the same program.

The torch target (a sequence of torch operations) loses to torch eager's fused kernels on
several functions (one pass per op against eager's one kernel per op, or fewer); the C
target runs each routine as one fused loop, keeps what the backward reads (the saving plan),
and its trusted twins skip the checks. So for CPU tensors of float32 / float64 the
`torch.autograd.Function` that `to_torch` returns calls the C module, zero-copy: the tensors'
memory is read as NumPy arrays (`Tensor.numpy()`), and the arrays the C functions wrote are
returned as tensors (`torch.from_numpy`). What decides the target (`CPath.lookup`):

- `target="torch"` or `compile=True`: always the torch target (frameworks.py).
- `target="c"`: the C module, built before the first call returns; a CUDA tensor, a float16
  one, is an error that says so.
- `target=None` (the default) follows the runtime's CPU target (docs/fast-by-default.md,
  `SYMGRAD_CPU_TARGET`, `sg.set_cpu_target`): "auto" is tiered -- a signature's first calls
  run the torch target while its C module is built in the background (the build starts on
  the signature's second call; `sg.wait_for_builds()` waits), later calls the C module; one
  already in the disk cache runs from the first call; no C compiler: the torch target, one
  warning. "c": as target="c". "numpy": the torch target (the NumPy module has no place
  inside torch). Tensors not on the CPU, dtypes C does not compute in (float16, bfloat16),
  and calls while torch.compile traces (`torch.compiler.is_compiling()`) run the torch
  target.

A backward under create_graph (grad mode on) runs the torch target's generated second-order
path (frameworks._torch_backward), so double backward and gradgradcheck work on either
forward. Outputs and gradients never alias memory a later call writes: a C routine's outputs
are new arrays on every call, and any array that shares its memory with an input, a
gradient, a saved value, another output, the scratch block, or is read-only is copied first.
"""
from __future__ import annotations

import os

import numpy
import torch

from ._profiling import ON as _PROF_ON
from .autograd import _compiled_functions as _cf
from .autograd._module_calls import _raw, _twin, call_module
from .native import SCRATCH

_ndarray = numpy.ndarray
_from_numpy = torch.from_numpy

__all__ = ["CPath"]

_FLOATS = ("float32", "float64")
_FORKED = [False]     # in a child after fork: the C loops stay on one thread (as the loader's)


def _after_fork():
    _FORKED[0] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class _Entry:
    """One call key of a to_torch Function: its C routines (or None: the torch target) and
    the background build while one is pending."""

    __slots__ = ("c", "fresh", "job", "mode", "standins")

    def __init__(self, c, job, fresh, mode, standins):
        self.c = c
        self.job = job
        self.fresh = fresh
        self.mode = mode
        self.standins = standins


class CPath:
    """The C side of one `to_torch` Function: per call key, the C module's routines."""

    def __init__(self, F, name, pin, dtype_error, fixed, prepare):
        """`fixed`: for F a CompiledModule, a function returning its C module (re-emitted
        from its graph, frameworks._Modules), else None. `prepare(args)`: see below."""
        self.F = F
        # prepare(args): the torch target's module of this call, compiled where a call key
        # starts on C: a create_graph backward runs it, and torch.compile's tracing (which
        # cannot compile a module) finds it in memory
        self.prepare = prepare
        self.name = name
        self.pin = pin                  # "c" or None (the runtime's CPU target decides)
        self.dtype_error = dtype_error  # (index, dtype name) -> the torch path's TypeError
        self.fixed = fixed
        self.entries = {}
        self.runs = {"c": 0, "torch": 0}
        self.token = object()           # this Function's jobs in symgrad._tiers
        self._fixed_c = None

    # ------------------------------------------------------------------ per call
    def lookup(self, args, check):
        """The _CCall that runs this call, or None for the torch target."""
        Tensor = torch.Tensor
        try:
            key = tuple([(type(a), a.shape, a.dtype, a.is_cpu) if isinstance(a, Tensor)
                         else (type(a), a) for a in args])
            entry = self.entries.get(key)
        except TypeError:           # an unhashable constant (or a NumPy array: check says)
            key = entry = None
        if entry is not None:
            if entry.job is not None:
                self._poll(entry)
            if self.pin is None and entry.mode != _cpu_target():
                entry = None        # sg.set_cpu_target changed it since
            elif entry.fresh is not None and not entry.fresh():
                entry = None        # a global the forward reads was rebound: compile again
        if entry is None:
            entry = self._entry(args, key, check)
            if key is not None:
                self.entries[key] = entry
        return entry.c

    def _poll(self, entry):
        job = entry.job
        if not job.done:
            if not job.queued:      # deferred: started by the signature's second call
                from . import _tiers

                _tiers.start(job)
            return
        entry.job = None
        if job.module is not None:
            entry.c = _CCall(job.module, entry.standins, self.name)
        else:
            _cf._tier_warn(f"symgrad: the C module of {self.name} (sg.to_torch) could not be "
                       f"built ({job.error}); this call signature keeps the torch target")

    # ------------------------------------------------------------------ per call key
    def _entry(self, args, key, check):
        check(args)
        mode = self.pin or _cpu_target()
        standins, reason = self._standins(args)
        fresh = None
        if not self.fixed:
            from .compiler import watch_list

            fresh = _cf._fresh_check(watch_list(self.F))
        if mode == "numpy" or (reason is not None and self.pin != "c"):
            return _Entry(None, None, fresh, mode, standins)   # (a CUDA tensor, float16, ...)
        if reason is not None:
            kind, i, what = reason
            if kind == "dtype":
                raise self.dtype_error(i, what)
            if kind == "device":
                raise ValueError(
                    f"{self.name}.apply: target='c' runs the C module on CPU tensors, but "
                    f"argument {i} is on {what}; use target='torch' (or the default "
                    f"target=None, which runs the torch target there), or move it with .cpu()")
            raise TypeError(f"{self.name}.apply: target='c' needs a float32 or float64 "
                            f"tensor argument ({what}); use target='torch'")
        if mode == "c":
            c = _CCall(self._build(standins), standins, self.name)
            self.prepare(args)
            return _Entry(c, None, fresh, mode, standins)
        # "auto": tiered
        if not _compiler_found():
            return _Entry(None, None, fresh, mode, standins)
        ready = self._probe(standins)
        if ready is not None:
            self.prepare(args)
            return _Entry(_CCall(ready, standins, self.name), None, fresh, mode, standins)
        if key is None:
            return _Entry(None, None, fresh, mode, standins)
        from . import _tiers

        def build_c():
            return self._build(standins)

        job = _tiers.submit(("sg.to_torch", self.token, key), build_c, defer=True)
        return _Entry(None, job, fresh, mode, standins)

    def _standins(self, args):
        """(the arguments with each tensor as a stand-in NumPy array of its shape and dtype
        holding no memory, why C cannot run this call or None)."""
        from ._dtypes import dtype_name

        out, reason, floats = [], None, False
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                out.append(a)
                continue
            dtype = dtype_name(a.dtype)
            if reason is None:
                if not a.is_cpu or a.layout is not torch.strided:
                    reason = ("device", i, str(a.device) if a.layout is torch.strided
                              else f"{a.device} ({a.layout})")
                elif dtype not in _DTYPES:
                    reason = ("dtype", i, dtype)
            floats = floats or dtype in _FLOATS
            try:
                dt = numpy.dtype(dtype)
            except TypeError:
                dt = numpy.dtype("float32")   # (bfloat16: never compiled for C)
            out.append(numpy.lib.stride_tricks.as_strided(
                numpy.zeros(1, dt), tuple(int(n) for n in a.shape), (0,) * a.dim(),
                writeable=False))
        if reason is None and not floats:
            reason = ("floats", None, "none is given")
        return tuple(out), reason

    def _probe(self, standins):
        """The runtime module of the C target when it is ready without any work (in memory,
        or in the disk cache with its library built), else None."""
        from . import compiler, native

        if not self.fixed:
            return compiler.cached_function(self.F, standins, "c")
        if self.F.target == "c":
            return compiler.RuntimeModule(self.F)
        if self.F.key is None:
            return None
        key = compiler._hash(self.F.key, "target", "c")
        with native.cache_only():
            hit = compiler._cached(key, "c", retrace=lambda: self.F.graph)
        return None if hit is None else compiler.RuntimeModule(hit)

    def _build(self, standins):
        from . import compiler

        if not self.fixed:
            return compiler.compile_function(self.F, standins, target="c")
        if self._fixed_c is None:
            self._fixed_c = compiler.RuntimeModule(self.fixed())
        return self._fixed_c


_DTYPES = frozenset({"float32", "float64", "bool", "int8", "int16", "int32", "int64", "uint8"})


def _cpu_target():
    return _cf._cpu_target[0]


def _compiler_found():
    cc = os.environ.get("CC", "cc")
    found = _cf._CC_FOUND.get(("sg.to_torch", cc))
    if found is None:
        import shutil

        found = _cf._CC_FOUND[("sg.to_torch", cc)] = shutil.which(cc) is not None
        if not found:
            _cf._tier_warn(f"symgrad: no C compiler ({cc!r} not found): sg.to_torch runs the "
                       "torch target on CPU tensors (set CC to a C compiler for the fused C "
                       "target, or SYMGRAD_CPU_TARGET=numpy to choose the torch target)")
    return found


# ---------------------------------------------------------------------- the C calls
def _array(t):
    """A CPU tensor's memory as a NumPy array (no copy; detached: numpy() refuses a tensor
    that requires grad)."""
    if t.requires_grad:
        t = t.detach()
    try:
        return t.numpy()
    except RuntimeError:        # a lazy negation / conjugation bit: materialized
        return t.resolve_neg().resolve_conj().numpy()


def _owner(a, ndarray):
    """The array that owns `a`'s memory (a itself, or the base its views lead to)."""
    b = a.base
    while type(b) is ndarray:
        a, b = b, b.base
    return a


class _CCall:
    """The C module of one call key, with everything a call needs looked up once."""

    __slots__ = (
        "backward_fn",
        "captured",
        "casts",
        "differentiable",
        "direct",
        "forward_fn",
        "is_c",
        "mark",
        "n_args",
        "name",
        "positions",
        "rm",
        "saving",
        "single",
        "standins",
        "threads",
    )

    def __init__(self, rm, standins, name):
        import ctypes

        self.rm = rm
        self.name = name
        self.standins = standins
        self.n_args = len(standins)
        self.positions = tuple(i for i, a in enumerate(standins)
                               if isinstance(a, numpy.ndarray))
        self.forward_fn = rm.forward
        self.backward_fn = rm.backward
        fs, bs = rm.forward_saving, rm.backward_saved
        self.saving = (fs, bs) if callable(fs) and callable(bs) else None
        # the functions call_module would call (the trusted twins of a C module), called
        # directly where nothing else is in between (no errstate decorator, no profiler)
        f, b = self.saving or (self.forward_fn, self.backward_fn)
        self.direct = tuple(_twin(r) if _raw(r) is None else None for r in (f, b))
        self.differentiable = tuple(rm.differentiable_outputs)
        self.mark = not all(self.differentiable)
        self.single = not rm.returns_tuple
        compiled = rm.compiled
        self.captured = bool(compiled.captured)
        self.is_c = compiled.target == "c" and "fallback" not in compiled.stats
        lib = getattr(compiled.raw, "_lib", None)
        threads = None
        if lib is not None:
            try:
                threads = ctypes.c_int.in_dll(lib, "symgrad_threads")
            except ValueError:      # built for one thread (no OpenMP): nothing to set
                pass
        self.threads = threads
        # per output, (torch's dtype, the module's) where they differ (mixed float32 / float64
        # inputs: an output computed from float32 inputs alone is float32, as on the torch
        # target and the runtime's compiled Functions), else None; None for no cast at all
        casts = _cf._output_casts(rm, standins)
        self.casts = None
        if casts:
            floats = [a.dtype for a in standins
                      if isinstance(a, numpy.ndarray) and a.dtype.kind == "f"]
            computed = numpy.result_type(*floats) if floats else numpy.dtype(numpy.float64)
            self.casts = tuple(None if c is None else (_torch_dtype(c), _torch_dtype(computed))
                               for c in casts)

    def _set_threads(self):
        """The library's split loops use torch.get_num_threads() threads (one after fork)."""
        v = self.threads
        if v is not None:
            n = 1 if _FORKED[0] else torch.get_num_threads()
            if v.value != n:
                v.value = n

    def forward(self, ctx, args):
        ndarray = _ndarray
        inputs = [args[i] for i in self.positions]
        arrays = [_array(t) for t in inputs]
        extra = self.rm.compiled.captured_arrays() if self.captured else ()
        if extra:
            arrays += extra
        self._set_threads()
        f = self.direct[0]
        if f is None or _PROF_ON[0]:
            f = lambda *a: call_module(self.saving[0] if self.saving else
                                       self.forward_fn, a, {})
        if self.saving is not None:
            outs, saved = f(*arrays)
        else:
            outs, saved = f(*arrays), ()
        # per owner of memory the outputs must not share, (its array, its tensor or None):
        # the inputs, the captured arrays, the scratch block; then each output
        owners = _held(arrays, inputs, ndarray)
        tensors = [None if o is None else _fresh(o, owners) for o in outs]
        if self.casts is not None:
            tensors = [t if c is None or t is None else t.to(c[0])
                       for t, c in zip(tensors, self.casts)]
        saved_t = []
        for s in saved:
            if s is None:
                saved_t.append(None)
                continue
            if type(s) is not ndarray:
                s = numpy.asarray(s)
            w = owners.get(id(_owner(s, ndarray)))
            if w is None:
                saved_t.append(torch.from_numpy(s) if s.flags.writeable and not _reversed(s)
                               else torch.from_numpy(s.copy()))
            elif w[0] is s and w[1] is not None:
                saved_t.append(w[1])    # an input or output itself: saved as that tensor
            else:
                saved_t.append(torch.from_numpy(s.copy()))
        ctx.c = self
        ctx.c_extra = extra
        ctx.save_for_backward(*inputs, *saved_t)
        if self.mark:
            fixed = [t for t, d in zip(tensors, self.differentiable) if t is not None and not d]
            if fixed:
                ctx.mark_non_differentiable(*fixed)
        return tensors[0] if self.single else tuple(tensors)

    def backward(self, ctx, grads):
        ndarray = _ndarray
        tensors = ctx.saved_tensors      # (the version check of torch's saved tensors)
        n = len(self.positions)
        arrays = [_array(t) for t in tensors[:n]]
        if ctx.c_extra:
            arrays += ctx.c_extra
        if self.casts is not None:   # a cast output's gradient, in the module's dtype
            grads = [g if c is None or g is None else g.to(c[1])
                     for g, c in zip(grads, self.casts)]
        gs = [_array(g) if d and g is not None else None
              for g, d in zip(grads, self.differentiable)]
        self._set_threads()
        b = self.direct[1]
        if b is None or _PROF_ON[0]:
            b = lambda *a: call_module(self.saving[1] if self.saving else
                                       self.backward_fn, a, {})
        if self.saving is not None:
            saved = [None if t is None else _array(t) for t in tensors[n:]]
            out = b(*gs, *saved, *arrays)
        else:
            saved = ()
            out = b(*gs, *arrays)
        owners = _held(arrays, (), ndarray)
        for a in saved:
            if a is not None:
                owners[id(_owner(a, ndarray))] = (a, None)
        for a, g in zip(gs, grads):
            if a is not None:
                owners[id(_owner(a, ndarray))] = (a, g)
        needed = ctx.needs_input_grad
        result = [None] * self.n_args
        for i, g in zip(self.positions, out):
            if g is None or not needed[i]:
                continue
            w = owners.get(id(g)) if type(g) is ndarray else None
            if w is not None and w[0] is g and w[1] is not None:
                result[i] = w[1]    # the incoming gradient itself, handed back as it came
            else:
                result[i] = _fresh(g, owners)
        return tuple(result)


def _torch_dtype(dt):
    """The torch dtype of NumPy dtype `dt`."""
    return _from_numpy(numpy.empty(0, dt)).dtype


def _held(arrays, tensors, ndarray):
    """{id(owner): (array, tensor or None)} of the arrays a call reads, and the scratch
    block of the C functions' temporaries."""
    owners = {}
    for k, a in enumerate(arrays):
        owners[id(_owner(a, ndarray))] = (a, tensors[k] if k < len(tensors) else None)
    block = getattr(SCRATCH, "block", None)
    if block is not None:
        owners[id(block)] = (block, None)
    return owners


def _reversed(a):
    """True where a view runs backwards along a dimension (a flip: cumsum's adjoint): torch
    has no negative strides, so torch.from_numpy refuses it (fuzz seed 59, to_torch_c)."""
    return any(st < 0 for st in a.strides)


def _fresh(o, owners):
    """Array `o` as a tensor whose memory nothing else holds: zero-copy where `o`'s owner is
    none of `owners` and may be written, a copy otherwise; its owner is then recorded."""
    ndarray = _ndarray
    if type(o) is not ndarray:
        o = numpy.asarray(o)
        if o.base is not None:
            o = o.copy()
    owner = _owner(o, ndarray)
    if id(owner) in owners or not o.flags.writeable or _reversed(o):
        o = o.copy()
        owner = o
    t = _from_numpy(o)
    owners[id(owner)] = (o, t)
    return t
