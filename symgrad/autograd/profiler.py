"""torch.autograd.profiler over symgrad's runtime: ``profile``, ``record_function``,
``emit_nvtx``, ``key_averages().table()``, ``export_chrome_trace``.

Events, with torch's names where torch has them:

- each forward op (``exp``, ``mul``, ``log_softmax``: the node name less ``Backward<n>``,
  snake case) and each ``Function.apply`` (the Function's class name);
- each backward node the engine runs, by its node name (``ExpBackward0``, ``MulBackward0``,
  ``AccumulateGrad``, a custom Function's ``MyFnBackward``);
- each call of a generated module (``<module name>.forward``, ``.backward``, ...);
- each compile (``compile: <name>``, with ``args['cache']`` ``miss`` / ``memory`` / ``disk``)
  and its stages (``compile.trace``, ``compile.differentiate``, ``compile.optimize``,
  ``compile.emit``, ``compile.cc``, ``compile.load``);
- each ``record_function(name)`` block.

With no profiler active, every instrumented site costs one list-item check
(``symgrad._profiling.ON[0]``). See docs/profiler.md.
"""
from __future__ import annotations

import functools
import json
import os
import threading
import warnings
from collections import OrderedDict

from symgrad import _profiling as _core

__all__ = ["profile", "record_function", "emit_nvtx", "EventList", "FunctionEvent",
           "FunctionEventAvg"]


def _us(seconds):
    return seconds * 1e6


