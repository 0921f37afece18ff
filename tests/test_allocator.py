"""symgrad._allocator: glibc keeps NumPy-sized temporaries in its heap unless told not to."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from symgrad import _allocator

_GLIBC = sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "mallinfo2")


@pytest.mark.parametrize("env, expected", [
    ({"SYMGRAD_MALLOC_TUNING": "0"}, "off (SYMGRAD_MALLOC_TUNING=0)"),
    ({"SYMGRAD_MALLOC_TUNING": "Off"}, "off (SYMGRAD_MALLOC_TUNING=Off)"),
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"}, "left to the user's GLIBC_TUNABLES"),
    ({"MALLOC_ARENA_MAX": "2"}, "left to the user's MALLOC_ARENA_MAX"),
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, "left to the user's MALLOC_TRIM_THRESHOLD_"),
])
def test_the_users_choice_wins(env, expected):
    assert _allocator._reason_not_to(env) == expected


def test_unrelated_settings_do_not_stop_it():
    env = {"SYMGRAD_MALLOC_TUNING": "1", "GLIBC_TUNABLES": "glibc.pthread.rseq=0"}
    expected = None if sys.platform.startswith("linux") else f"not glibc ({sys.platform})"
    assert _allocator._reason_not_to(env) == expected


_PROBE = textwrap.dedent("""
    import ctypes, numpy, symgrad, symgrad._allocator as A
    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Info
    a = numpy.ones(20 << 17)          # 20 MiB
    mapped = libc.mallinfo2().hblkhd  # bytes in mmapped blocks while it lives
    del a
    print(A.STATE, mapped >> 20, libc.mallinfo2().arena >> 20)
""")


def _probe(**env):
    base = {k: v for k, v in os.environ.items()
            if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          env={**base, **env}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    state, mapped, arena = proc.stdout.rsplit(None, 2)
    return state, int(mapped), int(arena)


@pytest.mark.skipif(not _GLIBC, reason="needs glibc >= 2.33 (mallinfo2)")
def test_import_keeps_a_freed_20_mib_array_in_the_heap():
    state, mapped, arena = _probe()
    assert state.startswith("tuned"), state
    assert mapped == 0          # below the 32 MiB mmap threshold: from the heap
    assert arena >= 20          # and still there, for the next array, after it was freed


@pytest.mark.skipif(not _GLIBC, reason="needs glibc >= 2.33 (mallinfo2)")
def test_opting_out_leaves_glibc_defaults():
    state, mapped, arena = _probe(SYMGRAD_MALLOC_TUNING="0")
    assert state == "off (SYMGRAD_MALLOC_TUNING=0)"
    assert mapped >= 20         # glibc's default: a 20 MiB block is mmapped
    assert arena < 20           # and given back when freed
