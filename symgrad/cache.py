"""The disk cache of generated modules: one JSON entry per key, written atomically.

Directory: $SYMGRAD_CACHE_DIR, else $XDG_CACHE_HOME/symgrad, else ~/.cache/symgrad.
SYMGRAD_CACHE=0 disables it. A corrupt or truncated entry is ignored (and recompiled).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile


def enabled() -> bool:
    return os.environ.get("SYMGRAD_CACHE", "1") not in ("0", "false", "no", "off")


def directory() -> str:
    path = os.environ.get("SYMGRAD_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "symgrad")
    return path


def _path(key: str) -> str:
    return os.path.join(directory(), key[:2], key + ".json")


def load(key: str) -> dict | None:
    """The entry stored under `key`, or None when absent, unreadable or corrupt."""
    if not enabled():
        return None
    try:
        path = _path(key)
        with open(path, encoding="utf-8") as f:
            entry = json.load(f)
        files = entry["files"]
        if entry.get("checksum") != _checksum(files):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.utime(path)   # its last use, for `symgrad cache info` (atime is often not kept)
    except OSError:
        pass
    return entry


def store(key: str, entry: dict) -> None:
    """Write `entry` atomically (a reader sees the old entry or the whole new one)."""
    if not enabled():
        return
    entry = dict(entry, checksum=_checksum(entry["files"]))
    path = _path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(entry, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or full cache directory only costs a recompile next time


def code_of(source: str, filename: str):
    """The code object of a generated module's source, from the cache's bytecode when this
    interpreter compiled the same source before (compiling a large module is most of a
    disk-cache hit: 12 ms of 16 for the elementwise-MLP benchmark's); compiled and stored
    otherwise. Keyed by the source, its filename and the interpreter's bytecode magic."""
    import importlib.util
    import marshal

    if not enabled():
        return compile(source, filename, "exec")
    digest = hashlib.sha256(b"\0".join((importlib.util.MAGIC_NUMBER, filename.encode(),
                                        source.encode()))).hexdigest()[:40]
    path = os.path.join(directory(), "py", digest + ".pyc")
    try:
        with open(path, "rb") as f:
            return marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = compile(source, filename, "exec")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(code))
        os.replace(tmp, path)
    except OSError:
        pass
    return code


def _checksum(files: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode())
        h.update(b"\0")
        h.update(files[name].encode())
        h.update(b"\0")
    return h.hexdigest()


def file_digest(path: str, _memo={}) -> str | None:
    """sha256 of a file's bytes (memoized by path, mtime and size), or None when it cannot be
    read."""
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        if key not in _memo:
            with open(path, "rb") as f:
                _memo[key] = hashlib.sha256(f.read()).hexdigest()
        return _memo[key]
    except OSError:
        return None


_LIBRARY_DIRS = None


def library_dirs() -> tuple:
    """Directories whose files are not a user's: symgrad's own (in the compiler fingerprint),
    the standard library and site-packages (SymPy, NumPy, ...). Each ends with a separator."""
    global _LIBRARY_DIRS
    if _LIBRARY_DIRS is None:
        import sysconfig

        paths = sysconfig.get_paths()
        dirs = {os.path.dirname(os.path.abspath(__file__))}
        dirs |= {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
        _LIBRARY_DIRS = tuple(sorted(os.path.join(os.path.realpath(d), "") for d in dirs))
    return _LIBRARY_DIRS


def dependency_digests(paths) -> dict | None:
    """{path: digest} of a forward's dependency files; None when unknown (`paths` None) or
    when one cannot be read — such an entry is kept in memory only."""
    if paths is None:
        return None
    out = {}
    for p in paths:
        d = file_digest(p)
        if d is None:
            return None
        out[p] = d
    return out


def dependencies_current(digests) -> bool:
    """Whether every dependency file still has the digest recorded when it was compiled."""
    return not digests or all(file_digest(p) == d for p, d in digests.items())


# What the cache writes: an entry's .json, a C module's .c source and .so library, a generated
# module's bytecode (.pyc), and .tmp files of writes in progress. info and clear walk the same
# set, so their counts agree.
_SUFFIXES = (".json", ".c", ".so", ".pyc", ".tmp")


def _files(root):
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith(_SUFFIXES):
                yield os.path.join(dirpath, name)


def info() -> dict:
    """The cache directory, its entries (generated modules), and the files and bytes they use
    (C modules add a .c and a .so to their entry)."""
    root = directory()
    entries = files = size = 0
    for path in _files(root):
        try:
            size += os.path.getsize(path)
        except OSError:   # removed meanwhile
            continue
        files += 1
        entries += path.endswith(".json")
    return {"directory": root, "entries": entries, "files": files, "bytes": size,
            "enabled": enabled()}


def entries() -> list:
    """One dict per entry, most recently used first: its key, function (the name the
    generated header gives, FILE.py:NAME), signature (inputs and shapes; "generic" for a
    shape-generic module), target, dtype, size in bytes, and last use (the time it was
    written or last loaded, seconds since the epoch)."""
    out = []
    for path in _files(directory()):
        if not path.endswith(".json"):
            continue
        try:
            st = os.stat(path)
            with open(path, encoding="utf-8") as f:
                entry = json.load(f)
            meta = entry.get("meta", {})
        except (OSError, ValueError, AttributeError):
            continue
        out.append({
            "key": os.path.basename(path)[:-5], "path": path,
            "function": meta.get("source") or meta.get("name") or "?",
            "name": meta.get("name") or "?",
            "signature": meta.get("signature") or ", ".join(meta.get("inputs", [])) or "?",
            "target": entry.get("target", "?"), "dtype": meta.get("dtype"),
            "size": st.st_size, "last_use": st.st_mtime})
    out.sort(key=lambda e: -e["last_use"])
    return out


def _matches(entry, name) -> bool:
    """Whether `name` names an entry's function: its NAME, FILE.py:NAME or FILE.py."""
    function = entry["function"]
    return name in (entry["name"], function, function.rpartition(":")[0]) or \
        function.endswith(f":{name}") or function.endswith(f".{name}")


def clear(name=None) -> dict:
    """Remove every cache file, or (`name`) the entries of one function (see _matches) and
    its C libraries; the entries and files removed, counted as info counts them."""
    if name is not None:
        chosen = [e for e in entries() if _matches(e, name)]
        paths = [e["path"] for e in chosen]
        stems = {_stem(e["name"]) + "_kernels-" for e in chosen if e["target"] == "c"}
        folder = os.path.join(directory(), "c")
        if stems and os.path.isdir(folder):
            paths += [os.path.join(folder, f) for f in os.listdir(folder)
                      if f.endswith(".so") and any(f.startswith(s) for s in stems)]
    else:
        paths = list(_files(directory()))
    removed = files = 0
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            continue
        files += 1
        removed += path.endswith(".json")
    return {"entries": removed, "files": files}


def _stem(name) -> str:
    """The file stem the C target gives a function's library (emit.c: snake case)."""
    import re

    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return re.sub(r"[^A-Za-z0-9_]", "_", "".join(out).strip("_") or "module").strip("_") \
        or "module"
