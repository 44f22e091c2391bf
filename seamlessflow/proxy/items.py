"""Items as the Responses and Conversations APIs list them back (`input_items`, a conversation's items) and
one page of such a list: one shape for both, so an item reads the same wherever it is listed."""

from __future__ import annotations

from typing import Any

from seamlessflow.proxy.errors import ProxyError

ITEM_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs",
               "compaction": "cmp"}


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
