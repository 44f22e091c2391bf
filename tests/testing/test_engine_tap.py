"""The engine tap reads the engine's ids from both reply forms, a JSON body and an SSE stream, and keeps them
when its caller hangs up before the stream's end."""

import asyncio
import json

import aiohttp
from aiohttp import web

from seamlessflow.testing.engine_tap import EngineAnswer, EngineTap, engine_answer


def test_a_json_reply_gives_its_prompt_and_first_choice_ids():
    body = {"prompt_token_ids": [1, 2], "choices": [{"index": 0, "token_ids": [3, 4]}]}
    answer = engine_answer(json.dumps(body).encode())
    assert (answer.prompt_ids, answer.completion_ids) == ([1, 2], [3, 4])


def test_a_stream_gives_the_first_chunk_s_prompt_ids_and_every_chunk_s_completion_ids():
    chunks = [
        {"prompt_token_ids": [1, 2], "choices": [{"index": 0, "token_ids": [3]}]},
        {"choices": [{"index": 0, "token_ids": [4, 5]}, {"index": 1, "token_ids": [9]}]},
        {"choices": [], "usage": {"completion_tokens": 3}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    answer = engine_answer(body.encode())
    assert (answer.prompt_ids, answer.completion_ids) == ([1, 2], [3, 4, 5])


async def slow_ending_engine(request: web.Request) -> web.StreamResponse:
    """Streams one answer and [DONE], then holds the stream open a while before ending it (as a busy engine may)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    chunk = {"prompt_token_ids": [1, 2], "choices": [{"index": 0, "token_ids": [3]}]}
    await response.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
    await asyncio.sleep(0.5)
    await response.write_eof()
    return response


async def test_a_caller_that_hangs_up_after_done_does_not_lose_the_answer():
    app = web.Application()
    app.router.add_post("/v1/chat/completions", slow_ending_engine)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    tap = await EngineTap(f"http://127.0.0.1:{runner.addresses[0][1]}").start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(tap.url + "/v1/chat/completions", json={}) as reply:
                async for line in reply.content:
                    if line.strip() == b"data: [DONE]":
                        break  # and close the connection before the stream's end, as the proxy does
        await asyncio.sleep(1.0)
        assert tap.answers == [EngineAnswer([1, 2], [3])]
    finally:
        await tap.stop()
        await runner.cleanup()
