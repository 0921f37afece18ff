"""Resolve `FILE.py:NAME` to a forward and its example inputs.

The file is imported as a module with a stable name (`symgrad_user_<stem>`), its directory on
`sys.path` while it imports, so its own imports work and its `if __name__ == "__main__":`
block does not run. Every problem is a `UsageError` (exit 2) or a `LoadError` (exit 1) with a
one-line message.
"""
from __future__ import annotations

import difflib
import functools
import importlib.util
import inspect
import os
import sys
import traceback

import numpy

from symgrad.errors import display_path

# Nothing here imports symgrad.trace (which imports SymPy, ~2 s): --help, --version, `cache`
# and a compile that hits the cache never need it.


class Spec:
    """An input given by shape and dtype only (symgrad.trace.TensorSpec's fields, which the
    tracer reads the same way), without importing the tracer."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape=None, dtype="float32"):
        self.shape, self.dtype = shape, dtype

    def __repr__(self):
        return f"TensorSpec(shape={self.shape!r}, dtype={self.dtype!r})"


class UsageError(Exception):
    """The command line names something that does not exist or is not usable (exit 2)."""


class LoadError(Exception):
    """The file exists but importing it failed (exit 1)."""


def split_spec(spec: str) -> tuple[str, str | None]:
    """'path/to/file.py:Name' -> ('path/to/file.py', 'Name'); the name is optional."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or os.sep in name or "/" in name:
        return spec, None
    return path, name or None


def import_file(path: str):
    """Import the Python file at `path` under a stable module name."""
    if not os.path.exists(path):
        raise UsageError(f"no such file: {path}")
    if not os.path.isfile(path) or not path.endswith(".py"):
        raise UsageError(f"not a Python file: {path} (expected FILE.py:NAME)")
    full = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(full))[0]
    name = "symgrad_user_" + "".join(c if c.isalnum() else "_" for c in stem)
    spec = importlib.util.spec_from_file_location(name, full)
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(full)
    sys.modules[name] = module          # inspect.getsourcefile finds classes through this
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        where = f"{display_path(exc.filename or full)}:{exc.lineno}"
        raise LoadError(f"cannot import {path}: SyntaxError: {exc.msg} (at {where})") from exc
    except Exception as exc:
        del sys.modules[name]
        raise LoadError(f"cannot import {path}: {one_line(exc)}{user_frame(exc)}") from exc
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return module


def is_function_class(obj) -> bool:
    """A class with a `forward` (an `sg.Function` subclass, or any class shaped like one)."""
    return inspect.isclass(obj) and callable(getattr(obj, "forward", None))


def candidates(module, every=False) -> list[str]:
    """Names in `module` that can be compiled: its Function classes, else its functions
    (`every`: the classes and the functions, for listing them in a message)."""
    own = [(k, v) for k, v in vars(module).items()
           if getattr(v, "__module__", None) == module.__name__ and not k.startswith("_")]
    classes = [k for k, v in own if is_function_class(v)]
    functions = [k for k, v in own if inspect.isfunction(v)]
    functions += [k for k, v in vars(module).items() if isinstance(v, functools.partial)
                  and not k.startswith("_") and every]
    if every:
        return classes + functions
    return classes or functions


def resolve(spec: str):
    """(forward object, path, name) for 'FILE.py:NAME'."""
    path, name = split_spec(spec)
    module = import_file(path)
    found = candidates(module)
    listed = candidates(module, every=True)
    hint = f" (candidates: {', '.join(listed)})" if listed else ""
    if name is None:
        if len(found) == 1:
            name = found[0]
        else:
            raise UsageError(f"{path}: name what to compile as {path}:NAME{hint}")
    obj = owner = module
    for part in name.split("."):
        if not hasattr(obj, part):
            close = difflib.get_close_matches(part, listed, n=1)
            if close and "." not in name:
                hint = f" (did you mean '{close[0]}'? candidates: {', '.join(listed)})"
            raise UsageError(f"{path} has no name '{name}'{hint}")
        owner, obj = obj, getattr(obj, part)
    if is_function_class(owner) and obj is getattr(owner, "forward", None):
        obj = owner     # FILE.py:Cls.forward names the Function: its forward takes ctx
    if inspect.isclass(obj):
        if not is_function_class(obj):
            raise UsageError(f"{path}:{name} is a class without a forward; expected an "
                             "sg.Function subclass or a function")
        if _is_module_style(obj):
            raise UsageError(f"{path}:{name}.forward is an instance method (forward(self, "
                             "...), nn.Module style); symgrad compiles an sg.Function subclass "
                             "(forward(ctx, ...), a staticmethod) or a function: pass its "
                             "parameters as inputs")
    elif not (inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj)
              or isinstance(obj, functools.partial)):
        raise UsageError(f"{path}:{name} is not an sg.Function subclass or a function "
                         f"(it is of type {type(obj).__name__})")
    return obj, path, name


def _is_module_style(cls) -> bool:
    """A class (not an sg.Function) whose forward is an instance method taking `self`."""
    import symgrad

    if issubclass(cls, symgrad.Function):
        return False
    forward = inspect.getattr_static(cls, "forward", None)
    if not inspect.isfunction(forward):      # a staticmethod or classmethod
        return False
    params = list(inspect.signature(forward).parameters)
    return bool(params) and params[0] == "self"


