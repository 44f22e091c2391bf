"""`rollout.sampling` at the proxy: what the engine is sent, what is recorded, and what is refused (stub engine,
real broker, the official openai SDK)."""

from __future__ import annotations

import asyncio

import openai
import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import TokenIO
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.proxy_harness import KEYS
from seamlessflow.topics import Topics


async def events(settings, codec, session_id):
    messages = await asyncio.to_thread(read_messages, settings, Topics(settings).session_events, codec)
    return [m for m in messages if isinstance(m, TokenIO) and m.session_id == session_id]


def client(proxy, session_id):
    return openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key="key-alpha", max_retries=0)


async def test_the_agents_temperature_is_served_and_recorded_and_its_truncation_overridden(proxy, stub, settings,
                                                                                           codec):
    await client(proxy, "warm").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=3, temperature=0.6, top_p=0.9,
        presence_penalty=0.5, logit_bias={"7": 5})
    sent = stub.requests[-1][1]
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["min_p"]) == (0.6, 1.0, 0, 0.0)
    assert sent["presence_penalty"] == 0.0 and "logit_bias" not in sent
    [event] = await events(settings, codec, "warm")
    assert event.temperature == pytest.approx(0.6) and event.logprob_space == "processed"
    assert (event.top_p, event.top_k, event.min_p, event.invalid_logprobs) == (1.0, 0, 0.0, 0)
    metrics = proxy.server.metrics.sampling_overridden
    assert metrics.labels("alpha", "top_p")._value.get() == 1
    assert metrics.labels("alpha", "logit_bias")._value.get() == 1


async def test_a_call_that_sets_no_temperature_is_sampled_and_recorded_at_one(proxy, stub, settings, codec):
    await client(proxy, "plain").completions.create(model="m", prompt="hi", max_tokens=2)
    assert stub.requests[-1][1]["temperature"] == 1.0
    [event] = await events(settings, codec, "plain")
    assert event.temperature == 1.0


async def test_a_refused_setting_is_a_400_naming_it_and_nothing_is_recorded(stub, settings, codec, tmp_path):
    strict = settings.with_overrides(rollout={"sampling": {"truncation": "refuse"}})
    config = ProxyOptions.model_validate({"port": 0, "engines": [{"id": "e0", "url": stub.url}]})
    proxy = await ProxyService(strict, config, team_keys=TeamKeys(tmp_path / "teams.json", KEYS)).start()
    try:
        await proxy.wait_listening()
        with pytest.raises(openai.BadRequestError, match="rollout.sampling.truncation") as refused:
            await client(proxy, "strict").chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2, top_p=0.9)
        assert refused.value.body["param"] == "top_p"
        assert not stub.requests and await events(settings, codec, "strict") == []
    finally:
        await proxy.stop()
