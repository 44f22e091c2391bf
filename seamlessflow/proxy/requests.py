"""What the proxy checks in a client's body, and what it changes before sending it to an engine.

Only the fields the proxy itself relies on are validated (400 on bad values); every other field passes
through untouched so the engine validates it and the agent sees the engine's own 400. Upstream the proxy
always streams with token ids and sampled-token logprobs on: streaming lets it label each token with the
policy version that produced it and cut a generation at a pause without losing what was generated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, overload

from seamlessflow.core.sampling import Sampled, upstream_sampling
from seamlessflow.proxy.errors import ProxyError

Kind = Literal["chat", "completions"]


@dataclass
class CallRequest:
    kind: Kind
    body: dict[str, Any]  # the client's body, unchanged
    n: int
    stream: bool
    include_usage: bool
    wants_token_ids: bool  # client asked for vLLM's return_token_ids itself
    wants_logprobs: bool  # client asked for logprobs itself
    max_tokens: int | None
    model: str
    num_prompts: int = 1
    # the client's body as its front door took it, where the door turned it into another form (a Responses
    # request into a chat call): what the reply echoes, and what a stored response keeps
    source: dict[str, Any] = field(default_factory=dict)
    # how the engine samples it (`rollout.sampling`, applied by the proxy once the call is parsed): what the
    # engine is sent and what the call's records say
    sampled: Sampled = field(default_factory=lambda: Sampled(1.0))

    def upstream_body(self, served_model: str | None = None) -> dict[str, Any]:
        body = upstream_sampling(self.body, self.sampled)
        body["stream"] = True
        body["stream_options"] = {"include_usage": False}
        body["return_token_ids"] = True
        if self.kind == "chat":
            body["logprobs"] = True
        elif not isinstance(body.get("logprobs"), int) or body["logprobs"] < 1:
            body["logprobs"] = 1
        if served_model:
            body["model"] = served_model
        return body


def parse_call(kind: Kind, body: Any, max_n: int) -> CallRequest:
    if not isinstance(body, dict):
        raise ProxyError(400, "the request body must be a JSON object")
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ProxyError(400, "'messages' must be a non-empty list of message objects", "messages")
    else:
        _check_prompt(body.get("prompt"))
        if body.get("echo") not in (None, False):
            raise ProxyError(400, "'echo' is not supported through the trajectory proxy", "echo")
    n = _int(body, "n", 1, 1, max_n)
    max_tokens = _max_tokens(body)
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ProxyError(400, "'stream_options' must be an object", "stream_options")
    include_usage = options is not None and bool(options) and _bool(options, "include_usage", False) and stream
    logprobs = body.get("logprobs")
    if kind == "chat":
        wants_logprobs = _bool(body, "logprobs", False)
        _int(body, "top_logprobs", 0, 0, 20)
    else:
        if logprobs is not None and (
            isinstance(logprobs, bool) or not isinstance(logprobs, int) or not 0 <= logprobs <= 20
        ):
            raise ProxyError(400, "'logprobs' must be an integer between 0 and 20", "logprobs")
        wants_logprobs = logprobs is not None
    model = body.get("model", "")
    if not isinstance(model, str):
        raise ProxyError(400, "'model' must be a string", "model")
    return CallRequest(
        kind=kind,
        body=body,
        n=n,
        stream=stream,
        include_usage=include_usage,
        wants_token_ids=_bool(body, "return_token_ids", False),
        wants_logprobs=wants_logprobs,
        max_tokens=max_tokens,
        model=model,
        num_prompts=_num_prompts(body.get("prompt")) if kind == "completions" else 1,
    )


def _num_prompts(prompt: Any) -> int:
    if isinstance(prompt, list) and prompt and not _is_token(prompt[0]):
        return len(prompt)
    return 1


def _check_prompt(prompt: Any) -> None:
    ok = isinstance(prompt, str) or (
        isinstance(prompt, list)
        and prompt
        and (
            all(isinstance(p, str) for p in prompt)
            or all(_is_token(t) for t in prompt)
            or all(isinstance(p, list) and p and all(_is_token(t) for t in p) for p in prompt)
        )
    )
    if not ok:
        raise ProxyError(400, "'prompt' must be a string, a list of strings, or token ids", "prompt")


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _max_tokens(body: dict) -> int | None:
    values = [_int(body, key, None, 1, 2**31 - 1) for key in ("max_tokens", "max_completion_tokens")]
    present = [v for v in values if v is not None]
    return min(present) if present else None


@overload
def _int(body: dict, key: str, default: int, low: int, high: int) -> int: ...
@overload
def _int(body: dict, key: str, default: None, low: int, high: int) -> int | None: ...
def _int(body: dict, key: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProxyError(400, f"'{key}' must be an integer between {low} and {high}", key)
    return value


def _bool(body: dict, key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ProxyError(400, f"'{key}' must be a boolean", key)
    return value
