"""The profiler's recording core: one flag the op layer reads, and the event sinks.

Every instrumented site (an op, a generated-module call, a backward node, a compile stage)
reads ``ON[0]`` and does nothing else while it is False: that one list-item check is the
whole cost of the profiler when no ``profile()`` / ``emit_nvtx()`` is active. The public API
is ``symgrad.autograd.profiler``; this module has no dependencies so that the compiler (a
lower layer than the autograd runtime) can record its stages too.

An instrumented function that wraps itself re-enters once with the profiler on; ``wants()``
tells the re-entered call to run its body (a thread-local marker set by ``call``), so the
check stays inline, ``if ON[0] and wants(): return call(...)``, with no second function call
on the fast path.
"""
from __future__ import annotations

import sys
import threading
import time

ON = [False]          # True while any sink is active
_SINKS = []           # active sinks: objects with begin(rec) / end(rec)
_local = threading.local()
_clock = time.perf_counter


class Rec:
    """One event being recorded: name, category, start/end (perf_counter seconds), thread,
    parent (the enclosing event on that thread), input shapes, stack and extra args."""

    __slots__ = ("name", "cat", "start", "end", "tid", "parent", "shapes", "stack", "args",
                 "children", "id")

    _ids = iter(range(1, 1 << 62))

    def __init__(self, name, cat, shapes=None, args=None):
        self.name = name
        self.cat = cat
        self.start = self.end = None
        self.tid = threading.get_ident()
        self.parent = None
        self.shapes = shapes
        self.stack = None
        self.args = args
        self.children = []
        self.id = next(Rec._ids)


def _frames():
    st = getattr(_local, "stack", None)
    if st is None:
        st = _local.stack = []
    return st


def wants():
    """False once, right after ``call`` re-entered the instrumented function: run its body."""
    if getattr(_local, "reenter", False):
        _local.reenter = False
        return False
    return True


def begin(name, cat, shapes=None, args=None):
    """Open an event on this thread (None when no sink is active)."""
    if not _SINKS:
        return None
    rec = Rec(name, cat, shapes, args)
    st = _frames()
    if st:
        rec.parent = st[-1]
    if any(s.with_stack for s in _SINKS):
        rec.stack = user_stack()
    st.append(rec)
    for s in _SINKS:
        s.begin(rec)
    rec.start = _clock()
    return rec


def end(rec):
    if rec is None:
        return
    rec.end = _clock()
    st = _frames()
    # pop it (and anything an exception left open above it)
    while st:
        top = st.pop()
        if top is rec:
            break
    for s in list(_SINKS):
        s.end(rec)


def call(fn, name, cat, shapes, args, params=None):
    """``fn(*args)`` as an event ``name``, ``fn`` re-entered past its own profiler check."""
    rec = begin(name, cat, shapes)
    try:
        _local.reenter = True
        return fn(*args) if params is None else fn(*args, **params)
    finally:
        _local.reenter = False
        end(rec)


def span(name, cat, start, stop, args=None):
    """Record an already-timed interval (perf_counter seconds) as a child of the current
    event: the compiler's stages, timed as it runs them."""
    if not _SINKS or start is None or stop is None:
        return
    rec = Rec(name, cat, None, args)
    st = _frames()
    if st:
        rec.parent = st[-1]
    rec.start, rec.end = start, stop
    for s in _SINKS:
        s.begin(rec)
        s.end(rec)


def shapes_of(values):
    """torch's ``input_shapes``: a list per argument (``[]`` for a non-array)."""
    out = []
    for v in values:
        shape = getattr(v, "shape", None)
        out.append([int(k) for k in shape] if shape is not None else [])
    return out


_INTERNAL = None


def user_stack():
    """The Python stack outside symgrad, innermost first, as torch formats it
    (``file.py(12): fn``)."""
    global _INTERNAL
    if _INTERNAL is None:
        import os

        _INTERNAL = os.path.dirname(os.path.abspath(__file__)) + os.sep
    out = []
    f = sys._getframe(2)
    while f is not None:
        path = f.f_code.co_filename
        if not path.startswith(_INTERNAL) and not path.startswith("<symgrad"):
            out.append(f"{path}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return out


def add_sink(sink):
    _SINKS.append(sink)
    ON[0] = True


def remove_sink(sink):
    if sink in _SINKS:
        _SINKS.remove(sink)
    ON[0] = bool(_SINKS)


def module_label(f):
    """A generated module entry point's event name: ``module: <module NAME>.<entry>``
    (``module: exp.forward``, ``module: Softplus.backward``)."""
    g = getattr(getattr(f, "__wrapped__", f), "__globals__", None) or {}
    name = g.get("NAME") or getattr(f, "__module__", None) or "module"
    return f"module: {name}.{getattr(f, '__name__', 'call')}"


def op_label(node_name):
    """A forward op's event name from its node's: ``ExpBackward0`` -> ``exp``,
    ``LogSoftmaxBackward0`` -> ``log_softmax``, ``RsubBackward1`` -> ``rsub``."""
    head, sep, tail = node_name.rpartition("Backward")
    base = head if sep and (not tail or tail.isdigit()) else node_name
    out = []
    for i, ch in enumerate(base):
        if ch.isupper() and i and (base[i - 1].islower() or base[i - 1].isdigit()):
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
