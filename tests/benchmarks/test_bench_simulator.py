"""`benchmarks/bench_simulator.py --autoscale` at a small size: one table with the fixed and the autoscaled
cluster side by side (GPU-hours, bubble, throughput), and the autoscaler's reasons after it."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_autoscale_prints_fixed_and_autoscaled_side_by_side():
    argv = [sys.executable, str(ROOT / "benchmarks" / "bench_simulator.py"), "--autoscale", "--gpus", "16",
            "--steps", "6"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in done.stdout.splitlines()
            if line.startswith("| ")]
    assert rows[0][:3] == ["run", "GPUs mean / peak", "GPU-hours"] and "bubble" in rows[0] and "tok/s" in rows[0]
    assert [row[0] for row in rows[1:]] == ["fixed", "autoscaled"]
    assert all(len(row) == len(rows[0]) for row in rows)
    fixed, scaled = ({name: cell for name, cell in zip(rows[0], row, strict=False)} for row in rows[1:])
    assert fixed["GPU-h vs fixed"] == "1.00x" and fixed["tok/s vs fixed"] == "1.000x" and fixed["scale changes"] == "0"
    assert float(scaled["GPU-hours"]) <= float(fixed["GPU-hours"]) and int(scaled["scale changes"]) > 0
    assert all(row[4].endswith("%") and float(row[6].replace(",", "")) > 0 for row in rows[1:])
    assert "sessions waiting per engine > 2: +" in done.stdout  # the decisions say why
