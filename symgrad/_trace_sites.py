"""The user's line: where a traced value came from (`user_site`, `site_of`, `display_path`,
`_at`), and the refusals of what a traced forward cannot do (`refuse_no_grad`,
`refuse_random`; `_TRACING` is set while trace() runs a forward). Moved verbatim from trace.py
(which re-exports every name).
"""
from __future__ import annotations

import contextvars
import os
import sys

import sympy

from .errors import TraceError, display_path

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# cli/ is installed as symgrad.cli but sits beside symgrad/ in a source checkout
_SKIP_DIRS = (_PKG_DIR, os.path.join(os.path.dirname(_PKG_DIR), "cli", ""),
              os.path.dirname(sympy.__file__))
_BUILTINS_FILE = os.path.join(_PKG_DIR, "_builtin_graphs.py")   # built-in ops are traced there


_SITE = contextvars.ContextVar("symgrad_site", default=None)
# True while a forward runs under trace(): the runtime's random factories refuse to run then
# (the value is the Tracer: sg.scan finds it when a loop's init and xs are plain arrays)
_TRACING = contextvars.ContextVar("symgrad_tracing", default=False)


def refuse_no_grad(what: str):
    """Raise a TraceError if a forward is being traced: the generated backward differentiates
    every traced op, so a block with gradients off would silently still carry them."""
    if _TRACING.get():
        raise TraceError(f"sg.{what} inside a traced forward{_at(user_site())}: the generated "
                         "backward differentiates every op of the forward; use x.detach() for "
                         "a value that must carry no gradient")


def refuse_random(op: str):
    """Raise a TraceError if a forward is being traced: a random draw (`sg.rand`, ...) would
    be made once, at trace time, and frozen into the generated module as a constant."""
    if _TRACING.get():
        raise TraceError(f"random op sg.{op} inside a traced forward{_at(user_site())}: the "
                         "draw would be made once and frozen into the generated module; draw "
                         "it outside the forward and pass it in as an input")


def user_site(skip: tuple[str, ...] = ()) -> str | None:
    """'file.py:14' of the innermost frame outside symgrad and SymPy (the user's line).

    `skip`: more directories whose frames are not the user's (torch's, when a torch function
    dispatched to us). While a derivative is built, the forward op being differentiated is the
    line to cite (`site_of`), not whichever user line called the compiler."""
    override = _SITE.get()
    if override is not None:
        return override or None
    skip_dirs = _SKIP_DIRS + tuple(skip)
    try:
        cwd = os.getcwd()   # (relative paths and display_path depend on it)
    except OSError:
        cwd = None
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename == _BUILTINS_FILE:
            return None   # built-in ops have no user line
        # per file: its display path if its frames are the user's, else "" (remembered: a
        # large program asks at each of its thousands of ops, over the same few files)
        key = (filename, skip_dirs, cwd)
        shown = _SHOWN.get(key) if cwd is not None else None
        if shown is None:
            path = os.path.abspath(filename)
            shown = display_path(path) if not path.startswith(skip_dirs) and \
                not filename.startswith("<frozen") else ""
            if cwd is not None:
                if len(_SHOWN) > 10_000:
                    _SHOWN.clear()
                _SHOWN[key] = shown
        if shown:
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return None


_SHOWN: dict = {}   # (co_filename, skipped dirs, cwd) -> display path, or "" (not a user's)


class site_of:
    """Context manager: values created inside are attributed to `site` (a forward op's line)."""

    def __init__(self, site):
        self.site = site or ""

    def __enter__(self):
        self.token = _SITE.set(self.site)

    def __exit__(self, *exc):
        _SITE.reset(self.token)


def _at(site):
    return f" (at {site})" if site else ""
