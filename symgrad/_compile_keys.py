"""The compiler's cache keys: what determines a compiled module's text, and when a module kept
for a forward is stale.

`signature_key` hashes the symgrad version, the compiler's own source
(`compiler_fingerprint`), the target, the dtype, the input signature and the forward's
*source identity*: its code and what it reads, transitively (`_source_identity`: helpers it
calls, Functions it applies, classes, closure values and globals; a captured array by content
up to CAPTURED_CONTENT_BYTES, else by identity). `watch_list` and `stale` tell when a global
name a forward reads has been rebound since its module was kept. Moved verbatim out of
`symgrad/compiler.py`, which re-exports every name.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import numbers
import os
import re
import sys
import types
import weakref

import numpy

from . import cache
from ._version import __version__
from .errors import display_path

# a captured array up to this size is part of the cache key by content (a SHA-256 of its
# bytes); a larger one by identity, shape and dtype, and its module is cached in memory only
CAPTURED_CONTENT_BYTES = 1 << 16


def _disk_ok(graph):
    """Whether a module may go to the disk cache: every array its forward captured is found
    again by the runtime (a closure variable, global or default) and keyed by content."""
    return all(where is not None and numpy.asarray(getattr(v, "_data", v)).nbytes
               <= CAPTURED_CONTENT_BYTES for where, v in graph.captured)


def _array_key(value):
    """A captured array's part of the cache key: content for small arrays, identity, shape
    and dtype for large ones (hashing megabytes per call would cost more than it saves)."""
    a = numpy.asarray(getattr(value, "_data", value))
    if a.nbytes <= CAPTURED_CONTENT_BYTES:
        digest = hashlib.sha256(numpy.ascontiguousarray(a).tobytes()).hexdigest()[:24]
        return f"array{a.shape}:{a.dtype}:{digest}"
    return f"array{a.shape}:{a.dtype}@{id(value)}"


def _value_key(value):
    """A closure value's part of the key: arrays (also inside lists, tuples and dicts) by
    `_array_key`, anything else by its repr."""
    if _is_array(value):
        return _array_key(value)
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{', '.join(_value_key(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_value_key(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _is_array(value):
    return isinstance(value, numpy.ndarray) or (
        hasattr(value, "_data") and hasattr(value, "requires_grad") and hasattr(value, "dtype"))


_MISSING = object()


def watch_list(fn) -> tuple:
    """The global names a forward reads that its module depends on (user helpers, Functions
    it applies, constants, transitively, as the cache key covers them): (namespace, name,
    value) each. A per-object memo of the module is `stale` once one of them is rebound, as
    eager code would call the new helper (a harness that rebinds `helper = make(op)` per op
    got the first op's derivatives every time)."""
    target = getattr(fn, "forward", fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return ()
    watch = []
    try:
        _dependencies(code, getattr(target, "__globals__", {}), [], {id(target)}, watch)
    except _Unstable:
        pass
    return tuple(watch)


def stale(watch) -> bool:
    """Whether a name of a `watch_list` is bound to another value now."""
    for namespace, name, value in watch:
        if namespace.get(name, _MISSING) is not value:
            return True
    return False


# --------------------------------------------------------------------------- keys
@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """A hash of the compiler's own source (the package's .py files and templates): a cached
    module is reused only by the compiler that wrote it, also in an editable install where the
    version number does not change. Computed once per process (~2 ms)."""
    import importlib.resources

    roots = [os.path.dirname(os.path.abspath(__file__)),
             str(importlib.resources.files("symgrad.templates"))]
    h = hashlib.sha256()
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "_generated"))
            for name in sorted(files):
                if name.endswith((".py", ".jinja")):
                    path = os.path.join(folder, name)
                    h.update(os.path.relpath(path, root).encode())
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()[:16]


def signature_key(fn, example_inputs, kwargs, target, dtype):
    """The cache key of a compile call, or None when the forward's source is unknown."""
    ident = _source_identity(fn)
    if ident is None:
        return None
    parts = [__version__, compiler_fingerprint(), target, str(dtype), ident]
    for a in list(example_inputs) + sorted(kwargs.items()):
        shape = getattr(a, "shape", None)
        if shape is not None and hasattr(a, "dtype"):
            parts.append(f"T{tuple(shape)}:{a.dtype}")
        else:
            text = repr(a)
            if " at 0x" in text:
                return None
            parts.append(f"C{text}")
    return _hash(*parts)


