"""The generation layer's HTTP client to its engines: kept-alive HTTP/1.1 connections per engine, a request sent in
one write, and its response's body handed over as each network read brings it.

Why not aiohttp's client (which the proxy used before, and still uses for an engine's `/v1/models` and health):
per engine event it fed a stream reader, woke its waiter, re-armed a read timer and copied the bytes through
two buffers, and per call it built a request object, its headers and a URL; at 16-30 events a call that was a
fifth of the proxy's CPU. Here the connection's protocol parses the response itself (status line, headers, then a
chunked, sized or to-the-end body) and hands the bytes of each read to the one call waiting on them. A silent
engine is found by one watchdog per client (`read_timeout_s`, checked a few times a second at most), not by a
timer per read.

A call's stream is cut by closing its connection (`EngineResponse.close`): what the engine sent after is never
read. A connection goes back to the pool only once its response ended; one the engine closed while it was idle
is dropped, and a request that finds its kept connection gone before any byte of an answer is sent once more on
a new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from typing import Any, cast

from yarl import URL

MAX_BUFFERED = 1 << 20  # body bytes held for a call that does not read: past this the socket is not read either
MAX_HEAD = 1 << 16


class EngineUnreachable(ConnectionError):
    """No connection could be made to the engine (refused, no route, a name that does not resolve)."""


class EngineDropped(ConnectionError):
    """The engine's connection ended, or broke the protocol, before its response was whole."""


class EngineResponse:
    """One response of an engine: its status, then its body as it arrives."""

    def __init__(self, connection: _Connection):
        self.connection = connection
        self.status = 0
        self.reason = ""
        self.started = False  # the status line and headers are in
        self.done = False  # the body is whole
        self.keep_alive = True
        self.any_bytes = False  # the engine answered something
        self._pieces: list[bytes] = []
        self._buffered = 0
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    async def start(self) -> None:
        while not self.started:
            if self._error is not None:
                raise self._error
            await self._wait()

    async def read_any(self) -> bytes:
        """The body bytes that arrived since the last read (waiting for some); b"" once the body is whole."""
        while not self._pieces:
            if self._error is not None:
                raise self._error
            if self.done:
                return b""
            await self._wait()
        pieces, self._pieces = self._pieces, []
        if self._buffered > MAX_BUFFERED:
            self.connection.resume()
        self._buffered = 0
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def at_eof(self) -> bool:
        return self.done and not self._pieces

    async def text(self) -> str:
        parts = []
        while piece := await self.read_any():
            parts.append(piece)
        return b"".join(parts).decode("utf-8", "replace")

    def close(self) -> None:
        """Ends the response now (a pause's cut): its connection is closed, a read waiting on it raises."""
        self.fail(EngineDropped("the stream was closed by the proxy"))
        self.connection.close()

    def release(self) -> None:
        """The response is done with: its connection is kept for the next request if the body was read whole."""
        if self.done and self.keep_alive and self._error is None:
            self.connection.idle()
        else:
            self.connection.close()

    # -- the connection's side -------------------------------------------------------------------------
    def body(self, data: bytes) -> None:
        self._pieces.append(data)
        self._buffered += len(data)
        if self._buffered > MAX_BUFFERED:
            self.connection.pause()

    def fail(self, error: BaseException) -> None:
        if self._error is None and not self.done:
            self._error = error
        self.wake()

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


class _Connection(asyncio.Protocol):
    """One kept-alive connection to an engine, and the parser of the response now coming on it."""

    def __init__(self, client: EngineClient, key: tuple[str, int, bool]):
        self.client, self.key = client, key
        self.transport: asyncio.Transport | None = None
        self.response: EngineResponse | None = None
        self.closed = False
        self.received = 0  # network reads so far: the watchdog's sign of life
        self._buffer = b""
        self._state = "head"
        self._left = 0  # of a sized body or of the current chunk
        self._paused = False

    # -- asyncio's side --------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes
        with contextlib.suppress(OSError, AttributeError):
            transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.received += 1
        response = self.response
        if response is None or response.done:
            self.close()  # bytes no request asked for: the connection cannot be trusted any more
            return
        response.any_bytes = True
        try:
            self._feed(response, self._buffer + data if self._buffer else data)
        except (ValueError, IndexError) as exc:
            response.fail(EngineDropped(f"the engine's response could not be read: {exc}"))
            self.close()
            return
        response.wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.client.forget(self)
        response = self.response
        if response is not None and not response.done:
            if self._state == "to_end" and response.started:
                response.done = True  # a body without a length ends with its connection
            response.fail(EngineDropped(f"the engine closed the connection mid-response ({exc or 'EOF'})"))

    # -- the pool's side -------------------------------------------------------------------------------
    def request(self, response: EngineResponse, data: bytes) -> None:
        assert self.transport is not None
        self.response, self._buffer, self._state = response, b"", "head"
        self.transport.write(data)

    def idle(self) -> None:
        self.response = None
        self.client.put_back(self)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
        self.client.forget(self)

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()

    # -- the response's bytes --------------------------------------------------------------------------
    def _feed(self, response: EngineResponse, data: bytes) -> None:
        """Takes what arrived; what cannot be read yet (half a head, half a chunk size) waits in `_buffer`."""
        self._buffer = b""
        at = 0
        while at < len(data) and not response.done:
            state = self._state
            if state == "head":
                end = data.find(b"\r\n\r\n", at)
                if end < 0:
                    if len(data) - at > MAX_HEAD:
                        raise ValueError("a response head past 64 KiB")
                    self._buffer = data[at:]
                    return
                self._head(response, data[at:end])
                at = end + 4
            elif state == "sized":
                take = min(self._left, len(data) - at)
                response.body(data[at:at + take])
                at += take
                self._left -= take
                if not self._left:
                    response.done = True
            elif state == "to_end":
                response.body(data[at:])
                return
            elif state == "chunk_size":
                end = data.find(b"\r\n", at)
                if end < 0:
                    self._buffer = data[at:]
                    return
                self._left = int(data[at:end].split(b";", 1)[0], 16)
                at = end + 2
                self._state = "chunk" if self._left else "trailers"
            elif state == "chunk":
                take = min(self._left, len(data) - at)
                if take:
                    response.body(data[at:at + take])
                at += take
                self._left -= take
                if not self._left:
                    self._state = "chunk_end"
            elif state == "chunk_end":
                if len(data) - at < 2:
                    self._buffer = data[at:]
                    return
                if data[at:at + 2] != b"\r\n":
                    raise ValueError("a chunk not ended by CRLF")
                at += 2
                self._state = "chunk_size"
            else:  # trailers: header lines (none expected), then a blank line that ends the body
                end = data.find(b"\r\n", at)
                if end < 0:
                    self._buffer = data[at:]
                    return
                response.done = end == at
                at = end + 2
        if at < len(data):
            raise ValueError("bytes past the end of the response")

    def _head(self, response: EngineResponse, head: bytes) -> None:
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code, _, reason = rest.partition(b" ")
        response.status, response.reason = int(code), reason.decode("latin-1")
        response.keep_alive = version == b"HTTP/1.1"
        length, chunked = None, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                response.keep_alive = b"close" not in value.lower() and (
                    response.keep_alive or b"keep-alive" in value.lower())
        response.started = True
        if chunked:
            self._state = "chunk_size"
        elif length is not None:
            self._state, self._left = "sized", length
            response.done = length == 0
        elif response.status in (204, 304) or 100 <= response.status < 200:
            response.done = True
        else:
            self._state, response.keep_alive = "to_end", False


