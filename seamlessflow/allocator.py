"""glibc's mmap threshold fixed for a service on request: large blocks kept out of its heap.

glibc serves blocks above its mmap threshold with their own mappings, returned on free; and each time such a
block is freed it raises the threshold to that block's size (up to 32 MiB). A trainer frees tensors of a new
size every step (the batch's lengths vary), so after a few steps most of them come from the heap instead,
where blocks of changing sizes can fragment memory that glibc does not give back. Setting the threshold
explicitly turns that adjustment off (mallopt(3)): large tensors are mapped and unmapped each time.

Measured on the trainer's step alone (`benchmarks/trainer_rss.py`, `docs/performance/soak.md`): fixed at 128 KiB
its resident memory is ~40 MiB lower and flatter, but a CPU step is slower (every large tensor is a fresh
mapping, page faults included), so it is not the default. `SEAMLESSFLOW_MALLOC_MMAP_THRESHOLD=131072` (bytes)
sets it for every service started with it (`service_main`); unset or `off` leaves glibc's dynamic threshold.
glibc's own `MALLOC_MMAP_THRESHOLD_`, when set, wins. Nothing is done on a C library that is not glibc.

Trimming, on request: glibc gives freed heap memory back to the system only from the top of its heap, so a
process whose objects come and go (the proxy's sessions: the newest 100 000 kept, the oldest evicted) can
hold free pages in the middle of its heap that count in its RSS. `SEAMLESSFLOW_MALLOC_TRIM_S=N` makes every
service call `malloc_trim(0)` every N seconds, which hands those pages back (madvise), and log how much
resident memory that gave back: growth that a trim gives back was free memory, not a leak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import platform
import threading
import time

import psutil

ENV = "SEAMLESSFLOW_MALLOC_MMAP_THRESHOLD"
TRIM_ENV = "SEAMLESSFLOW_MALLOC_TRIM_S"
log = logging.getLogger("seamlessflow.allocator")
M_MMAP_THRESHOLD = -3  # <malloc.h>


def fix_mmap_threshold() -> int | None:
    """Sets glibc's mmap threshold for this process when asked (see the module's docstring); the bytes, or None."""
    value = os.environ.get(ENV, "off").strip().lower()
    if value in ("off", "0", "") or "MALLOC_MMAP_THRESHOLD_" in os.environ or platform.libc_ver()[0] != "glibc":
        return None
    if not value.isdigit() or int(value) >= 1 << 31:
        raise ValueError(f"{ENV}={value!r}: a size in bytes (below 2 GiB), or off")
    threshold = int(value)
    if _libc().mallopt(M_MMAP_THRESHOLD, threshold) != 1:
        raise ValueError(f"{ENV}={threshold}: glibc refused it")
    return threshold


def start_trimming(service: str) -> float | None:
    """Trims glibc's heap every `$SEAMLESSFLOW_MALLOC_TRIM_S` seconds when asked (see the module); the period."""
    value = os.environ.get(TRIM_ENV, "").strip()
    if not value or platform.libc_ver()[0] != "glibc":
        return None
    every_s = float(value)
    if every_s <= 0:
        raise ValueError(f"{TRIM_ENV}={value!r}: a period in seconds above 0")
    threading.Thread(target=_trim_every, args=(service, every_s), name="malloc-trim", daemon=True).start()
    return every_s


def trim() -> tuple[int, int]:
    """glibc's `malloc_trim(0)`: the process's RSS in bytes before and after."""
    process = psutil.Process()
    before = process.memory_info().rss
    _libc().malloc_trim(0)
    return before, process.memory_info().rss


def _trim_every(service: str, every_s: float) -> None:
    while True:
        time.sleep(every_s)
        before, after = trim()
        log.info("%s: malloc_trim gave back %.1f MiB (RSS %.1f -> %.1f MiB)", service, (before - after) / 2**20,
                 before / 2**20, after / 2**20)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"))
