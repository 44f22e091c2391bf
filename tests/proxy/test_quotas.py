"""Per-team quotas (`proxy.teams`) in front of a StubEngine, seen through the real `openai` and `anthropic` SDKs:
a team over its share gets its API's rate-limit error with `Retry-After`, another team is served meanwhile,
and `/metrics` counts each team's calls, refusals and tokens."""

from __future__ import annotations

import asyncio
import time

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from seamlessflow.testing.proxy_harness import client, until

BETA = "key-beta"


def chat(proxy, session_id, key="key-alpha", max_tokens=1):
    return client(proxy, session_id, key).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], max_tokens=max_tokens
    )


def respond(proxy, session_id):
    return client(proxy, session_id).responses.create(model="m", input="q", max_output_tokens=1)


def message(proxy, session_id):
    sdk = anthropic.AsyncAnthropic(base_url=proxy.session_url(session_id).removesuffix("/v1"), api_key="key-alpha",
                                   max_retries=0)
    return sdk.messages.create(model="m", max_tokens=1, messages=[{"role": "user", "content": "q"}])


async def team_metrics(proxy) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, for the per-team and refusal samples of `/metrics`."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(proxy.base_url.removesuffix("/v1") + "/metrics")).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith(("seamlessflow_proxy_team_", "seamlessflow_proxy_rejected_total"))
    }


async def test_a_team_over_its_session_quota_gets_each_apis_429_while_another_team_is_served(proxy_factory, stub):
    proxy = await proxy_factory([stub], retry_after_s=3, teams={"alpha": {"max_sessions": 1}})
    stub.behaviour.hold_after_tokens = 1  # a call of 2 tokens or more generates until released
    held = asyncio.create_task(chat(proxy, "s1", max_tokens=2))
    await until(lambda: stub.tokens_sent == 1, what="alpha's first session to generate")

    with pytest.raises(openai.RateLimitError) as chat_refused:
        await chat(proxy, "s2")
    with pytest.raises(openai.RateLimitError) as responses_refused:
        await respond(proxy, "s3")
    with pytest.raises(anthropic.RateLimitError) as messages_refused:
        await message(proxy, "s4")
    for refused in (chat_refused, responses_refused, messages_refused):
        assert refused.value.status_code == 429 and refused.value.response.headers["retry-after"] == "3"
    for refused in (chat_refused, responses_refused):
        error = refused.value.response.json()["error"]
        assert error["type"] == "rate_limit_error" and error["code"] == 429 and "max_sessions" in error["message"]
    anthropic_body = messages_refused.value.response.json()
    assert anthropic_body["type"] == "error" and anthropic_body["error"]["type"] == "rate_limit_error"
    assert "max_sessions" in anthropic_body["error"]["message"]

    assert (await chat(proxy, "s1")).choices[0].finish_reason == "length"  # the session already generating
    assert (await chat(proxy, "b1", key=BETA)).choices  # beta has no quota: served while alpha is refused
    stub.behaviour.release.set()
    await held
    assert (await chat(proxy, "s2")).choices  # alpha's session is done: another may generate

    seen = await team_metrics(proxy)
    assert seen[("seamlessflow_proxy_team_refused_total", (("quota", "sessions"), ("team", "alpha")))] == 3
    assert seen[("seamlessflow_proxy_team_admitted_total", (("team", "alpha"),))] == 3
    assert seen[("seamlessflow_proxy_team_admitted_total", (("team", "beta"),))] == 1
    assert seen[("seamlessflow_proxy_team_tokens_total", (("team", "alpha"),))] == 4  # 2 + 1 + 1
    assert seen[("seamlessflow_proxy_team_tokens_total", (("team", "beta"),))] == 1
    assert seen[("seamlessflow_proxy_team_sessions", (("team", "alpha"),))] == 0
    assert seen[("seamlessflow_proxy_rejected_total", (("reason", "quota"),))] == 3


async def test_the_token_rate_refuses_a_team_in_debt_until_its_bucket_refills(proxy_factory, stub):
    proxy = await proxy_factory([stub], teams={"alpha": {"tokens_per_s": 4, "burst_tokens": 2}})
    now = [time.monotonic()]
    proxy.server.quotas.clock = lambda: now[0]  # time moved by hand: no sleeping, exact Retry-After

    await chat(proxy, "t1", max_tokens=10)  # let in with 2 tokens in the bucket; its 10 leave it at -8
    with pytest.raises(openai.RateLimitError) as refused:
        await chat(proxy, "t2")
    assert refused.value.response.headers["retry-after"] == "2"  # 8 tokens at 4 a second
    assert "tokens_per_s" in refused.value.response.json()["error"]["message"]
    assert (await chat(proxy, "b1", key=BETA, max_tokens=10)).choices  # beta's calls are not charged to alpha

    now[0] += 1.0
    with pytest.raises(anthropic.RateLimitError) as still:
        await message(proxy, "t3")
    assert still.value.response.headers["retry-after"] == "1"
    now[0] += 1.0
    assert (await chat(proxy, "t2")).choices  # out of debt: let in again

    seen = await team_metrics(proxy)
    assert seen[("seamlessflow_proxy_team_refused_total", (("quota", "tokens"), ("team", "alpha")))] == 2
    assert seen[("seamlessflow_proxy_team_tokens_total", (("team", "alpha"),))] == 11
    assert seen[("seamlessflow_proxy_team_tokens_total", (("team", "beta"),))] == 10


async def test_a_streamed_call_is_charged_the_tokens_it_generated(proxy_factory, stub):
    proxy = await proxy_factory([stub], teams={"alpha": {"tokens_per_s": 1}})
    proxy.server.quotas.clock = lambda: proxy.server.quotas.buckets["alpha"].stamp  # time stands still
    stream = await client(proxy, "u1").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], max_tokens=3, stream=True
    )
    async for _ in stream:
        pass
    assert proxy.server.quotas.buckets["alpha"].level == -2  # the 1 it held, less the 3 generated
    with pytest.raises(openai.RateLimitError):
        await chat(proxy, "u2")


def test_quotas_are_validated_and_a_team_without_one_is_unlimited():
    from pydantic import ValidationError

    from seamlessflow.proxy import ProxyOptions

    options = ProxyOptions.model_validate({"teams": {"red": {"max_sessions": 8, "tokens_per_s": 2000}}})
    assert options.teams["red"].burst_tokens is None and "blue" not in options.teams
    for bad in ({"max_sessions": 0}, {"tokens_per_s": -1}, {"weight": 1.0}):
        with pytest.raises(ValidationError):
            ProxyOptions.model_validate({"teams": {"red": bad}})
