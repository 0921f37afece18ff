"""Issue 20, items 6 and 7: a disk cache that can neither crash nor lie.

Every artefact kind the cache holds (an entry's .json, a module's bytecode .pyc, a C library
.so and its signature .so.sig) gets each fault (truncated, a flipped byte, garbage, empty,
swapped with another forward's of the same signature, owned by another user, group-writable);
then two fresh processes must each compute the right values, never fall back to NumPy for
good, and never crash (a truncated .so SIGBUSes dlopen, a flipped .pyc SIGSEGVs marshal).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from symgrad import cache

DRIVER = textwrap.dedent('''
    import json, sys, warnings
    import numpy as np
    import symgrad as sg

    def f(x, y):
        return (sg.tanh(x) * y + sg.exp(-x * x)).sum()

    def g(x, y):
        return (sg.sin(x) * y - x).sum()

    x = np.linspace(-1, 1, 8)
    y = np.linspace(0.5, 2, 8)
    refs = {"f": ((np.tanh(x) * y + np.exp(-x * x)).sum(),
                  (1 - np.tanh(x) ** 2) * y - 2 * x * np.exp(-x * x)),
            "g": ((np.sin(x) * y - x).sum(), np.cos(x) * y - 1)}
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fn in (f, g):
            m = sg.compile(fn, x, y, target=sys.argv[1])
            value, grad = m.forward(x, y), m.backward(np.float64(1.0), x, y)[0]
            ref, gref = refs[fn.__name__]
            out[fn.__name__] = {"ok": bool(np.allclose(value, ref) and np.allclose(grad, gref)),
                                "cache": m.stats["cache"], "fallback": m.stats.get("fallback"),
                                "library": m.stats.get("library")}
    out["warnings"] = [str(w.message) for w in caught]
    print(json.dumps(out))
''')

HAS_CC = shutil.which(os.environ.get("CC", "cc")) is not None


def _run(work, cache_dir, target="c"):
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(cache_dir))
    proc = subprocess.run([sys.executable, str(work / "drv.py"), target], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    # a SIGBUS / SIGSEGV is a negative return code
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    if not HAS_CC:
        pytest.skip("no C compiler")
    work = tmp_path_factory.mktemp("issue20_cache")
    (work / "drv.py").write_text(DRIVER)
    first = _run(work, work / "pristine")
    assert first["f"]["cache"] == first["g"]["cache"] == "miss"
    second = _run(work, work / "pristine")
    assert second["f"]["cache"] == second["g"]["cache"] == "disk"
    return work


def _artefacts(cache_dir, kind):
    """The two files (f's, g's) of an artefact kind."""
    paths = sorted(os.path.join(d, n) for d, _, names in os.walk(cache_dir) for n in names)
    if kind == "json":
        found = [p for p in paths if p.endswith(".json")]
        by = {}
        for p in found:
            with open(p) as fh:
                by[json.load(fh)["meta"]["name"]] = p
        return [by["f"], by["g"]]
    if kind == "pyc":
        found = [p for p in paths if p.endswith(".pyc")]
    elif kind == "so":
        found = [p for p in paths if p.endswith(".so")]
    else:
        found = [p for p in paths if p.endswith(".so.sig")]
    found.sort(key=lambda p: os.path.basename(p))
    assert len(found) == 2, (kind, paths)
    return found


def _inject(path, other, fault):
    with open(path, "rb") as fh:
        data = fh.read()
    if fault == "truncate":
        data = data[:len(data) // 2]
    elif fault == "flip":
        i = len(data) // 2
        data = data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1:]
    elif fault == "garbage":
        data = os.urandom(len(data))
    elif fault == "empty":
        data = b""
    if fault == "swap":
        with open(other, "rb") as fh:
            theirs = fh.read()
        with open(other, "wb") as fh:
            fh.write(data)
        data = theirs
    with open(path, "wb") as fh:
        fh.write(data)


def _fresh(pristine, name):
    cache_dir = pristine / name
    shutil.rmtree(cache_dir, ignore_errors=True)
    shutil.copytree(pristine / "pristine", cache_dir, copy_function=shutil.copy2)
    return cache_dir


def _check_two_runs(pristine, cache_dir, expect_warning=False):
    for run in (1, 2):
        out = _run(pristine, cache_dir)
        for name in ("f", "g"):
            assert out[name]["ok"], (run, out)
            assert out[name]["fallback"] is None, (run, out)   # never the NumPy fallback
        warned = [w for w in out["warnings"] if "symgrad" in w]
        if expect_warning:
            assert any("not using it, compiling in memory" in w for w in warned), out
        else:
            assert not warned, out
            if run == 2:   # rebuilt in place: the second run is a plain disk hit
                assert out["f"]["cache"] == out["g"]["cache"] == "disk", out
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["json", "pyc", "so", "sig"])
@pytest.mark.parametrize("fault", ["truncate", "flip", "garbage", "empty", "swap"])
def test_damaged_artefact_is_rebuilt_never_loaded(pristine, kind, fault, monkeypatch):
    cache_dir = _fresh(pristine, f"{kind}-{fault}")
    f_file, g_file = _artefacts(cache_dir, kind)
    _inject(f_file, g_file, fault)
    if kind == "so" and fault == "swap":   # the libraries with their signatures
        _inject(f_file + ".sig", g_file + ".sig", "swap")
    _check_two_runs(pristine, cache_dir)
    _assert_intact(cache_dir, monkeypatch)


@pytest.mark.slow
def test_signed_but_unloadable_library_is_rebuilt_not_a_permanent_fallback(pristine,
                                                                          monkeypatch):
    """A library whose signature matches but which dlopen refuses (one built against another
    machine's libraries) is rebuilt once, not the NumPy fallback of every later run."""
    cache_dir = _fresh(pristine, "so-forged")
    f_file, _ = _artefacts(cache_dir, "so")
    key = os.path.basename(f_file)[:-3].rsplit("-", 1)[1]
    garbage = b"\x7fELF" + os.urandom(4000)
    with open(f_file, "wb") as fh:
        fh.write(garbage)
    with open(f_file + ".sig", "wb") as fh:
        fh.write(cache.library_signature(f_file, key, garbage))
    _check_two_runs(pristine, cache_dir)
    _assert_intact(cache_dir, monkeypatch)


def _assert_intact(cache_dir, monkeypatch):
    # every artefact is intact again: the libraries' signatures verify
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(cache_dir))
    for path in _artefacts(cache_dir, "so"):
        key = os.path.basename(path)[:-3].rsplit("-", 1)[1]
        assert cache.library_verified(path, key), path


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["json", "pyc", "so", "sig", "folder", "root"])
@pytest.mark.parametrize("fault", ["group_writable", "foreign_owner"])
def test_untrusted_cache_is_refused_and_compiled_in_memory(pristine, kind, fault):
    if fault == "foreign_owner" and (not hasattr(os, "geteuid") or os.geteuid() != 0):
        pytest.skip("chown to another user needs root")
    cache_dir = _fresh(pristine, f"{kind}-{fault}")
    if kind == "root":
        target = str(cache_dir)
    elif kind == "folder":
        target = os.path.dirname(_artefacts(cache_dir, "so")[0])
    else:
        target = _artefacts(cache_dir, kind)[0]
    before = {}
    for name in ("so", "json"):
        for p in _artefacts(cache_dir, name):
            with open(p, "rb") as fh:
                before[p] = fh.read()
    if fault == "group_writable":
        os.chmod(target, os.stat(target).st_mode | stat.S_IWGRP)
    else:
        os.chown(target, 12345, 12345)
    out = _check_two_runs(pristine, cache_dir, expect_warning=True)
    # the refused library is not loaded from the cache, and nothing there was overwritten
    if kind in ("so", "sig", "folder", "root"):
        lib = out["f"]["library"]
        assert lib is not None and not lib.startswith(str(cache_dir)), out
    for p, data in before.items():
        with open(p, "rb") as fh:
            assert fh.read() == data, p