_BY_OBJECT = weakref.WeakKeyDictionary()


def _object_cache(fn):
    try:
        return _BY_OBJECT.setdefault(fn, {})
    except TypeError:  # not weak-referenceable
        return None


def _signature_text(example_inputs, kwargs, target, dtype):
    parts = [target, str(dtype)]
    for a in list(example_inputs) + sorted(kwargs.items()):
        shape = getattr(a, "shape", None)
        if shape is not None and hasattr(a, "dtype"):
            parts.append(f"T{tuple(shape)}:{a.dtype}")
        else:
            parts.append(f"C{a!r}")
    return "\0".join(parts)


def _source_identity(fn):
    """What identifies a forward's meaning: its code object (bytecode, names, constants, line
    table, recursively), where it is (the path and line the generated header and comments
    show), the values its closure captured, and what it reads, transitively: the global
    numbers, arrays and helpers it names and the functions those call. Not the bytes of its
    whole file: an edit elsewhere in the file keeps the cached module. A forward defined in
    `exec`, `python -c`, the REPL or a notebook cell (no source file) is keyed the same way.
    None (no disk caching) when one of these has no stable text (an object shown by its
    address) or the forward has no code object (a partial, a callable instance)."""
    target = getattr(fn, "forward", fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return None
    parts = [_shown_path(code.co_filename),
             getattr(fn, "__qualname__", getattr(fn, "__name__", "?")), _code_text(code)]
    seen = {id(target)}
    try:
        _captured(target, parts, seen)
        _dependencies(code, getattr(target, "__globals__", {}), parts, seen)
        if inspect.isclass(fn):
            # the class's other methods and attributes: example_inputs (the header's
            # regenerate command), _mask_orders, a setup_context, ...
            _class_parts(fn, parts, seen)
    except _Unstable:
        return None
    return _hash(*parts)


def _shown_path(filename):
    """A code object's file as the generated header shows it (relative to the cwd, as
    errors.display_path): the same file compiled from another directory has another header,
    so another entry. A pseudo-file (<string>, <stdin>, <ipython-input-...>) as it is."""
    if filename.startswith("<"):
        # IPython's <ipython-input-N-hash>: N counts the cells run, the hash is the cell's
        return re.sub(r"^<ipython-input-\d+-", "<ipython-input-", filename)
    if not os.path.exists(filename):
        # a notebook cell's temporary file (ipykernel: /tmp/ipykernel_<pid>/<hash>.py): the
        # same cell in a new kernel is the same forward
        return os.path.basename(filename)
    return display_path(filename)


def _class_parts(cls, parts, seen, watch=None):
    """A user class's own attributes: its simple values (numbers, strings, tuples of them),
    and its functions with what they read."""
    for klass in cls.__mro__:
        if klass is object or _user_file(klass) is None:
            continue
        for attr, value in sorted(vars(klass).items()):
            if attr.startswith("__") and attr.endswith("__"):
                continue
            value = getattr(value, "__func__", value)
            if inspect.isfunction(value):
                if id(value) in seen:
                    continue
                seen.add(id(value))
                parts.append(f"{klass.__qualname__}.{attr}:{_code_text(value.__code__)}")
                try:
                    _captured(value, parts, seen, watch)
                    _dependencies(value.__code__, value.__globals__, parts, seen, watch)
                except _Unstable:
                    # example_inputs only gives the header's --shape options: a global it
                    # reads without a stable repr (a Generator) leaves it keyed by its code
                    if attr != "example_inputs":
                        raise
            elif _simple(value):
                parts.append(f"{klass.__qualname__}.{attr}={value!r}")


def _simple(value) -> bool:
    if isinstance(value, (bool, str, bytes, numbers.Number, type(None))):
        return True
    return isinstance(value, (tuple, frozenset)) and all(
        isinstance(v, (bool, str, numbers.Number)) for v in value)


def _code_text(code) -> str:
    """What a code object computes and where, stably: its bytecode, the names it reads
    (x.asin() and x.acos() differ only there), its constants, its first line and line table
    (the generated code cites the user's lines), and those of the code it nests (whose repr
    would show an address)."""
    consts = [_code_text(c) if isinstance(c, types.CodeType) else
              repr(sorted(map(repr, c))) if isinstance(c, frozenset) else repr(c)
              for c in code.co_consts]
    lines = getattr(code, "co_linetable", None) or getattr(code, "co_lnotab", b"")
    return (f"{code.co_firstlineno}|{code.co_code.hex()}|{code.co_names!r}|{lines.hex()}|"
            f"{'|'.join(consts)}")


class _Unstable(Exception):
    """A value the forward depends on has no stable text (an object shown by its address):
    such a forward is cached in memory on the function object only."""


def _cells(fn) -> list:
    """The values a function's closure holds ("<empty>" for a cell not yet bound)."""
    out = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            out.append("<empty>")
    return out


def _captured(fn, parts, seen, watch=None):
    """What a function holds besides its code: the values its closure captured and its
    default arguments. Two closures of one factory (make(sg.sin), make(sg.exp)) share their
    code and their file, not these."""
    cells = _cells(fn)
    kwdefaults = sorted((getattr(fn, "__kwdefaults__", None) or {}).items())
    for value in cells + list(getattr(fn, "__defaults__", None) or ()) + kwdefaults:
        if inspect.isfunction(value) or inspect.isclass(value):
            if _user_file(value) is not None:
                _dependency("<captured>", value, getattr(value, "__code__", None), parts, seen,
                            watch)
            else:
                # a library function (sg.sin, math.exp): its name says what it is, and the
                # names and numbers it captured which of a factory's functions (sg.amin and
                # sg.amax are both _method.<locals>.op)
                data = [v for v in _cells(value) if isinstance(v, (str, numbers.Number))]
                parts.append(f"{value.__module__}.{value.__qualname__}:{value.__name__}"
                             f"{data!r}")
            continue
        parts.append(_value_text(value))


def _value_text(value) -> str:
    """A value's stable text for the key: a NumPy array or Tensor (also inside lists, tuples
    and dicts) by `_value_key` (content when small, identity when large: the captured-array
    rule), another array type by its dtype, shape and a digest of its bytes (its repr elides
    the middle of a large one), else its repr; _Unstable for a repr that shows an address
    (an object without a repr of its own)."""
    if _is_array(value) or isinstance(value, (list, tuple, dict)):
        text = _value_key(value)
        if " at 0x" in text:
            raise _Unstable
        return text
    if hasattr(value, "__array__") and hasattr(value, "shape") and hasattr(value, "dtype"):
        try:
            a = numpy.ascontiguousarray(numpy.asarray(value))
        except Exception:
            raise _Unstable from None
        if a.dtype != object:
            return (f"array{a.shape}:{a.dtype}:"
                    f"{hashlib.sha256(a.view(numpy.uint8).reshape(-1)).hexdigest()}")
    text = repr(value)
    if " at 0x" in text:
        raise _Unstable
    return text


def _user_file(obj):
    """The source file of a function, class or module outside symgrad, the standard
    library and site-packages, or None. A function or class defined without a source file
    (exec, `python -c`, the REPL, a notebook cell) is the user's: its pseudo-file
    (`<string>`, `<stdin>`, `<ipython-input-1-...>`) or its module's name."""
    try:
        path = inspect.getsourcefile(obj)
    except (TypeError, OSError):
        path = None
    if path is None:
        pseudo = _pseudo_file(obj)
        if pseudo is not None:
            return pseudo
        return None
    path = os.path.abspath(path)
    return None if os.path.realpath(path).startswith(cache.library_dirs()) else path


def _pseudo_file(obj):
    """The code file of a function (or of a class's first function) that has no source
    file on disk, when it is a user's: not frozen, not a library module's."""
    if inspect.ismodule(obj):
        return None
    functions = [obj] if inspect.isfunction(obj) else [
        getattr(v, "__func__", v) for v in vars(obj).values()
        if inspect.isfunction(getattr(v, "__func__", v))] if inspect.isclass(obj) else []
    module = getattr(obj, "__module__", None) or ""
    for fn in functions:
        name = fn.__code__.co_filename
        if name.startswith("<frozen"):
            return None
        if name.startswith("<") or not os.path.exists(name):
            # a library builds functions with exec too (dataclass's __init__ is <string>):
            # the user's are in __main__ (or a module with no file)
            mod = sys.modules.get(module)
            if module == "__main__" or mod is None or getattr(mod, "__file__", None) is None:
                return name
            return None
    if inspect.isclass(obj) and module == "__main__":
        return f"<{module}>"
    return None


def _dependencies(code, globals_, parts, seen, watch=None):
    """What a forward reads besides its own code, transitively: the global numbers it names,
    and the functions (helpers, Functions it applies) it calls, by their code and their file
    (a helper imported from another file edited since, or a constant changed there, must not
    reuse the cached module). `watch`: a list that collects (namespace, name, value) of each
    global that counted (see watch_list)."""
    for const in code.co_consts:              # comprehensions, lambdas, nested functions
        if isinstance(const, types.CodeType):
            _dependencies(const, globals_, parts, seen, watch)
    for name in _global_names(code):
        if name in globals_:
            _watched(globals_, name, code, parts, seen, watch)


@functools.lru_cache(maxsize=4096)
def _global_names(code) -> tuple:
    """The global names a code object reads (not its attribute names: `x.data` is no read of
    a global `data`)."""
    import dis

    return tuple(dict.fromkeys(
        i.argval for i in dis.get_instructions(code)
        if i.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(i.argval, str)))


def _watched(namespace, name, code, parts, seen, watch, shown=None):
    counted = len(parts)
    value = namespace[name]
    _dependency(shown or name, value, code, parts, seen, watch)
    if watch is not None and len(parts) != counted:
        watch.append((namespace, name, value))


def _dependency(name, value, code, parts, seen, watch=None):
    if _simple(value):
        parts.append(f"{name}={value!r}")
    elif _is_array(value):   # a global array the forward may capture
        parts.append(f"{name}={_array_key(value)}")
    elif isinstance(value, types.ModuleType):
        if _user_file(value) is None or id(value) in seen:
            return
        seen.add(id(value))
        for attr in code.co_names:          # helpers.act, consts.SCALE
            if attr in vars(value):
                _watched(vars(value), attr, code, parts, seen, watch, f"{name}.{attr}")
    elif inspect.isfunction(value) or inspect.isclass(value):
        path = _user_file(value)
        if path is None or id(value) in seen:
            return
        seen.add(id(value))
        parts.append(f"{name}@{_shown_path(path)}")
        if inspect.isclass(value):
            _class_parts(value, parts, seen, watch)
            return
        parts.append(_code_text(value.__code__))
        _captured(value, parts, seen, watch)
        _dependencies(value.__code__, value.__globals__, parts, seen, watch)
    elif inspect.isroutine(value) or inspect.isclass(value):
        # a library's routine or class (math.exp, sg.sin, sg.Tensor): what it is does not
        # change with the user's edits
        parts.append(f"{name}:{getattr(value, '__module__', '')}."
                     f"{getattr(value, '__qualname__', type(value).__qualname__)}")
    else:
        # a global array, list, dict or object the forward reads: its value (an edit of the
        # file no longer invalidates everything, so the data it reads must key the module)
        parts.append(f"{name}={_value_text(value)}")


def _hash(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def _dtype_name(dtype, examples):
    """The dtype a C or CUDA module computes in: `dtype`, else the widest of the float
    examples' (float32 * float64 computes in float64, as NumPy and torch promote)."""
    from ._dtypes import dtype_name

    if dtype is not None:
        return dtype_name(dtype)
    floats = [dtype_name(a.dtype) for a in examples
              if "float" in str(getattr(a, "dtype", ""))]
    return "float64" if "float64" in floats else floats[0] if floats else "float32"
