"""A client SDK that times out and retries sends the same request again: one request, one trajectory.

The real `openai` SDK (timeout 1 s, `max_retries=1`) against the stub engine (fake, named as such: it
answers every attempt with the same tokens, the greedy case). The proxy's acknowledgement of the first attempt
comes 2 s late, so that attempt is recorded on Kafka but its reply never reaches the agent; the SDK's retry is
recorded too. Both carry the request's call id (a digest of its body in the session) and their attempt number.
The sampled case (attempts that generated different tokens) runs on the real engine in
`tests/agents/test_framework_examples.py`.
"""

from __future__ import annotations

import httpx
import openai

from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.proxy_retries import acknowledge_first_call_late, trajectories

ASK = [{"role": "user", "content": "What is 2 + 3?"}]


async def end(proxy, session_id, reward=1.0):
    async with httpx.AsyncClient() as http:
        reply = await http.post(proxy.session_url(session_id).removesuffix("/v1") + "/end",
                                headers={"Authorization": "Bearer key-alpha"}, json={"reward": reward})
    assert reply.status_code == 200


async def test_an_sdk_retry_after_a_timeout_is_the_same_call_and_assembles_once(proxy, settings, codec):
    acknowledge_first_call_late(proxy, delay_s=2.0)
    agent = openai.AsyncOpenAI(base_url=proxy.session_url("retry"), api_key="key-alpha", timeout=1.0, max_retries=1)
    reply = await agent.chat.completions.create(model="m", messages=ASK, max_tokens=4)
    assert reply.choices[0].message.content
    await end(proxy, "retry")

    first, retry, _ = await session_events(settings, codec, "retry")
    assert (first.attempt, retry.attempt) == (0, 1) and first.call_id == retry.call_id
    assert first.event_id == retry.event_id  # the same tokens: one record, kept once
    [trajectory], letters = await trajectories(settings, codec, "retry")
    assert not letters and trajectory.tokens == list(first.prompt_ids) + list(first.completion_ids)
    assert trajectory.num_forks == 0


async def test_the_same_request_asked_twice_without_a_retry_is_not_an_attempt(proxy, settings, codec):
    agent = openai.AsyncOpenAI(base_url=proxy.session_url("twice"), api_key="key-alpha", max_retries=0)
    for _ in range(2):
        await agent.chat.completions.create(model="m", messages=ASK, max_tokens=4)
    first, second = await session_events(settings, codec, "twice")
    assert first.call_id == second.call_id and (first.attempt, second.attempt) == (0, 0)


async def test_different_requests_get_different_call_ids(proxy, settings, codec):
    agent = openai.AsyncOpenAI(base_url=proxy.session_url("two"), api_key="key-alpha", max_retries=0)
    await agent.chat.completions.create(model="m", messages=ASK, max_tokens=4)
    await agent.chat.completions.create(model="m", messages=ASK, max_tokens=5)
    first, second = await session_events(settings, codec, "two")
    assert first.call_id != second.call_id
