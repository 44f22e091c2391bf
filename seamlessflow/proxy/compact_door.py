"""`POST /v1/responses/compact`: the conversation so far (`input`, after a `previous_response_id`'s stored one)
summarised by the policy model itself, answered in the API's shape: every user message, then one `compaction`
item. Sent back as the next call's input, the item becomes a user message holding the summary
(`items.compacted_summary`).

Why the model writes the summary through the ordinary call path: it is a generation of the policy like any
other, so it is recorded (prompt and completion ids, versions) in the session, and the engine's own template
renders it. What the model sees after compaction (the user messages, the summary, the new input) no longer
starts with the earlier calls' tokens: the session's prefix tree forks there, so it is a new branch of the
trajectory and never an extension of the conversation it replaced. Nothing is stored (`store` does not apply).

Codex calls this route only for providers it knows to compact remotely (OpenAI's and Azure's); pointed at the
proxy as docs/agents/codex.md says, it compacts locally instead: an ordinary Responses call with its own
summary prompt, then a new history, recorded as the same kind of fork.
"""

from __future__ import annotations

from typing import Any

from seamlessflow.proxy.doors import EventShape
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.items import compaction_content
from seamlessflow.proxy.requests import CallRequest
from seamlessflow.proxy.responses_door import ResponsesDoor
from seamlessflow.proxy.shaping import Shaper

COMPACT_PROMPT = ("Summarise the conversation above for whoever continues it: the task, what was done and "
                  "found, and what is left to do. Be brief and exact.")
COMPACT_MAX_TOKENS = 1024  # the summary's length unless the request sets `max_output_tokens` (an extension)


class CompactDoor(ResponsesDoor):
    """A Responses door whose call is the summary, and whose reply is a `response.compaction` object."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "responses_compact"

    def parse(self, body: Any, max_n: int) -> CallRequest:
        if not isinstance(body, dict):
            raise ProxyError(400, "the request body must be a JSON object")
        for key in ("stream", "conversation", "background"):
            if body.get(key):
                raise ProxyError(400, f"'{key}' is not taken by /v1/responses/compact", key)
        given = body.get("input")
        if given is None and not body.get("previous_response_id"):
            raise ProxyError(400, "'input' or 'previous_response_id' is required", "input")
        if given is not None and not isinstance(given, str | list):
            raise ProxyError(400, "'input' must be a string or a list of input items", "input")
        if body.get("instructions") is not None and not isinstance(body["instructions"], str):
            raise ProxyError(400, "'instructions' must be a string", "instructions")
        items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())
        summarise = {key: body[key] for key in ("model", "instructions", "previous_response_id", "temperature",
                                                 "top_p", "max_output_tokens") if key in body}
        summarise.setdefault("max_output_tokens", COMPACT_MAX_TOKENS)
        call = super().parse({**summarise, "input": [*items, {"role": "user", "content": COMPACT_PROMPT}]}, 1)
        call.source = {**summarise, "input": given, "store": False}
        return call

    def reply(self, shaper: Shaper, call_id: str) -> dict:
        summary = shaper.response()["choices"][0]["message"].get("content") or ""
        said = [m for m in shaper.request.body["messages"][:-1] if m["role"] == "user"]  # the prompt left out
        output: list[dict] = [
            {"type": "message", "id": f"msg_{call_id}_{index}", "status": "completed", "role": "user",
             "content": [{"type": "input_text", "text": message["content"]}]}
            for index, message in enumerate(said)
        ]
        output.append({"type": "compaction", "id": f"cmp_{call_id}", "encrypted_content": compaction_content(summary)})
        prompt, completion = shaper.capture.prompt_tokens, shaper.capture.completion_tokens
        return {"id": f"resp_{call_id}", "object": "response.compaction", "created_at": shaper.created,
                "output": output,
                "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": prompt + completion}}

    def events(self, shaper: Shaper, call_id: str) -> EventShape:
        raise ProxyError(400, "/v1/responses/compact does not stream", "stream")  # parse refused it already
