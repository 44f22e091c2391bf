"""The Responses API's WebSocket mode (`socket_door.py`) in front of a StubEngine (a fake engine): each
`response.create` is served as a streamed `POST /v1/responses` is (the same events, recording and stored
responses), `previous_response_id` chains turns on one connection (also with `store: false`, and after a
`generate: false` warmup), bad frames get `error` events and the connection goes on, an upgrade without the team
key is a 401, and a connection closed mid-response frees the call as a client leaving an HTTP stream does."""

from __future__ import annotations

import asyncio
import json
import shutil

import aiohttp
import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.loadtest.stub_engine import StubBehaviour, StubEngine
from seamlessflow.messages import TokenIO
from seamlessflow.testing import agent_clis
from seamlessflow.testing.proxy_harness import session_events, until
from seamlessflow.testing.stored_responses import agent
from seamlessflow.topics import Topics

TOOLS = [{"type": "function", "name": "lookup", "description": "look a word up",
          "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}]
AUTH = {"Authorization": "Bearer key-alpha"}


def socket_url(proxy, session_id: str | None = None) -> str:
    return (proxy.session_url(session_id) if session_id else proxy.base_url) + "/responses"


async def turn(ws: aiohttp.ClientWebSocketResponse, **request) -> list[dict]:
    """One `response.create` and its events, up to the one that ends it."""
    await ws.send_str(json.dumps({"type": "response.create", **request}))
    events: list[dict] = []
    while not events or events[-1]["type"] not in ("response.completed", "response.incomplete", "error"):
        message = await asyncio.wait_for(ws.receive(), 30)
        assert message.type == aiohttp.WSMsgType.TEXT, message
        events.append(json.loads(message.data))
    return events


def calls_of(recorded: list) -> list[tuple]:
    return [(c.prompt_ids, c.completion_ids, c.logprobs, c.versions, c.finish_reason)
            for c in recorded if isinstance(c, TokenIO)]


async def test_two_turns_with_a_function_tool_over_one_socket_record_what_the_http_stream_records(
    proxy, stub, settings, codec
):
    first = {"model": "m", "instructions": "use the tool", "input": "look up 'socket'", "tools": TOOLS,
             "max_output_tokens": 4}
    async with aiohttp.ClientSession() as http, http.ws_connect(socket_url(proxy, "ws"), headers=AUTH) as ws:
        one = await turn(ws, **first)
        done = one[-1]["response"]
        assert done["status"] == "incomplete" and done["output"][0]["type"] == "function_call"
        call_id = done["output"][0]["call_id"]
        second = {"model": "m", "input": [{"type": "function_call_output", "call_id": call_id, "output": "a pipe"}],
                  "tools": TOOLS, "tool_choice": "none", "max_output_tokens": 3, "store": False}
        two = await turn(ws, previous_response_id=done["id"], **second)
    assert two[-1]["response"]["previous_response_id"] == done["id"] and two[-1]["response"]["store"] is False
    said = {"name": "lookup", "arguments": done["output"][0]["arguments"]}
    assert stub.requests[-1][1]["messages"] == [  # no instructions: the API does not carry them over
        {"role": "user", "content": "look up 'socket'"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": said}]},
        {"role": "tool", "tool_call_id": call_id, "content": "a pipe"},
    ]

    client = agent(proxy, "http")  # the same two calls, streamed over HTTP
    http_one = [e.model_dump(exclude_none=True) async for e in await client.responses.create(stream=True, **first)]
    http_two = [e.model_dump(exclude_none=True) async for e in await client.responses.create(
        stream=True, previous_response_id=http_one[-1]["response"]["id"], **second)]
    assert [e["type"] for e in one + two] == [e["type"] for e in http_one + http_two]
    ws_calls, http_calls = await session_events(settings, codec, "ws"), await session_events(settings, codec, "http")
    assert len(calls_of(ws_calls)) == 2 and calls_of(ws_calls) == calls_of(http_calls)
    assert all(c.team == "alpha" for c in ws_calls if isinstance(c, TokenIO))
    assert (await client.responses.retrieve(done["id"])).id == done["id"]  # the stored one is on Kafka too


async def test_a_store_false_response_and_a_warmup_continue_on_their_connection_only(proxy, stub, settings, codec):
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(socket_url(proxy), headers=AUTH) as ws:
            warm = await turn(ws, model="m", input="first", generate=False, store=False)
            assert [e["type"] for e in warm] == ["response.created", "response.in_progress", "response.completed"]
            assert warm[-1]["response"]["output"] == [] and not stub.requests  # nothing reached the engine
            one = (await turn(ws, model="m", input="second", store=False, max_output_tokens=2,
                              previous_response_id=warm[-1]["response"]["id"]))[-1]["response"]
            two = (await turn(ws, model="m", input="third", store=False, max_output_tokens=2,
                              previous_response_id=one["id"]))[-1]["response"]
            assert two["status"] == "incomplete"
            assert [m["content"] for m in stub.requests[-1][1]["messages"]] == [
                "first", "second", one["output"][0]["content"][0]["text"], "third"]
            old = await turn(ws, model="m", input="x", previous_response_id=one["id"])  # only the last is kept
            assert old[-1]["type"] == "error" and old[-1]["status"] == 400
        async with http.ws_connect(socket_url(proxy), headers=AUTH) as ws:
            [gone] = await turn(ws, model="m", input="x", previous_response_id=two["id"])
    assert gone["status"] == 400 and "not found" in gone["error"]["message"]
    calls = [c for c in await session_events(settings, codec) if isinstance(c, TokenIO)]
    assert len(calls) == 2 and len({c.session_id for c in calls}) == 1  # the warmup recorded nothing
    assert not read_messages(settings, Topics(settings).responses, codec)  # store: false: nothing on Kafka


async def test_bad_frames_get_error_events_and_the_connection_goes_on(proxy, stub):
    stub.behaviour.token_delay_s = 0.05
    async with aiohttp.ClientSession() as http, http.ws_connect(socket_url(proxy, "bad"), headers=AUTH) as ws:
        await ws.send_str(json.dumps({"type": "response.create", "model": "m", "input": "hi", "max_output_tokens": 4}))
        await ws.send_str("{not json")  # while the call runs
        await ws.send_str(json.dumps({"type": "response.cancel"}))
        await ws.send_str(json.dumps(["response.create"]))
        await ws.send_bytes(b"\x00")
        events = []
        while len([e for e in events if e["type"] in ("error", "response.incomplete")]) < 5:
            events.append(json.loads((await asyncio.wait_for(ws.receive(), 30)).data))
        errors = [e for e in events if e["type"] == "error"]
        assert [e["status"] for e in errors] == [400] * 4 and "not valid JSON" in errors[0]["error"]["message"]
        assert "'response.cancel'" in errors[1]["error"]["message"] and errors[1]["error"]["param"] == "type"
        assert [e["type"] for e in events].count("response.incomplete") == 1  # the call ran to its end meanwhile
        for request, says in [({"input": "hi"}, "'model' is required"),
                              ({"model": "m", "input": [{"type": "input_image"}]}, "'input_image'"),
                              ({"model": "m", "input": "x", "previous_response_id": "resp_nope"}, "not found")]:
            [error] = await turn(ws, **request)  # what the HTTP route refuses, as an error event
            assert error["type"] == "error" and error["status"] == 400 and says in error["error"]["message"]
            assert error["error"]["type"] == "invalid_request_error"
        assert (await turn(ws, model="m", input="again", max_output_tokens=2))[-1]["type"] == "response.incomplete"


async def test_an_upgrade_without_the_team_key_is_a_401_and_a_plain_get_a_400(proxy):
    async with aiohttp.ClientSession() as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(socket_url(proxy, "s"), headers=headers)
            assert refused.value.status == 401
        async with http.get(socket_url(proxy), headers=AUTH) as plain:
            assert plain.status == 400 and "WebSocket" in (await plain.json())["error"]["message"]


async def test_a_connection_closed_mid_response_frees_its_call(proxy, stub, settings, codec):
    stub.behaviour.hold_after_tokens = 2
    async with aiohttp.ClientSession() as http, http.ws_connect(socket_url(proxy, "gone"), headers=AUTH) as ws:
        await ws.send_str(json.dumps({"type": "response.create", "model": "m", "input": "hi", "max_output_tokens": 6}))
        await until(lambda: stub.tokens_sent == 2, what="two tokens")
        await until(lambda: proxy.server.admission.running == 1, what="the call to hold a slot")
    await until(lambda: proxy.server.admission.running == 0, what="the call to be freed")
    assert proxy.server.sessions.get("gone").inflight == 0
    stub.behaviour.hold_after_tokens = None
    stub.behaviour.release.set()
    async with aiohttp.ClientSession() as http, http.ws_connect(socket_url(proxy, "gone"), headers=AUTH) as ws:
        assert (await turn(ws, model="m", input="hi", max_output_tokens=2))[-1]["type"] == "response.incomplete"


@pytest.mark.slow
async def test_codex_exec_runs_over_the_websocket_with_a_user_provider(proxy_factory, settings, codec, tmp_path):
    """Codex 0.169 with `supports_websockets = true` on its user-defined provider (the only switch: `codex-rs/core/
    src/client.rs`, `responses_websocket_enabled`) speaks to the proxy over the WebSocket: a `generate: false`
    warmup, then its turn continuing it with `previous_response_id` and only the new items. The stub answers
    text cut at its token limit (`response.incomplete`), which Codex reports as an error: only the transport
    and the recording are the point here."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: Codex is installed from the npm registry")
    agent_clis.install_agent_clis()
    stub = await StubEngine(StubBehaviour(tool_call=False)).start()
    try:
        proxy = await proxy_factory([stub])
        work = tmp_path / "work"
        home = tmp_path / "codex-home"
        home.mkdir()
        config = agent_clis.codex_config(proxy.session_url("codex-ws"), "tiny") + "supports_websockets = true\n"
        (home / "config.toml").write_text(config)
        env = {**agent_clis._base_env(work), "CODEX_HOME": str(home), agent_clis.KEY_ENV: "key-alpha"}
        argv = [str(agent_clis.binary("codex")), "exec", "--skip-git-repo-check", "Write hello.txt."]
        run = await asyncio.to_thread(agent_clis._run, argv, env, work, 120)
    finally:
        await stub.stop()
    calls = [c for c in await session_events(settings, codec, "codex-ws") if isinstance(c, TokenIO)]
    sockets = proxy.server.sockets
    print(f"codex exec: rc {run.returncode}, {sockets.opened} sockets, {sockets.creates} creates "
          f"({sockets.chained} continuing), {len(calls)} calls\n{run.output[-600:]}")
    assert calls and sockets.opened >= 1, run.output[-3000:]
    assert sockets.creates == len(calls) + 1 == len(stub.requests) + 1  # a warmup (no engine), then the calls
    assert sockets.chained == len(calls)  # each continues the connection's last response with its new items
    assert stub.requests[0][1]["messages"][-1] == {"role": "user", "content": "Write hello.txt."}
    assert len(calls[0].prompt_ids) > 1000  # Codex's whole system prompt, kept from the warmup's input
