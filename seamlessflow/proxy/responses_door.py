"""OpenAI's Responses API (`POST /v1/responses`) as a front door: the request becomes a chat call.

Instructions, message items, `function_call` and `function_call_output` items and function tools map one to
one onto chat messages and tools; the engine renders them with the model's chat template and reports the
prompt ids it used, which is what gets recorded. Response state (`store`, `previous_response_id`) is kept on
Kafka by `state.py` and read back through `stored_door.py`; here a request only names it (items' chat form is
`items.py`).
Anything with no chat form (images, files, item references) gets a 400 that says so rather than being
dropped. Built-in tools (`web_search`, ...) are not offered to the model: no one behind the proxy runs them,
and Codex sends one with every call; the tools of a `namespace` tool are offered as plain function tools.
Reasoning items carry nothing the engine can take back and are skipped. Errors keep OpenAI's shape.
"""

from __future__ import annotations

from typing import Any

from seamlessflow.proxy.doors import EventShape, OpenAIDoor, sse_event
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.items import conversation_of, input_messages, stores
from seamlessflow.proxy.requests import CallRequest, parse_call
from seamlessflow.proxy.shaping import Shaper

SAMPLING = {"temperature": "temperature", "top_p": "top_p", "max_output_tokens": "max_tokens",
            "parallel_tool_calls": "parallel_tool_calls"}
# built-in tools OpenAI's servers run: no chat form and no one to run them here, so not offered to the model
HOSTED_TOOLS = ("web_search", "web_search_preview", "file_search", "code_interpreter", "computer_use_preview",
                "image_generation", "local_shell", "mcp")


class ResponsesDoor(OpenAIDoor):
    """Key and errors as OpenAI's; the reply is a Response object and the stream Responses events."""

    def __init__(self) -> None:
        super().__init__("chat")
        self.name = "responses"

    def parse(self, body: Any, max_n: int) -> CallRequest:
        call = parse_call("chat", chat_body(body), 1)
        call.source = body
        return call

    def reply(self, shaper: Shaper, call_id: str) -> dict:
        choice = shaper.response()["choices"][0]
        message = choice["message"]
        items = []
        if message.get("content"):
            items.append(message_item(f"msg_{call_id}_0", message["content"]))
        for call in message.get("tool_calls") or ():
            items.append(function_call_item(f"fc_{call_id}_{len(items)}", call))
        return response_object(shaper, call_id, items, choice.get("finish_reason"))

    def events(self, shaper: Shaper, call_id: str) -> EventShape:
        return ResponseEvents(shaper, call_id)


def response_object(shaper: Shaper, call_id: str, items: list[dict], finish_reason: str | None) -> dict:
    body, source = shaper.request.body, shaper.request.source
    cut = finish_reason == "length"
    prompt, completion = shaper.capture.prompt_tokens, shaper.capture.completion_tokens
    return {
        "id": f"resp_{call_id}", "object": "response", "created_at": shaper.created, "model": shaper.model,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "output": items, "error": None, "instructions": source.get("instructions"), "metadata": {},
        "tools": body.get("tools") or [], "tool_choice": body.get("tool_choice", "auto"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_tokens"),
        "previous_response_id": source.get("previous_response_id"), "store": stores(source),
        "conversation": {"id": conversation_of(source)} if conversation_of(source) else None,
        "text": {"format": {"type": "text"}}, "truncation": "disabled",
        "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": completion,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + completion},
    }


def message_item(item_id: str, text: str, status: str = "completed") -> dict:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if text else []}


def function_call_item(item_id: str, call: dict, status: str = "completed") -> dict:
    function = call.get("function") or {}
    return {"type": "function_call", "id": item_id, "call_id": call.get("id") or item_id,
            "name": function.get("name", ""), "arguments": function.get("arguments", ""), "status": status}


# -- request ------------------------------------------------------------------------------------------------
def chat_body(body: Any) -> dict:
    if not isinstance(body, dict):
        raise ProxyError(400, "the request body must be a JSON object")
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise ProxyError(400, "'previous_response_id' must be a response id (a string)", "previous_response_id")
    if body.get("store") is not None and not isinstance(body["store"], bool):
        raise ProxyError(400, "'store' must be a boolean", "store")
    conversation = body.get("conversation")
    if conversation is not None and conversation_of(body) is None:
        raise ProxyError(400, "'conversation' must be a conversation id, or an object with its 'id'", "conversation")
    if conversation is not None and previous is not None:
        raise ProxyError(400, "Mutually exclusive parameters: Ensure you are only providing one of: "
                              "'previous_response_id' or 'conversation'.", "conversation")
    for key in ("background", "prompt"):
        if body.get(key):
            raise ProxyError(400, f"'{key}' is not supported through the trajectory proxy", key)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ProxyError(400, "'model' is required: a string", "model")
    messages = [{"role": "system", "content": body["instructions"]}] if body.get("instructions") else []
    messages += input_messages(body.get("input"))
    chat: dict[str, Any] = {"model": model, "messages": messages, "stream": body.get("stream", False)}
    chat.update({ours: body[theirs] for theirs, ours in SAMPLING.items() if body.get(theirs) is not None})
    tools = chat_tools(body.get("tools") or [])
    if tools:
        chat["tools"] = tools
    if body.get("tool_choice") is not None and (tools or body["tool_choice"] not in ("auto", "none")):
        chat["tool_choice"] = tool_choice_of(body["tool_choice"])
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": fmt.get("name", "output"),
                "schema": fmt.get("schema") or {},
                "strict": fmt.get("strict", False),
            },
        }
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        chat["response_format"] = {"type": "json_object"}
    return chat


