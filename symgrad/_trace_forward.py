"""The forward being traced, as trace() reads it: its `ctx` (`TraceCtx`), its signature and
a call's arguments split into tensor inputs and constants (`forward_of`, `bind_inputs`,
`_rebuild_call`), the inputs' names in generated code (`_input_name`), its provenance
(`source_of`, `source_line`), and what it reads besides its arguments: captured arrays
(`locate_captured`, `resolve_captured`), named float globals, the user's helper files. Moved
verbatim from trace.py (which re-exports every name).
"""
from __future__ import annotations

import functools
import inspect
import keyword
import os
import sys

from .errors import TraceError
from ._trace_shapes import TensorSpec, _is_tensor_like
from ._trace_sites import display_path


class TraceCtx:
    """The `ctx` a forward sees while traced: records what it needs, ignores the rest."""

    def __init__(self, n_inputs):
        self.needs_input_grad = (True,) * n_inputs
        self.non_differentiable = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def save_for_forward(self, *tensors):   # for a jvp of the Function's own (forward AD)
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors):
        raise TraceError("mark_dirty in a forward without backward: a traced forward cannot "
                         "modify its inputs in place")

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable += tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    def __setattr__(self, key, value):
        object.__setattr__(self, key, value)


def forward_of(fn):
    """(callable, takes_ctx, display name) for a Function subclass or a plain function."""
    forward = getattr(fn, "forward", None)
    if isinstance(fn, type) and forward is not None:
        # torch 2 style: with a setup_context, forward takes no ctx
        return forward, not _defines_setup_context(fn), fn.__name__
    if isinstance(fn, functools.partial):   # named by the module-level name bound to it
        return fn, False, source_of(fn).rpartition(":")[2]
    if callable(fn):
        return fn, False, getattr(fn, "__name__", type(fn).__name__)
    raise TraceError(f"cannot trace {fn!r}: expected a Function subclass or a function")


def _defines_setup_context(cls) -> bool:
    for klass in cls.__mro__:
        if "setup_context" in vars(klass):
            return klass.__module__ != "symgrad.autograd.function"   # not the base class's
    return False


def source_line(fn) -> str | None:
    """'file.py:12' where `fn` is defined (its `def` line), or None."""
    try:
        path = inspect.getsourcefile(fn)
        line = fn.__code__.co_firstlineno
    except (TypeError, OSError, AttributeError):
        return None
    return f"{display_path(path)}:{line}" if path else None


def source_of(fn) -> str:
    """'file.py:Name' of a traced callable, for provenance headers: what `symgrad compile`
    takes. A lambda, a closure or a functools.partial bound to a module-level name is named
    by it (`square = lambda x: x * x` is file.py:square, not file.py:<lambda>)."""
    code_owner = fn.func if isinstance(fn, functools.partial) else fn
    try:
        path = inspect.getsourcefile(code_owner)
    except (TypeError, OSError):
        path = None
    name = getattr(fn, "__qualname__", None)
    if name is None or "<" in name:
        module = sys.modules.get(getattr(code_owner, "__module__", None) or "")
        bound = next((k for k, v in vars(module).items() if v is fn), None) if module else None
        name = bound or name or getattr(code_owner, "__qualname__", type(fn).__name__)
    return f"{display_path(path)}:{name}" if path else name


def bind_inputs(fn, args, kwargs=None):
    """Split a call's arguments into tensor inputs (name, example) and constants (name, value)."""
    forward, takes_ctx, name = forward_of(fn)
    try:
        sig = inspect.signature(forward)
    except (TypeError, ValueError):
        sig = None
    params = list(sig.parameters.values()) if sig else []
    if takes_ctx and params:
        params = params[1:]
    try:
        bound = (inspect.Signature(params).bind_partial(*args, **(kwargs or {})) if sig
                 else None)
    except TypeError as exc:
        raise TraceError(f"{_call_label(fn, name)}: {exc} (given {_count(len(args), 'input')}; "
                         f"it takes {_signature_text(params)})") from None
    tensors, constants, call = [], [], []
    if bound is None:
        for i, a in enumerate(args):
            (tensors if _is_tensor_like(a) else constants).append((f"x{i}", a))
        return tensors, constants, None
    explicit = dict(bound.arguments)
    generic = not any(_is_tensor_like(v) for v in explicit.values())
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            values = explicit.get(p.name, ())
            if p.kind == p.VAR_KEYWORD:
                for k, v in dict(values).items():
                    (tensors if _is_tensor_like(v) else constants).append((k, v))
                continue
            for i, v in enumerate(values):
                (tensors if _is_tensor_like(v) else constants).append((f"{p.name}{i}", v))
            continue
        if p.name in explicit:
            v = explicit[p.name]
            (tensors if _is_tensor_like(v) else constants).append((p.name, v))
        elif p.default is not p.empty:
            constants.append((p.name, p.default))
        elif generic:
            tensors.append((p.name, TensorSpec()))
        else:
            raise TraceError(f"{_call_label(fn, name)}: missing argument '{p.name}' (given "
                             f"{_count(len(args), 'input')}; it takes {_signature_text(params)})")
    return tensors, constants, params


def _call_label(fn, name):
    """'Name.forward' for a Function class, 'name' for a plain function (for messages)."""
    return f"{name}.forward" if isinstance(fn, type) else name


def _count(n, noun):
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _signature_text(params):
    try:   # with its '*' and '/' markers: (x, y, *, scale=2.0)
        return str(inspect.Signature(params))
    except ValueError:
        return "(" + ", ".join(str(p) for p in params) + ")"