# --------------------------------------------------------------------------- example inputs
def forward_params(fn) -> list[inspect.Parameter]:
    """The forward's parameters after `ctx` (for a Function class)."""
    forward = fn.forward if inspect.isclass(fn) else fn
    try:
        params = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):
        return []
    return params[1:] if inspect.isclass(fn) and params else params


def example_inputs(fn) -> tuple | None:
    """`fn.example_inputs` (a tuple, or a static/class method returning one), else None."""
    ex = getattr(fn, "example_inputs", None)
    if ex is None:
        return None
    if callable(ex):
        try:
            ex = ex()
        except Exception as exc:
            raise LoadError(f"example_inputs() failed: {one_line(exc)}{user_frame(exc)}") from exc
    if isinstance(ex, list):
        ex = tuple(ex)
    if not isinstance(ex, tuple):
        ex = (ex,)
    return ex


def parse_shapes(options: list[str], fn) -> dict[str, tuple[int, ...]]:
    """['x=2,3', 'w=3'] -> {'x': (2, 3), 'w': (3,)}; 'x=' or 'x=()' is a scalar."""
    params = forward_params(fn)
    names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    star = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    shapes = {}
    for opt in options:
        key, sep, text = opt.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--shape {opt!r}: expected NAME=2,3")
        kwonly = next((p for p in params if p.name == key and p.kind == p.KEYWORD_ONLY), None)
        if kwonly is not None:   # it used to be passed positionally: 'too many positional'
            raise UsageError(f"--shape {opt!r}: '{key}' is a keyword-only argument of the "
                             "forward; tensor inputs are positional (keyword-only arguments "
                             "are constants: their defaults)")
        if key not in names and not (star and key.startswith(star)
                                     and key[len(star):].isdigit()):
            listed = names + ([f"{star}0, {star}1, ... for *{star}"] if star else [])
            raise UsageError(f"--shape {opt!r}: the forward has no argument '{key}' "
                             f"(arguments: {', '.join(listed)})")
        text = text.strip().strip("()[]").replace("x", ",")
        try:
            shape = tuple(int(n) for n in text.split(",") if n.strip())
        except ValueError:
            raise UsageError(f"--shape {opt!r}: sizes must be integers, e.g. {key}=2,3") from None
        if any(n < 0 for n in shape):
            raise UsageError(f"--shape {opt!r}: sizes must be non-negative")
        if key in shapes and shapes[key] != shape:   # the last one silently won
            raise UsageError(f"--shape {opt!r}: {key} is given twice, with shapes "
                             f"{shapes[key]} and {shape}")
        shapes[key] = shape
    return shapes


def shaped_inputs(fn, shapes, make):
    """Positional inputs for a forward from --shape options: make(shape) for each tensor
    argument, defaults for constants. Every argument without a default needs a shape."""
    args = []
    pending = []
    for p in forward_params(fn):
        if p.kind == p.VAR_POSITIONAL:   # *xs: --shape xs0=... --shape xs1=..., in order
            k = 0
            while f"{p.name}{k}" in shapes:
                args.extend(pending)
                pending = []
                args.append(make(shapes[f"{p.name}{k}"]))
                k += 1
            extra = sorted(set(n for n in shapes if n.startswith(p.name)
                               and n[len(p.name):].isdigit()) - {f"{p.name}{i}" for i in range(k)})
            if extra:
                raise UsageError(f"--shape {extra[0]}: *{p.name} takes its shapes in order "
                                 f"from {p.name}0 (missing {p.name}{k})")
            break
        if p.kind == p.VAR_KEYWORD:
            break
        if p.name in shapes:
            args.extend(pending)
            pending = []
            args.append(make(shapes[p.name]))
        elif p.default is not p.empty:
            pending.append(p.default)
        else:
            missing = [q.name for q in forward_params(fn)
                       if q.default is q.empty and q.name not in shapes
                       and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]
            raise UsageError(f"--shape is missing for: {', '.join(missing)}")
    return tuple(args)


def spec_inputs(fn, shapes, dtype):
    """Inputs for compiling: TensorSpecs (shape and dtype, no data)."""
    return shaped_inputs(fn, shapes, lambda s: Spec(s, dtype))


def with_dtype(inputs, dtype):
    """Floating example arrays converted to `dtype`; everything else unchanged."""
    out = []
    for a in inputs:
        if isinstance(a, Spec) or type(a).__name__ == "TensorSpec":
            out.append(Spec(a.shape, dtype) if "float" in str(a.dtype) else a)
        elif hasattr(a, "shape") and hasattr(a, "dtype") and "float" in str(a.dtype):
            out.append(numpy.asarray(to_numpy(a), dtype=dtype))
        else:
            out.append(a)
    return tuple(out)


def to_numpy(a):
    """A NumPy array from an ndarray or an sg.Tensor-like object."""
    if isinstance(a, numpy.ndarray):
        return a
    if hasattr(a, "numpy"):
        return numpy.asarray(a.numpy())
    return numpy.asarray(a)


# --------------------------------------------------------------------------- messages
def one_line(exc: BaseException) -> str:
    """'Type: message' on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def user_frame(exc: BaseException) -> str:
    """' (at file.py:12)' for the innermost frame of a traceback outside symgrad, or ''."""
    import symgrad

    pkg = os.path.dirname(os.path.abspath(symgrad.__file__))
    here = os.path.dirname(os.path.abspath(__file__))
    site = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(frame.filename)
        if path.startswith((pkg, here)) or frame.filename.startswith("<"):
            continue
        if "importlib" in path or "site-packages" in path:
            continue
        site = f" (at {display_path(path)}:{frame.lineno})"
    return site