def _format_time(us):
    """torch's format: seconds, milliseconds or microseconds, three decimals."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class FunctionEvent:
    """One recorded event (torch.autograd.profiler_util.FunctionEvent's fields)."""

    def __init__(self, rec, origin):
        self.id = rec.id
        self.name = rec.name
        self.key = rec.name
        self.category = rec.cat
        self.thread = rec.tid
        self.input_shapes = rec.shapes if rec.shapes is not None else []
        self.stack = rec.stack if rec.stack is not None else []
        self.args = dict(rec.args) if rec.args else {}
        self.start_us = _us(rec.start - origin)
        self.end_us = _us(rec.end - origin)
        self.cpu_children = []
        self.cpu_parent = None
        self.count = 1
        self.is_async = False
        self.device_type = "cpu"

    @property
    def time_range(self):
        return (self.start_us, self.end_us)

    @property
    def cpu_time_total(self):
        return self.end_us - self.start_us

    @property
    def cpu_time(self):
        return self.cpu_time_total

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    cuda_time_total = self_cuda_time_total = device_time_total = self_device_time_total = 0.0

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} "
                f"cpu_time={_format_time(self.cpu_time_total)} thread={self.thread} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """Events grouped by key (and, when asked, input shapes / stack): totals and counts."""

    def __init__(self, key, input_shapes=None, stack=None):
        self.key = key
        self.name = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.input_shapes = input_shapes
        self.stack = stack
        self.category = None
        self.cuda_time_total = self.self_cuda_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0

    def add(self, ev):
        self.count += ev.count
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        if self.category is None:
            self.category = ev.category
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self):
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"cpu_time={_format_time(self.cpu_time)} "
                f"self_cpu_time={_format_time(self.self_cpu_time)}>")


_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "count", "cuda_time",
              "cuda_time_total", "self_cuda_time_total", "device_time", "device_time_total",
              "self_device_time_total", "cpu_memory_usage", "self_cpu_memory_usage")


class EventList(list):
    """A list of events with torch's ``table``, ``key_averages``, ``total_average``,
    ``export_chrome_trace`` and ``self_cpu_time_total``."""

    def __init__(self, *args, origin=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self._origin = origin

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        groups = OrderedDict()
        for ev in self:
            key = [ev.key]
            if group_by_input_shape:
                key.append(str(ev.input_shapes))
            if group_by_stack_n > 0:
                key.append(str(ev.stack[:group_by_stack_n]))
            key = tuple(key)
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(
                    ev.key, ev.input_shapes if group_by_input_shape else None,
                    ev.stack[:group_by_stack_n] if group_by_stack_n > 0 else None)
            avg.add(ev)
        out = EventList(groups.values(), origin=self._origin)
        out._grouped_shapes = group_by_input_shape
        out._grouped_stack = group_by_stack_n
        return out

    def total_average(self):
        total = FunctionEventAvg("Total")
        for ev in self:
            total.add(ev)
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        """torch's text table: one row per event (or per key after ``key_averages``), sorted
        by ``sort_by`` (descending; ``None`` keeps recording order)."""
        rows = list(self)
        if top_level_events_only:
            rows = [r for r in rows if getattr(r, "cpu_parent", None) is None]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table: unknown sort_by {sort_by!r}; choose one of "
                                 f"{', '.join(_SORT_KEYS)}")
            rows.sort(key=lambda r: getattr(r, sort_by, 0.0), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        total_self = self.self_cpu_time_total or 1.0
        shapes = any(getattr(r, "input_shapes", None) for r in rows) and \
            getattr(self, "_grouped_shapes", True)
        stacks = any(getattr(r, "stack", None) for r in rows)
        name_w = min(max(len("Name"), *(len(r.key) for r in rows)) if rows else 4,
                     max_name_column_width) + 2
        cols = [("Name", name_w), ("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12),
                ("CPU total", 12), ("CPU time avg", 12), ("# of Calls", 12)]
        if shapes:
            cols.append(("Input Shapes", max_shapes_column_width))
        if stacks:
            cols.append(("Source Location", max_src_column_width))
        line = "-" * (sum(w for _, w in cols) + 2 * (len(cols) - 1))

        def fmt(values):
            parts = []
            for (title, w), v in zip(cols, values):
                v = str(v)
                if len(v) > w:
                    v = v[:w - 3] + "..."
                parts.append(v.ljust(w) if title in ("Name", "Input Shapes",
                                                     "Source Location") else v.rjust(w))
            return "  ".join(parts).rstrip()

        out = []
        if header is not None:
            out += [line, header]
        out += [line, fmt([t for t, _ in cols]), line]
        for r in rows:
            count = r.count
            total = r.cpu_time_total
            vals = [r.key, f"{100 * r.self_cpu_time_total / total_self:.2f}%",
                    _format_time(r.self_cpu_time_total),
                    f"{100 * total / total_self:.2f}%", _format_time(total),
                    _format_time(total / count if count else 0.0), count]
            if shapes:
                vals.append(str(r.input_shapes) if r.input_shapes is not None else "")
            if stacks:
                vals.append(r.stack[0] if r.stack else "")
            out.append(fmt(vals))
        out += [line, f"Self CPU time total: {_format_time(self.self_cpu_time_total)}", ""]
        return "\n".join(out)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path):
        """Write the events as Chrome trace-event JSON (``ph: "X"`` complete events, times in
        microseconds): opens in Perfetto (ui.perfetto.dev) and chrome://tracing."""
        pid = os.getpid()
        events = []
        for ev in sorted(self, key=lambda e: (e.start_us, -e.end_us)):
            args = {}
            if ev.input_shapes:
                args["Input Dims"] = ev.input_shapes
            if ev.stack:
                args["Call stack"] = ";".join(ev.stack)
            args.update({k: v if isinstance(v, (str, int, float, bool)) or v is None
                         else str(v) for k, v in ev.args.items()})
            events.append({"ph": "X", "cat": ev.category, "name": ev.name, "pid": pid,
                           "tid": ev.thread, "ts": round(ev.start_us, 3),
                           "dur": round(ev.cpu_time_total, 3), "args": args})
        meta = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                 "args": {"name": "symgrad"}}]
        for tid in sorted({e.thread for e in self}):
            meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                         "args": {"name": f"thread {tid}"}})
        doc = {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": meta + events}
        with open(path, "w") as f:
            json.dump(doc, f)


class profile:
    """torch.autograd.profiler.profile: records symgrad's events while active.

    Args (torch's): ``enabled`` (False: a no-op), ``record_shapes`` (each op's input shapes),
    ``with_stack`` (the Python source location of each event, innermost user frame first).
    ``use_cuda``/``use_device``/``profile_memory``/``with_flops``/``with_modules``/
    ``use_kineto``/``use_cpu``/``experimental_config``/``acc_events`` are accepted; symgrad
    times host (CPU) intervals only (a CUDA module's call is timed as its launch).
    """

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        self.enabled = bool(enabled)
        self.record_shapes = bool(record_shapes)
        self.with_stack = bool(with_stack)
        self.use_cuda = use_cuda
        self.use_device = use_device
        self.profile_memory = profile_memory
        self.entered = False
        self.function_events = None
        self._recs = []
        self._lock = threading.Lock()
        self._origin = 0.0

    # sink protocol (symgrad._profiling)
    def begin(self, rec):
        pass

    def end(self, rec):
        with self._lock:
            self._recs.append(rec)

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        if any(isinstance(s, profile) for s in _core._SINKS):
            raise RuntimeError("Profiler is already enabled on this thread")
        self.entered = True
        self._origin = _core._clock()
        _core.add_sink(self)
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        _core.remove_sink(self)
        self._build()
        return False

    def _build(self):
        recs = [r for r in self._recs if r.end is not None]
        events = {r.id: FunctionEvent(r, self._origin) for r in recs}
        if not self.record_shapes:
            for ev in events.values():
                ev.input_shapes = []
        for r in recs:
            ev = events[r.id]
            p = r.parent
            while p is not None and p.id not in events:
                p = p.parent
            if p is not None:
                ev.cpu_parent = events[p.id]
                events[p.id].cpu_children.append(ev)
        ordered = sorted(events.values(), key=lambda e: (e.start_us, -e.end_us, e.id))
        self.function_events = EventList(ordered, origin=self._origin)

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def events(self):
        self._check_finish()
        return self.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self):
        self._check_finish()
        return self.function_events.total_average()

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        self._check_finish()
        return self.function_events.table(sort_by, row_limit, max_src_column_width,
                                          max_name_column_width, max_shapes_column_width,
                                          header, top_level_events_only)

    def export_chrome_trace(self, path):
        self._check_finish()
        return self.function_events.export_chrome_trace(path)

    @property
    def self_cpu_time_total(self):
        self._check_finish()
        return self.function_events.self_cpu_time_total

    def __str__(self):
        self._check_finish()
        return str(self.function_events)

    __repr__ = object.__repr__