def test_cache_directory_writable_by_others_is_refused(tmp_path, monkeypatch):
    """In process: a world-writable cache directory (a shared /tmp folder) is neither read nor
    written, with one warning."""
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o777)
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(root))
    cache._WARNED.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache.store("ab" * 20, {"files": {"m.py": "x = 1\n"}, "main": "m.py", "meta": {},
                                "target": "numpy"})
        assert cache.load("ab" * 20) is None
        code = cache.code_of("y = 2\n", "<t>")
        assert cache.load("ab" * 20) is None
    ns = {}
    exec(code, ns)
    assert ns["y"] == 2
    assert os.listdir(root) == []
    msgs = [str(w.message) for w in caught if "symgrad" in str(w.message)]
    assert len(msgs) == 1 and "other users can write it" in msgs[0], msgs


def test_entry_carries_its_key_and_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "c"))
    a, b = "a" * 40, "b" * 40
    entry = {"files": {"m.py": "x = 1\n"}, "main": "m.py", "meta": {"n": [1, 2.5]},
             "target": "numpy"}
    cache.store(a, entry)
    cache.store(b, dict(entry, meta={"n": [3]}))
    assert cache.load(a)["meta"] == {"n": [1, 2.5]}
    # swapped files: each is another key's entry
    pa, pb = cache._path(a), cache._path(b)
    da, db = open(pa, "rb").read(), open(pb, "rb").read()
    open(pa, "wb").write(db)
    open(pb, "wb").write(da)
    assert cache.load(a) is None and cache.load(b) is None
    # a changed meta value with the old checksum
    cache.store(a, entry)
    text = open(pa).read().replace("2.5", "3.5")
    open(pa, "w").write(text)
    assert cache.load(a) is None
    # files are private
    cache.store(a, entry)
    assert stat.S_IMODE(os.stat(pa).st_mode) & 0o077 == 0
    assert stat.S_IMODE(os.stat(os.path.dirname(pa)).st_mode) & 0o022 == 0


