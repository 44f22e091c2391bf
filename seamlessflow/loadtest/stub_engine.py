"""StubEngine: a fake vLLM OpenAI server for proxy tests, chaos and load runs and the overhead benchmark. Not an engine.

It speaks the subset of vLLM's API the proxy uses (chat and completions, streaming or not, with
`return_token_ids` and logprobs; `/health`; `/v1/models`) and generates no language: the token at
absolute position p of the sequence (prompt + completion) is `100 + p % 50`, so a call cut and continued
from its tokens yields exactly the ids of an uncut call. Prompt ids are the UTF-8 bytes of the messages'
contents (or the given token ids). Hooks let tests fail calls, drop streams and hold generation.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

LOGPROB = -0.5


def token_at(position: int) -> int:
    return 100 + position % 50


@dataclass
class StubBehaviour:
    default_max_tokens: int = 8
    token_delay_s: float = 0.0  # between tokens (one chunk per token)
    fail_next: int = 0  # answer this many calls with 500
    reject_with: int | None = None  # answer every call with this 4xx status
    drop_after_tokens: int | None = None  # close the connection after this many tokens (once)
    hold_after_tokens: int | None = None  # stop generating after this many tokens until `release` is set
    release: asyncio.Event = field(default_factory=asyncio.Event)
    healthy: bool = True
    tool_call: bool = True  # answer with a tool call when the request offers tools
    max_tokens_cap: int = 4096
    end_delay_s: float = 0.0  # between a stream's `[DONE]` and the end of its body (they may arrive apart)


class StubEngine:
    def __init__(self, behaviour: StubBehaviour | None = None, model: str = "stub-model"):
        self.behaviour = behaviour or StubBehaviour()
        self.model = model
        # the newest request bodies, for tests to inspect; bounded so a long soak measures the proxy, not this
        self.requests: deque[tuple[str, dict]] = deque(maxlen=10_000)
        self.peers: deque[Any] = deque(maxlen=10_000)  # each request's client address: one per connection it came on
        self.tokens_sent = 0
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        return app

    async def start(self, port: int = 0) -> StubEngine:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, backlog=2048)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.behaviour.healthy else 503)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "stub"}]}
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(("chat", body))
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        return await self._generate(
            request,
            body,
            "chat",
            lambda: [list("".join(str(m.get("content") or "") for m in body["messages"]).encode()) or [0]],
        )

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(("completions", body))
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        return await self._generate(request, body, "completions", lambda: _prompts(body["prompt"]))

    async def _generate(self, request: web.Request, body: dict[str, Any], kind: str,
                        read_prompts: Callable[[], list[list[int]]]) -> web.StreamResponse:
        try:
            return await self._generate_checked(request, body, kind, read_prompts())
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # vLLM answers bad fields with 400 too
            return web.json_response(
                {"error": {"message": f"stub: {exc}", "type": "BadRequestError", "param": None, "code": 400}},
                status=400,
            )

    async def _generate_checked(self, request: web.Request, body: dict[str, Any], kind: str,
                                prompts: list[list[int]]) -> web.StreamResponse:
        b = self.behaviour
        if b.reject_with:
            return web.json_response(
                {"error": {"message": "stub rejects", "type": "BadRequestError", "param": None, "code": b.reject_with}},
                status=b.reject_with,
            )
        if b.fail_next > 0:
            b.fail_next -= 1
            return web.json_response(
                {"error": {"message": "stub failure", "type": "InternalServerError", "code": 500}}, status=500
            )
        n = body.get("n") or 1
        max_tokens = min(
            int(body.get("max_tokens") or body.get("max_completion_tokens") or b.default_max_tokens), b.max_tokens_cap
        )
        tool = kind == "chat" and b.tool_call and body.get("tools") and body.get("tool_choice") != "none"
        stream = _Stream(self, request, body, kind, prompts, n, max_tokens, bool(tool))
        return await (stream.streamed() if body.get("stream") else stream.whole())


class _Stream:
    def __init__(self, engine: StubEngine, request: web.Request, body: dict[str, Any], kind: str,
                 prompts: list[list[int]], n: int, max_tokens: int, tool: bool) -> None:
        self.engine, self.request, self.body, self.kind = engine, request, body, kind
        self.prompts, self.n, self.max_tokens, self.tool = prompts, n, max_tokens, tool
        self.id = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-stub{time.monotonic_ns()}"
        self.created = int(time.time())
        self.ids_on = bool(body.get("return_token_ids"))
        self.lp_on = bool(body.get("logprobs"))

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.engine.model}

    def _choices(self) -> list[tuple[int, list[int]]]:
        return [(p * self.n + i, prompt) for p, prompt in enumerate(self.prompts) for i in range(self.n)]

    def _piece(self, index: int, prompt: list[int], k: int, token: int) -> dict[str, Any]:
        text = f"t{token} "
        finish = "length" if k == self.max_tokens - 1 else None
        if self.kind == "chat":
            delta: dict[str, Any] = {"content": text}
            if self.tool and k == 0:
                delta = {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_stub",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": ""},
                        }
                    ]
                }
            elif self.tool:
                delta = {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}
            choice = {"index": index, "delta": delta, "finish_reason": finish}
            if self.lp_on:
                choice["logprobs"] = {
                    "content": [{"token": text, "logprob": LOGPROB, "bytes": list(text.encode()), "top_logprobs": []}]
                }
        else:
            choice = {"index": index, "text": text, "finish_reason": finish}
            if self.lp_on:
                choice["logprobs"] = {
                    "tokens": [text],
                    "token_logprobs": [LOGPROB],
                    "top_logprobs": [{text: LOGPROB}],
                    "text_offset": [0],
                }
        if self.ids_on:
            choice["token_ids"] = [token]
        return choice

    async def streamed(self) -> web.StreamResponse:
        b = self.engine.behaviour
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(self.request)
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        if self.kind == "chat":
            first = {
                **self._head(obj),
                "choices": [
                    {"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                    for i, _ in self._choices()
                ],
            }
            if self.ids_on:
                first["prompt_token_ids"] = self.prompts[0]
            await response.write(_sse(first))
        for k in range(self.max_tokens):
            if b.hold_after_tokens is not None and k == b.hold_after_tokens:
                await b.release.wait()
            if b.drop_after_tokens is not None and k == b.drop_after_tokens:
                b.drop_after_tokens = None
                self.request.transport.close()  # type: ignore[union-attr]  # open while its handler runs
                return response
            if b.token_delay_s:
                await asyncio.sleep(b.token_delay_s)
            choices = []
            for index, prompt in self._choices():
                choice = self._piece(index, prompt, k, token_at(len(prompt) + k))
                if self.kind == "completions" and self.ids_on and k == 0:
                    choice["prompt_token_ids"] = prompt
                choices.append(choice)
            self.engine.tokens_sent += len(choices)
            await response.write(_sse({**self._head(obj), "choices": choices}))
        await response.write(b"data: [DONE]\n\n")
        if b.end_delay_s:
            await asyncio.sleep(b.end_delay_s)
        return response

    async def whole(self) -> web.Response:
        b = self.engine.behaviour
        if b.token_delay_s:  # one sleep per token, as when streaming, so both paths cost the engine the same
            for _ in range(self.max_tokens):
                await asyncio.sleep(b.token_delay_s)
        choices = []
        for index, prompt in self._choices():
            tokens = [token_at(len(prompt) + k) for k in range(self.max_tokens)]
            text = "".join(f"t{t} " for t in tokens)
            if self.kind == "chat":
                choice = {"index": index, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
            else:
                choice = {"index": index, "text": text, "finish_reason": "length"}
            if self.ids_on:
                choice["token_ids"] = tokens
            choices.append(choice)
        prompt_tokens = sum(len(p) for p in self.prompts)
        completion = self.max_tokens * len(choices)
        out = {
            **self._head("chat.completion" if self.kind == "chat" else "text_completion"),
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion,
            },
        }
        return web.json_response(out)


def main() -> None:
    """`python -m seamlessflow.loadtest.stub_engine PORT TOKEN_DELAY_MS`: a StubEngine process (for the benchmark)."""
    import sys

    async def serve() -> None:
        engine = await StubEngine(StubBehaviour(token_delay_s=float(sys.argv[2]) / 1000)).start(int(sys.argv[1]))
        print(f"stub engine on {engine.url}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


def _prompts(prompt: Any) -> list[list[int]]:  # the request's JSON "prompt": text, ids, or a list of either
    if isinstance(prompt, str):
        return [list(prompt.encode()) or [0]]
    if prompt and isinstance(prompt[0], int):
        return [prompt]
    if prompt and isinstance(prompt[0], str):
        return [list(p.encode()) or [0] for p in prompt]
    return prompt


def _sse(chunk: dict) -> bytes:
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


if __name__ == "__main__":
    main()
