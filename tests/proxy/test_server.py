"""The proxy in front of a StubEngine, driven by the official openai SDK; events read back from the broker."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.loadtest.stub_engine import LOGPROB, token_at
from seamlessflow.messages import EpisodeEnd, TokenIO
from seamlessflow.topics import Topics


async def session_events(settings, codec, session_id=None):
    messages = await asyncio.to_thread(read_messages, settings, Topics(settings).session_events, codec)
    return [m for m in messages if session_id is None or m.session_id == session_id]


def client(proxy, session_id, key="key-alpha"):
    return openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key=key, max_retries=0)


async def test_non_streaming_chat_records_one_event_with_the_engine_tokens(proxy, stub, settings, codec):
    reply = await client(proxy, "s1").chat.completions.create(
        model="stub-model", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    expected = [token_at(2), token_at(3), token_at(4)]
    assert reply.choices[0].message.content == "".join(f"t{t} " for t in expected)
    assert reply.usage.completion_tokens == 3 and reply.usage.prompt_tokens == 2
    assert "token_ids" not in reply.choices[0].model_extra and reply.choices[0].logprobs is None
    [event] = await session_events(settings, codec, "s1")
    assert isinstance(event, TokenIO)
    assert (event.prompt_ids, event.completion_ids) == ([104, 105], expected)
    assert event.logprobs == [LOGPROB] * 3 and event.versions == [0, 0, 0]
    assert (
        event.team == "alpha"
        and event.event_id.startswith(f"{event.call_id}-")
        and event.event_id.endswith(".0")
        and event.finish_reason == "length"
    )
    assert event.engine_id == "e0"
    sent = stub.requests[-1][1]
    assert sent["stream"] is True and sent["return_token_ids"] is True and sent["logprobs"] is True


async def test_streaming_chat_with_usage_ends_with_done(proxy, settings, codec):
    stream = await client(proxy, "s2").chat.completions.create(
        model="stub-model", messages=[{"role": "user", "content": "hey"}], max_tokens=4, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "".join(f"t{token_at(3 + k)} " for k in range(4))
    assert chunks[-1].usage.completion_tokens == 4 and chunks[-1].choices == []
    assert len({c.id for c in chunks}) == 1
    [event] = await session_events(settings, codec, "s2")
    assert event.completion_ids == [token_at(3 + k) for k in range(4)]


async def test_calls_reuse_one_engine_connection(proxy, stub):
    """The proxy reads each engine stream to its end: aiohttp closes a connection released mid-body, and a new
    connection per call took 12% of the proxy's CPU in one profile (docs/performance/proxy.md)."""
    stub.behaviour.end_delay_s = 0.05  # the body's end arrives after `[DONE]`, in a read of its own
    for stream in (False, True) * 3:
        reply = await client(proxy, "reuse").chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": "hi"}], max_tokens=3, stream=stream
        )
        if stream:
            [chunk async for chunk in reply]
    # one connection, or two when the proxy's health check held the first as a call began (six when none is kept)
    assert len(stub.peers) == 6 and len(set(stub.peers)) <= 2


async def test_client_asking_for_token_ids_and_logprobs_gets_them(proxy):
    reply = await client(proxy, "s3").chat.completions.create(
        model="stub-model", messages=[{"role": "user", "content": "a"}], max_tokens=2, logprobs=True,
        extra_body={"return_token_ids": True},
    )
    assert reply.model_extra["prompt_token_ids"] == [97]
    assert reply.choices[0].model_extra["token_ids"] == [token_at(1), token_at(2)]
    assert [e.logprob for e in reply.choices[0].logprobs.content] == [LOGPROB, LOGPROB]


async def test_n_choices_publish_one_event_each(proxy, settings, codec):
    reply = await client(proxy, "s4").completions.create(
        model="stub-model", prompt=[1, 2, 3], max_tokens=2, n=3, stream=False
    )
    assert [c.index for c in reply.choices] == [0, 1, 2]
    events = sorted(await session_events(settings, codec, "s4"), key=lambda e: e.choice_index)
    assert [e.event_id.split(".")[-1] for e in events] == ["0", "1", "2"]
    assert all(e.prompt_ids == [1, 2, 3] and e.completion_ids == [token_at(3), token_at(4)] for e in events)
    assert len({e.call_id for e in events}) == 1


