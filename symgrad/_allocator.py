"""glibc malloc thresholds for NumPy-sized temporaries.

NumPy allocates one array per operation, and the generated NumPy modules (and the runtime
that runs them) free most of them a few operations later. With glibc's default, dynamic
thresholds the heap is trimmed back to the OS as soon as more than twice the largest
recently freed block is free at its top, so the next call's fresh arrays page-fault again:
≈ 0.6 ms per MB on the VMs we measured, which made the runtime's softplus at 1e5 elements
3x slower than with the heap kept (benchmarks and README, "Performance").

`tune()` sets the two thresholds that glibc's own tunables would set,

    GLIBC_TUNABLES=glibc.malloc.trim_threshold=134217728:glibc.malloc.mmap_threshold=33554432

once, when symgrad is imported: blocks below 32 MiB come from the heap, and up to 128 MiB of
free heap top is kept for reuse instead of being returned to the OS. It does nothing:

- when ``SYMGRAD_MALLOC_TUNING`` is ``0`` / ``off`` / ``false`` / ``no``;
- when the user already chose malloc settings (``GLIBC_TUNABLES`` naming ``malloc``, or one of
  glibc's ``MALLOC_*_`` variables): theirs win;
- off Linux or off glibc (musl, macOS, Windows). With jemalloc or tcmalloc preloaded, glibc's
  thresholds are set but unused: harmless.

`STATE` says which of these happened ("tuned", or why not); the benchmarks print it.
"""
from __future__ import annotations

import os
import sys

TRIM_THRESHOLD = 128 << 20   # bytes of free heap top kept for reuse
MMAP_THRESHOLD = 32 << 20    # blocks below this come from the heap (glibc's dynamic maximum)

_M_TRIM_THRESHOLD = -1       # <malloc.h>
_M_MMAP_THRESHOLD = -3

_USER_MALLOC_VARS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                     "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX")

STATE = "not tried"


def _reason_not_to(environ) -> str | None:
    flag = environ.get("SYMGRAD_MALLOC_TUNING", "").strip().lower()
    if flag in ("0", "off", "false", "no"):
        return "off (SYMGRAD_MALLOC_TUNING=%s)" % environ["SYMGRAD_MALLOC_TUNING"]
    if "malloc" in environ.get("GLIBC_TUNABLES", ""):
        return "left to the user's GLIBC_TUNABLES"
    for name in _USER_MALLOC_VARS:
        if name in environ:
            return f"left to the user's {name}"
    if not sys.platform.startswith("linux"):
        return f"not glibc ({sys.platform})"
    return None


def tune(environ=None) -> str:
    """Set the thresholds (see the module docstring) unless told or found not to; returns and
    records in `STATE` what happened. Never raises."""
    global STATE
    environ = os.environ if environ is None else environ
    reason = _reason_not_to(environ)
    if reason is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            glibc = getattr(libc, "gnu_get_libc_version", None)
            mallopt = getattr(libc, "mallopt", None)
            if glibc is None or mallopt is None:
                reason = "not glibc"
            else:
                mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
                mallopt.restype = ctypes.c_int
                if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and \
                        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD):
                    reason = (f"tuned (glibc malloc: mmap_threshold {MMAP_THRESHOLD >> 20} MiB, "
                              f"trim_threshold {TRIM_THRESHOLD >> 20} MiB)")
                else:
                    reason = "mallopt refused"
        except (OSError, AttributeError, TypeError) as e:   # no libc to load: leave it be
            reason = f"not tuned ({type(e).__name__})"
    STATE = reason
    return STATE