class record_function:
    """torch.autograd.profiler.record_function: a named event around a block (context
    manager) or around every call of a function (decorator). ``args``: a string shown
    with it in the trace."""

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError(f"record_function(): name must be a str, got "
                            f"{type(name).__name__}")
        self.name = name
        self.args = args
        self._rec = None

    def __enter__(self):
        if _core.ON[0]:
            self._rec = _core.begin(self.name, "user_annotation", None,
                                    None if self.args is None else {"args": self.args})
        return self

    def __exit__(self, *exc):
        rec, self._rec = self._rec, None
        _core.end(rec)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapper


class _Nvtx:
    """Sink: one NVTX range per event (cupy.cuda.nvtx)."""

    with_stack = False

    def __init__(self, nvtx, record_shapes):
        self.nvtx = nvtx
        self.record_shapes = record_shapes

    def begin(self, rec):
        name = rec.name
        if self.record_shapes and rec.shapes:
            name = f"{name}, sizes = {rec.shapes}"
        self.nvtx.RangePush(name)

    def end(self, rec):
        self.nvtx.RangePop()


def _cupy_nvtx():
    try:
        import cupy
        from cupy.cuda import nvtx

        if cupy.cuda.runtime.getDeviceCount() < 1 or not nvtx.available:
            return None
        return nvtx
    except Exception:
        return None


class emit_nvtx:
    """torch.autograd.profiler.emit_nvtx: each event becomes an NVTX range (seen by Nsight
    Systems / nvprof) through CuPy. Without CuPy or a CUDA device it does nothing, and says
    so once with a warning."""

    _warned = False

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = bool(enabled)
        self.record_shapes = bool(record_shapes)
        self.entered = False
        self._sink = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("NVTX annotation context manager is not reentrant")
        self.entered = True
        nvtx = _cupy_nvtx()
        if nvtx is None:
            if not emit_nvtx._warned:
                emit_nvtx._warned = True
                warnings.warn("emit_nvtx: NVTX ranges need CuPy and a CUDA device; none is "
                              "available, so emit_nvtx does nothing", RuntimeWarning,
                              stacklevel=2)
            return self
        self._sink = _Nvtx(nvtx, self.record_shapes)
        _core.add_sink(self._sink)
        return self

    def __exit__(self, *exc):
        if self._sink is not None:
            _core.remove_sink(self._sink)
            self._sink = None
        self.entered = False
        return False
