"""glibc's mmap threshold fixed for a service on request: large blocks kept out of its heap.

glibc serves blocks above its mmap threshold with their own mappings, returned on free; and each time such a
block is freed it raises the threshold to that block's size (up to 32 MiB). A trainer frees tensors of a new
size every step (the batch's lengths vary), so after a few steps most of them come from the heap instead,
where blocks of changing sizes can fragment memory that glibc does not give back. Setting the threshold
explicitly turns that adjustment off (mallopt(3)): large tensors are mapped and unmapped each time.

Measured on the trainer's step alone (`benchmarks/trainer_rss.py`, `benchmarks/README.md`): fixed at 128 KiB
its resident memory is ~40 MiB lower and flatter, but a CPU step is slower (every large tensor is a fresh
mapping, page faults included), so it is not the default. `SEAMLESSFLOW_MALLOC_MMAP_THRESHOLD=131072` (bytes)
sets it for every service started with it (`service_main`); unset or `off` leaves glibc's dynamic threshold.
glibc's own `MALLOC_MMAP_THRESHOLD_`, when set, wins. Nothing is done on a C library that is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import platform

ENV = "SEAMLESSFLOW_MALLOC_MMAP_THRESHOLD"
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


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"))
