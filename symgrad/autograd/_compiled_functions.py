"""Compiled Functions: a forward-only ``Function``'s module per call signature (the runtime
layer, below ``function.py``, which re-exports every name here).

What ``Function.apply`` runs when a subclass defines no ``backward``: the CPU target (``auto``:
tiered, NumPy first while the C module builds; ``numpy``; ``c``), the tier polling, the cache
of compiled entries per signature (``_COMPILED``), the output dtype casts of torch's type
promotion, and ``_apply_compiled`` itself.
"""

import os
import warnings

import numpy as np

from symgrad import tensor as _tm
from symgrad._dtypes import dtype_name as _dtype_name
from symgrad.autograd._module_calls import _MISS, _ndarray
from symgrad.autograd._module_fastpaths import (
    _apply_function1, _apply_function_n, apply1, apply2,
)
from symgrad.autograd._module_nodes import SAVE_ALL, _NO_PARAMS, _wrap, apply_module


_signatures = {}


def _bind(cls, args, kwargs):
    """(positional args, keyword-only and **kwargs values) of a call to cls.forward."""
    if not kwargs:
        return args, {}
    import inspect

    sig = _signatures.get(cls)
    if sig is None:
        sig = _signatures[cls] = inspect.signature(cls.forward)
    # torch 2 style (a setup_context of its own): forward takes no ctx
    takes_ctx = not any("setup_context" in vars(k) for k in cls.__mro__
                        if k.__module__ != "symgrad.autograd.function")   # (Function's own module)
    bound = sig.bind(None, *args, **kwargs) if takes_ctx else sig.bind(*args, **kwargs)
    bound.apply_defaults()
    # keyword-only and **kwargs values stay keywords (bound.args would drop them)
    return tuple(bound.args[1:] if takes_ctx else bound.args), dict(bound.kwargs)


CPU_TARGETS = ("auto", "numpy", "c")
_cpu_target = ["auto"]


def set_cpu_target(target):
    """The target forward-only Functions compile to for CPU tensors:

    - "auto" (the default): tiered. A Function's first calls for a call signature run its
      NumPy module while its C module (fused native loops) is built in a background thread;
      later calls run the C module once it is loaded. A C module already in the disk cache
      runs from the first call. Without a C compiler (CC, default cc) it is NumPy, with one
      warning; a C build that fails warns once and keeps NumPy for that signature.
    - "numpy": always the NumPy module.
    - "c": always the C module, built before the first call returns (the NumPy module with
      one warning where no C compiler works).

    The environment variable SYMGRAD_CPU_TARGET sets it at import; a Function's class
    attribute `cpu_target` overrides it for that Function. Returns the previous target.
    Functions already compiled for a call signature keep their module until this changes;
    symgrad's own composite ops stay on NumPy (one small op gains little from C). See
    docs/fast-by-default.md."""
    _check_cpu_target(target, "set_cpu_target")
    previous = _cpu_target[0]
    if target != previous:
        _cpu_target[0] = target
        _COMPILED.clear()
    return previous


def _check_cpu_target(target, who):
    if target not in CPU_TARGETS:
        raise ValueError(f"{who}: unknown target {target!r}; choose one of "
                         f"{', '.join(map(repr, CPU_TARGETS))}")


def get_cpu_target():
    """The target forward-only Functions compile to for CPU tensors (see set_cpu_target)."""
    return _cpu_target[0]


_CC_FOUND = {}        # CC's value -> whether it names an executable
_TIER_WARNED = set()  # reasons warned about (once each)


def _tier_warn(reason):
    if reason not in _TIER_WARNED:
        _TIER_WARNED.add(reason)
        warnings.warn(reason, RuntimeWarning, stacklevel=5)


def _c_compiler_found():
    cc = os.environ.get("CC", "cc")
    found = _CC_FOUND.get(cc)
    if found is None:
        import shutil

        found = _CC_FOUND[cc] = shutil.which(cc) is not None
        if not found:
            _tier_warn(f"symgrad: no C compiler ({cc!r} not found): forward-only Functions run "
                       "their NumPy modules (set CC to a C compiler for the fused C target, or "
                       "SYMGRAD_CPU_TARGET=numpy to choose NumPy)")
    return found


