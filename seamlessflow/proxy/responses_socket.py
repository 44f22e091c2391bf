"""The Responses API's WebSocket mode: `GET /v1/responses` (and `/sessions/{id}/v1/responses`) upgraded.

The client sends `{"type": "response.create", ...}` text frames, each the body of a `POST /v1/responses`; each is
served by the same path as a streamed POST (`ProxyServer.serve_call`: the same session, recording, stored
responses and token ids), and its events are the same Responses events, each one JSON text frame, in order.
Calls run one at a time, in the order they came (the API's rule for one connection); a frame is read while one
runs, so a bad frame (not JSON, an unknown type) gets its `error` event at once and nothing else is disturbed.
A request the HTTP route would refuse gets the same error as an `error` event with its HTTP status (the
API's WebSocket error shape: `{"type": "error", "status", "error": {...}}`), and the connection stays open.

As the API does on a WebSocket, the connection keeps its last response in memory, so `previous_response_id`
continues it even with `store: false` (Codex sends only the new input items after it); a stored response of
the team's continues as on HTTP. `generate: false` is a warmup: nothing is generated or recorded, the request
is kept as the connection's last response (empty output) for the next call to continue. The connection closing
while a call runs cancels it as a client leaving an HTTP stream does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
from aiohttp import WSMsgType, web

from seamlessflow.proxy.capture import CallCapture
from seamlessflow.proxy.doors import DOOR
from seamlessflow.proxy.errors import ProxyError, error_body
from seamlessflow.proxy.generation import ClientGone, UpstreamRejected
from seamlessflow.proxy.recording import CallIdentity
from seamlessflow.proxy.responses_api import ResponseEvents, ResponsesDoor
from seamlessflow.proxy.shaping import Shaper
from seamlessflow.proxy.stored_responses import Recent

if TYPE_CHECKING:
    from seamlessflow.proxy.server import ProxyServer

log = logging.getLogger(__name__)
CREATE = "response.create"


class SocketStream:
    """`ClientStream`'s part for a WebSocket: each server-sent event written goes out as one text frame (its JSON)."""

    def __init__(self, ws: web.WebSocketResponse, lock: asyncio.Lock):
        self.response, self.lock = ws, lock
        self.started = False

    async def write(self, data: bytes) -> None:
        for block in data.split(b"\n\n"):
            payload = next((line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")), None)
            if payload is None or payload == b"[DONE]":
                continue
            self.started = True
            await send(self.response, self.lock, payload.decode())

    async def close(self, data: bytes = b"") -> None:
        await self.write(data)  # the connection stays open for the next call


@dataclass
class SocketCall:
    """What a call on a WebSocket brings to `serve_call`: where its events go, and its connection's last response."""

    stream: SocketStream
    recent: Recent


async def send(ws: web.WebSocketResponse, lock: asyncio.Lock, text: str) -> None:
    try:
        async with lock:
            if ws.closed:
                raise ClientGone()
            await ws.send_str(text)
    except (ConnectionError, aiohttp.ClientConnectionResetError) as exc:
        raise ClientGone() from exc


def error_event(status: int, body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    return orjson.dumps({"type": "error", "status": status,
                         "error": error if isinstance(error, dict) else {"message": str(body)}}).decode()


class ResponsesSockets:
    """The upgrade route; one `_Connection` per WebSocket."""

    def __init__(self, server: ProxyServer):
        self.server = server
        self.door = ResponsesDoor()
        self.opened = self.creates = self.chained = 0  # connections; `response.create`s; those naming a previous

    async def open(self, request: web.Request) -> web.StreamResponse:
        request[DOOR] = self.door  # errors before the upgrade answer as the HTTP route's do
        team = self.server._team(request)  # the team key in Authorization, checked before the upgrade
        self.server._session_id(request)  # a bad session id is a 400 here, not an error on every call
        ws = web.WebSocketResponse(max_msg_size=self.server.config.max_body_bytes)
        if not ws.can_prepare(request).ok:
            raise ProxyError(400, "GET /v1/responses is the Responses API's WebSocket: send a WebSocket upgrade "
                                  "(or POST /v1/responses)")
        await ws.prepare(request)
        self.opened += 1
        await _Connection(self, request, ws, team).run()
        return ws


class _Connection:
    def __init__(self, sockets: ResponsesSockets, request: web.Request, ws: web.WebSocketResponse, team: str):
        self.sockets, self.request, self.ws, self.team = sockets, request, ws, team
        self.server, self.door = sockets.server, sockets.door
        self.lock = asyncio.Lock()
        self.recent = Recent()
        self.queue: asyncio.Queue[tuple[bytes, dict]] = asyncio.Queue()

    async def run(self) -> None:
        worker = asyncio.create_task(self._work())
        try:
            async for message in self.ws:
                if message.type == WSMsgType.TEXT:
                    frame = await self._frame(message.data)
                    if frame is not None:
                        self.queue.put_nowait(frame)
                elif message.type == WSMsgType.BINARY:
                    await self._error(400, error_body(400, "send response.create events as JSON text frames"))
        finally:  # closed (or the handler cancelled): a call still running is cancelled, as an HTTP client leaving
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    async def _frame(self, text: str) -> tuple[bytes, dict] | None:
        """A `response.create` event as the body of a POST, or None once the client has its error event."""
        try:
            event = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            await self._error(400, error_body(400, f"the event is not valid JSON: {str(exc)[:200]}"))
            return None
        kind = event.get("type") if isinstance(event, dict) else None
        if kind != CREATE:
            await self._error(400, error_body(400, f"unknown event type {kind!r}: a client sends {CREATE!r}", "type"))
            return None
        body = {key: value for key, value in event.items() if key != "type"}
        body["stream"] = True  # implicit on a WebSocket
        self.sockets.creates += 1
        self.sockets.chained += body.get("previous_response_id") is not None
        return text.encode(), body

    async def _work(self) -> None:
        while True:
            raw, body = await self.queue.get()
            try:
                await self._create(raw, body)
            except ClientGone:
                return

    async def _create(self, raw: bytes, body: dict) -> None:
        stream = SocketStream(self.ws, self.lock)
        try:
            if body.pop("generate", True) is False:
                await self._warmup(body)
                return
            result = await self.server.serve_call(self.request, self.door, self.team,
                                                  self.server._session_id(self.request), raw, body,
                                                  SocketCall(stream, self.recent))
            if result is not self.ws and isinstance(result, web.Response) and isinstance(result.body, bytes):
                await self._error(result.status, json.loads(result.body))  # refused before it streamed
        except ProxyError as exc:
            await self._error(exc.status, exc.body())
        except UpstreamRejected as exc:
            await self._error(exc.status, exc.body)
        except (ClientGone, asyncio.CancelledError):
            raise
        except Exception:  # noqa: BLE001 - an unexpected bug answers this call, and the connection goes on
            log.exception("unexpected error on a Responses WebSocket")
            await self._error(500, error_body(500, "internal proxy error"))

    async def _warmup(self, body: dict) -> None:
        """`generate: false`: the request checked and continued as a call would be, then kept as the connection's
        last response with no output; nothing reaches an engine or Kafka."""
        call = self.door.parse(body, self.server.config.max_n)
        session_id, generated = self.server._session_id(self.request)
        session_id = await self.server.stored.continue_from(call, self.team, session_id, generated, self.recent)
        self.server._claim(session_id, self.team)
        reply_id = uuid.uuid4().hex
        events = ResponseEvents(Shaper(call, CallCapture(1), f"resp_{reply_id}"), reply_id)
        tail = events.finish()
        assert events.response is not None  # finish() made it
        who = CallIdentity(session_id, self.team, reply_id)
        self.recent.remember(await self.server.stored.record(call, who, None, events.response, self.recent))
        await SocketStream(self.ws, self.lock).write(tail)

    async def _error(self, status: int, body: Any) -> None:
        with contextlib.suppress(ClientGone):
            await send(self.ws, self.lock, error_event(status, body))
