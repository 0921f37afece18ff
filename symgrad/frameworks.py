"""symgrad inside PyTorch and JAX: `to_torch(F)` and `to_jax(F)`.

Both take a forward-only `sg.Function`, a plain function of tensors, or a compiled module, and
return the framework's own differentiable function whose forward and backward are symgrad's
generated code for that framework (the "torch" / "jax" targets): the stabilized, CSE'd steps
as ordinary torch / jax.numpy operations on the caller's device and dtype.

- A module is compiled per call signature (shapes, dtypes, constant arguments), cached in
  memory per function and on disk like every module; a compiled module given directly is
  re-emitted once for the framework from its graph.
- Derivatives of every order are generated ones: the backward of the backward is the
  backward of `module.grad_module()`, wrapped the same way (see docs/pytorch-and-jax.md for
  the measurement that chose this over differentiating the backward's torch ops).
- `to_torch` runs the fused C module of the same program on CPU tensors (symgrad/_torch_c.py:
  tiered like the runtime's CPU target), the torch target elsewhere.
"""
from __future__ import annotations

from ._dtypes import dtype_name as _dtype_name   # the one normaliser (symgrad/_dtypes.py)

__all__ = ["to_torch", "to_jax"]


def _is_array(a) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, (int, float))


_DTYPES = frozenset({"float32", "float64", "bool", "int8", "int16", "int32", "int64", "uint8"})


class _Modules:
    """The modules of one function for one target, per call signature."""

    def __init__(self, fn, target):
        self.fn = fn
        self.target = target
        self.by_signature = {}
        self.by_key = {}      # the per-call fast path: (type, shape, dtype) / (type, value) keys
        self.fixed = self._from_module(fn) if _is_compiled(fn) else None

    def _from_module(self, module):
        from .compiler import _cached, _hash, compile_graph

        if module.target == self.target:
            return _registered(module)
        key = None if module.key is None else _hash(module.key, "target", self.target)
        hit = _cached(key, self.target, retrace=lambda: module.graph)
        return _registered(hit or compile_graph(lambda: module.graph, self.target,
                                                module.meta.get("dtype"), key,
                                                retrace=lambda: module.graph))

    def get(self, args, check=None):
        """(module, positions of the arguments that are its inputs). Each call looks its
        arguments' (type, shape, dtype) -- a constant's (type, value) -- up first: the
        signature below (dtype names, shape tuples, validation, `check(args)`) runs once per
        new key, not on every call (it cost ~1/3 of sg.to_torch's per-call overhead)."""
        try:
            key = tuple((type(a), a.shape, a.dtype) if _is_array(a) else (type(a), a)
                        for a in args)
            hit = self.by_key.get(key)
        except TypeError:           # an unhashable constant
            key = hit = None
        if hit is not None:
            from .compiler import stale

            if not stale(hit[2]):
                return hit[0], hit[1]
        if check is not None:
            check(args)
        module, positions = self._get(args)
        if key is not None:
            watch = () if self.fixed is not None else self.by_signature_watch
            self.by_key[key] = (module, positions, watch)
        return module, positions

    def _get(self, args):
        positions = tuple(i for i, a in enumerate(args) if _is_array(a))
        self.by_signature_watch = ()
        if self.fixed is not None:
            if len(positions) != len(self.fixed.input_names):
                raise TypeError(f"{self.fixed.meta.get('name')} takes "
                                f"{len(self.fixed.input_names)} tensors "
                                f"({', '.join(self.fixed.input_names)}), got {len(positions)}")
            return self.fixed, positions
        sig = []
        for i, a in enumerate(args):
            if _is_array(a):
                dtype = _dtype_name(a.dtype)
                if dtype not in _DTYPES:
                    raise _dtype_error(_name_of(self.fn))(i, dtype)
                sig.append((tuple(int(n) for n in a.shape), dtype))
            else:
                try:
                    hash(a)
                    sig.append(("const", type(a).__name__, a))
                except TypeError:
                    sig.append(("const", repr(a)))
        sig = tuple(sig)
        hit = self.by_signature.get(sig)
        from .compiler import stale, watch_list

        if hit is None or stale(hit[1]):
            import numpy

            from .compiler import compile

            examples = [numpy.zeros(s[0], dtype=s[1]) if i in positions else args[i]
                        for i, s in enumerate(sig)]
            module = compile(self.fn, *examples, target=self.target)
            hit = self.by_signature[sig] = (_registered(module), watch_list(self.fn))
        self.by_signature_watch = hit[1]
        return hit[0], positions