def bad(field: str) -> Any:
    raise ProxyError(400, f"'{field}' must be a list of objects", field)


def chat_tools(tools: Any) -> list[dict]:
    """The tools the model is offered: function tools, and those inside a `namespace` tool (Codex groups its
    sub-agent tools so); hosted tools are left out, since no one behind the proxy runs them (Codex offers
    `web_search` by default)."""
    out: list[dict] = []
    for tool in tools if isinstance(tools, list) else bad("tools"):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "namespace" and isinstance(tool.get("tools"), list):
            out += [function_tool(inner) for inner in tool["tools"]]
        elif kind not in HOSTED_TOOLS:
            out.append(function_tool(tool))
    return out


def function_tool(tool: Any) -> dict:
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("name"), str):
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise ProxyError(400, f"only function tools are supported through the trajectory proxy (got {kind!r})", "tools")
    function = {"name": tool["name"], "parameters": tool.get("parameters") or {"type": "object"}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def tool_choice_of(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise ProxyError(400, "'tool_choice' must be auto, none, required or {type: function, name}", "tool_choice")


# -- streamed events ----------------------------------------------------------------------------------------
class ResponseEvents:
    """Chat chunks as the Responses stream: created, output items (message text or function call), completed."""

    def __init__(self, shaper: Shaper, call_id: str):
        self.shaper, self.call_id = shaper, call_id
        self.sequence = 0
        self.items: list[dict] = []
        self.open: dict | None = None
        self.finish_reason: str | None = None
        self.started = False
        self.response: dict | None = None  # the final Response object, once `finish` made it

    def chunk(self, chunk: dict) -> bytes:
        out = self._start()
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                if self.open is None or self.open["type"] != "message":
                    out += self._add(message_item(f"msg_{self.call_id}_{len(self.items)}", "", "in_progress"))
                    out += self._event(
                        "response.content_part.added",
                        self.open,
                        content_index=0,
                        part={"type": "output_text", "text": "", "annotations": []},
                    )
                out += self._text(delta["content"])
            for call in delta.get("tool_calls") or ():
                function = call.get("function") or {}
                if call.get("id") or function.get("name"):
                    item = function_call_item(f"fc_{self.call_id}_{len(self.items)}", call, "in_progress")
                    out += self._add({**item, "arguments": ""})
                if function.get("arguments") and self.open is not None and self.open["type"] == "function_call":
                    self.open["arguments"] += function["arguments"]
                    out += self._event("response.function_call_arguments.delta", self.open, delta=function["arguments"])
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return out

    def finish(self) -> bytes:
        out = self._start() + self._close()
        response = self.response = response_object(self.shaper, self.call_id, self.items, self.finish_reason)
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        return out + self._event(kind, None, response=response)

    def fail(self, status: int, body: dict) -> bytes:
        error: dict = body["error"] if isinstance(body.get("error"), dict) else {"message": str(body)}
        return self._event(
            "error", None, code=str(error.get("code", status)), message=error.get("message"), param=error.get("param")
        )

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        response = {**response_object(self.shaper, self.call_id, [], None), "status": "in_progress", "usage": None}
        return self._event("response.created", None, response=response) + self._event(
            "response.in_progress", None, response=response
        )

    def _add(self, item: dict) -> bytes:
        out = self._close()
        self.items.append(item)
        self.open = item
        return out + self._event("response.output_item.added", None, output_index=len(self.items) - 1, item=item)

    def _text(self, text: str) -> bytes:
        assert self.open is not None
        parts = self.open["content"] or [{"type": "output_text", "text": "", "annotations": [], "logprobs": []}]
        parts[0]["text"] += text
        self.open["content"] = parts
        return self._event("response.output_text.delta", self.open, content_index=0, delta=text, logprobs=[])

    def _close(self) -> bytes:
        item, self.open = self.open, None
        if item is None:
            return b""
        item["status"] = "completed"
        out = b""
        if item["type"] == "message":
            part = item["content"][0] if item["content"] else {"type": "output_text", "text": "", "annotations": []}
            out += self._event("response.output_text.done", item, content_index=0, text=part["text"], logprobs=[])
            out += self._event("response.content_part.done", item, content_index=0, part=part)
        else:
            out += self._event(
                "response.function_call_arguments.done", item, name=item["name"], arguments=item["arguments"]
            )
        return out + self._event("response.output_item.done", None, output_index=self.items.index(item), item=item)

    def _event(self, kind: str, about: dict | None, **fields: Any) -> bytes:
        """One numbered event; `about` is the output item it concerns (its id and output index are named)."""
        data: dict[str, Any] = {"type": kind, "sequence_number": self.sequence}
        if about is not None:
            data.update(item_id=about["id"], output_index=self.items.index(about))
        data.update(fields)
        self.sequence += 1
        return sse_event(kind, data)
