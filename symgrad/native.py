"""Loading generated native modules without SymPy: building and loading the C target's
shared libraries, and the CUDA target's loader.

A cache hit of a `target="c"` module runs only this: compile the generated C once per
(source, compiler, flags) into the disk cache (`build`), load it with ctypes through the
generated loader (`load_c`), or fall back to the NumPy target with one warning. Kept apart
from `symgrad.emit.c` (the emitter, which needs SymPy) so that a disk-cache hit imports no
SymPy.
"""
from __future__ import annotations

import hashlib
import linecache
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import types
import warnings

from . import _profiling, cache
from ._version import __version__

_WARNED: set = set()
# Every C module symgrad loads takes its temporaries from one scratch block per thread (the
# loader's _scratch reads its module's `_thread`, set to this at load): a block of the largest
# size asked for instead of one per module, kept warm in cache by whichever module ran last (a
# Function's runtime module and its symgrad.compile module, a program's several Functions).
# A C call uses the block only while it runs, and the modules' calls on one thread never
# overlap: no C function calls back into Python.
SCRATCH = threading.local()


class BuildError(RuntimeError):
    """The C kernels could not be compiled here (the message says why)."""


class NotBuilt(BuildError):
    """Cache-only mode (`cache_only`): the library is not in the disk cache yet."""


# Per thread: "background" (the tier worker: a failed build raises, no NumPy fallback) and
# "cache_only" (a probe on the caller's thread: never run the compiler, raise NotBuilt).
_MODE = threading.local()
_RUNNING: set = set()          # compiler processes running now (killed at exit)
_EXITING = [False]


def in_background(flag=True):
    """Mark this thread as a background builder: a failed build raises BuildError."""
    _MODE.background = flag


class cache_only:
    """Within it, on this thread: a library not already in the disk cache raises NotBuilt
    (the compiler never runs), and no load falls back to NumPy."""

    def __enter__(self):
        self.previous = getattr(_MODE, "cache_only", False)
        _MODE.cache_only = True
        return self

    def __exit__(self, *exc):
        _MODE.cache_only = self.previous
        return False


def stop_builds():
    """At interpreter exit: kill the running compilers (their builds raise, their temporary
    folders are removed by the building thread) and refuse new builds."""
    _EXITING[0] = True
    for proc in list(_RUNNING):
        try:
            proc.kill()
        except OSError:
            pass


def _strict():
    return getattr(_MODE, "background", False) or getattr(_MODE, "cache_only", False)


