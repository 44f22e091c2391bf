"""Environment steps for the environment tests (module-level: they are pickled to a child process)."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

from seamlessflow.agents.environment import Environment

if TYPE_CHECKING:
    import openai

    from seamlessflow.messages import Task

ENV = Environment(timeout_s=30.0, memory_mb=512, preload=("seamlessflow.testing.environment_steps",))


def add(a: int, b: int) -> int:
    return a + b


def sleep_then(seconds: float, value: str) -> str:
    time.sleep(seconds)
    return value


def wait_for_file(path: str, value: str) -> str:
    """A step that runs until the test lets it go (creates `path`): slow for exactly as long as the test needs."""
    while not os.path.exists(path):
        time.sleep(0.05)
    return value


def crash() -> None:
    os._exit(7)


def broken() -> None:
    raise ValueError("the simulator rejected the action")


def env_agent(task: Task, client: openai.OpenAI) -> float:
    """A sync agent whose environment step the task chooses: `{"step": "fast" | "slow" | "hang" | "crash"}`.
    Slow sleeps `seconds` in its environment; hang outlives the step deadline; crash kills the step's process."""
    payload = json.loads(task.payload_json)
    step = payload["step"]
    if step == "fast":
        return float(ENV.step(add, 1, 2) == 3)
    if step == "slow":
        return 0.5 if ENV.step(sleep_then, payload["seconds"], "ok", timeout_s=120) == "ok" else 0.0
    if step == "hang":
        return ENV.step(sleep_then, 3600, "never", timeout_s=payload["timeout_s"])
    return ENV.step(crash)
