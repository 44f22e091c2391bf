"""`benchmarks/bench_proxy.py --peers` at a tiny size, SeamlessFlow alone: the table has its rows streamed and
plain, and a peer whose venv is missing is skipped with its install command printed, never installed here (the
suite downloads nothing)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_peers_table_for_seamlessflow_alone_skips_missing_peers(tmp_path: Path) -> None:
    argv = [
        sys.executable, str(ROOT / "benchmarks" / "bench_proxy.py"), "--peers", "--no-install",
        "--peers-dir", str(tmp_path / "peers"), "--levels", "2", "--seconds", "0.5", "--routes", "chat",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in done.stdout.splitlines()
            if line.startswith("| ") and "---" not in line]
    assert rows[0][:4] == ["mode", "sessions", "gateway", "route"]
    ours = {row[0]: row for row in rows[1:] if row[2] == "seamlessflow"}
    assert sorted(ours) == ["plain", "stream"]
    for row in ours.values():
        assert 0 < float(row[8]) < 2 and row[9].endswith(" ms") and "Kafka" in row[11]
    assert ours["stream"][7].endswith(" ms")  # time to the first token, on streams
    for peer in ("litellm", "agentlightning"):
        assert f"skipped {peer}: no venv at {tmp_path / 'peers' / peer}" in done.stdout
    assert not (tmp_path / "peers").exists()
