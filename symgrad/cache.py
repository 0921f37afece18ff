"""The disk cache of generated modules: one JSON entry per key, written atomically.

Directory: $SYMGRAD_CACHE_DIR, else $XDG_CACHE_HOME/symgrad, else ~/.cache/symgrad.
SYMGRAD_CACHE=0 disables it.

What is in it runs: an entry's module source is executed, its bytecode (py/*.pyc) unmarshalled
and its C library (c/*.so) loaded with dlopen. Two rules follow (docs/trust-and-security.md):

- Ownership (as pip and Python's own caches): the cache directory, its folders and every file
  read from them must be owned by the current user and writable by no one else. Otherwise the
  cache is refused with one warning, and the module is compiled in memory (a C library in a
  private temporary folder). Folders the cache creates are private (0o700), files 0o600.
- Integrity: every entry and artefact carries the key it belongs to and the digest of its
  contents, both verified before it is used: a JSON entry its key and a checksum over all of
  it, a .pyc the digest of the source it compiles and the sha256 of its marshal data, a .so
  a signature file (.so.sig) with its key and sha256, checked before dlopen (a truncated
  library would SIGBUS the loader, a flipped byte in marshal data SIGSEGV it). A truncated,
  bit-flipped, garbage, empty or swapped artefact is ignored and rebuilt in place.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
import warnings

_WARNED: set = set()
_REFUSED: set = set()   # files not ours: never loaded, never overwritten (compiled in memory)


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


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(f"symgrad: {message}; not using it, compiling in memory (make it yours "
                      "and not writable by others: chown, chmod go-w; or set "
                      "SYMGRAD_CACHE_DIR)", RuntimeWarning, stacklevel=3)


def _problem(st) -> str | None:
    """Why a file or folder with this stat may not be trusted, or None."""
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"it is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "its group or other users can write it"
    return None


def trusted_dir(path: str, create: bool = False) -> bool:
    """Whether folder `path` (the cache directory or a folder in it) may be read from or
    written to: it and every folder from the cache directory down to it are this user's and
    writable by no one else. `create`: make missing folders (private, 0o700)."""
    root = os.path.abspath(directory())
    path = os.path.abspath(path)
    chain = [root]
    if path != root:
        rel = os.path.relpath(path, root)
        if rel.startswith(os.pardir):
            return False
        for part in rel.split(os.sep):
            chain.append(os.path.join(chain[-1], part))
    for folder in chain:
        try:
            st = os.stat(folder)
        except FileNotFoundError:
            if not create:
                return False
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
                st = os.stat(folder)
            except OSError:
                return False
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
        reason = _problem(st)
        if reason is not None:
            _warn_once(f"the cache directory {folder}: {reason}")
            return False
    return True


def read_trusted(path: str) -> bytes | None:
    """The bytes of cache file `path`, or None when absent, unreadable, not a regular file, or
    not trusted (see trusted_dir; such a file is refused with one warning and never
    overwritten)."""
    if path in _REFUSED or not trusted_dir(os.path.dirname(path)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            reason = _problem(st)
            if reason is not None:
                _REFUSED.add(path)
                _warn_once(f"the cache file {path}: {reason}")
                return None
            return f.read()
        except OSError:
            return None


def refused(path: str) -> bool:
    """Whether cache file `path` was refused as not this user's (see read_trusted)."""
    return path in _REFUSED


def write_atomic(path: str, data: bytes) -> bool:
    """Write `data` to cache file `path` atomically (a reader sees the old file or the whole
    new one), private to this user. False when the folder is not trusted or not writable, or
    `path` is a refused file."""
    folder = os.path.dirname(path)
    if path in _REFUSED or not trusted_dir(folder, create=True):
        return False
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")   # 0o600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
        return True
    except OSError:
        return False   # a read-only or full cache directory only costs a recompile next time


def load(key: str) -> dict | None:
    """The entry stored under `key`, or None when absent, unreadable, untrusted, corrupt, or
    another key's (a swapped file)."""
    if not enabled():
        return None
    path = _path(key)
    data = read_trusted(path)
    if data is None:
        return None
    try:
        entry = json.loads(data.decode("utf-8"))
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        checksum = entry.pop("checksum", None)
        if checksum != _entry_checksum(entry):
            return None
        entry["files"], entry["main"], entry["meta"]   # noqa: B018  (present)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    try:
        os.utime(path)   # its last use, for `symgrad cache info` (atime is often not kept)
    except OSError:
        pass
    return entry


