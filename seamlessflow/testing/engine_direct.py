"""A real engine asked directly (greedy, with token ids), to compare with what the proxy recorded for the same
request: the vLLM tests of the front doors and of stored responses share it."""

from __future__ import annotations

from typing import Any

import httpx

from seamlessflow.messages import TokenIO
from seamlessflow.testing.vllm_server import VllmServer

# a named tool choice constrains the reply to the tool's parameters: pinned values keep a random model's JSON short
PINNED = {
    "name": "add",
    "description": "add 1 and 2",
    "parameters": {
        "type": "object",
        "properties": {"a": {"enum": [1]}, "b": {"enum": [2]}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}
CALL_TOKENS = 200  # a named tool call's budget: its JSON arguments fit


async def direct(engine: VllmServer, messages: list[dict], max_tokens: int, **extra: Any) -> dict:
    """The engine's own greedy answer with token ids, bypassing the proxy."""
    body = {
        "model": "tiny",
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "return_token_ids": True,
        **extra,
    }
    async with httpx.AsyncClient(timeout=120) as http:
        return (await http.post(engine.url + "/v1/chat/completions", json=body)).json()


def assert_recorded_as_the_engine(event: TokenIO, reply: dict) -> None:
    assert event.prompt_ids == reply["prompt_token_ids"] and event.completion_ids == reply["choices"][0]["token_ids"]
    assert len(event.logprobs) == len(event.completion_ids) and all(lp <= 0 for lp in event.logprobs)
