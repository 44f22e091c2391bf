"""Items of the Responses and Conversations APIs, both ways: as chat messages (what the engine is sent, for a
request's input, a stored response's output or a conversation's items), and as the APIs list them back
(`input_items`, a conversation's items, one page of such a list): one shape for both, so an item reads the same
wherever it is listed. The Responses door (`responses_door.py`) and the state a call continues (`state.py`,
`conversations.py`) both read items, so they live below both."""

from __future__ import annotations

import base64
from typing import Any

from seamlessflow.proxy.errors import ProxyError

ITEM_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs",
               "compaction": "cmp"}
TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


def input_items(value: Any, response_id: str) -> list[dict]:
    """A request's input as the API lists it back: items with ids, message text as content parts."""
    items = [{"role": "user", "content": value}] if isinstance(value, str) else list(value or ())
    tag = response_id.removeprefix("resp_")
    out = []
    for index, given in enumerate(items):
        item = {"type": "message", **given}
        if item["type"] == "message":
            if isinstance(item.get("content"), str):
                part = "output_text" if item.get("role") == "assistant" else "input_text"
                item["content"] = [{"type": part, "text": item["content"]}]
            item.setdefault("status", "completed")
        item.setdefault("id", f"{ITEM_PREFIX.get(item['type'], 'item')}_{tag}_{index}")
        out.append(item)
    return out


def page(items: list[dict], query: Any) -> dict:
    """One page of a list as the API pages it: `limit` (1-100, 20), `order` (asc | desc, the default), `after`."""
    limit_text, order = query.get("limit", "20"), query.get("order", "desc")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 100:
        raise ProxyError(400, "'limit' must be an integer between 1 and 100", "limit")
    if order not in ("asc", "desc"):
        raise ProxyError(400, "'order' must be asc or desc", "order")
    ordered = items if order == "asc" else items[::-1]
    start, after = 0, query.get("after")
    if after is not None:
        ids = [item.get("id") for item in ordered]
        start = ids.index(after) + 1 if after in ids else len(ordered)
    data = ordered[start:start + int(limit_text)]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": start + len(data) < len(ordered)}


def conversation_of(body: dict) -> str | None:
    """The conversation a request names (`"conv_..."` or `{"id": "conv_..."}`), if it names one well."""
    value = body.get("conversation")
    value = value.get("id") if isinstance(value, dict) else value
    return value if isinstance(value, str) and value else None


def stores(body: dict) -> bool:
    """Whether the response is kept (`store`, true unless the client says false, as the API's default)."""
    return body.get("store") is not False


def input_messages(value: Any) -> list[dict]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        raise ProxyError(400, "'input' must be a string or a non-empty list of input items", "input")
    messages: list[dict] = []
    for item in value:
        kind = item.get("type", "message")
        if kind == "message":
            role = {"developer": "system"}.get(item.get("role"), item.get("role"))
            if role not in ("system", "user", "assistant"):
                raise ProxyError(400, "message items need a role of user, assistant, system or developer", "input")
            messages.append({"role": role, "content": text_of(item.get("content"))})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": text_of(item.get("output"))}
            )
        elif kind == "compaction":
            messages.append({"role": "user", "content": compacted_summary(item)})
        elif kind != "reasoning":
            raise ProxyError(
                400, f"input items of type {kind!r} are not supported through the trajectory proxy", "input"
            )
    return messages


# `POST /v1/responses/compact` (compact_door.py) answers with a `compaction` item; sent back as input, the model sees
# its summary as a user message after this prefix. The item's `encrypted_content` is not encrypted (nothing the
# proxy keeps is secret from the team): the summary, base64 after a mark that says the proxy made it.
SUMMARY_PREFIX = "A summary of the conversation so far (its earlier turns were compacted):\n"
COMPACTION_MARK = "seamlessflow.summary.v1:"


def compaction_content(summary: str) -> str:
    return COMPACTION_MARK + base64.b64encode(summary.encode()).decode()


def compacted_summary(item: dict) -> str:
    content = item.get("encrypted_content")
    if not isinstance(content, str) or not content.startswith(COMPACTION_MARK):
        raise ProxyError(400, "a compaction item must be one this proxy's /v1/responses/compact made", "input")
    try:
        return SUMMARY_PREFIX + base64.b64decode(content.removeprefix(COMPACTION_MARK), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        raise ProxyError(400, "a compaction item's content is damaged", "input") from None


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ProxyError(400, "message content must be a string or a list of text parts", "input")
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in TEXT_PARTS:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ProxyError(400, f"content parts of type {kind!r} are not supported (text only)", "input")
        texts.append(part.get("text") or part.get("refusal") or "")
    return "\n".join(texts)
