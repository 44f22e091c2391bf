"""The Responses and Messages front doors in front of a StubEngine (a fake engine), driven by the real `openai`
and `anthropic` SDKs: what reaches the engine, what the agent sees, what is recorded, and the APIs' own errors."""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import openai
import pytest

from seamlessflow.loadtest.stub_engine import token_at
from seamlessflow.messages import TokenIO
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.proxy_harness import KEYS, send_command, session_events, until

ALPHA = "key-alpha"


def responses_client(proxy, session_id, key=ALPHA) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key=key, max_retries=0)


def messages_client(proxy, session_id, key=ALPHA) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=proxy.session_url(session_id).removesuffix("/v1"), api_key=key, max_retries=0
    )


def stub_text(prompt_len: int, n: int) -> str:
    return "".join(f"t{token_at(prompt_len + k)} " for k in range(n))


async def test_responses_plain_sends_instructions_and_items_as_chat_and_records_the_engine_tokens(
    proxy, stub, settings, codec
):
    reply = await responses_client(proxy, "r1").responses.create(
        model="stub-model",
        instructions="be brief",
        max_output_tokens=3,
        input=[
            {"role": "developer", "content": "d"},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ],
    )
    sent = stub.requests[-1][1]
    assert sent["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": "d"},
        {"role": "user", "content": "hi"},
    ]
    assert sent["max_tokens"] == 3 and sent["return_token_ids"] is True
    prompt_len = len("be briefdhi")  # the stub's prompt ids are the bytes of the messages' contents
    assert reply.output_text == stub_text(prompt_len, 3) and reply.status == "incomplete"
    assert reply.usage.output_tokens == 3 and reply.id.startswith("resp_")
    [event] = await session_events(settings, codec, "r1")
    assert isinstance(event, TokenIO) and event.completion_ids == [token_at(prompt_len + k) for k in range(3)]
    assert event.prompt_ids == list(b"be briefdhi")


async def test_responses_stream_gives_the_event_sequence_and_the_same_text(proxy, settings, codec):
    stream = await responses_client(proxy, "r2").responses.create(
        model="stub-model", input="hey", max_output_tokens=4, stream=True
    )
    events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.incomplete" and "response.output_text.done" in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == stub_text(3, 4) == events[-1].response.output_text
    [event] = await session_events(settings, codec, "r2")
    assert event.completion_ids == [token_at(3 + k) for k in range(4)]


async def test_responses_function_tool_round_trip(proxy, stub):
    client = responses_client(proxy, "r3")
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]
    first = await client.responses.create(model="stub-model", input="find it", tools=tools, max_output_tokens=2)
    [call] = first.output
    assert (call.type, call.name, call.call_id) == ("function_call", "lookup", "call_stub")
    assert stub.requests[-1][1]["tools"] == [
        {"type": "function", "function": {"name": "lookup", "parameters": tools[0]["parameters"]}}
    ]
    streamed = await client.responses.create(
        model="stub-model", input="find it", tools=tools, max_output_tokens=2, stream=True
    )
    kinds = [e.type async for e in streamed]
    assert "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
    await client.responses.create(
        model="stub-model",
        tools=tools,
        tool_choice="none",
        max_output_tokens=2,
        input=[
            {"role": "user", "content": "find it"},
            {"type": "function_call", "call_id": "call_stub", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_stub", "output": "42"},
        ],
    )
    assert stub.requests[-1][1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_stub", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call_stub", "content": "42"},
    ]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (
            {"model": "m", "input": "x", "previous_response_id": "resp_1"},
            400,
            "Previous response with id 'resp_1' not found",
        ),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]},
            400,
            "input_image",
        ),
        ({"model": "m", "input": "x", "tools": [{"type": "custom", "name": "patch"}]}, 400, "only function tools"),
        ({"model": "m", "input": []}, 400, "'input'"),
    ],
)
async def test_responses_bad_input_gets_openai_errors_and_records_nothing(proxy, settings, codec, body, status, words):
    async with httpx.AsyncClient() as http:
        response = await http.post(
            proxy.session_url("rbad") + "/responses", json=body, headers={"Authorization": f"Bearer {ALPHA}"}
        )
    assert response.status_code == status and words in response.json()["error"]["message"]
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert await session_events(settings, codec, "rbad") == []


