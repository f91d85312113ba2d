"""The process's C heap kept from giving freed memory back at once (``keep_freed_heap``), for a broker's answers.

A broker's pulls answer 16 or more messages each (tens of KiB of body bytes, allocated by the store for each
answer) and a run of them is written together, its bodies freed together once the socket took them. glibc's default
(trim the heap's top past 128 KiB freed; mmap each allocation past 128 KiB, adapting) then hands those pages back to
the kernel after every run and faults them in again for the next: ~15-20 % of a pull's cost on the broker's core
(issue 27 item 6: measured with py-spy, memcpy and malloc stalled on fresh pages). ``keep_freed_heap`` sets a fixed
trim threshold (``HEAP_TRIM_BYTES``: freed memory up to it stays with the process, for the next run) and mmap
threshold (``HEAP_MMAP_BYTES``: allocations below it come from the heap). A ``MALLOC_TRIM_THRESHOLD_`` /
``MALLOC_MMAP_THRESHOLD_`` in the environment wins (glibc read it at start); other C libraries: nothing done.
Thread-safety: call it once, at start (``mallopt`` is process-wide).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

HEAP_TRIM_BYTES = 8 * 1024 * 1024  # freed heap kept for reuse, at most (a few connections' runs of pull answers)
HEAP_MMAP_BYTES = 4 * 1024 * 1024  # allocations from this size on get their own mapping (large frames)
_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def keep_freed_heap() -> bool:
    """Set the process's trim and mmap thresholds (glibc only, each unless the environment set it); True if done."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = True
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        done = mallopt(_M_TRIM_THRESHOLD, HEAP_TRIM_BYTES) == 1 and done
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        done = mallopt(_M_MMAP_THRESHOLD, HEAP_MMAP_BYTES) == 1 and done
    return done
