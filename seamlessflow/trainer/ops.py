"""DeepSpeed's JIT-compiled ops (on CPU, the shared-memory comm op): where they are built, and built safely.

torch guards each op build with a plain lock *file* that only its creator removes, and it takes that lock
on every start, even when nothing needs compiling. A trainer killed at that moment (kill -9 in the crash
test, a stack stopped while the trainer starts) leaves the file behind, and every later DeepSpeed start on
the machine waits for it for ever. So:

- ops are built per virtual environment (``<venv>/torch-extensions``), not in the user-wide cache that
  every checkout shares (two checkouts would rebuild each other's ops and fight over the lock);
- every DeepSpeed start of ours first loads those ops holding an ``flock`` (which the kernel releases when
  its holder dies) and, under it, removes torch's lock files: nobody else builds in that directory, so any
  found is stale (if you point ``TORCH_EXTENSIONS_DIR`` at a directory other programs build in too, that
  no longer holds). Loading happens *before* `init_distributed`: a lock held across a rendezvous would
  deadlock ranks sharing a node. DeepSpeed keeps loaded ops per process, so its own later load is a no-op;
- ``python -m seamlessflow.trainer.ops`` builds the ops once at install, so no test or trainer waits
  minutes for a compiler.

Ops a GPU config JIT-builds inside `deepspeed.initialize` (e.g. fused Adam without a prebuilt wheel) are
not covered; they use the same directory. For them, `TORCH_CUDA_ARCH_LIST` is normalised first: CUDA
images for Hopper often set `9.0a` (arch-specific features), which torch accepts but DeepSpeed's
`compute_capability_args` parses as an integer minor version and fails on (`invalid literal for int()
with base 10: '0a'`). Our op builds need no arch-specific instructions, so `9.0a` becomes `9.0`.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXTENSIONS_ENV = "TORCH_EXTENSIONS_DIR"
ARCH_LIST_ENV = "TORCH_CUDA_ARCH_LIST"


def plain_arch_list(value: str) -> str:
    """``9.0a`` -> ``9.0``, ``8.0;9.0a+PTX`` -> ``8.0;9.0+PTX``, ``10.0f 9.0a`` -> ``10.0 9.0``: the
    arch-specific/family suffixes dropped, separators, ``+PTX`` and order kept, repeats removed."""
    seen, out = set(), []
    for arch in re.split(r"[;\s]+", value.strip()):
        arch = re.sub(r"^(\d+\.\d+)[a-z]+", r"\1", arch)
        if arch and arch not in seen:
            seen.add(arch)
            out.append(arch)
    return (" " if " " in value.strip() and ";" not in value else ";").join(out)


def normalise_arch_list() -> str | None:
    """Rewrites ``TORCH_CUDA_ARCH_LIST`` in this process's environment (and its children's) to
    `plain_arch_list`; returns the value now set (None when unset)."""
    value = os.environ.get(ARCH_LIST_ENV)
    if value:
        os.environ[ARCH_LIST_ENV] = plain_arch_list(value)
    return os.environ.get(ARCH_LIST_ENV)


def extensions_dir() -> Path:
    """Where torch builds DeepSpeed's ops; set in the environment so child processes agree."""
    os.environ.setdefault(EXTENSIONS_ENV, str(Path(sys.prefix) / "torch-extensions"))
    path = Path(os.environ[EXTENSIONS_ENV])
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def op_build_lock() -> Iterator[Path]:
    """Serialise our op loads on this machine and clear the lock files a killed load left."""
    root = extensions_dir()
    with open(root / ".seamlessflow-build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            for stale in root.glob("*/lock"):
                stale.unlink(missing_ok=True)
            yield root
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def preload_ops() -> list[str]:
    """Load (building if needed) the ops DeepSpeed's comm backend loads when it starts: the shared-memory
    collectives where the accelerator has them (CPU). Returns the names loaded."""
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    loaded = []
    normalise_arch_list()  # before any build, ours or deepspeed.initialize's
    with op_build_lock():
        builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
        if builder is not None and deepspeed.ops.__compatible_ops__.get(builder.NAME, False):
            builder.load()
            loaded.append(builder.NAME)
    return loaded


if __name__ == "__main__":
    names = preload_ops()
    print(f"DeepSpeed ops ready in {extensions_dir()}: {', '.join(names) or 'none to build'}")
