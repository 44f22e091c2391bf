"""Front doors: the APIs an agent may speak (Chat Completions, Completions, Responses, Messages), one recording path.

Every door turns its request into a `CallRequest` in chat or completions form, so the engine, the partial
rollout, the capture and the recording are the same whichever API the agent speaks: the tokens recorded are
the engine's own prompt and completion ids. A door owns only what differs: where the API key is, how errors
look, and how the chat-shaped reply (`Shaper`) and its streamed chunks are shown to the agent.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp import web

from seamlessflow.proxy.errors import ProxyError, error_response
from seamlessflow.proxy.generation import ClientGone
from seamlessflow.proxy.requests import CallRequest, Kind, parse_call
from seamlessflow.proxy.shaping import Shaper


class EventShape(Protocol):
    """One streamed reply's events, from the chat-shaped chunks the shaper makes."""

    def chunk(self, chunk: dict) -> bytes: ...
    def finish(self) -> bytes: ...
    def fail(self, status: int, body: dict) -> bytes: ...


class FrontDoor(Protocol):
    name: str
    key_header: str  # how the API sends its key, for the 401 that asks for it

    def api_key(self, request: web.Request) -> str | None: ...
    def parse(self, body: Any, max_n: int) -> CallRequest: ...
    def error(self, exc: ProxyError, headers: dict[str, str] | None = None) -> web.Response: ...
    def rejected(self, status: int, body: dict, headers: dict[str, str]) -> web.Response: ...
    def reply(self, shaper: Shaper, call_id: str) -> dict: ...
    def events(self, shaper: Shaper, call_id: str) -> EventShape: ...


DOOR = web.RequestKey("door", FrontDoor)  # the request's front door: errors answer in its API's shape


def bearer_key(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() or None if auth[:7].lower() == "bearer " else None


class OpenAIDoor:
    """`/v1/chat/completions` and `/v1/completions`: the engine's own API, shown as the engine shaped it."""

    key_header = "Authorization: Bearer <team key>"

    def __init__(self, kind: Kind):
        self.kind = kind
        self.name: str = kind

    def api_key(self, request: web.Request) -> str | None:
        return bearer_key(request)

    def parse(self, body: Any, max_n: int) -> CallRequest:
        return parse_call(self.kind, body, max_n)

    def error(self, exc: ProxyError, headers: dict[str, str] | None = None) -> web.Response:
        return error_response(exc, headers)

    def rejected(self, status: int, body: dict, headers: dict[str, str]) -> web.Response:
        return web.json_response(body, status=status, headers=headers)

    def reply(self, shaper: Shaper, call_id: str) -> dict:
        return shaper.response()

    def events(self, shaper: Shaper, call_id: str) -> EventShape:
        return _OpenAIEvents(shaper)


class _OpenAIEvents:
    def __init__(self, shaper: Shaper):
        self.shaper = shaper

    def chunk(self, chunk: dict) -> bytes:
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def finish(self) -> bytes:
        usage = self.chunk(self.shaper.usage_chunk()) if self.shaper.request.include_usage else b""
        return usage + b"data: [DONE]\n\n"

    def fail(self, status: int, body: dict) -> bytes:
        return b"data: " + json.dumps(body).encode() + b"\n\n"


def sse_event(name: str, data: dict) -> bytes:
    """A named server-sent event (`event:` line, then its JSON), as the Responses and Messages APIs send them."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class ClientStream:
    """The agent's SSE response, opened at the first write so earlier errors can still be plain HTTP errors."""

    def __init__(self, request: web.Request, headers: dict):
        self.request = request
        self.response = web.StreamResponse(
            headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        self.started = False

    async def write(self, data: bytes) -> None:
        if not data:
            return
        try:
            if not self.started:
                self.started = True
                await self.response.prepare(self.request)
            await self.response.write(data)
        except (ConnectionError, aiohttp.ClientConnectionResetError) as exc:
            raise ClientGone() from exc

    async def close(self, data: bytes = b"") -> None:
        await self.write(data)
        try:
            await self.response.write_eof()
        except (ConnectionError, aiohttp.ClientConnectionResetError):
            pass


def json_reply(body: Any, headers: dict[str, str]) -> web.Response:
    """A JSON response serialised by orjson (the call's reply is on every call's path)."""
    return web.Response(body=orjson.dumps(body), content_type="application/json", headers=headers)
