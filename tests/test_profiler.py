"""symgrad.autograd.profiler: torch.autograd.profiler's API, events with torch's node names,
compile events with their stages and cache answers, Chrome trace export, NVTX fallback."""
import json
import warnings

import numpy as np
import pytest

import symgrad as sg
from symgrad import _profiling
from symgrad.autograd import profiler


class _Softplus(sg.Function):
    @staticmethod
    def forward(ctx, x):
        return sg.log(1 + sg.exp(x))


def _names(prof, cat=None):
    return [e.name for e in prof.function_events if cat is None or e.category == cat]


def test_forward_ops_backward_nodes_and_module_calls_are_events():
    x = sg.tensor(np.linspace(-1, 1, 12).reshape(4, 3), requires_grad=True)
    with profiler.profile(record_shapes=True) as prof:
        y = (x.exp() * x).sum()
        y.backward()
    ops = _names(prof, "cpu_op")
    assert ops == ["exp", "mul", "sum"]
    back = _names(prof, "backward")
    assert back[:3] == ["SumBackward0", "MulBackward0", "ExpBackward0"]
    assert back.count("torch::autograd::AccumulateGrad") == 1
    mods = _names(prof, "module")
    assert "module: exp.forward_saving" in mods or "module: exp.forward" in mods
    # a module call is a child of its op, with the op's input shapes
    exp = next(e for e in prof.function_events if e.name == "exp")
    assert exp.input_shapes == [[4, 3]]
    assert [c.category for c in exp.cpu_children] == ["module"]
    mul = next(e for e in prof.function_events if e.name == "mul")
    assert mul.input_shapes == [[4, 3], [4, 3]]
    # the gradient is the same as without the profiler
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()) * (
        1 + x.detach().numpy()), rtol=1e-6)


def test_backward_node_names_match_torchs_profiler():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((3, 4))

    def run(lib, prof_mod):
        x = lib.tensor(a, requires_grad=True)
        with prof_mod.profile() as prof:
            (lib.tanh(x) * x.sin() + x.exp()).sum().backward()
        names = set()
        for e in prof.function_events:
            n = e.name.split(": ")[-1]
            if n.endswith("Backward0") or n.endswith("AccumulateGrad"):
                names.add(n)
        return names

    ours = run(sg, profiler)
    theirs = run(torch, torch.autograd.profiler)
    assert ours == theirs, (ours, theirs)


def test_self_time_table_and_key_averages():
    x = sg.randn(8, requires_grad=True)
    with profiler.profile() as prof:
        for _ in range(3):
            (x * 2).exp().sum().backward()
    avg = prof.key_averages()
    by = {e.key: e for e in avg}
    assert by["mul"].count == 3 and by["MulBackward0"].count == 3
    assert by["exp"].cpu_time_total >= by["exp"].self_cpu_time_total > 0
    # self times add up to the top-level events' total time
    top = sum(e.cpu_time_total for e in prof.function_events if e.cpu_parent is None)
    assert prof.self_cpu_time_total == pytest.approx(top, rel=1e-9)
    table = avg.table(sort_by="self_cpu_time_total", row_limit=5)
    rows = [ln for ln in table.splitlines() if ln and not ln.startswith("-")]
    assert rows[0].startswith("Name") and "Self CPU %" in rows[0]
    assert len(rows) == 1 + 5 + 1   # header, 5 rows, total line
    selfs = sorted((e.self_cpu_time_total for e in avg), reverse=True)[:5]
    assert [r.split()[0] for r in rows[1:6]] == [
        next(e.key for e in avg if e.self_cpu_time_total == s).split()[0] for s in selfs]
    assert rows[-1].startswith("Self CPU time total:")
    with pytest.raises(ValueError, match="sort_by"):
        avg.table(sort_by="cpu_tme")


def test_record_shapes_off_and_with_stack():
    x = sg.randn(2, 3, requires_grad=True)
    with profiler.profile(with_stack=True) as prof:
        x.exp()   # this line
    ev = next(e for e in prof.function_events if e.name == "exp")
    assert ev.input_shapes == []
    assert ev.stack and "test_profiler.py" in ev.stack[0] and "test_record_shapes" in ev.stack[0]
    grouped = prof.key_averages(group_by_stack_n=1)
    assert any(e.stack for e in grouped)


def test_record_function_block_decorator_and_nesting():
    x = sg.randn(3, requires_grad=True)

    @profiler.record_function("helper")
    def helper(t):
        return t * t

    with profiler.profile() as prof:
        with profiler.record_function("outer", "some args"):
            helper(x).sum()
    names = _names(prof)
    assert names[:3] == ["outer", "helper", "mul"]
    outer = prof.function_events[0]
    assert outer.args == {"args": "some args"}
    assert outer.cpu_children[0].name == "helper"
    assert outer.cpu_children[0].cpu_children[0].name == "mul"
    # outside a profile it is a no-op
    with profiler.record_function("nothing"):
        pass
    with pytest.raises(TypeError, match="name must be a str"):
        profiler.record_function(3)