async def test_responses_offers_a_namespace_s_tools_and_leaves_hosted_tools_out(proxy, stub):
    """As Codex sends every call: sub-agent tools grouped in a `namespace`, and `web_search`, which no one behind
    the proxy runs (it was a 400, so Codex could not start)."""
    lookup = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    spawn = {**lookup, "name": "spawn_agent", "description": "start one"}
    grouped = {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": [spawn]}
    hosted = {"type": "web_search", "external_web_access": False}
    await responses_client(proxy, "rtools").responses.create(
        model="stub-model", input="x", tools=[lookup, grouped, hosted], tool_choice="auto", max_output_tokens=2
    )
    assert [tool["function"]["name"] for tool in stub.requests[-1][1]["tools"]] == ["lookup", "spawn_agent"]
    await responses_client(proxy, "rhosted").responses.create(
        model="stub-model", input="x", tools=[hosted], tool_choice="auto", max_output_tokens=2
    )
    assert "tools" not in stub.requests[-1][1] and "tool_choice" not in stub.requests[-1][1]


async def test_responses_without_a_key_is_401(proxy):
    with pytest.raises(openai.AuthenticationError):
        await responses_client(proxy, "r4", key="wrong").responses.create(model="stub-model", input="x")


async def test_messages_plain_with_system_and_the_engine_tokens_recorded(proxy, stub, settings, codec):
    reply = await messages_client(proxy, "m1").messages.create(
        model="stub-model",
        max_tokens=3,
        system=[{"type": "text", "text": "sys"}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
        ],
    )
    assert stub.requests[-1][1]["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert reply.content[0].text == stub_text(5, 3) and reply.stop_reason == "max_tokens"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (5, 3) and reply.role == "assistant"
    [event] = await session_events(settings, codec, "m1")
    assert event.prompt_ids == list(b"syshi") and event.completion_ids == [token_at(5 + k) for k in range(3)]


async def test_messages_system_message_inside_the_conversation_stays_in_its_place(proxy, stub):
    """Claude Code sends its environment notes as a `system` message after the user's turn (it was a 400)."""
    await messages_client(proxy, "msys").messages.create(
        model="stub-model",
        max_tokens=2,
        system="sys",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "text", "text": "env"}]},
        ],
    )
    assert stub.requests[-1][1]["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "env"},
    ]


async def test_messages_stream_gives_anthropics_events(proxy, settings, codec):
    client = messages_client(proxy, "m2")
    async with client.messages.stream(
        model="stub-model", max_tokens=4, messages=[{"role": "user", "content": "hey"}]
    ) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(texts) == stub_text(3, 4) == final.content[0].text and final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 4
    [event] = await session_events(settings, codec, "m2")
    assert event.completion_ids == [token_at(3 + k) for k in range(4)]


async def test_messages_tool_use_then_tool_result(proxy, stub):
    client = messages_client(proxy, "m3")
    tools = [{"name": "lookup", "description": "d", "input_schema": {"type": "object", "properties": {}}}]
    first = await client.messages.create(
        model="stub-model", max_tokens=2, tools=tools, messages=[{"role": "user", "content": "find it"}]
    )
    [use] = first.content
    assert (use.type, use.name, use.id, first.stop_reason) == ("tool_use", "lookup", "call_stub", "max_tokens")
    async with httpx.AsyncClient() as http:  # raw: the stub's arguments are not JSON, which the SDK would parse
        streamed = (
            await http.post(
                proxy.session_url("m3") + "/messages",
                headers={"x-api-key": ALPHA},
                json={
                    "model": "stub-model",
                    "max_tokens": 2,
                    "tools": tools,
                    "stream": True,
                    "messages": [{"role": "user", "content": "find it"}],
                },
            )
        ).text
    assert '"content_block":{"type":"tool_use","id":"call_stub","name":"lookup","input":{}}' in streamed
    assert (
        '"delta":{"type":"input_json_delta","partial_json":"t' in streamed and '"stop_reason":"max_tokens"' in streamed
    )
    await client.messages.create(
        model="stub-model",
        max_tokens=2,
        tools=tools,
        tool_choice={"type": "none"},
        messages=[
            {"role": "user", "content": "find it"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_stub", "name": "lookup", "input": {"q": 1}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_stub", "content": "42"},
                    {"type": "text", "text": "and?"},
                ],
            },
        ],
    )
    assert stub.requests[-1][1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_stub", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_stub", "content": "42"},
        {"role": "user", "content": "and?"},
    ]