def _registered(module):
    """The module, its loaded code registered in sys.modules under its own name: torch.compile
    (dynamo) of a user function that calls G.apply traces into the generated functions and
    imports their module by name (ModuleNotFoundError: 'symgrad:<key>' otherwise)."""
    import sys

    raw = getattr(module, "raw", None)
    name = getattr(raw, "__name__", None) if isinstance(raw, type(sys)) else None
    if name is not None and sys.modules.get(name, raw) is raw:
        sys.modules[name] = raw
    return module


def _is_compiled(fn) -> bool:
    from .compiler import CompiledModule

    return isinstance(fn, CompiledModule)


def _name_of(fn) -> str:
    if _is_compiled(fn):
        return str(fn.meta.get("name", "Generated"))
    return getattr(fn, "__name__", type(fn).__name__)


# --------------------------------------------------------------------------- torch
_TORCH_NODES = {}


def _torch_node():
    """The torch.autograd.Function that runs one generated module: forward(module, needed,
    *inputs); its backward is, under create_graph, the same node on the module's
    grad_module (generated derivatives of every order), else the module's backward."""
    hit = _TORCH_NODES.get("node")
    if hit is not None:
        return hit
    import torch

    class GeneratedNode(torch.autograd.Function):
        @staticmethod
        def forward(ctx, module, *inputs):
            outs = module.raw.forward(*inputs)
            ctx.module = module
            ctx.save_for_backward(*inputs)
            _mark(ctx, module, outs)
            return tuple(outs)

        @staticmethod
        def backward(ctx, *grads):
            inputs = ctx.saved_tensors
            return (None,) + tuple(_torch_backward(ctx.module, grads, inputs,
                                                   ctx.needs_input_grad[1:]))

    _TORCH_NODES["node"] = GeneratedNode
    return GeneratedNode


_TORCH_DTYPE_NAMES = {}


def _output_dtypes(module, inputs, names=None):
    """Per output, the dtype name torch gives it where it differs from the one the module
    computes in (the promotion of all its float inputs), else None; () when none differs.
    Mixed float32 / float64 inputs only: torch promotes op by op, so an output computed from
    float32 inputs alone is float32 (fuzz seeds 9, 15, 18, 20 of tests/test_fuzz_frameworks.py;
    the runtime's compiled Functions do the same, autograd._compiled_functions)."""
    want = getattr(module, "output_dtypes", None)
    if not want:
        return ()
    have = tuple(_dtype_name(a.dtype) if names is None else names.get(a.dtype)
                 for a in inputs)
    if have != module.input_dtypes:
        return ()
    floats = {d for d in have if d in ("float32", "float64")}
    if len(floats) < 2:
        return ()
    return tuple(w if w in floats and w != "float64" else None for w in want)


def _torch_dtypes(module, inputs, outs):
    """outs with _output_dtypes' casts. The dtype names come from a dict of torch dtypes:
    dynamo traces this (torch.compile of a function calling G.apply) and cannot run
    _dtype_name's numpy.dtype(torch.float64)."""
    import torch

    names = _TORCH_DTYPE_NAMES or _TORCH_DTYPE_NAMES.update(
        {getattr(torch, n): n for n in _DTYPES}) or _TORCH_DTYPE_NAMES
    casts = _output_dtypes(module, inputs, names)
    if not casts:
        return outs

    return [o if c is None or o is None else o.to(getattr(torch, c))
            for o, c in zip(outs, casts)]


def _mark(ctx, module, outs):
    fixed = [o for o, d in zip(outs, module.differentiable_outputs)
             if o is not None and not d]
    if fixed:
        ctx.mark_non_differentiable(*fixed)


# "generated": under create_graph the backward is a node whose own backward is the generated
# second-order module; "torch": the backward's torch operations are recorded and differentiated
# by torch's autograd (see docs/pytorch-and-jax.md for the measurement)
DOUBLE_BACKWARD = "generated"