class EngineClient:
    """Requests to the engines, over connections kept per engine; a silent engine times out (`read_timeout_s`)."""

    def __init__(self, connect_timeout_s: float, read_timeout_s: float):
        self.connect_timeout_s, self.read_timeout_s = connect_timeout_s, read_timeout_s
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}
        self._busy: set[_Connection] = set()
        self._watchdog: asyncio.Task[None] | None = None

    async def post(self, url: URL, body: bytes) -> EngineResponse:
        """Sends a JSON body; returns once the response's status and headers are in. TimeoutError (no connection
        in `connect_timeout_s`, or silence past `read_timeout_s`), EngineUnreachable, EngineDropped."""
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())
        assert url.host is not None and url.port is not None
        key = (url.host, url.port, url.scheme == "https")
        host = f"{url.raw_host}:{url.port}" if url.explicit_port else str(url.raw_host)
        data = b"".join((b"POST ", url.raw_path_qs.encode(), b" HTTP/1.1\r\nHost: ", host.encode(),
                         b"\r\nContent-Type: application/json\r\nContent-Length: ", str(len(body)).encode(),
                         b"\r\n\r\n", body))
        while True:
            connection = self._kept(key)
            reused = connection is not None
            if connection is None:
                connection = await self._connect(key)
            response = EngineResponse(connection)
            self._busy.add(connection)
            connection.request(response, data)
            try:
                await response.start()
                return response
            except EngineDropped:
                connection.close()
                if reused and not response.any_bytes:
                    continue  # the engine had closed the kept connection: once more, on a new one
                raise
            except BaseException:
                connection.close()
                raise

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        for connections in list(self._idle.values()):
            for connection in list(connections):
                connection.close()
        for connection in list(self._busy):
            connection.close()

    # -- the connections' side -------------------------------------------------------------------------
    def put_back(self, connection: _Connection) -> None:
        self._busy.discard(connection)
        if not connection.closed:
            self._idle.setdefault(connection.key, []).append(connection)

    def forget(self, connection: _Connection) -> None:
        self._busy.discard(connection)
        kept = self._idle.get(connection.key)
        if kept and connection in kept:
            kept.remove(connection)

    def _kept(self, key: tuple[str, int, bool]) -> _Connection | None:
        kept = self._idle.get(key)
        while kept:
            connection = kept.pop()  # the newest: the least likely to have been closed by the engine
            if not connection.closed and connection.transport is not None and not connection.transport.is_closing():
                return connection
        return None

    async def _connect(self, key: tuple[str, int, bool]) -> _Connection:
        host, port, tls = key
        loop = asyncio.get_running_loop()
        context: Any = ssl.create_default_context() if tls else None
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                transport, connection = await loop.create_connection(lambda: _Connection(self, key), host, port,
                                                                     ssl=context)
        except TimeoutError:
            raise
        except OSError as exc:
            raise EngineUnreachable(f"cannot connect to {host}:{port}: {exc}") from exc
        if connection.transport is None:  # uvloop tells the protocol only after it returned
            connection.connection_made(transport)
        return connection

    async def _watch(self) -> None:
        """Fails a response whose engine sent nothing for `read_timeout_s` (a few checks per timeout, one a
        second at most)."""
        every_s = min(1.0, self.read_timeout_s / 4)
        seen: dict[_Connection, tuple[int, float]] = {}
        while True:
            await asyncio.sleep(every_s)
            now = asyncio.get_running_loop().time()
            for connection in list(self._busy):
                received, since = seen.get(connection, (-1, now))
                if connection.received != received:
                    seen[connection] = (connection.received, now)
                elif now - since >= self.read_timeout_s and connection.response is not None:
                    connection.response.fail(TimeoutError(f"the engine sent nothing for {self.read_timeout_s} s"))
                    connection.close()
            for connection in [c for c in seen if c not in self._busy]:
                del seen[connection]
