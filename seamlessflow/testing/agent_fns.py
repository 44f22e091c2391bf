"""Agent functions used by the worker tests (they make no LLM calls; the end-to-end tests do), named to the
workers as `seamlessflow.testing.agent_fns:NAME`."""

from __future__ import annotations

import json
from typing import Any

import openai

from seamlessflow.messages import Task


def reward_from_payload(task: Task, client: openai.OpenAI) -> tuple[float, dict[str, str]]:
    """Returns the payload's reward and where the client points, so a test can check both."""
    return json.loads(task.payload_json)["reward"], {"base_url": str(client.base_url)}


def always_raises(task: Task, client: openai.OpenAI) -> Any:
    raise RuntimeError("environment crashed")


def returns_text(task: Task, client: openai.OpenAI) -> Any:
    return "not a number"


async def async_reward(task: Task, client: openai.AsyncOpenAI) -> tuple[float, dict[str, str]]:
    return 0.5, {"client": type(client).__name__}


def kills_its_worker(task: Task, client: openai.OpenAI) -> Any:
    """An environment that takes the whole worker process down (segfault, OOM kill)."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