def _torch_backward(module, grads, inputs, needed, mode=None, saved=(), compile=False):
    """The gradients of the inputs in `needed` (None for the others). `saved`: the values
    forward_saving kept, read by backward_saved where no graph is being recorded (they were
    computed without one, so a create_graph backward recomputes from the inputs)."""
    import torch

    given = grads
    grads = [g if d else None for g, d in zip(grads, module.differentiable_outputs)]
    mode = mode or DOUBLE_BACKWARD
    recording = torch.is_grad_enabled()
    if not recording:    # a plain backward (no create_graph): torch runs it without grad mode
        if saved:
            out = _routine(module, "backward_saved", compile)(*grads, *saved, *inputs)
        else:
            out = _routine(module, "backward", compile)(*grads, *inputs)
    elif any(t is not None and t.requires_grad for t in list(grads) + list(inputs)):
        if mode == "torch":
            out = module.raw.backward(*grads, *inputs)
        else:
            grad_module = _registered(module.grad_module(tuple(bool(n) for n in needed)))
            # a non-differentiable output's gradient as torch materialized it (zeros), not
            # None: the second-order backward takes zeros_like of each of its inputs
            out = _torch_node().apply(grad_module, *[g if g is not None else h for g, h in
                                                     zip(grads, given)], *inputs)
    else:
        with torch.no_grad():
            if saved:
                out = _routine(module, "backward_saved", compile)(*grads, *saved, *inputs)
            else:
                out = _routine(module, "backward", compile)(*grads, *inputs)
    return [g if n else None for g, n in zip(out, needed)]


_COMPILED = {}


def _routine(module, name, compile):
    """module.raw.<name> (None if absent), through torch.compile(fullgraph=True) if compile:
    the generated steps fused by inductor (compiled on first use, per module)."""
    fn = getattr(module.raw, name, None)
    if fn is None or not compile:
        return fn
    hit = _COMPILED.get((id(module), name))
    if hit is None or hit[0] is not module:
        import torch

        hit = _COMPILED[(id(module), name)] = (module, torch.compile(fn, fullgraph=True,
                                                                     dynamic=False))
    return hit[1]


def _torch_captured(module, inputs):
    """The arrays the module's forward captured, as tensors on the inputs' device (float ones
    in the inputs' float dtype: constants, as a NumPy module computes them in its dtype)."""
    import torch

    device = next((t.device for t in inputs if isinstance(t, torch.Tensor)), None)
    fdt = next((t.dtype for t in inputs if isinstance(t, torch.Tensor) and
                t.is_floating_point()), torch.float64)
    return [torch.as_tensor(a, dtype=fdt if a.dtype.kind == "f" else None, device=device)
            for a in module.captured_arrays()]