async def test_streamed_tool_calls_reach_the_agent_and_merge_when_not_streamed(proxy):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    reply = await client(proxy, "s5").chat.completions.create(
        model="stub-model", messages=[{"role": "user", "content": "x"}], max_tokens=3, tools=tools, tool_choice="auto"
    )
    [call] = reply.choices[0].message.tool_calls
    assert call.id == "call_stub" and call.function.name == "lookup"
    assert call.function.arguments == f"t{token_at(2)} t{token_at(3)} "
    stream = await client(proxy, "s5").chat.completions.create(
        model="stub-model", messages=[{"role": "user", "content": "x"}], max_tokens=3, tools=tools, stream=True
    )
    deltas = [
        c.choices[0].delta.tool_calls for c in [c async for c in stream] if c.choices and c.choices[0].delta.tool_calls
    ]
    assert deltas[0][0].function.name == "lookup" and len(deltas) == 3


async def test_multi_turn_session_then_end_follows_its_calls(proxy, settings, codec):
    agent = client(proxy, "s6")
    messages = [{"role": "user", "content": "1"}]
    for _turn in range(3):
        reply = await agent.chat.completions.create(model="stub-model", messages=messages, max_tokens=2)
        messages += [
            {"role": "assistant", "content": reply.choices[0].message.content},
            {"role": "user", "content": "2"},
        ]
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            proxy.session_url("s6").removesuffix("/v1") + "/end",
            headers={"Authorization": "Bearer key-alpha"},
            json={"reward": 1.0, "status": "done", "info": {"k": 1}, "group_id": "g", "task_id": "t"},
        )
    assert answer.status_code == 200 and answer.json()["num_calls"] == 3
    events = await session_events(settings, codec, "s6")
    generated = sorted({v for e in events if isinstance(e, TokenIO) for v in e.versions})
    assert generated and answer.json()["versions"] == generated  # the versions that generated the session
    assert [type(e) for e in events] == [TokenIO, TokenIO, TokenIO, EpisodeEnd]
    end = events[-1]
    assert (end.reward, end.status, end.num_calls, end.group_id, end.task_id, end.info_json) == (
        1.0,
        "done",
        3,
        "g",
        "t",
        '{"k": 1}',
    )


async def test_header_session_and_generated_session_id(proxy, settings, codec):
    async with httpx.AsyncClient() as http:
        body = {"model": "m", "messages": [{"role": "user", "content": "z"}], "max_tokens": 1}
        named = await http.post(
            proxy.base_url + "/chat/completions",
            json=body,
            headers={"Authorization": "Bearer key-alpha", "X-Session-Id": "hdr-1"},
        )
        anonymous = await http.post(
            proxy.base_url + "/chat/completions", json=body, headers={"Authorization": "Bearer key-alpha"}
        )
    assert named.headers["X-Session-Id"] == "hdr-1"
    generated = anonymous.headers["X-Session-Id"]
    assert generated and generated != "hdr-1"
    ids = {e.session_id for e in await session_events(settings, codec)}
    assert {"hdr-1", generated} <= ids


async def test_team_isolation(proxy):
    await client(proxy, "owned").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], max_tokens=1
    )
    with pytest.raises(openai.PermissionDeniedError):
        await client(proxy, "owned", key="key-beta").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}], max_tokens=1
        )
    with pytest.raises(openai.AuthenticationError):
        await client(proxy, "other", key="nope").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}], max_tokens=1
        )
    async with httpx.AsyncClient() as http:
        end = await http.post(
            proxy.session_url("owned").removesuffix("/v1") + "/end",
            headers={"Authorization": "Bearer key-beta"},
            json={"reward": 0},
        )
        missing = await http.post(proxy.base_url + "/chat/completions", json={})
    assert end.status_code == 403 and missing.status_code == 401
    assert missing.json()["error"]["type"] == "authentication_error"


async def test_models_are_listed(proxy):
    models = await client(proxy, "m1").models.list()
    assert [m.id for m in models.data] == ["stub-model"]


def test_event_ids_keep_the_call_id_and_change_only_with_the_tokens():
    from seamlessflow.proxy.deltas import token_sequence
    from seamlessflow.proxy.recording import event_id

    first = event_id("c1", 0, 2, token_sequence([1, 2], [3, 4]))
    assert (
        first == event_id("c1", 0, 2, token_sequence([1, 2], [3, 4]))
        and first.startswith("c1-")
        and first.endswith(".0")
    )
    assert (
        event_id("c1", 0, 2, token_sequence([1, 2], [3, 5])) != first
    )  # a retry that generated anew is its own record
    assert event_id("c1", 1, 2, token_sequence([1, 2], [3, 4])) != first
    assert event_id("c1", 0, 3, token_sequence([1, 2, 3], [4])) != first  # where the prompt ends counts too
