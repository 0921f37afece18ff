"""Tiered CPU compilation: the C modules being built in the background.

Under the default CPU target ("auto", see ``symgrad.set_cpu_target``) a forward-only
Function's first calls run its NumPy module while its C module is built here, by one daemon
worker thread (one build at a time: the machine's cores belong to the user's work; one job
per call signature, deduplicated by its key). The runtime polls its job at the start of a
call (one attribute read while a job is pending) and switches to the C module only between
two calls, so no call sees a half-loaded module, and a node recorded by a NumPy forward keeps
its NumPy module for its backward.

A job's exception never reaches the user: the runtime warns once, naming the reason, and
keeps the NumPy module for that signature. ``wait_for_builds()`` waits for the pending jobs
(tests, benchmarks, a program that wants the fast path from its next call on).

Process exit: the worker is a daemon thread; at exit a running compiler is killed and its
temporary folder removed (``symgrad.native``), so nothing half-written stays in the cache.
Fork: the child has no worker thread; the jobs that were pending are queued again there (the
worker starts on demand).
"""
from __future__ import annotations

import atexit
import os
import threading

__all__ = ["Job", "submit", "start", "wait_for_builds", "pending"]


class Job:
    """One background build: ``thunk()`` returns the module; then ``done`` with ``module`` or
    ``error`` (the exception's text)."""

    __slots__ = ("key", "thunk", "done", "module", "error", "queued")

    def __init__(self, key, thunk):
        self.key = key
        self.thunk = thunk
        self.queued = False
        self.done = False
        self.module = None
        self.error = None


_cond = threading.Condition()
_queue: list = []            # jobs not started
_jobs: dict = {}             # key -> Job (queued, running or finished: deduplication)
_running: list = []          # the job being built, if any
_worker = [None]
_state = {"exiting": False}


# While a build runs, the GIL's switch interval is lowered: the build's Python work (trace,
# SymPy) holds the GIL, and each time a user's call releases it (a NumPy operation on a large
# array) the call waits up to one interval to get it back. At the default 5 ms a call that
# releases it ten times ran 40x slower during a build; at 0.2 ms it is a few percent.
BUILD_SWITCH_INTERVAL = 2e-4


def _run():
    import sys

    from . import native

    native.in_background(True)
    saved = None
    while True:
        with _cond:
            if not _queue and saved is not None:
                if sys.getswitchinterval() == BUILD_SWITCH_INTERVAL:
                    sys.setswitchinterval(saved)   # (unless someone else set another since)
                saved = None
            while not _queue and not _state["exiting"]:
                _cond.wait()
            if _state["exiting"]:
                return
            job = _queue.pop(0)
            _running.append(job)
            if saved is None and sys.getswitchinterval() > BUILD_SWITCH_INTERVAL:
                saved = sys.getswitchinterval()
                sys.setswitchinterval(BUILD_SWITCH_INTERVAL)
        module = error = None
        try:
            module = job.thunk()
        except BaseException as e:   # noqa: BLE001 - nothing of a build reaches the user
            error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        with _cond:
            job.module, job.error, job.done = module, error, True
            job.thunk = None
            _running.remove(job)
            _cond.notify_all()


def _ensure_worker():
    w = _worker[0]
    if w is None or not w.is_alive():
        w = threading.Thread(target=_run, name="symgrad-c-builder", daemon=True)
        _worker[0] = w
        w.start()


def submit(key, thunk, defer=False) -> Job:
    """The job of `key`: the one already submitted, or a new one, queued for the worker now
    or, with `defer`, by `start(job)` (the runtime starts a signature's build on its second
    call: the first call, which compiles the NumPy module, shares neither the GIL nor the
    CPU with the build, and a signature called once builds nothing)."""
    with _cond:
        job = _jobs.get(key)
        if job is not None:
            return job
        job = _jobs[key] = Job(key, thunk)
        if _state["exiting"]:
            job.done, job.error = True, "the interpreter is exiting"
            return job
        if not defer:
            _start(job)
        return job


def _start(job):
    if not job.queued and not job.done:
        job.queued = True
        _queue.append(job)
        _ensure_worker()
        _cond.notify_all()


def start(job):
    """Queue a deferred job (see submit)."""
    with _cond:
        if not _state["exiting"]:
            _start(job)


def pending() -> int:
    """How many builds are queued or running (not counting deferred ones)."""
    with _cond:
        return len(_queue) + len(_running)


def wait_for_builds(timeout=None) -> bool:
    """Wait until every background C build has finished (or `timeout` seconds passed).
    True when none is pending. The next call of each Function then runs its C module (or,
    where its build failed, warns once and keeps NumPy)."""
    import time

    deadline = None if timeout is None else time.monotonic() + timeout
    with _cond:
        for job in list(_jobs.values()):   # deferred ones too
            if not _state["exiting"]:
                _start(job)
        while _queue or _running:
            if _worker[0] is None or not _worker[0].is_alive():
                _ensure_worker()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            _cond.wait(left if left is not None else 1.0)
        return True


def _at_exit():
    from . import native

    with _cond:
        _state["exiting"] = True
        _queue.clear()
        _cond.notify_all()
    native.stop_builds()
    w = _worker[0]
    if w is not None and w.is_alive():
        w.join(5.0)   # lets the killed build remove its temporary folder


def _after_fork_in_child():
    global _cond
    _cond = threading.Condition()
    _worker[0] = None
    if _running:
        # the parent's worker may have been importing: its half-initialized modules would
        # fail every later import of them here (the thread finishing them is not copied)
        import sys

        for name, mod in list(sys.modules.items()):
            if getattr(getattr(mod, "__spec__", None), "_initializing", False):
                sys.modules.pop(name, None)
    _running.clear()
    again = [j for j in _jobs.values() if j.queued and not j.done and j.thunk is not None]
    _queue[:] = again
    if again:
        _ensure_worker()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
