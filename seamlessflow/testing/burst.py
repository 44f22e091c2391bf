"""A burst of agent sessions, and what the engines did under it: the autoscaler's live tests (one machine and
Ray) drive the same load and read the same signs.

`Burst`: threads that each run short sessions through the proxy's chat route with the real `openai` SDK until
stopped, counting calls and every error (none may fail: calls wait in the engine, none is refused). `serving`:
the rollout engines whose newest heartbeat says they serve rollout. `engines_that_served`: the engines named by
the session events, i.e. where calls really went."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import openai
from openai.types.chat import ChatCompletionMessageParam

from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import read_topic
from seamlessflow.messages import TokenIO
from seamlessflow.ports import free_port, free_port_block
from seamlessflow.stack.rows import resource_rows
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.topics import Topics

SESSIONS = 12  # at 2 generating at a time, 10 wait in the engine: 10 per engine > up_waiting_per_engine (2)
CALLS_PER_SESSION = 3  # then the thread starts a new session, which the proxy may route to another engine


def burst_stack_config(tmp_path: Path, model: Path, cluster: dict | None = None) -> tuple[Path, int]:
    """One rollout engine that generates for two sequences at a time (vLLM `--max-num-seqs 2`), a proxy and
    the scheduler advising between 1 and 2 engines (`act`: the process holding the stack carries it out). The
    trainer and the assembler are left out: the trainer's signals stay neutral. Returns (the file, the proxy's
    port)."""
    proxy = free_port()
    config: dict = {
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
    if cluster is not None:
        config["cluster"] = cluster
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    return path, proxy


class Burst:
    """SESSIONS threads, each calling the proxy's chat route in short sessions until stopped; counts calls and
    errors."""

    def __init__(self, proxy_url: str, key: str):
        self.proxy_url, self.key = proxy_url, key
        self.stopping, self.calls = threading.Event(), 0
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._session, daemon=True) for _ in range(SESSIONS)]

    def __enter__(self) -> Burst:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)

    def _session(self) -> None:
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Count on."}]
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


def serving(settings: Settings) -> set[str]:
    """The rollout engines whose newest heartbeat says they serve in the rollout role."""
    rows = resource_rows(settings, timeout_s=5.0)
    return {row["id"] for row in rows if row["kind"] == "rollout" and row["state"] == "active"
            and row["active_tag"] == "rollout" and row["figures"].get("engine_up", 1) and row["heartbeat_age_s"] < 15}


def engines_that_served(settings: Settings) -> set[str]:
    records = read_topic(settings, Topics(settings).session_events, codec_for(settings))
    return {r.message.engine_id for r in records if isinstance(r.message, TokenIO)}