@pytest.mark.parametrize("fault", ["truncate", "flip", "garbage", "empty", "swap"])
def test_bytecode_is_verified_before_unmarshal(tmp_path, monkeypatch, fault):
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "c"))
    src_a = "def h(v):\n    return v * 3 + 1\n"
    src_b = "def h(v):\n    return v - 7\n"
    cache.code_of(src_a, "<a>")
    cache.code_of(src_b, "<b>")
    folder = tmp_path / "c" / "py"
    files = sorted(folder.iterdir())
    assert len(files) == 2
    _inject(str(files[0]), str(files[1]), fault)
    for _ in range(2):
        for src, fn, want in ((src_a, "<a>", 7), (src_b, "<b>", -5)):
            ns = {}
            exec(cache.code_of(src, fn), ns)
            assert ns["h"](2) == want


@pytest.mark.skipif(not HAS_CC, reason="no C compiler")
@pytest.mark.parametrize("fault", ["truncate", "flip", "garbage", "empty", "swap", "unsigned"])
def test_library_is_verified_before_dlopen(tmp_path, monkeypatch, fault):
    """In process: a damaged cached library is rebuilt before anything loads it (a truncated
    one would SIGBUS this very process)."""
    import ctypes

    from symgrad import native

    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "c"))
    src_a = "double sg_a(double v) { return v * 3.0 + 1.0; }\n"
    src_b = "double sg_b(double v) { return v - 7.0; }\n"
    lib_a, lib_b = native.build(src_a, "a.c"), native.build(src_b, "b.c")
    if fault == "unsigned":
        os.remove(lib_a + ".sig")
    else:
        _inject(lib_a, lib_b, fault)
        if fault == "swap":
            _inject(lib_a + ".sig", lib_b + ".sig", "swap")
    for _ in range(2):
        again_a, again_b = native.build(src_a, "a.c"), native.build(src_b, "b.c")
        assert (again_a, again_b) == (lib_a, lib_b)
        key_a = os.path.basename(lib_a)[:-3].rsplit("-", 1)[1]
        key_b = os.path.basename(lib_b)[:-3].rsplit("-", 1)[1]
        assert cache.library_verified(lib_a, key_a) and cache.library_verified(lib_b, key_b)
    # a copy, so that this process's earlier handle of the path does not answer for it
    for lib, sym, want in ((lib_a, "sg_a", 7.0), (lib_b, "sg_b", -5.0)):
        copy = tmp_path / f"copy_{sym}.so"
        shutil.copy(lib, copy)
        fn = getattr(ctypes.CDLL(str(copy)), sym)
        fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
        assert fn(2.0) == want


def test_refused_library_is_built_privately(tmp_path, monkeypatch):
    """A cached library that is group-writable is neither loaded nor overwritten: the build
    goes to a private folder."""
    from symgrad import native

    if not HAS_CC:
        pytest.skip("no C compiler")
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "c"))
    src = "double sg_c(double v) { return v + 0.5; }\n"
    lib = native.build(src, "c.c")
    os.chmod(lib, 0o770)
    data = open(lib, "rb").read()
    cache._WARNED.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = native.build(src, "c.c")
    assert other != lib and not other.startswith(str(tmp_path))
    assert open(lib, "rb").read() == data
    assert any("group or other users can write it" in str(w.message) for w in caught)