def store(key: str, entry: dict) -> None:
    """Write `entry` atomically, with its key and a checksum over all of it."""
    if not enabled():
        return
    entry = dict(entry, key=key)
    try:
        entry["checksum"] = _entry_checksum(entry)
        data = json.dumps(entry, sort_keys=True).encode("utf-8")
    except (TypeError, ValueError):
        return
    write_atomic(_path(key), data)


def _entry_checksum(entry: dict) -> str:
    """sha256 of an entry's canonical JSON (without its checksum): the same before it is
    written and after it is read back."""
    text = json.dumps({k: v for k, v in entry.items() if k != "checksum"}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_PYC_MAGIC = b"SGPYC1\0"


def code_of(source: str, filename: str):
    """The code object of a generated module's source, from the cache's bytecode when this
    interpreter compiled the same source before (compiling a large module is most of a
    disk-cache hit: 12 ms of 16 for the elementwise-MLP benchmark's); compiled and stored
    otherwise. Keyed by the source, its filename and the interpreter's bytecode magic.

    The file holds a header before the marshal data: a magic, the key (digest) it belongs to
    and the sha256 of the data, all checked before marshal.loads sees a byte."""
    import importlib.util
    import marshal

    if not enabled():
        return compile(source, filename, "exec")
    digest = hashlib.sha256(b"\0".join((importlib.util.MAGIC_NUMBER, filename.encode(),
                                        source.encode()))).hexdigest()[:40]
    path = os.path.join(directory(), "py", digest + ".pyc")
    data = read_trusted(path)
    head = len(_PYC_MAGIC) + 40 + 32
    if data is not None and len(data) > head and data.startswith(_PYC_MAGIC) \
            and data[len(_PYC_MAGIC):len(_PYC_MAGIC) + 40] == digest.encode() \
            and hashlib.sha256(data[head:]).digest() == data[head - 32:head]:
        try:
            return marshal.loads(data[head:])
        except (ValueError, EOFError, TypeError):
            pass
    code = compile(source, filename, "exec")
    payload = marshal.dumps(code)
    write_atomic(path, _PYC_MAGIC + digest.encode() + hashlib.sha256(payload).digest()
                 + payload)
    return code


def library_signature(lib: str, key: str, data: bytes) -> bytes:
    """The .so.sig text of a C library: the key it was built for and its sha256."""
    return json.dumps({"library": os.path.basename(lib), "key": key,
                       "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)},
                      sort_keys=True).encode()


def library_verified(lib: str, key: str) -> bool:
    """Whether the cached C library `lib` is the complete, intact library built for `key`:
    its signature file names it and the key, and its bytes have the recorded sha256. Checked
    before dlopen: a truncated library would SIGBUS the loader."""
    sig = read_trusted(lib + ".sig")
    data = read_trusted(lib) if sig is not None else None
    if data is None:
        return False
    return sig == library_signature(lib, key, data)


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


# What the cache writes: an entry's .json, a C module's .c source and .so library (and its
# .so.sig signature), a generated module's bytecode (.pyc), and .tmp files of writes in
# progress. info and clear walk the same set, so their counts agree.
_SUFFIXES = (".json", ".c", ".so", ".sig", ".pyc", ".tmp")


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
        stems = {_snake(e["name"]) + "_kernels-" for e in chosen if e["target"] == "c"}
        folder = os.path.join(directory(), "c")
        if stems and os.path.isdir(folder):
            paths += [os.path.join(folder, f) for f in os.listdir(folder)
                      if f.endswith((".so", ".so.sig")) and any(f.startswith(s) for s in stems)]
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


def _snake(name):
    """A function's file stem, one for every target (NumPy, C, CUDA, torch, JAX) and the cache:
    snake case (`LayerNorm` -> `layer_norm`), ASCII letters, digits and `_` only (a C file and a
    Python module must be named by it; accents are dropped, `Ünïcode` -> `unicode`), so a class
    named '../x' or 'a"b' writes no other file; short enough for a file system's 255 bytes with
    its suffixes and the cache's key."""
    import unicodedata

    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not (name[i - 1].isupper() or name[i - 1] == "_"):
            out.append("_")
        out.append(ch.lower())
    ascii_ = unicodedata.normalize("NFKD", "".join(out)).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9_]", "_", ascii_).strip("_")[:64].strip("_") or "module"
