"""The Responses API's WebSocket mode: `GET /v1/responses` (and `/sessions/{id}/v1/responses`) upgraded.

A door like the others: the client sends `{"type": "response.create", ...}` text frames, each the body of a
`POST /v1/responses`; each becomes a `Call` handed to the gatekeeper as a streamed POST's is (the same session,
recording, stored responses and token ids), and its events are the same Responses events, each one JSON text
frame, in order.
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
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import WSMsgType, web

from seamlessflow.proxy.calls import Call, CallIdentity, Recent
from seamlessflow.proxy.capture import CallCapture
from seamlessflow.proxy.doors import DOOR, PROFILE_HEADER, Delivery, attempt_of, session_named
from seamlessflow.proxy.errors import ProxyError, error_body
from seamlessflow.proxy.gatekeeper import Gatekeeper
from seamlessflow.proxy.generation import ClientGone, UpstreamRejected
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.responses_door import ResponseEvents, ResponsesDoor
from seamlessflow.proxy.shaping import Shaper
from seamlessflow.proxy.state import ResponseState

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


@dataclass
class SocketDoor:
    """The upgrade route; one `_Connection` per WebSocket."""

    gatekeeper: Gatekeeper
    state: ResponseState
    options: ProxyOptions
    door: ResponsesDoor = field(default_factory=ResponsesDoor)
    opened: int = 0  # connections
    creates: int = 0  # `response.create`s
    chained: int = 0  # those naming a previous response

    async def open(self, request: web.Request) -> web.StreamResponse:
        request[DOOR] = self.door  # errors before the upgrade answer as the HTTP route's do
        team = self.gatekeeper.team(self.door.api_key(request), self.door.key_header)  # checked before the upgrade
        self.gatekeeper.session_named(session_named(request))  # a bad session id is a 400 here, not on every call
        ws = web.WebSocketResponse(max_msg_size=self.options.max_body_bytes)
        if not ws.can_prepare(request).ok:
            raise ProxyError(400, "GET /v1/responses is the Responses API's WebSocket: send a WebSocket upgrade "
                                  "(or POST /v1/responses)")
        await ws.prepare(request)
        self.opened += 1
        await _Connection(self, request, ws, team).run()
        return ws


class _Connection:
    def __init__(self, sockets: SocketDoor, request: web.Request, ws: web.WebSocketResponse, team: str):
        self.sockets, self.request, self.ws, self.team = sockets, request, ws, team
        self.door, self.gatekeeper = sockets.door, sockets.gatekeeper
        self.session_id = session_named(request)
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
        try:
            if body.pop("generate", True) is False:
                await self._warmup(raw, body)
                return
            stream = SocketStream(self.ws, self.lock)
            delivery = Delivery(self.door, lambda headers: stream)
            result = await delivery.serve(self._call(raw, body, delivery), self.gatekeeper)
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

    def _call(self, raw: bytes, body: dict, delivery: Delivery) -> Call:
        """A frame's call, as a POST's: its key is its frame's digest, not the upgrade's headers."""
        return Call(self.door.parse(body, self.sockets.options.max_n), delivery, self.team, self.session_id, raw,
                    self.request.path, attempt=attempt_of(self.request),
                    declared_profile=self.request.headers.get(PROFILE_HEADER), recent=self.recent)

    async def _warmup(self, raw: bytes, body: dict) -> None:
        """`generate: false`: the request checked and continued as a call would be, then kept as the connection's
        last response with no output; nothing reaches an engine or Kafka."""
        delivery = Delivery(self.door, None)
        call = self._call(raw, body, delivery)
        continued = await self.sockets.state.continue_call(call)
        session_id = self.gatekeeper.session_of(call.session_id, continued)
        self.gatekeeper.claim(session_id, self.team)
        events = ResponseEvents(Shaper(call.request, CallCapture(1), f"resp_{delivery.reply_id}"), delivery.reply_id)
        tail = events.finish()
        assert events.response is not None  # finish() made it
        who = CallIdentity(session_id, self.team, delivery.reply_id)
        self.recent.remember(self.sockets.state.record(call, who, events.response))
        await SocketStream(self.ws, self.lock).write(tail)

    async def _error(self, status: int, body: Any) -> None:
        with contextlib.suppress(ClientGone):
            await send(self.ws, self.lock, error_event(status, body))