def _jax_captured(module, inputs):
    """The captured arrays for the JAX module (float ones in the inputs' float dtype)."""
    import jax.numpy as jnp

    floats = [x for x in inputs if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    fdt = jnp.result_type(*floats) if floats else None
    return [jnp.asarray(a, dtype=fdt if a.dtype.kind == "f" else None)
            for a in module.captured_arrays()]


def _dtype_error(name):
    def error(i, dtype):
        return TypeError(
            f"{name}: argument {i} is {dtype}; symgrad's generated code computes in float32 or "
            f"float64 (integer and bool arguments are indices and masks): cast it, e.g. "
            f"x.float() or x.double()")
    return error


TORCH_TARGETS = (None, "torch", "c")


def to_torch(F, double_backward=None, compile=False, target=None):
    """A `torch.autograd.Function` subclass computing F with symgrad's generated forward and
    backward, on CPU or CUDA tensors of float32 / float64.

    F: a forward-only `sg.Function` subclass, a plain function of tensors, or a
    `CompiledModule`. Call the result as `G.apply(*args)`: tensor arguments are the inputs
    (a module is compiled per shapes and dtypes, cached), other arguments are constants of the
    trace.

    `target`: which generated code runs. None (the default): CPU tensors run the fused C
    module (one pass per routine, zero-copy through NumPy views of the tensors), tiered as
    the runtime's CPU target (docs/fast-by-default.md: a signature's first calls run the
    torch target while the C module builds in the background, `sg.wait_for_builds()` waits;
    SYMGRAD_CPU_TARGET=numpy means the torch target here); CUDA tensors, `compile=True`,
    calls inside torch.compile's tracing and a create_graph backward run the "torch" target
    (torch operations on the inputs' device and dtype). "torch" / "c" pin it ("c" on a CUDA
    tensor is an error). `G.runs` counts the forwards run on each ({"c": n, "torch": m}).

    `double_backward`: "generated" (default: the backward of the backward is symgrad's
    generated second-order module) or "torch" (torch's autograd differentiates the
    backward's torch operations). `compile`: run the generated torch forward and backward
    through `torch.compile(fullgraph=True)` (inductor fuses their steps; each module compiles
    on first use, which takes seconds); a create_graph backward runs uncompiled.
    """
    import torch

    if double_backward not in (None, "generated", "torch"):
        raise ValueError(f"to_torch: double_backward must be 'generated' or 'torch', got "
                         f"{double_backward!r}")
    if target not in TORCH_TARGETS:
        raise ValueError(f"to_torch: target must be None (the default: C on CPU tensors, "
                         f"tiered), 'torch' or 'c', got {target!r}")
    if target == "c" and compile:
        raise ValueError("to_torch: compile=True runs the torch target through "
                         "torch.compile; it cannot be combined with target='c'")
    modules = _Modules(F, "torch")
    name = _name_of(F)
    dtype_error = _dtype_error(name)
    cpath = None
    if target != "torch" and not compile:
        from ._torch_c import CPath

        fixed_c = (lambda: _Modules(F, "c").fixed) if modules.fixed is not None else None
        cpath = CPath(F, name, target, dtype_error, fixed_c,
                      lambda args: modules.get(args, check))
    runs = cpath.runs if cpath is not None else {"c": 0, "torch": 0}
    is_compiling = torch.compiler.is_compiling

    def check(args):
        for i, a in enumerate(args):
            if _is_array(a) and not isinstance(a, torch.Tensor):
                raise TypeError(f"{name}.apply: argument {i} is a {type(a).__module__}."
                                f"{type(a).__name__}; pass torch tensors (torch.as_tensor)")

    def torch_forward(ctx, args):
        module, positions = modules.get(args, check)
        inputs = [args[i] for i in positions]
        if module.captured:      # arrays the forward captured (sg.fori_loop's index, ...)
            inputs += _torch_captured(module, inputs)
        saving = _routine(module, "forward_saving", compile)
        if saving is not None:
            # the saving plan: keep the intermediates the backward would recompute
            outs, saved = saving(*inputs)
            # a saved number (a step of constants only) as a 0-d tensor; float64 keeps its
            # digits and does not promote float32 tensors
            saved = [v if isinstance(v, torch.Tensor) or v is None else torch.as_tensor(
                v, dtype=torch.float64 if isinstance(v, float) else None) for v in saved]
            # mixed float32 / float64 inputs: backward_saved computes in the promoted dtype
            # and casts its arguments, not the saved values; a float32 one met a float64
            # gradient in a matmul (fuzz seed 804 of tests/test_fuzz_frameworks.py)
            fdt = [a.dtype for a in inputs if a.is_floating_point()]
            if any(d != fdt[0] for d in fdt):
                promoted = fdt[0]
                for d in fdt[1:]:
                    promoted = torch.promote_types(promoted, d)
                saved = [v.to(promoted) if isinstance(v, torch.Tensor) and v.is_floating_point()
                         and v.dtype != promoted else v for v in saved]
        else:
            outs, saved = _routine(module, "forward", compile)(*inputs), ()
        ctx.c = None
        ctx.module, ctx.positions, ctx.n_args = module, positions, len(args)
        ctx.n_inputs = len(inputs)
        ctx.save_for_backward(*inputs, *saved)
        cast = _torch_dtypes(module, [args[i] for i in positions], outs)
        # the gradient of an output cast to float32 arrives float32: the backward gets it in
        # the dtype the module computed that output in (fuzz seed 804 of the extreme run)
        ctx.grad_dtypes = [None if c is o or o is None else o.dtype
                           for c, o in zip(cast, outs)] if cast is not outs else None
        outs = cast
        _mark(ctx, module, outs)
        return tuple(outs) if module.returns_tuple else outs[0]

    def forward(ctx, *args):
        if cpath is not None and not is_compiling():
            c = cpath.lookup(args, check)
            if c is not None:
                runs["c"] += 1
                return c.forward(ctx, args)
            runs["torch"] += 1
        return torch_forward(ctx, args)

    def backward(ctx, *grads):
        c = ctx.c
        if c is not None:
            if not torch.is_grad_enabled():
                return c.backward(ctx, grads)
            return c_create_graph(ctx, c, grads)
        tensors = ctx.saved_tensors
        inputs, saved = tensors[:ctx.n_inputs], tensors[ctx.n_inputs:]
        if ctx.grad_dtypes is not None:
            grads = [g if d is None or g is None else g.to(d)
                     for g, d in zip(grads, ctx.grad_dtypes)]
        needed = [ctx.needs_input_grad[i] for i in ctx.positions]
        needed += [False] * (ctx.n_inputs - len(needed))   # the captured arrays: constants
        out = [None] * ctx.n_args
        for i, g in zip(ctx.positions, _torch_backward(ctx.module, grads, inputs, needed,
                                                        double_backward, saved, compile)):
            out[i] = g
        return tuple(out)

    def c_create_graph(ctx, c, grads):
        """A create_graph backward of a forward that ran on C: the torch target's (its
        generated second-order module records the double backward)."""
        module, positions = modules.get(c.standins)
        inputs = list(ctx.saved_tensors[:len(positions)])
        if module.captured:
            inputs += _torch_captured(module, inputs)
        needed = [ctx.needs_input_grad[i] for i in positions]
        needed += [False] * (len(inputs) - len(needed))
        out = [None] * c.n_args
        for i, g in zip(positions, _torch_backward(module, grads, inputs, needed,
                                                    double_backward)):
            out[i] = g
        return tuple(out)

    doc = (f"{name} as a torch.autograd.Function (symgrad's generated forward and backward: "
           f"the C module on CPU tensors, the torch target elsewhere). Call {name}.apply(*args).")
    cls = type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward), "backward": staticmethod(backward),
        "__doc__": doc, "__module__": getattr(F, "__module__", __name__),
        "modules": modules, "runs": runs, "target": target, "c_path": cpath,
    })
    return cls


