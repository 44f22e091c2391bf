"""Memory snapshots of a running service, on request through the environment, to find what grows.

A leak shows as a slope in resident memory over hours; the snapshot diff says which lines allocated what
stayed. `SEAMLESSFLOW_TRACEMALLOC_DIR=DIR` makes every service process started with it trace its Python
allocations (`tracemalloc`, `SEAMLESSFLOW_TRACEMALLOC_FRAMES` frames per allocation, default 8; only the
services named in `SEAMLESSFLOW_TRACEMALLOC_ONLY`, e.g. `proxy,trainer`, when it is set) from
`SEAMLESSFLOW_TRACEMALLOC_AFTER_S` seconds after its start (default 120: tracing the imports of torch and
DeepSpeed slows a trainer's start to minutes, and a leak is what grows after the warm-up), and write a
snapshot to `DIR/<pid>-<seconds since start>.snap` every `SEAMLESSFLOW_TRACEMALLOC_EVERY_S` seconds (default
60); `benchmarks/memory_diff.py` prints what grew between two of them. Tracing costs CPU (roughly twice the
allocation cost), so it is for finding a leak, never for a benchmark's figures.
"""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from pathlib import Path

DIR_ENV = "SEAMLESSFLOW_TRACEMALLOC_DIR"


def start_from_environment(service: str) -> Path | None:
    """Starts tracing and the snapshot thread when `SEAMLESSFLOW_TRACEMALLOC_DIR` is set (and `service`, e.g.
    "services.proxy", is among those `SEAMLESSFLOW_TRACEMALLOC_ONLY` names, if it names any); the directory."""
    target = os.environ.get(DIR_ENV)
    only = {name.strip() for name in os.environ.get("SEAMLESSFLOW_TRACEMALLOC_ONLY", "").split(",") if name.strip()}
    if not target or (only and service.rpartition(".")[2] not in only):
        return None
    directory = Path(target)
    directory.mkdir(parents=True, exist_ok=True)
    frames = int(os.environ.get("SEAMLESSFLOW_TRACEMALLOC_FRAMES", "8"))
    after_s = float(os.environ.get("SEAMLESSFLOW_TRACEMALLOC_AFTER_S", "120"))
    every_s = float(os.environ.get("SEAMLESSFLOW_TRACEMALLOC_EVERY_S", "60"))
    threading.Thread(target=_snapshots, args=(directory, frames, after_s, every_s), name="tracemalloc",
                     daemon=True).start()
    return directory


def _snapshots(directory: Path, frames: int, after_s: float, every_s: float) -> None:
    started = time.monotonic()
    time.sleep(after_s)
    tracemalloc.start(frames)
    while True:
        time.sleep(every_s)
        elapsed = int(time.monotonic() - started)
        path = directory / f"{os.getpid()}-{elapsed:06d}.snap"
        tracemalloc.take_snapshot().dump(str(path.with_suffix(".tmp")))
        path.with_suffix(".tmp").rename(path)  # a reader never sees half a snapshot
