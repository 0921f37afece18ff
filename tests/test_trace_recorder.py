"""The trace's file recorder (the forward's helper modules, for the cache key) is switched off
while an op builds its formula (issue 18, compile time: CPython 3.11 runs every frame through
its tracing dispatch while any profile hook is set, which doubled an unrolled program's trace).
It still records every user module the forward calls, also one that makes no traced op; a
user's own profiler is never switched off."""
import importlib
import sys

import numpy as np

import symgrad as sg

EW = importlib.import_module("symgrad._trace_elementwise")


def _user_module(tmp_path, monkeypatch, name, text):
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def test_ops_run_without_the_recorder_and_helpers_are_still_recorded(tmp_path, monkeypatch):
    helpers = _user_module(tmp_path, monkeypatch, "rec_helpers", (
        "import symgrad as sg\n\n"
        "def scale():\n    return 0.5   # no traced op: still a dependency\n\n"
        "def act(x):\n    return sg.tanh(x) * scale()\n"))
    seen = []
    by_shape = EW._by_shape

    def spy(*args):
        seen.append(sys.getprofile())
        return by_shape(*args)

    monkeypatch.setattr(EW, "_by_shape", spy)

    def model(x):
        return helpers.act(x) * 2 + x.exp()

    x = np.array([0.3, -0.2])
    m = sg.compile(model, x, cache_ok=False)
    assert seen and all(hook is None for hook in seen)   # each op built unprofiled
    assert sys.getprofile() is None                        # and the recorder is gone after
    deps = m.meta["deps"]
    assert [p.rsplit("/", 1)[-1] for p in deps] == ["rec_helpers.py"]
    out = m.forward(x)
    np.testing.assert_allclose(out, np.tanh(x) * 0.5 * 2 + np.exp(x), rtol=1e-12)


def test_a_users_profiler_still_sees_the_ops(monkeypatch):
    """A profile hook of the user's own (cProfile, a tracer) stays on through the ops, and
    the trace records no dependencies then (unknown: never cached on disk), as before."""
    files = set()

    def hook(frame, event, arg):
        if event == "call":
            files.add(frame.f_code.co_filename)

    seen = []
    by_shape = EW._by_shape

    def spy(*args):
        seen.append(sys.getprofile())
        return by_shape(*args)

    monkeypatch.setattr(EW, "_by_shape", spy)
    sys.setprofile(hook)
    try:
        m = sg.compile(lambda x: (x * 3).sin() + x, np.array([0.1, 0.2]), cache_ok=False)
    finally:
        sys.setprofile(None)
    assert seen and all(h is hook for h in seen)
    assert any("_trace_elementwise" in f for f in files)
    assert m.meta["deps"] is None


def test_user_line_follows_the_working_directory(tmp_path, monkeypatch):
    """user_site remembers each file's display path per working directory (a large program
    asks at every op): the line an error cites is relative to the cwd of each call."""
    import pytest

    mod = _user_module(tmp_path, monkeypatch, "rec_site", (
        "def model(x):\n"
        "    b = x > 0\n"
        "    return b - b\n"))
    x = np.array([0.3, -0.2])
    for cwd, shown in ((tmp_path, "rec_site.py:3"),
                       (tmp_path.parent, f"{tmp_path.name}/rec_site.py:3"),
                       (tmp_path, "rec_site.py:3")):
        monkeypatch.chdir(cwd)
        with pytest.raises(Exception, match=f"sub \\(at {shown}\\)"):
            sg.compile(mod.model, x, cache_ok=False)
