"""The engine client against a raw socket server that answers with bytes written out here: a chunked body split
anywhere across reads, a sized one, one that ends with its connection, a kept connection reused, one the engine
closed while idle, a silent engine, one that cannot be reached; and a StubEngine's stream under uvloop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import uvloop
from yarl import URL

from seamlessflow.loadtest.stub_engine import StubEngine
from seamlessflow.ports import free_port
from seamlessflow.proxy.engine_client import EngineClient, EngineDropped, EngineUnreachable

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(answer: Answer) -> tuple[asyncio.Server, URL]:
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, URL(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions")


async def request_of(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))[15:])
    return head + await reader.readexactly(length)


async def body_of(client: EngineClient, url: URL) -> tuple[int, bytes]:
    response = await client.post(url, b'{"a": 1}')
    parts = []
    while piece := await response.read_any():
        parts.append(piece)
    response.release()
    return response.status, b"".join(parts)


async def test_a_chunked_body_split_anywhere_arrives_whole_and_the_connection_is_kept():
    connections = []

    async def answer(reader, writer):
        connections.append(writer)
        while True:
            try:
                request = await request_of(reader)
            except asyncio.IncompleteReadError:
                return
            assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:")
            assert request.endswith(b'\r\n\r\n{"a": 1}')
            wire = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n"
                    b"6\r\ndata: \r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n")
            for at in range(0, len(wire), 5):  # every piece of the wire in a read of its own
                writer.write(wire[at:at + 5])
                await writer.drain()
                await asyncio.sleep(0)

    server, url = await serve(answer)
    client = EngineClient(5.0, 5.0)
    try:
        assert await body_of(client, url) == (200, b"data: abc0123456789")
        assert await body_of(client, url) == (200, b"data: abc0123456789")
        assert len(connections) == 1
    finally:
        client.close()
        server.close()


async def test_a_sized_body_and_a_body_that_ends_with_its_connection():
    async def answer(reader, writer):
        while b"sized" in await request_of(reader):
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\n{\"error\":1}")
        writer.write(b"HTTP/1.0 200 OK\r\n\r\nto the end")
        await writer.drain()
        writer.close()

    server, url = await serve(answer)
    client = EngineClient(5.0, 5.0)
    try:
        response = await client.post(url.with_path("/sized"), b"{}")
        assert (response.status, response.reason, await response.text()) == (400, "Bad Request", '{"error":1}')
        response.release()
        assert await body_of(client, url) == (200, b"to the end")
    finally:
        client.close()
        server.close()


async def test_a_kept_connection_the_engine_closed_is_replaced_and_a_drop_mid_body_raises():
    served = []

    async def answer(reader, writer):
        await request_of(reader)
        served.append(writer)
        if len(served) == 1:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            writer.close()  # idle timeout on the engine's side, after its answer
        elif len(served) == 2:
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nha")
            await writer.drain()
            writer.close()  # the engine died mid-stream

    server, url = await serve(answer)
    client = EngineClient(5.0, 5.0)
    try:
        assert await body_of(client, url) == (200, b"ok")
        await asyncio.sleep(0.05)
        response = await client.post(url, b"{}")  # on a new connection: the kept one is gone
        assert await response.read_any() == b"ha"
        with pytest.raises(EngineDropped):
            await response.read_any()
        response.release()
    finally:
        client.close()
        server.close()


async def test_a_silent_engine_times_out_and_an_absent_one_is_unreachable():
    async def answer(reader, writer):
        await request_of(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(10)

    server, url = await serve(answer)
    client = EngineClient(5.0, 0.2)
    try:
        response = await client.post(url, b"{}")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(response.read_any(), 5)
        with pytest.raises(EngineUnreachable):
            await client.post(URL(f"http://127.0.0.1:{free_port()}/v1/completions"), b"{}")
    finally:
        client.close()
        server.close()


def test_a_stub_engines_stream_under_uvloop():
    async def stream() -> bytes:
        engine = await StubEngine().start()
        client = EngineClient(5.0, 5.0)
        try:
            body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": 3}'
            status, data = await body_of(client, URL(engine.url + "/v1/chat/completions"))
            assert status == 400  # the body above: `{"a": 1}` is no chat request
            response = await client.post(URL(engine.url + "/v1/chat/completions"), body)
            return await response.text()
        finally:
            client.close()
            await engine.stop()

    text = uvloop.run(stream())
    assert text.count("t10") == 3 and text.rstrip().endswith("data: [DONE]")  # its three tokens, then the end