def physical_cores() -> int:
    """The physical cores this process may run on: torch.get_num_threads()'s default (one
    thread per core, not per hyper-thread), from /proc/cpuinfo's (physical id, core id)
    pairs, at most the CPUs of the affinity mask; os.cpu_count() where that is unknown."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    cores, pid, logical = set(), None, 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "processor":
                    logical += 1
                elif key == "physical id":
                    pid = value.strip()
                elif key == "core id":
                    cores.add((pid, value.strip()))
    except OSError:
        pass
    n = len(cores) if cores else allowed
    if cores and logical > len(cores):    # hyper-threads: scale the allowed CPUs down alike
        allowed = max(1, allowed * len(cores) // logical)
    return max(1, min(n, allowed))


def num_threads() -> int:
    """Threads of the C target's large fused loops: SYMGRAD_NUM_THREADS, else the physical
    cores (as torch). Loops under SYMGRAD_PARALLEL_MIN elements run on one thread."""
    value = os.environ.get("SYMGRAD_NUM_THREADS")
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            warnings.warn(f"symgrad: SYMGRAD_NUM_THREADS={value!r} is not a whole number; "
                          "using the physical cores", RuntimeWarning, stacklevel=2)
    return _DEFAULT_THREADS[0] or _default_threads()


_DEFAULT_THREADS = [0]


def _default_threads():
    _DEFAULT_THREADS[0] = physical_cores()
    return _DEFAULT_THREADS[0]


def _march() -> str:
    """x86-64-v3 (AVX2 + FMA: 8 float lanes) where this CPU has it, else x86-64-v2.

    Never -march=native: the level is part of the flags, hence of the cache key, so a cached
    library moved to an older machine is rebuilt rather than run with illegal instructions.
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
            else:
                flags = set()
    except OSError:
        flags = set()
    v3 = {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"}
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return ""
    return "-march=x86-64-v3" if v3 <= flags else "-march=x86-64-v2"


# The flags of every build, on every machine (a standalone loader builds with them too).
FLAGS = ("-O3", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off",
         # FP operations do not trap, so both arms of a select may be computed: without it gcc
         # keeps a division or multiply under a ternary as a branch, and a branch in a loop
         # body stops vectorization (values and IEEE special cases are unchanged)
         "-fno-trapping-math",
         "-DSYMGRAD_OPENMP_SIMD",
         # gcc fuses sin(t) and cos(t) of one argument into a scalar sincos, which has no
         # libmvec variant and de-vectorizes the loop (30-deep tanh/sin chain: 6x slower); as
         # plain functions they keep their `omp declare simd` vector variants
         "-fno-builtin-sin", "-fno-builtin-cos", "-fno-builtin-sinf", "-fno-builtin-cosf")


def compiler_and_flags():
    """(compiler path, flags): CC (default cc), the flags, and the threads setting."""
    cc = os.environ.get("CC", "cc")
    path = shutil.which(cc)
    flags = list(FLAGS)
    march = _march()
    if march:
        flags.append(march)
    threads = num_threads()
    if threads > 1:
        flags += ["-fopenmp", f"-DSYMGRAD_THREADS={threads}"]
        least = os.environ.get("SYMGRAD_PARALLEL_MIN", "")
        if least.isdigit():   # elements from which a loop is split (default: the template's)
            flags.append(f"-DSYMGRAD_PARALLEL_MIN={int(least)}")
    else:
        flags += ["-fopenmp-simd"]
    return cc, path, flags


def _compiler_identity(path):
    """The compiler binary's identity without running it: real path, size, mtime."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


_PRIVATE_DIR = None


def _private_dir() -> str:
    """A folder of this process only (0o700, removed at exit): where C libraries are built when
    the disk cache may not be trusted ("compiled in memory": never shared, never reused)."""
    global _PRIVATE_DIR
    if _PRIVATE_DIR is None:
        import atexit

        _PRIVATE_DIR = tempfile.mkdtemp(prefix="symgrad-")
        atexit.register(shutil.rmtree, _PRIVATE_DIR, True)
    return _PRIVATE_DIR


def build(c_source: str, name: str) -> str:
    """Path of the shared library of `c_source`, compiled on the first call (disk-cached).

    A cached library is used only when its signature (.so.sig: the key and the sha256 of its
    bytes) verifies, before anything loads it; a damaged, truncated, swapped or unsigned one
    is rebuilt in place. Where the cache directory is not trusted (cache.trusted_dir) the
    library is built in a private temporary folder instead."""
    cc, path, flags = compiler_and_flags()
    if path is None:
        raise BuildError(f"no C compiler: {cc!r} not found (set CC to a C compiler)")
    key = hashlib.sha256("\0".join([c_source, _compiler_identity(path), *flags,
                                    __version__]).encode()).hexdigest()[:32]
    folder = os.path.join(cache.directory(), "c")
    trusted = cache.trusted_dir(folder, create=True)
    if not trusted:
        folder = _private_dir()
    stem = re.sub(r"[^A-Za-z0-9_]", "_", os.path.splitext(name)[0])[:64]
    lib = os.path.join(folder, f"{stem}-{key}.so")
    if trusted and cache.library_verified(lib, key):
        return lib
    if getattr(_MODE, "cache_only", False):
        raise NotBuilt(f"{name} is not built yet")
    if _EXITING[0]:
        raise BuildError("the interpreter is exiting")
    if trusted and (cache.refused(lib) or cache.refused(lib + ".sig")):
        # another user's library or signature: neither loaded nor overwritten
        trusted, folder = False, _private_dir()
        lib = os.path.join(folder, f"{stem}-{key}.so")
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        src = os.path.join(tmp, name)
        with open(src, "w", encoding="utf-8") as f:
            f.write(c_source)
        out = os.path.join(tmp, "lib.so")
        cmd = [path, *flags, src, "-o", out, "-lmvec", "-lm"]
        t0 = time.perf_counter()
        try:
            run = _run_compiler(cmd)
        except (OSError, subprocess.SubprocessError) as e:
            raise BuildError(f"{cc} could not run: {e}") from None
        if _EXITING[0]:
            raise BuildError("the interpreter is exiting")
        if _profiling.ON[0]:
            _profiling.span("compile.cc", "compile", t0, time.perf_counter(),
                            {"compiler": cc, "file": name})
        if run.returncode != 0:
            first = (run.stderr or run.stdout).strip().splitlines()[:5]
            raise BuildError(f"{cc} failed ({' '.join(cmd)}): " + " | ".join(first))
        os.chmod(out, 0o700)   # not group-writable whatever the umask (the cache refuses that)
        with open(out, "rb") as f:
            data = f.read()
        if trusted:
            # the signature first: a reader that sees the new library sees its signature (the
            # old library with a new signature fails the check and is rebuilt, never loaded)
            cache.write_atomic(lib + ".sig", cache.library_signature(lib, key, data))
        os.replace(out, lib)   # atomic: readers see no library or the whole one
    return lib


def _run_compiler(cmd):
    """subprocess.run(cmd) with the process registered, so that exit can kill it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    finally:
        _RUNNING.discard(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def load_c(module):
    """The runnable module of a C-target CompiledModule (NumPy fallback with one warning)."""
    files = module.files
    c_name = next(n for n in files if n.endswith(".c"))
    loader = load_source(files[module.main], f"<symgrad:{module.key or module.main}>")
    try:
        lib = build(files[c_name], c_name)
        try:
            loader.bind(lib)
        except OSError:
            # intact yet not loadable here (built by another machine's libraries): rebuilt
            # once, so that no cached file makes the NumPy fallback permanent
            for path in (lib + ".sig", lib):
                try:
                    os.remove(path)
                except OSError:
                    pass
            lib = build(files[c_name], c_name)
            loader.bind(lib)
        module.stats["library"] = lib
        if hasattr(loader, "_scratch"):
            loader._thread = SCRATCH
        return loader
    except (BuildError, OSError) as e:
        if _strict():
            raise   # tiered (background or cache probe): the caller keeps its NumPy module
        reason = str(e)
        if reason not in _WARNED:
            _WARNED.add(reason)
            warnings.warn(f"symgrad: target 'c' is unavailable, using the NumPy target "
                          f"instead: {reason}", RuntimeWarning, stacklevel=4)
        module.stats["fallback"] = reason
        np_name = next(n for n in files if n.endswith(".py") and n != module.main)
        return load_source(files[np_name], f"<symgrad:{module.key or np_name}>")


def load_cuda(compiled):
    """The loader module of a compiled CUDA module. Importing it needs no CuPy; it compiles the
    kernels (NVRTC, through CuPy) on the first call."""
    mod = load_source(compiled.files[compiled.main], f"<symgrad:{compiled.key or compiled.main}>")
    cu = [name for name in compiled.files if name.endswith(".cu")]
    if cu:
        mod.KERNEL_SOURCE = compiled.files[cu[0]]
    return mod


def load_source(source: str, filename: str):
    """Execute generated Python source as a fresh module (its lines visible in tracebacks)."""
    mod = types.ModuleType(os.path.splitext(os.path.basename(filename))[0].strip("<>"))
    mod.__file__ = filename
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(cache.code_of(source, filename), mod.__dict__)
    return mod
