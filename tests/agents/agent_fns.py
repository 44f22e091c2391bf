"""Agent functions used by the worker tests (they make no LLM calls; the end-to-end tests do)."""

from __future__ import annotations

import json


def reward_from_payload(task, client):
    """Returns the payload's reward and where the client points, so a test can check both."""
    return json.loads(task.payload_json)["reward"], {"base_url": str(client.base_url)}


def always_raises(task, client):
    raise RuntimeError("environment crashed")


def returns_text(task, client):
    return "not a number"


async def async_reward(task, client):
    return 0.5, {"client": type(client).__name__}


def kills_its_worker(task, client):
    """An environment that takes the whole worker process down (segfault, OOM kill)."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