def _compile_function(cls, args, kwargs=None, tier_key=None):
    """(runtime module, background job or None) of a call signature."""
    from symgrad.compiler import compile_function

    # CuPy arrays (tensors on "cuda") compile for the CUDA target: fused kernels, no host copy
    on_gpu = any(type(a).__module__.split(".")[0] == "cupy" for a in args)
    if on_gpu:
        target = "cuda"
    elif cls.__module__.startswith("symgrad."):
        target = "numpy"
    else:
        # a Function may choose for itself: class attribute cpu_target = "c"
        target = getattr(cls, "cpu_target", None) or _cpu_target[0]
        _check_cpu_target(target, f"{cls.__name__}.cpu_target")
    if target != "auto":
        return compile_function(cls, args, target=target, kwargs=kwargs), None
    if tier_key is None or not _c_compiler_found():
        return compile_function(cls, args, target="numpy", kwargs=kwargs), None
    from symgrad import _tiers, compiler

    ready = compiler.cached_function(cls, args, "c", kwargs)
    if ready is not None:   # built by an earlier process (or call): no NumPy tier
        return ready, None
    module = compile_function(cls, args, target="numpy", kwargs=kwargs)

    # the build traces shapes and dtypes: stand-ins that hold no memory, not the caller's
    # arrays (a signature called once would keep them alive in its deferred job)
    specs = tuple(np.lib.stride_tricks.as_strided(np.zeros(1, a.dtype), a.shape,
                                                  (0,) * a.ndim, writeable=False)
                  if type(a) is _ndarray else a for a in args)

    def build_c():
        return compile_function(cls, specs, target="c", kwargs=kwargs)

    # keyed by the NumPy module too: one recompiled after an edit gets a new C build;
    # started by the signature's second call (_tier_poll)
    return module, _tiers.submit((tier_key, module), build_c, defer=True)


def _tier_poll(entry):
    """Between two calls: switch `entry` to its C module once built, or, its build failed,
    warn once and keep NumPy."""
    job = entry.job
    if not job.done:
        if not job.queued:
            from symgrad import _tiers

            _tiers.start(job)
        return
    entry.job = None
    if job.module is not None:
        entry.mod = job.module
        entry.direct = None
    else:
        name = getattr(entry.forward_fn, "__qualname__", entry.name)
        _tier_warn(f"symgrad: the C module of {name.rsplit('.forward', 1)[0]} could not be "
                   f"built ({job.error}); this call signature keeps its NumPy module")


class _Compiled:
    """A forward-only Function's module for one call signature, with what apply needs."""

    __slots__ = ("mod", "name", "differentiable", "single", "one", "watch", "stale", "captured",
                 "forward_fn", "job", "casts", "fast", "fresh", "direct", "call", "diff0",
                 "in_dtypes")

    def __init__(self, cls, mod, job=None):
        from symgrad.compiler import stale, watch_list

        self.mod = mod
        self.job = job   # the C module being built (tiered CPU target), or None
        # the globals the forward reads (helpers, constants): one rebound recompiles
        self.watch = () if cls.__module__.startswith("symgrad.") else watch_list(cls)
        self.stale = stale
        # `not stale(watch)` as one generated expression (None: nothing to watch)
        self.fresh = _fresh_check(self.watch)
        # the module's forward once known to be called directly (no errstate decorator, no
        # saving plan: a C module's), for _apply_function1; reset when mod changes
        self.direct = None
        self.call = None
        self.in_dtypes = None   # the inputs' dtypes, a node's _in_dtypes (the key has them)
        # torch names a Function's node <Name>Backward; symgrad's own composite ops give
        # torch's name of the op's node (_node_name)
        self.name = getattr(cls, "_node_name", None) or cls.__name__ + "Backward"
        self.differentiable = tuple(mod.differentiable_outputs)
        self.diff0 = self.differentiable[0] if self.differentiable else None
        self.single = not getattr(mod, "returns_tuple", False)
        # one output: the one-output fast paths apply (the module returns exactly one)
        self.one = len(self.differentiable) == 1 and getattr(mod, "n_outputs", 1) == 1
        # arrays the forward captured (closure, globals): constant trailing inputs, read
        # afresh on every call so that the module sees their current contents
        compiled = getattr(mod, "compiled", None)
        self.captured = bool(getattr(compiled, "captured", ()))
        self.forward_fn = getattr(cls, "forward", None)
        self.casts = None   # per output, its dtype where the module's is not (_output_casts)
        self.fast = 0       # n > 0: _apply_compiled's fast path applies (n Tensors)


