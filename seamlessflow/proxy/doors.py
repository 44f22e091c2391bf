"""Front doors: the APIs an agent may speak (Chat Completions, Completions, Responses, Messages), one recording path.

Every door turns its request into a `CallRequest` in chat or completions form, so the engine, the partial
rollout, the capture and the recording are the same whichever API the agent speaks: the tokens recorded are
the engine's own prompt and completion ids. A door owns only what differs: where the API key is, how errors
look, and how the chat-shaped reply (`Shaper`) and its streamed chunks are shown to the agent.

Here too is what every door does the same way: a call's HTTP request read into a `Call` (`CallRoute`), handed
to the gatekeeper, the layer below (`calls.py` draws them all), and its reply or error rendered (`Delivery`).
The Responses WebSocket (`socket_door.py`) hands its calls down the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp import web

from seamlessflow.proxy.calls import Call, Emit
from seamlessflow.proxy.errors import ProxyError, error_response
from seamlessflow.proxy.gatekeeper import Gatekeeper
from seamlessflow.proxy.generation import ClientGone, UpstreamRejected
from seamlessflow.proxy.metrics import ProxyMetrics
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.quotas import QuotaExceeded
from seamlessflow.proxy.requests import CallRequest, Kind, parse_call
from seamlessflow.proxy.shaping import Shaper

log = logging.getLogger(__name__)
SESSION_HEADER = "X-Session-Id"
PROFILE_HEADER = "X-Session-Profile"  # prefill | decode | auto: declares the session's routing profile
CALL_KEY_HEADERS = ("Idempotency-Key", "X-Request-Id")
RETRY_COUNT_HEADER = "X-Stainless-Retry-Count"
BEARER_HEADER = "Authorization: Bearer <team key>"


class EventShape(Protocol):
    """One streamed reply's events, from the chat-shaped chunks the shaper makes."""

    response: dict | None  # the reply's object once `finish` made it, where the API keeps one (Responses)

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


class Stream(Protocol):
    """Where a streamed reply goes: an SSE response (`ClientStream`) or a WebSocket (`socket_door.SocketStream`)."""

    started: bool

    @property
    def response(self) -> web.StreamResponse: ...  # what the route returns once the call is over

    async def write(self, data: bytes) -> None: ...
    async def close(self, data: bytes = b"") -> None: ...


DOOR = web.RequestKey("door", FrontDoor)  # the request's front door: errors answer in its API's shape


def bearer_key(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() or None if auth[:7].lower() == "bearer " else None


def session_named(request: web.Request) -> str | None:
    """The session the client named: in the path, else in the `X-Session-Id` header (None: it named none)."""
    return request.match_info.get("session_id") or request.headers.get(SESSION_HEADER)


def attempt_of(request: web.Request) -> int:
    """Which attempt of its request this is, as the client's SDK counts it (0 when it does not say)."""
    value = request.headers.get(RETRY_COUNT_HEADER, "")
    return int(value) if value.isdigit() and len(value) < 6 else 0


def call_key_of(request: web.Request) -> str | None:
    """The client's own name for the request, if it gave one: its retries send the same."""
    headers = request.headers
    return headers.get(CALL_KEY_HEADERS[0]) or headers.get(CALL_KEY_HEADERS[1]) or None


async def read_body(request: web.Request, max_bytes: int) -> bytes:
    if request.content_length is not None and request.content_length > max_bytes:
        raise ProxyError(413, f"request body over {max_bytes} bytes")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise ProxyError(413, f"request body over {max_bytes} bytes") from None


def read_json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)  # strict: NaN, Infinity and integers past 64 bits are not JSON here
    except orjson.JSONDecodeError as exc:
        raise ProxyError(400, f"request body is not valid JSON: {str(exc)[:200]}") from None


class OpenAIDoor:
    """`/v1/chat/completions` and `/v1/completions`: the engine's own API, shown as the engine shaped it."""

    key_header = BEARER_HEADER

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
        self.response: dict | None = None  # nothing of a chat or completions stream is kept

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


