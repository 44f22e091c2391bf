"""Asked to, every service fixes glibc's mmap threshold: a large block freed does not move the next ones into the heap.

Measured the way glibc counts it (`mallinfo2().hblks`: blocks served by their own mapping) in fresh
processes: a 4 MiB block freed raises glibc's dynamic threshold to 4 MiB and a 2 MiB block after it comes
from the heap (where the trainer's changing tensor sizes fragmented memory it never gave back); with the
threshold fixed it is mapped, and returned when freed.
"""

import ctypes
import ctypes.util
import os
import subprocess
import sys

import pytest

from seamlessflow.allocator import ENV, TRIM_ENV, start_trimming, trim

PROBE = """
import ctypes, ctypes.util
from seamlessflow.allocator import fix_mmap_threshold
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype, libc.malloc.restype, libc.free.argtypes = Info, ctypes.c_void_p, [ctypes.c_void_p]
print("set", fix_mmap_threshold())
libc.free(libc.malloc(4 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(2 << 20)
print("mapped", libc.mallinfo2().hblks - before)
libc.free(block)
"""


def _probe(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.fixture
def clean_env():
    return {k: v for k, v in os.environ.items() if k not in (ENV, "MALLOC_MMAP_THRESHOLD_")}


def test_with_the_threshold_fixed_a_large_block_is_mapped_after_a_larger_one_was_freed(clean_env):
    assert _probe({**clean_env, ENV: "131072"}) == ["set", "131072", "mapped", "1"]


def test_by_default_glibcs_dynamic_threshold_moves_it_into_the_heap(clean_env):
    assert _probe(clean_env) == ["set", "None", "mapped", "0"]
    assert _probe({**clean_env, ENV: "off"}) == ["set", "None", "mapped", "0"]


def test_glibcs_own_variable_wins(clean_env):
    assert _probe({**clean_env, ENV: "4096", "MALLOC_MMAP_THRESHOLD_": "131072"}) == ["set", "None", "mapped", "1"]


def test_a_value_that_is_no_size_is_a_clear_error(clean_env):
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean_env, ENV: "lots"}, capture_output=True, text=True)
    assert out.returncode != 0 and "SEAMLESSFLOW_MALLOC_MMAP_THRESHOLD='lots': a size in bytes" in out.stderr


def test_a_trim_gives_back_the_free_pages_in_the_middle_of_the_heap():
    """Blocks freed below one still in use stay in glibc's heap (and in the RSS) until a trim hands them back."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.free.argtypes, libc.memset.argtypes = ctypes.c_void_p, [ctypes.c_void_p], [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    blocks = [libc.malloc(4096) for _ in range(20_000)]  # ~80 MiB from the heap (below the mmap threshold)
    for block in blocks:
        libc.memset(block, 1, 4096)  # touched: resident
    for n, block in enumerate(blocks):
        if n % 64:
            libc.free(block)  # every 64th block stays: the freed pages are in the middle, not at the top
    before, after = trim()
    for block in blocks[::64]:
        libc.free(block)
    assert before - after > 32 << 20, f"the trim gave back only {(before - after) / 2**20:.1f} MiB"


def test_trimming_only_when_asked(monkeypatch):
    monkeypatch.delenv(TRIM_ENV, raising=False)
    assert start_trimming("services.proxy") is None
    monkeypatch.setenv(TRIM_ENV, "-1")
    with pytest.raises(ValueError, match=TRIM_ENV):
        start_trimming("services.proxy")
