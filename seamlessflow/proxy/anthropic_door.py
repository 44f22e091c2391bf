"""Anthropic's Messages API (`POST /v1/messages`) as a front door: the request becomes a chat call.

System prompts (also a `system` message inside the conversation, as Claude Code sends), text, `tool_use` and
`tool_result` blocks and tools map one to one onto chat messages and function tools; the engine renders them
with the model's chat template and reports the prompt ids it used, which is what gets recorded. What has no
chat form (images, documents, server tools, MCP servers) is refused with a 400 rather than silently dropped.
`thinking`, `metadata` and `cache_control` change nothing the engine sees and are ignored. Errors have
Anthropic's shape (`{"type": "error", "error": {"type", "message"}}`).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from aiohttp import web

from seamlessflow.proxy.doors import EventShape, bearer_key, sse_event
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.requests import CallRequest, parse_call
from seamlessflow.proxy.shaping import Shaper

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 409: "invalid_request_error", 413: "request_too_large",
               429: "rate_limit_error", 503: "overloaded_error", 504: "timeout_error"}
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "abort": "end_turn"}
SAMPLING = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "stop_sequences": "stop"}
REFUSED_FIELDS = ("mcp_servers", "container")


class MessagesDoor:
    name = "messages"
    key_header = "x-api-key: <team key>"

    def api_key(self, request: web.Request) -> str | None:
        return request.headers.get("x-api-key") or bearer_key(request)

    def parse(self, body: Any, max_n: int) -> CallRequest:
        return parse_call("chat", chat_body(body), 1)

    def error(self, exc: ProxyError, headers: dict[str, str] | None = None) -> web.Response:
        headers = dict(headers or {})
        if exc.retry_after is not None:
            headers["Retry-After"] = str(exc.retry_after)
        return web.Response(status=exc.status, body=orjson.dumps(error_body(exc.status, exc.message)),
                            content_type="application/json", headers=headers)

    def rejected(self, status: int, body: dict, headers: dict[str, str]) -> web.Response:
        return self.error(ProxyError(status, engine_message(body)), headers)

    def reply(self, shaper: Shaper, call_id: str) -> dict:
        chat = shaper.response()
        choice = chat["choices"][0]
        message = choice["message"]
        content: list[dict] = [{"type": "text", "text": message["content"]}] if message.get("content") else []
        for call in message.get("tool_calls") or ():
            content.append(tool_use_block(call))
        called = any(block["type"] == "tool_use" for block in content)
        return {
            **message_head(shaper, call_id),
            "content": content,
            **stop_of(choice, called),
            "usage": {"input_tokens": shaper.capture.prompt_tokens, "output_tokens": shaper.capture.completion_tokens},
        }

    def events(self, shaper: Shaper, call_id: str) -> EventShape:
        return MessageEvents(shaper, call_id)


def error_body(status: int, message: str) -> dict:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def engine_message(body: dict) -> str:
    error = body.get("error")
    return str(error.get("message") if isinstance(error, dict) else error or body)[:2000]


def message_head(shaper: Shaper, call_id: str) -> dict:
    return {"id": f"msg_{call_id}", "type": "message", "role": "assistant", "model": shaper.model}


def stop_of(choice: dict, called: bool) -> dict:
    """Anthropic's stop_reason: `tool_use` whenever the reply calls a tool (vLLM says `stop` after a named tool
    choice), `stop_sequence` for a stop string the engine matched."""
    stop, finish = choice.get("stop_reason"), choice.get("finish_reason")
    if called and finish != "length":
        return {"stop_reason": "tool_use", "stop_sequence": None}
    if finish == "stop" and isinstance(stop, str):
        return {"stop_reason": "stop_sequence", "stop_sequence": stop}
    return {"stop_reason": STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"), "stop_sequence": None}


def tool_use_block(call: dict) -> dict:
    function = call.get("function") or {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    return {
        "type": "tool_use",
        "id": call.get("id") or "",
        "name": function.get("name", ""),
        "input": arguments if isinstance(arguments, dict) else {},
    }


# -- request ------------------------------------------------------------------------------------------------
def chat_body(body: Any) -> dict:
    if not isinstance(body, dict):
        raise ProxyError(400, "the request body must be a JSON object")
    for key in REFUSED_FIELDS:
        if body.get(key):
            raise ProxyError(400, f"'{key}' is not supported through the trajectory proxy", key)
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ProxyError(400, "'max_tokens' is required: a positive integer", "max_tokens")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ProxyError(400, "'messages' must be a non-empty list of messages", "messages")
    messages = system_messages(body.get("system"))
    for message in raw:
        messages += chat_messages(message)
    chat: dict[str, Any] = {
        "model": body.get("model"),
        "messages": messages,
        "max_tokens": max_tokens,
        "stream": body.get("stream", False),
    }
    chat.update({ours: body[theirs] for theirs, ours in SAMPLING.items() if body.get(theirs) is not None})
    if body.get("tools"):
        chat["tools"] = [function_tool(tool) for tool in listed(body["tools"], "tools")]
    choice = body.get("tool_choice")
    if choice is not None:
        chat.update(tool_choice_of(choice))
    if not isinstance(chat["model"], str) or not chat["model"]:
        raise ProxyError(400, "'model' is required: a string", "model")
    return chat


def listed(value: Any, name: str) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProxyError(400, f"'{name}' must be a list of objects", name)
    return value


def system_messages(system: Any) -> list[dict]:
    if system is None or system == "" or system == []:
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    return [{"role": "system", "content": text_of(listed(system, "system"), "system")}]


def text_of(blocks: list[dict], where: str) -> str:
    texts = []
    for block in blocks:
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise ProxyError(400, f"only text blocks are supported in {where} (got {block.get('type')!r})", where)
        texts.append(block["text"])
    return "\n".join(texts)


def chat_messages(message: Any) -> list[dict]:
    """One Anthropic message as chat messages: a user turn's tool results become tool messages before its text."""
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
        raise ProxyError(400, "each message needs a role of 'user', 'assistant' or 'system'", "messages")
    role, content = message["role"], message.get("content")
    if role == "system":  # Claude Code sends its environment notes as a system message after the user's turn
        text = content if isinstance(content, str) else text_of(listed(content, "messages.content"), "system")
        return [{"role": "system", "content": text}]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    blocks = listed(content, "messages.content")
    if role == "assistant":
        return [assistant_message(blocks)]
    out = [tool_message(b) for b in blocks if b.get("type") == "tool_result"]
    rest = [b for b in blocks if b.get("type") != "tool_result"]
    if rest or not out:
        out.append({"role": "user", "content": text_of(rest, "user messages")})
    return out


