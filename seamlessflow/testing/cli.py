"""The `seamlessflow` CLI run as a user runs it: a separate process on a data dir and a broker port.

Why a process and not click's CliRunner: `up --detach`, `down` and `status` start, find and stop other
processes, which only a real invocation exercises.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_cli(data_dir: Path, broker_port: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m seamlessflow --data-dir DATA_DIR --broker-port PORT ARGS...`, output captured as text."""
    cmd = [sys.executable, "-m", "seamlessflow", "--data-dir", str(data_dir), "--broker-port", str(broker_port),
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