@pytest.mark.parametrize(
    ("body", "headers", "status", "kind"),
    [
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}]},
            {"x-api-key": ALPHA},
            400,
            "invalid_request_error",
        ),
        (
            {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "image"}]}]},
            {"x-api-key": ALPHA},
            400,
            "invalid_request_error",
        ),
        (
            {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}, {"role": "system"}]},
            {"x-api-key": ALPHA},
            400,
            "invalid_request_error",
        ),
        (
            {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}]},
            {},
            401,
            "authentication_error",
        ),
        (
            {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}]},
            {"x-api-key": "nope"},
            401,
            "authentication_error",
        ),
        (
            {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "x" * 5_000_000}]},
            {"x-api-key": ALPHA},
            413,
            "request_too_large",
        ),
    ],
)
async def test_messages_bad_input_gets_anthropic_errors_and_records_nothing(
    proxy, settings, codec, body, headers, status, kind
):
    async with httpx.AsyncClient() as http:
        response = await http.post(
            proxy.session_url("mbad") + "/messages", json=body, headers={**headers, "anthropic-version": "2023-06-01"}
        )
    assert response.status_code == status
    assert response.json()["type"] == "error" and response.json()["error"]["type"] == kind
    assert await session_events(settings, codec, "mbad") == []


async def test_messages_sdk_raises_its_own_error_classes(proxy):
    with pytest.raises(anthropic.AuthenticationError):
        await messages_client(proxy, "m4", key="nope").messages.create(
            model="m", max_tokens=2, messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        await messages_client(proxy, "m4").messages.create(
            model="m", max_tokens=0, messages=[{"role": "user", "content": "x"}]
        )


async def test_a_responses_and_a_messages_stream_cut_by_a_pause_continue_with_the_new_version(
    proxy, stub, settings, codec
):
    """Partial rollout is the chat route's: each stream is cut after two tokens, continues after the resume, and
    the agent reads one answer in its API's events while the record labels the tokens with both versions."""
    stub.behaviour.hold_after_tokens = 2

    async def responses() -> str:
        stream = await responses_client(proxy, "pa").responses.create(
            model="m", input="ab", max_output_tokens=5, stream=True
        )
        return "".join([e.delta async for e in stream if e.type == "response.output_text.delta"])

    async def messages() -> str:
        async with messages_client(proxy, "pb").messages.stream(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "ab"}]
        ) as s:
            return "".join([text async for text in s.text_stream])

    calls = [asyncio.create_task(responses()), asyncio.create_task(messages())]
    await until(lambda: stub.tokens_sent == 4, what="two tokens of each call")
    await send_command(settings, codec, "pause", mode="keep", epoch=1)
    await until(lambda: proxy.server.gate.paused and not proxy.server.gate.active, what="the calls to be cut")
    stub.behaviour.hold_after_tokens = None
    stub.behaviour.release.set()
    await send_command(settings, codec, "resume", weight_version=3, epoch=2)
    texts = await asyncio.gather(*calls)

    expected = [token_at(2 + k) for k in range(5)]
    assert texts == ["".join(f"t{t} " for t in expected)] * 2
    for session in ("pa", "pb"):
        [event] = await session_events(settings, codec, session)
        assert event.completion_ids == expected and event.versions == [0, 0, 3, 3, 3]


async def test_unrecordable_calls_never_look_like_a_success_on_the_new_doors(stub, settings, tmp_path):
    """Kafka does not confirm the events: a plain call gets its API's 503, a stream ends in its API's error event
    instead of response.completed or message_stop."""
    dead_kafka = settings.with_overrides(bootstrap_servers="127.0.0.1:9")
    config = ProxyOptions(
        port=0,
        engines=[{"id": "e0", "url": stub.url}],
        delivery_timeout_s=1,
        listen_control=False,
        discover_engines=False,
    )
    proxy = await ProxyService(dead_kafka, config, team_keys=TeamKeys(tmp_path / "t.json", KEYS)).start()
    responses = {"model": "m", "input": "q", "max_output_tokens": 2}
    messages = {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "q"}]}
    try:
        async with httpx.AsyncClient(
            base_url=proxy.session_url("dead"), headers={"x-api-key": ALPHA, "Authorization": f"Bearer {ALPHA}"}
        ) as http:
            plain_r, stream_r = (
                await http.post("/responses", json=responses),
                await http.post("/responses", json={**responses, "stream": True}),
            )
            plain_m, stream_m = (
                await http.post("/messages", json=messages),
                await http.post("/messages", json={**messages, "stream": True}),
            )
        assert plain_r.status_code == 503 and plain_r.json()["error"]["type"] == "service_unavailable"
        assert plain_m.status_code == 503 and plain_m.json()["error"]["type"] == "overloaded_error"
        assert "event: error" in stream_r.text and "response.completed" not in stream_r.text
        assert "event: error" in stream_m.text and "message_stop" not in stream_m.text
    finally:
        proxy.server.publisher._producer.purge()
        await proxy.stop()