def assistant_message(blocks: list[dict]) -> dict:
    texts, calls = [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "tool_use":
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": json.dumps(block.get("input") or {})},
                }
            )
        elif kind not in ("thinking", "redacted_thinking"):
            raise ProxyError(400, f"assistant content blocks of type {kind!r} are not supported", "messages")
    message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def tool_message(block: dict) -> dict:
    content = block.get("content")
    text = (
        content if isinstance(content, str) else text_of(listed(content or [], "tool_result.content"), "tool results")
    )
    return {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text}


def function_tool(tool: dict) -> dict:
    if tool.get("type") not in (None, "custom") or not isinstance(tool.get("name"), str):
        raise ProxyError(
            400, f"only client tools with a name and input_schema are supported (got {tool.get('type')!r})", "tools"
        )
    function = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object"}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def tool_choice_of(choice: Any) -> dict:
    kind = choice.get("type") if isinstance(choice, dict) else None
    out: dict[str, Any] = {}
    if kind in ("auto", "none"):
        out["tool_choice"] = kind
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "tool" and isinstance(choice.get("name"), str):
        out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise ProxyError(400, "'tool_choice' must be {type: auto|any|tool|none}", "tool_choice")
    if choice.get("disable_parallel_tool_use"):
        out["parallel_tool_calls"] = False
    return out


# -- streamed events ----------------------------------------------------------------------------------------
class MessageEvents:
    """Chat chunks as Anthropic's stream: message_start, content blocks (text or tool_use), message_delta, stop."""

    def __init__(self, shaper: Shaper, call_id: str):
        self.shaper, self.call_id = shaper, call_id
        self.started = False
        self.block: str | None = None  # the open block's kind
        self.index = -1
        self.choice: dict = {}
        self.called = False  # a tool_use block was sent
        self.response: dict | None = None  # the Messages API keeps no reply: nothing is stored

    def chunk(self, chunk: dict) -> bytes:
        out = self._start()
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                out += self._open("text", {"type": "text", "text": ""})
                out += self._delta({"type": "text_delta", "text": delta["content"]})
            for call in delta.get("tool_calls") or ():
                function = call.get("function") or {}
                if call.get("id") or function.get("name"):
                    block: dict[str, Any] = {
                        "type": "tool_use",
                        "id": call.get("id") or "",
                        "name": function.get("name") or "",
                        "input": {},
                    }
                    out += self._open("tool_use", block, new=True)
                    self.called = True
                if function.get("arguments"):
                    out += self._delta({"type": "input_json_delta", "partial_json": function["arguments"]})
            if choice.get("finish_reason"):
                self.choice = choice
        return out

    def finish(self) -> bytes:
        out = self._start() + self._close()
        usage = {"output_tokens": self.shaper.capture.completion_tokens}
        out += sse_event(
            "message_delta", {"type": "message_delta", "delta": stop_of(self.choice, self.called), "usage": usage}
        )
        return out + sse_event("message_stop", {"type": "message_stop"})

    def fail(self, status: int, body: dict) -> bytes:
        message = body.get("error", {}).get("message") if isinstance(body.get("error"), dict) else str(body)
        return sse_event("error", error_body(status, str(message)))

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        usage = {"input_tokens": self.shaper.capture.prompt_tokens, "output_tokens": 0}
        message = {
            **message_head(self.shaper, self.call_id),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        return sse_event("message_start", {"type": "message_start", "message": message})

    def _open(self, kind: str, block: dict, new: bool = False) -> bytes:
        if self.block == kind and not new:
            return b""
        out = self._close()
        self.block, self.index = kind, self.index + 1
        return out + sse_event(
            "content_block_start", {"type": "content_block_start", "index": self.index, "content_block": block}
        )

    def _delta(self, delta: dict) -> bytes:
        return sse_event("content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": delta})

    def _close(self) -> bytes:
        if self.block is None:
            return b""
        self.block = None
        return sse_event("content_block_stop", {"type": "content_block_stop", "index": self.index})