# --------------------------------------------------------------------------- JAX
_JAX_FUNCTIONS = {}


def _jax_function(module, level=0):
    """A jax.custom_vjp function returning a tuple: level 0 runs the module's forward,
    level 1 its backward, level k + 1 the backward of the module that level k's backward
    is the forward of (grad_module). Its vjp is the next level, so derivatives of every
    order are generated ones, and a second-order module is compiled only when a second
    derivative is traced."""
    key = (id(module), level)
    hit = _JAX_FUNCTIONS.get(key)
    if hit is not None and hit[0] is module:
        return hit[1]
    import jax

    if level == 0:
        run = module.raw.forward

        def next_level():
            return _jax_function(module, 1)
    else:
        run = module.raw.backward

        def next_level():
            return _jax_function(_registered(module.grad_module()), level + 1)

    @jax.custom_vjp
    def f(*xs):
        return tuple(run(*xs))

    def f_fwd(*xs):
        return f(*xs), xs

    def f_bwd(xs, gs):
        if level == 0:
            gs = [g if d else None for g, d in zip(gs, module.differentiable_outputs)]
        out = next_level()(*gs, *xs)
        return tuple(_jax_cotangent(g, x) for g, x in zip(out, xs))

    f.defvjp(f_fwd, f_bwd)
    _JAX_FUNCTIONS[key] = (module, f)
    return f


def _jax_cotangent(g, x):
    """The cotangent JAX expects for input x: g, or zeros (float0 for an integer input)."""
    import jax
    import jax.numpy as jnp
    import numpy

    dtype = jnp.result_type(x)
    if not jnp.issubdtype(dtype, jnp.inexact):
        return numpy.zeros(jnp.shape(x), dtype=jax.dtypes.float0)
    if g is None:
        return jnp.zeros(jnp.shape(x), dtype)
    return jnp.broadcast_to(jnp.asarray(g, dtype), jnp.shape(x))


def to_jax(F):
    """A JAX function computing F with symgrad's generated forward and backward (the "jax"
    target) as a `jax.custom_vjp`: it works under jax.jit, jax.grad (of any order: the
    derivatives are generated ones), jax.vmap, on every JAX device.

    F: a forward-only `sg.Function` subclass, a plain function of tensors, or a
    `CompiledModule`. Array arguments are the inputs (a module is compiled per shapes and
    dtypes, cached); other arguments are constants of the trace.
    """
    modules = _Modules(F, "jax")

    def fn(*args):
        module, positions = modules.get(args)
        inputs = [args[i] for i in positions]
        if module.captured:      # arrays the forward captured (sg.fori_loop's index, ...)
            inputs += _jax_captured(module, inputs)
        outs = _jax_function(module)(*inputs)
        casts = _output_dtypes(module, inputs[:len(positions)])
        if casts:
            outs = [o if c is None else o.astype(c) for o, c in zip(outs, casts)]
        return tuple(outs) if module.returns_tuple else outs[0]

    fn.__name__ = fn.__qualname__ = _name_of(F)
    fn.__doc__ = (f"{_name_of(F)} through symgrad's generated JAX forward and backward "
                  f"(a jax.custom_vjp).")
    fn.modules = modules
    return fn