class Delivery:
    """A call's `Reply` as its door shows it: streamed (the chunks as the API's events, then their tail), or whole;
    and the error in the door's shape when the layers below refuse or fail the call."""

    def __init__(self, door: FrontDoor, stream_to: Callable[[dict[str, str]], Stream] | None):
        self.door, self.stream_to = door, stream_to
        self.reply_id = uuid.uuid4().hex  # the reply's own ids (response, items, tool calls): two never share one
        self.headers: dict[str, str] = {}
        self.stream: Stream | None = None
        self.events: EventShape | None = None
        self.shaper: Shaper | None = None
        self.body: dict | None = None
        self.tail = b""
        self.finished = False

    def open(self, shaper: Shaper, session_id: str) -> Emit | None:
        self.shaper, self.headers = shaper, {SESSION_HEADER: session_id}
        if self.stream_to is None:
            return None
        stream = self.stream = self.stream_to(self.headers)
        events = self.events = self.door.events(shaper, self.reply_id)
        return lambda chunks: stream.write(b"".join(map(events.chunk, chunks)))

    def finish(self) -> dict | None:
        if not self.finished:
            assert self.shaper is not None  # generation opened the reply before the call was recorded
            self.finished = True
            if self.events is not None:
                self.tail = self.events.finish()
                self.body = self.events.response
            else:
                self.body = self.door.reply(self.shaper, self.reply_id)
        return self.body

    async def serve(self, call: Call, gatekeeper: Gatekeeper) -> web.StreamResponse:
        """The call served by the layers below, then shown to the agent. A refusal before generation started
        propagates (the route answers it, a WebSocket sends it as an event); later ones are answered here."""
        try:
            await gatekeeper.serve(call)
        except ClientGone:
            assert self.stream is not None  # only a streaming reply's writes raise it
            return self.stream.response
        except (ProxyError, UpstreamRejected) as exc:
            if self.shaper is None:
                raise
            return await self._failed(exc)
        body = self.finish()
        if self.stream is None:
            return json_reply(body, self.headers)
        await self.stream.close(self.tail)
        return self.stream.response

    async def _failed(self, exc: ProxyError | UpstreamRejected) -> web.StreamResponse:
        status, body = (exc.status, exc.body()) if isinstance(exc, ProxyError) else (exc.status, exc.body)
        if self.stream is None or not (self.stream.started or self.finished):
            if isinstance(exc, ProxyError):
                return self.door.error(exc, self.headers)
            return self.door.rejected(status, body, self.headers)
        await self.stream.close(self.events.fail(status, body) if self.events else b"")
        return self.stream.response


class CallRoute:
    """The `POST` route of one front door: the request read into a `Call`, served below, its reply rendered."""

    def __init__(self, door: FrontDoor, gatekeeper: Gatekeeper, options: ProxyOptions):
        self.door, self.gatekeeper = door, gatekeeper
        self.max_body_bytes, self.max_n = options.max_body_bytes, options.max_n

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        door = self.door
        request[DOOR] = door  # errors answer in the door's API shape
        team = self.gatekeeper.team(door.api_key(request), door.key_header)  # before the body is read
        session_id = self.gatekeeper.session_named(session_named(request))
        raw = await read_body(request, self.max_body_bytes)
        parsed = door.parse(read_json(raw), self.max_n)
        delivery = Delivery(door, (lambda headers: ClientStream(request, headers)) if parsed.stream else None)
        call = Call(parsed, delivery, team, session_id, raw, request.path, call_key_of(request), attempt_of(request),
                    request.headers.get(PROFILE_HEADER))
        return await delivery.serve(call, self.gatekeeper)


def errors_middleware(metrics: ProxyMetrics, door_of: Callable[[web.Request], FrontDoor]) -> Any:
    """Answers whatever a route raised in its door's shape (`door_of` the request, where no door took it yet), and
    counts every request by route and status."""

    @web.middleware
    async def errors(request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        resource = request.match_info.route.resource
        route = resource.canonical if resource else "unmatched"
        started = time.monotonic()
        try:
            response = await handler(request)
        except ProxyError as exc:
            if exc.status == 429:
                metrics.rejected.labels("quota" if isinstance(exc, QuotaExceeded) else "backpressure").inc()
            response = (request.get(DOOR) or door_of(request)).error(exc, {})
        except UpstreamRejected as exc:
            response = (request.get(DOOR) or door_of(request)).rejected(exc.status, exc.body, {})
        except web.HTTPException as exc:
            exc_status = exc.status if exc.status < 500 else 502
            response = (request.get(DOOR) or door_of(request)).error(ProxyError(exc_status, exc.reason or "error"))
        except (ClientGone, asyncio.CancelledError):
            raise
        except Exception:  # noqa: BLE001 - an unexpected bug must still answer in OpenAI's shape
            log.exception("unexpected error on %s", request.path)
            response = (request.get(DOOR) or door_of(request)).error(ProxyError(500, "internal proxy error"))
        metrics.requests.labels(route, str(response.status)).inc()
        metrics.latency.labels(route).observe(time.monotonic() - started)
        return response

    return errors
