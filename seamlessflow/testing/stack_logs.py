"""The end of each service log of a stack run from a data directory, for a failing end-to-end test's message."""

from __future__ import annotations

from pathlib import Path


def log_tails(data_dir: Path, chars: int = 3000) -> str:
    """The last `chars` of every `<data_dir>/logs/*.log`, each under its name ("" before `up` made the folder)."""
    logs = Path(data_dir) / "logs"
    return "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-chars:]}"
                   for p in sorted(logs.glob("*.log"))) if logs.exists() else ""
