"""Thread pinning and machine/version header.

``configure_threads`` MUST run before numpy, torch or jax are imported: BLAS,
OpenMP and XLA read their thread counts once, at import / first use.
"""
from __future__ import annotations

import os
import platform
import sys

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
_HEAVY = ("numpy", "torch", "jax", "jaxlib", "autograd")


def configure_threads(n: int) -> list[str]:
    """Set every thread knob to ``n``; returns warnings (e.g. numpy imported too early)."""
    warnings = [f"{m} was imported before thread settings were applied; its thread "
                f"count may not be {n}" for m in _HEAVY if m in sys.modules]
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    multi = "true" if n > 1 else "false"
    xla = f"--xla_cpu_multi_thread_eigen={multi} intra_op_parallelism_threads={n}"
    # keep any unrelated XLA flags the user set
    prev = [f for f in os.environ.get("XLA_FLAGS", "").split()
            if not f.startswith(("--xla_cpu_multi_thread_eigen", "intra_op_parallelism_threads"))]
    os.environ["XLA_FLAGS"] = " ".join(prev + [xla])
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["SYMGRAD_NUM_THREADS"] = str(n)
    return warnings


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cores() -> str:
    n = os.cpu_count()
    try:
        aff = len(os.sched_getaffinity(0))
    except AttributeError:
        aff = n
    return f"{n} logical" + (f", {aff} usable" if aff != n else "")


def numpy_blas() -> str:
    try:
        import numpy as np
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - purely informative
        return "?"


def thread_summary() -> str:
    parts = [f"{v}={os.environ.get(v)}" for v in THREAD_VARS[:3]]
    parts.append(f'XLA_FLAGS="{os.environ.get("XLA_FLAGS", "")}"')
    if "torch" in sys.modules:
        t = sys.modules["torch"]
        parts.append(f"torch.get_num_threads()={t.get_num_threads()}"
                     f" interop={t.get_num_interop_threads()}")
    return ", ".join(parts)


def malloc_summary() -> str:
    """What the process's allocator does with freed arrays; importing symgrad tunes glibc's
    thresholds for every peer in the process alike (symgrad/_allocator.py)."""
    state = "symgrad not imported"
    if "symgrad._allocator" in sys.modules:
        state = sys.modules["symgrad._allocator"].STATE
    user = os.environ.get("GLIBC_TUNABLES")
    return state + (f'; GLIBC_TUNABLES="{user}"' if user else "") + " — applies to all peers"


def base_header() -> list[str]:
    import numpy as np
    return [
        f"machine : {cpu_model()} ({cores()} cores), {platform.system()} {platform.release()}",
        f"python  : {platform.python_version()} ({platform.python_implementation()})",
        f"numpy   : {np.__version__} (BLAS: {numpy_blas()})",
    ]


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fresh_python(code: str) -> list[str]:
    """argv for a fresh interpreter that sees the same ``symgrad`` and ``benchmarks``
    as this process (run it with ``cwd`` outside the repository)."""
    import importlib.util
    paths = []
    spec = importlib.util.find_spec("symgrad")
    if spec is not None and spec.origin:
        d = os.path.dirname(spec.origin)
        paths.append(os.path.dirname(d) if os.path.basename(spec.origin) == "__init__.py" else d)
    elif spec is not None and spec.submodule_search_locations:  # namespace package
        paths.append(os.path.dirname(list(spec.submodule_search_locations)[0]))
    paths.append(REPO_ROOT)
    prelude = f"import sys; sys.path[:0] = {paths!r}; "
    return [sys.executable, "-c", prelude + code]
