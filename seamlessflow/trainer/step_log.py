"""`steps.jsonl`: which trajectory ids each optimizer step trained, the record the chaos audit reads to prove
nothing is trained twice or lost.

Lines are appended only once the commit made their steps durable, and before `latest` names their checkpoint;
a crash between the two leaves lines past the restored step, which the restart cuts (`cut_after`). A fenced
trainer appends none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def append_steps(path: Path, version: int, entries: list[dict[str, Any]]) -> None:
    """Appends `entries` (one per step) under `version`, flushed to disk before it returns."""
    with open(path, "a") as out:
        for entry in entries:
            out.write(json.dumps({"version": version, **entry}) + "\n")
        out.flush()
        os.fsync(out.fileno())


def cut_after(path: Path, step: int) -> None:
    """Drops the lines of steps after `step` (the one the restart restored)."""
    if not path.exists():
        return
    lines = path.read_text().splitlines()
    kept = [line for line in lines if line.strip() and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in kept))


def fmt_figures(values: dict) -> str:
    """A step's figures as the trainer's log line shows them (`name=value`, floats to 4 digits)."""
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