def _fresh_check(watch):
    """A function of no arguments that is ``not stale(watch)``, or None for an empty watch:
    one expression of the watched dicts' items, their names and values bound as defaults
    (apply's fast path checks it on every call; the loop over `watch` cost ~0.3 us for four
    names, this ~0.1 us). None too where a namespace is not a plain dict (the loop then)."""
    if not watch:
        return None
    if any(type(ns) is not dict or type(name) is not str for ns, name, _ in watch):
        return lambda: not _stale_loop(watch)
    spaces = {}
    params, terms = [], []
    for i, (ns, name, value) in enumerate(watch):
        k = spaces.setdefault(id(ns), (len(spaces), ns))[0]
        params.append(f"_v{i}")
        terms.append(f"_n{k}[{name!r}] is _v{i}")
    params += [f"_n{k}" for k, _ in spaces.values()]
    src = (f"def fresh({', '.join(p + '=' + p for p in params)}):\n"
           f"    try:\n        return {' and '.join(terms)}\n"
           "    except KeyError:\n        return False\n")
    scope = {f"_v{i}": value for i, (_, _, value) in enumerate(watch)}
    scope.update({f"_n{k}": ns for k, ns in spaces.values()})
    exec(compile(src, "<symgrad watch check>", "exec"), scope)
    return scope["fresh"]


def _stale_loop(watch):
    for namespace, name, value in watch:
        if namespace.get(name, _MISS) is not value:
            return True
    return False


def _output_casts(mod, arrays):
    """Per output, the dtype torch gives it where the module's differs, or None; () for none.

    A generated module casts every output to the combined dtype of all its inputs; torch
    promotes per op, so an output computed from float32 inputs only is float32 even when
    another input is float64. Each output gets the promotion of the float inputs its value
    depends on (the graph's output_depends: not those read only for shape or inside a where's
    condition), zero-dimensional ones counting only when no other does (torch's rule).
    Only mixed-precision calls are concerned.

    Where the module knows torch's dtype of each output for its trace's input dtypes (the
    tracer promotes op by op: output_dtypes), a call with those dtypes gets them: also an
    output of integer inputs and a Python float (the default float dtype, where the module
    computes in float64), an int32 one of int32 and 0-d int64 inputs, and a float32 one that
    reads a float64 0-d input through a value made dimensioned first (fuzz seeds 324, 82)."""
    compiled = getattr(mod, "compiled", None)
    want = getattr(compiled, "output_dtypes", None)
    if want:
        have = tuple(_dtype_name(a.dtype) if hasattr(a, "dtype") else None for a in arrays)
        if have == compiled.input_dtypes:
            floats = [a.dtype for a in arrays
                      if getattr(getattr(a, "dtype", None), "kind", "") == "f"]
            computed = np.result_type(*floats) if floats else np.dtype(np.float64)
            casts = []
            for w in want:
                dt = None if w is None else _tm._default_float.np if w == "default" \
                    else np.dtype(w)
                if dt is not None and dt == computed:   # the module's float dtype already
                    dt = None
                casts.append(dt)
            return tuple(casts) if any(c is not None for c in casts) else ()
    floats = {a.dtype for a in arrays if getattr(getattr(a, "dtype", None), "kind", "") == "f"}
    if len(floats) < 2:
        return ()
    deps = getattr(compiled, "output_depends", None)
    if deps is None:   # a module without the dependences (an older cache entry)
        return ()
    casts = []
    for d in deps:
        fl = [arrays[k] for k in d or () if k < len(arrays)
              and getattr(getattr(arrays[k], "dtype", None), "kind", "") == "f"]
        dims = [a.dtype for a in fl if a.ndim] or [a.dtype for a in fl]
        casts.append(np.result_type(*dims) if dims else None)
    return tuple(casts) if any(c is not None for c in casts) else ()


def _recast(outs, casts):
    """Give each output its dtype of ``casts`` (its node's output metadata too)."""
    for out, dt in zip(outs, casts):
        if out is None or dt is None:
            continue
        a = out._data
        if a.dtype == dt:
            continue
        out._data = a.astype(dt)
        node = out._grad_fn
        meta = getattr(node, "_out_meta", None) if node is not None else None
        if meta is not None and meta[out._output_nr] is not None:
            meta = list(meta)
            meta[out._output_nr] = (a.shape, np.dtype(dt))
            node._out_meta = tuple(meta)


_COMPILED = {}  # (cls, per argument (array type, shape, dtype) or (type, value)) -> _Compiled
if os.environ.get("SYMGRAD_CPU_TARGET"):
    set_cpu_target(os.environ["SYMGRAD_CPU_TARGET"])


