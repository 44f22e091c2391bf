"""`benchmarks/gpu_smoke.py --device cpu`: the GPU smoke run's dry run at tiny sizes, as one command, so the
script a lent GPU machine runs is known to work before its minutes are spent: every check passes (tree and
flat equal; the device weight source's bytes equal to the parameters right after the step, ZeRO-2 and
ZeRO-3, DeepSpeed on gloo) and the table has every row."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_dry_run_passes_every_check_and_prints_the_table():
    argv = [sys.executable, str(ROOT / "benchmarks" / "gpu_smoke.py"), "--device", "cpu", "--rounds", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = [[cell.strip() for cell in line.split(" | ")] for line in done.stdout.splitlines() if " | " in line]
    assert rows[0] == ["check", "figures", "result"] and len(rows) == 7
    checks = {row[0]: row[2] for row in rows[1:]}
    assert sorted(result for result in checks.values() if result) == ["ok"] * 4
    assert any(check.endswith("step time") for check in checks) and any("MFU" in row[1] for row in rows)
    assert {"weight source right after the step, ZeRO-2", "weight source right after the step, ZeRO-3"} <= set(checks)