def test_compile_events_have_stages_and_cache_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path))

    class Cube(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x * x + 0.125

    a = np.linspace(0, 1, 5)
    with profiler.profile() as prof:
        sg.compile(Cube, a)
        sg.compile(Cube, a)
    comp = [e for e in prof.function_events if e.name.startswith("compile: ")]
    assert [e.args["cache"] for e in comp] == ["miss", "memory"]
    stages = [c.name for c in comp[0].cpu_children]
    assert stages == ["compile.trace", "compile.differentiate", "compile.optimize",
                      "compile.emit", "compile.load"]
    assert comp[1].cpu_children == []
    assert all(c.cpu_time_total > 0 for c in comp[0].cpu_children)
    assert comp[0].cpu_time_total >= sum(c.cpu_time_total for c in comp[0].cpu_children)


@pytest.mark.slow
def test_c_target_compile_has_a_cc_stage(tmp_path, monkeypatch):
    import shutil

    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path))

    class Quad(sg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x * 0.5 + x

    with profiler.profile() as prof:
        sg.compile(Quad, np.zeros(4), target="c")
    names = _names(prof, "compile")
    assert "compile.cc" in names and "compile.load" in names
    cc = next(e for e in prof.function_events if e.name == "compile.cc")
    assert cc.cpu_parent.name == "compile.load"


def test_forward_only_function_call_and_first_call_compile():
    x = sg.tensor(np.array([-2.0, 0.0, 3.0]), requires_grad=True)
    with profiler.profile() as prof:
        _Softplus.apply(x).sum().backward()
    names = _names(prof)
    assert "_Softplus" in names and "_SoftplusBackward" in names
    fn = next(e for e in prof.function_events if e.name == "_Softplus")
    kids = [c.name for c in fn.cpu_children]
    # first call: its compile (a miss: traced, differentiated, ...), then its op
    assert kids == ["compile: _Softplus", "_softplus"]
    np.testing.assert_allclose(x.grad.numpy(), 1 / (1 + np.exp(-np.array([-2.0, 0.0, 3.0]))))


def test_chrome_trace_is_valid_trace_event_json(tmp_path):
    x = sg.randn(4, requires_grad=True)
    with profiler.profile(record_shapes=True) as prof:
        with profiler.record_function("step"):
            x.sin().sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    evs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(evs) == len(prof.function_events)
    for e in evs:
        assert set(e) >= {"name", "ph", "ts", "dur", "pid", "tid", "cat", "args"}
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    step = next(e for e in evs if e["name"] == "step")
    sin = next(e for e in evs if e["name"] == "sin")
    assert step["ts"] <= sin["ts"] and sin["ts"] + sin["dur"] <= step["ts"] + step["dur"] + 1e-3
    assert sin["args"]["Input Dims"] == [[4]]
    assert any(e["ph"] == "M" and e["name"] == "process_name" for e in doc["traceEvents"])


def test_profiler_off_records_nothing_and_errors_are_torchs():
    assert _profiling.ON[0] is False
    prof = profiler.profile()
    with pytest.raises(RuntimeError, match="didn't finish"):
        prof.key_averages()
    with pytest.raises(ZeroDivisionError):
        with prof:
            assert _profiling.ON[0] is True
            1 / 0
    assert _profiling.ON[0] is False   # an exception inside turns it off as well
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already enabled"):
            with profiler.profile():
                pass
    assert _profiling.ON[0] is False
    with profiler.profile(enabled=False) as off:
        sg.randn(3).exp()
    assert off.function_events is None and _profiling.ON[0] is False


def test_emit_nvtx_without_cuda_warns_once_and_does_nothing(monkeypatch):
    monkeypatch.setattr(profiler, "_cupy_nvtx", lambda: None)
    monkeypatch.setattr(profiler.emit_nvtx, "_warned", False)
    with pytest.warns(RuntimeWarning, match="emit_nvtx"):
        with profiler.emit_nvtx():
            assert _profiling.ON[0] is False
            sg.randn(3).exp()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with profiler.emit_nvtx():
            pass


def test_emit_nvtx_pushes_and_pops_one_range_per_event(monkeypatch):
    calls = []

    class FakeNvtx:
        @staticmethod
        def RangePush(name):
            calls.append(("push", name))

        @staticmethod
        def RangePop():
            calls.append(("pop",))

    monkeypatch.setattr(profiler, "_cupy_nvtx", lambda: FakeNvtx)
    x = sg.randn(3, requires_grad=True)
    with profiler.emit_nvtx(record_shapes=True):
        x.exp().sum().backward()
    assert _profiling.ON[0] is False
    pushes = [c[1] for c in calls if c[0] == "push"]
    assert pushes[0] == "exp, sizes = [[3]]"
    assert "ExpBackward0, sizes = [[3]]" in pushes
    assert len(pushes) == sum(1 for c in calls if c[0] == "pop")