def _apply_compiled(cls, args, kwargs):
    if not kwargs and args:
        # the common call: Tensors only, a signature compiled before (its key built directly,
        # the checks of the general path below made once, when the entry was)
        Tensor = _tm.Tensor
        x = args[0]
        n = len(args)
        if type(x) is Tensor:
            a = x._data
            if n == 1:
                entry = _COMPILED.get((cls, (type(a), a.shape, a.dtype)))
            elif n == 2:
                y = args[1]
                if type(y) is Tensor:
                    b = y._data
                    entry = _COMPILED.get((cls, (type(a), a.shape, a.dtype),
                                           (type(b), b.shape, b.dtype)))
                else:
                    entry = None
            else:
                for t in args:
                    if type(t) is not Tensor:
                        entry = None
                        break
                else:
                    arrays = [t._data for t in args]
                    entry = _COMPILED.get((cls, *[(type(d), d.shape, d.dtype) for d in arrays]))
            if entry is not None and entry.fast == n:
                fresh = entry.fresh   # compiler.stale(entry.watch), negated, generated
                if fresh is None or fresh():
                    if entry.one:
                        if n == 1:
                            out = _apply_function1(entry, x, a)
                            return out if entry.single else (out,)
                        out = _apply_function_n(entry, args, [a, b] if n == 2 else arrays)
                        return out if entry.single else (out,)
                    if n <= 2:
                        arrays = [a] if n == 1 else [a, b]
                    outs = apply_module(entry.mod, list(args), arrays, {}, entry.name,
                                        SAVE_ALL, entry.differentiable)
                    if entry.single and len(outs) == 1:
                        return outs[0]
                    return tuple(outs)
    kw = {}
    if kwargs:
        args, kw = _bind(cls, args, kwargs)
    Tensor = _tm.Tensor
    key = [cls, tuple(sorted(kw.items()))] if kw else [cls]
    tensors = []
    arrays = []
    for a in args:
        if type(a) is not Tensor and isinstance(a, (_ndarray, np.generic)):
            # a NumPy array or scalar is traced as an input (it has a shape and dtype):
            # passed to the module as a Tensor that needs no gradient, never as a constant
            # (a value in the key would compile once per value)
            args = tuple(_wrap(np.asarray(b)) if b is a else b for b in args)
            return _apply_compiled(cls, args, kw)
        if isinstance(a, Tensor):
            d = a._data
            key.append((type(d), d.shape, d.dtype))
            tensors.append(a)
            arrays.append(d)
        else:
            key.append((type(a), a))
    key = tuple(key)
    try:
        entry = _COMPILED.get(key)
    except TypeError:  # an unhashable constant: compile_function keys it by its repr
        key = entry = None
    if entry is not None and entry.watch and entry.stale(entry.watch):
        entry = None
    if entry is None:
        trace_args = tuple(a._data if isinstance(a, Tensor) else a for a in args)
        entry = _Compiled(cls, *_compile_function(cls, trace_args, kw, key))
        if key is not None:
            _COMPILED[key] = entry
    elif entry.job is not None:
        _tier_poll(entry)
    # read once: this call's forward and its node's backward use the same module
    mod = entry.mod
    if entry.captured:
        extra = mod.compiled.captured_arrays(entry.forward_fn)
        tensors = tensors + [None] * len(extra)
        arrays = arrays + extra
    casts = entry.casts
    if casts is None:   # once per call signature: its dtypes are in the key
        casts = entry.casts = _output_casts(mod, arrays)
    # the fast path above, for the next calls: Tensor arguments only, no captured arrays, no
    # output cast, no background build pending
    entry.fast = (len(tensors) if not entry.captured and not casts and entry.job is None
                  and len(tensors) == len(args) and not kw else 0)
    entry.in_dtypes = tuple([a.dtype for a in arrays])
    if entry.one:
        n = len(tensors)
        if n == 1:
            out = apply1(mod, tensors[0], arrays[0], _NO_PARAMS, entry.name, SAVE_ALL,
                         entry.differentiable[0])
            if casts:
                _recast((out,), casts)
            return out if entry.single else (out,)
        if n == 2:
            out = apply2(mod, tensors[0], tensors[1], arrays[0], arrays[1], entry.name,
                         SAVE_ALL, entry.differentiable[0])
            if casts:
                _recast((out,), casts)
            return out if entry.single else (out,)
    outs = apply_module(mod, tensors, arrays, {}, entry.name, SAVE_ALL,
                        entry.differentiable)
    if casts:
        _recast(outs, casts)
    if entry.single and len(outs) == 1:
        return outs[0]
    return tuple(outs)
