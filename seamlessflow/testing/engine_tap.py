"""A pass-through HTTP relay in front of a real engine that keeps what the engine answered to each generation.

Why: an agent CLI samples (no temperature of ours to set) and its requests are rendered by the proxy, so a
test cannot ask the engine the same question again to learn its tokens. The tap sits where the engine is
(the proxy is given its URL instead) and keeps the engine's own prompt and completion ids of every chat or
completions call, streamed or not, to compare with what the proxy recorded.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

import aiohttp
from aiohttp import web

GENERATION_PATHS = ("/v1/chat/completions", "/v1/completions")
HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding", "host"}


@dataclass(frozen=True)
class EngineAnswer:
    """The engine's ids for one generation call (choice 0), as its response body said them."""

    prompt_ids: list[int]
    completion_ids: list[int]


class EngineTap:
    def __init__(self, engine_url: str):
        self.engine_url = engine_url.rstrip("/")
        self.answers: list[EngineAnswer] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None

    async def start(self) -> EngineTap:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=600))
        return self

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        async with self._http.request(request.method, self.engine_url + request.path_qs, data=body,
                                      headers=headers) as upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS})
            await response.prepare(request)
            kept = bytearray()
            # a caller that hangs up early does not stop the tap keeping the answer: the proxy closes its
            # engine connection once it has read `[DONE]`, which may be before the stream's end
            async for piece in upstream.content.iter_any():
                kept += piece
                with contextlib.suppress(ConnectionResetError):
                    await response.write(piece)
        if request.path in GENERATION_PATHS and upstream.status == 200:
            self.answers.append(engine_answer(bytes(kept)))
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response


def engine_answer(body: bytes) -> EngineAnswer:
    """Ids from a JSON reply, or from an SSE stream (prompt ids in its first chunk, completion ids per chunk)."""
    text = body.decode()
    if not text.lstrip().startswith("data:"):
        reply = json.loads(text)
        return EngineAnswer(reply.get("prompt_token_ids") or [], reply["choices"][0].get("token_ids") or [])
    prompt: list[int] = []
    completion: list[int] = []
    for line in text.splitlines():
        if not line.startswith("data:") or line.strip() == "data: [DONE]":
            continue
        chunk = json.loads(line[5:])
        prompt = prompt or chunk.get("prompt_token_ids") or []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) == 0:
                completion += choice.get("token_ids") or []
    return EngineAnswer(prompt, completion)