_RESERVED = {"numpy", "cupy", "math", "grad", "out", "dtype", "shape"}


def _input_name(name):
    """An input's name in generated code: not a module's import, local or helper (every
    helper's name begins with '_': an input `_sum` would shadow `_sum()`), nor a term name."""
    name = name if name.isidentifier() else "x"
    if name.startswith("_"):
        stripped = name.lstrip("_")
        name = (stripped if stripped[:1].isalpha() else f"x{stripped}") + "_"
    if (name in _RESERVED or keyword.iskeyword(name)
            or name.startswith(("t", "v")) and name[1:].isdigit()
            or name.startswith("out") and name[3:].isdigit()):   # out0, out1: output names
        name = f"{name}_"
    return name


def _named_globals(forward):
    """(name, value) of the module globals holding a float that `forward`'s code (and the
    code nested in it) reads by name: the docstring formulas name those numbers."""
    forward = getattr(forward, "__func__", forward)
    code = getattr(forward, "__code__", None)
    space = getattr(forward, "__globals__", None)
    if code is None or not isinstance(space, dict):
        return ()
    names, stack = [], [code]
    while stack:
        c = stack.pop()
        names.extend(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return tuple((n, space[n]) for n in dict.fromkeys(names)
                 if type(space.get(n)) is float)


def locate_captured(forward, array):
    """How the runtime finds a captured array on each call, so that it sees the array's
    current contents: ("cell", i) in the forward's closure, ("default", i), ("global", name)
    among the names its code reads; None (the trace-time array is kept) when it is none of
    these (made inside the forward, reached through an object)."""
    forward = getattr(forward, "__func__", forward)
    for i, cell in enumerate(getattr(forward, "__closure__", None) or ()):
        try:
            if cell.cell_contents is array:
                return ("cell", i)
        except ValueError:
            pass
    for i, value in enumerate(getattr(forward, "__defaults__", None) or ()):
        if value is array:
            return ("default", i)
    code = getattr(forward, "__code__", None)
    namespace = getattr(forward, "__globals__", {})
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        for name in c.co_names:
            if namespace.get(name, None) is array:
                return ("global", name)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return None


def resolve_captured(forward, where, fallback):
    """The array a `locate_captured` answer names now (`fallback` when it names none)."""
    if where is None:
        return fallback
    forward = getattr(forward, "__func__", forward)
    kind, key = where
    try:
        if kind == "cell":
            return forward.__closure__[key].cell_contents
        if kind == "default":
            return forward.__defaults__[key]
        return forward.__globals__[key]
    except (IndexError, KeyError, ValueError, TypeError, AttributeError):
        return fallback


def _file_recorder(files):
    """A sys.setprofile hook collecting the file of every Python function called. Marked
    (`symgrad_recorder`): an op's own formula building switches it off (`muted_recorder`)."""
    add = files.add

    def hook(frame, event, arg):
        if event == "call":
            add(frame.f_code.co_filename)
    hook.symgrad_recorder = True
    return hook


def muted_recorder():
    """Switch the trace's file recorder (`_file_recorder`, trace() installs it) off, for an
    op that builds its formula from symgrad's and SymPy's code only (whose files are never a
    user's: `_user_files` drops them); returns the hook, for `sys.setprofile(hook)` when the op
    is done, or None (no recorder of ours: a user's profiler is never switched off).
    While any profile hook is set, CPython 3.11 runs every frame through its tracing dispatch,
    not only the hook: an unrolled program's elementwise ops took twice their time with it."""
    hook = sys.getprofile()
    if hook is not None and getattr(hook, "symgrad_recorder", False):
        sys.setprofile(None)
        return hook
    return None


def _user_files(files, forward):
    """The recorded files that can change what the forward traces to: the user's own modules
    (helpers the forward calls), sorted; not its own file (already in the cache key)."""
    from .cache import library_dirs

    own = getattr(getattr(forward, "__code__", None), "co_filename", None)
    skip = library_dirs()
    out = []
    for f in files:
        if f == own or f.startswith("<"):   # <frozen ...>, <string> (dataclass methods), ...
            continue
        real = os.path.realpath(f) if os.path.isabs(f) else f
        if not real.startswith(skip):
            out.append(f)
    return tuple(sorted(out))


def _rebuild_call(params, values, constants, example_inputs):
    """The forward's (args, kwargs), with traced values in place of tensors."""
    if params is None:
        it = iter(values.values())
        return [next(it) if _is_tensor_like(a) else a for a in example_inputs], {}
    args, kwargs = [], {}
    named = {p.name for p in params}
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            k = 0
            while f"{p.name}{k}" in values or f"{p.name}{k}" in constants:
                key = f"{p.name}{k}"
                args.append(values.get(key, constants.get(key)))
                k += 1
        elif p.kind == p.VAR_KEYWORD:
            for key in [*values, *constants]:
                if key not in named and not _is_var_positional_key(key, params):
                    kwargs[key] = values.get(key, constants.get(key))
        elif p.name in values or p.name in constants:
            value = values.get(p.name, constants.get(p.name))
            if p.kind == p.KEYWORD_ONLY:
                kwargs[p.name] = value
            else:
                args.append(value)
    return args, kwargs


def _is_var_positional_key(key, params):
    return any(p.kind == p.VAR_POSITIONAL and key.startswith(p.name) and key[len(p.name):].isdigit()
               for p in params)
