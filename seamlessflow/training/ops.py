"""DeepSpeed's JIT-compiled ops (shared-memory comm, CPU Adam): where they are built, and built safely.

torch guards each op build with a plain lock *file* that only its creator removes, and it takes that lock
on every start, even when nothing needs compiling. A trainer killed at that moment (kill -9 in the crash
test, a stack stopped while the trainer starts) leaves the file behind, and every later DeepSpeed start on
the machine waits for it for ever. So:

- ops are built per virtual environment (``<venv>/torch-extensions``), not in the user-wide cache that
  every checkout shares (two checkouts would rebuild each other's ops and fight over the lock);
- every DeepSpeed start of ours holds an ``flock`` (which the kernel releases when its holder dies) and,
  under it, removes torch's lock files: nobody else builds in that directory, so any found is stale;
- ``python -m seamlessflow.training.ops`` builds the ops once at install, so no test or trainer waits
  minutes for a compiler.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXTENSIONS_ENV = "TORCH_EXTENSIONS_DIR"


def extensions_dir() -> Path:
    """Where torch builds DeepSpeed's ops; set in the environment so child processes agree."""
    os.environ.setdefault(EXTENSIONS_ENV, str(Path(sys.prefix) / "torch-extensions"))
    path = Path(os.environ[EXTENSIONS_ENV])
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def op_build_lock() -> Iterator[Path]:
    """Serialise our DeepSpeed starts on this machine and clear the lock files a killed start left."""
    root = extensions_dir()
    with open(root / ".seamlessflow-build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            for stale in root.glob("*/lock"):
                stale.unlink(missing_ok=True)
            yield root
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_ops() -> None:
    """Start DeepSpeed once on a toy model with the CPU config: builds exactly the ops a trainer loads."""
    import deepspeed
    import torch

    from seamlessflow.training.config import TrainerConfig
    from seamlessflow.training.engine import init_distributed

    with op_build_lock():
        init_distributed()
        model = torch.nn.Linear(4, 4)
        config = TrainerConfig().deepspeed_dict()
        deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)


if __name__ == "__main__":
    build_ops()
    print(f"DeepSpeed ops ready in {extensions_dir()}")
