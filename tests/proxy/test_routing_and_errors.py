"""Routing across engines, failover, backpressure, bad input, upstream errors, unrecordable events."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from seamlessflow.loadtest.stub_engine import StubEngine, token_at
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.proxy_harness import KEYS, client, session_events, until

AUTH = {"Authorization": "Bearer key-alpha"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "q"}], "max_tokens": 2}


@pytest.fixture
async def two_stubs():
    engines = [await StubEngine().start(), await StubEngine().start()]
    yield engines
    for engine in engines:
        await engine.stop()


async def test_sessions_stick_to_one_engine_and_move_when_it_dies(proxy_factory, two_stubs, settings, codec):
    proxy = await proxy_factory(two_stubs)
    sessions = [f"r{i}" for i in range(12)]
    for session_id in sessions:
        for _ in range(2):
            await client(proxy, session_id).chat.completions.create(**CHAT)
    events = await session_events(settings, codec)
    engine_of = {}
    for event in events:
        assert engine_of.setdefault(event.session_id, event.engine_id) == event.engine_id
    assert set(engine_of.values()) == {"e0", "e1"}  # both engines get sessions

    await two_stubs[0].stop()
    moved = [s for s in sessions if engine_of[s] == "e0"]
    for session_id in moved:
        await client(proxy, session_id).chat.completions.create(**CHAT)
    later = [e for e in await session_events(settings, codec) if e not in events]
    assert {e.engine_id for e in later} == {"e1"}
    async with httpx.AsyncClient() as http:
        health = (await http.get(proxy.base_url.removesuffix("/v1") + "/healthz")).json()
    assert [e["healthy"] for e in health["engines"]] == [False, True]


async def test_a_stream_dropped_mid_way_continues_on_another_engine(proxy_factory, two_stubs, settings, codec):
    proxy = await proxy_factory(two_stubs)
    session_id = next(s for s in (f"d{i}" for i in range(100)) if proxy.server.engines.pick(s).id == "e0")
    two_stubs[0].behaviour.drop_after_tokens = 2
    reply = await client(proxy, session_id).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "xy"}], max_tokens=4
    )
    expected = [token_at(2 + k) for k in range(4)]
    assert reply.choices[0].message.content == "".join(f"t{t} " for t in expected)
    [event] = await session_events(settings, codec, session_id)
    assert event.completion_ids == expected and event.engine_id == "e0"
    assert two_stubs[1].requests[0][1]["prompt"] == [120, 121, expected[0], expected[1]]


async def test_full_queue_answers_429_with_retry_after(proxy_factory, stub):
    proxy = await proxy_factory([stub], max_inflight=1, max_queued=0, retry_after_s=2)
    stub.behaviour.hold_after_tokens = 1
    held = asyncio.create_task(client(proxy, "q1").chat.completions.create(**CHAT))
    await until(lambda: stub.tokens_sent == 1, what="the first call to generate")
    async with httpx.AsyncClient() as http:
        refused = await http.post(proxy.base_url + "/chat/completions", json=CHAT, headers=AUTH)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "2"
    assert refused.json()["error"]["type"] == "rate_limit_error"
    stub.behaviour.release.set()
    await held


async def test_bad_requests_get_openai_shaped_4xx(proxy_factory, stub):
    proxy = await proxy_factory([stub], max_body_bytes=2000)
    async with httpx.AsyncClient() as http:
        def post(body, **kw):
            return http.post(
                proxy.base_url + "/chat/completions", headers=AUTH, **({"json": body} if body is not None else kw)
            )
        too_big = await post({"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]})
        not_json = await post(None, content=b"{nope")
        bad_n = await post({**CHAT, "n": "two"})
        no_messages = await post({"model": "m"})
        bad_session = await http.post(
            proxy.base_url + "/chat/completions", json=CHAT, headers={**AUTH, "X-Session-Id": "a b"}
        )
        bad_end = await http.post(
            proxy.session_url("e1").removesuffix("/v1") + "/end", json={"reward": "high"}, headers=AUTH
        )
    assert too_big.status_code == 413
    for response in (not_json, bad_n, no_messages, bad_session, bad_end):
        assert response.status_code == 400, response.text
        assert response.json()["error"]["type"] == "invalid_request_error"
    assert bad_n.json()["error"]["param"] == "n"


async def test_engine_4xx_passes_through_and_5xx_is_retried_then_502(proxy_factory, stub):
    proxy = await proxy_factory([stub], max_attempts=2)
    stub.behaviour.fail_next = 1
    await client(proxy, "u1").chat.completions.create(**CHAT)  # one 500, then a good retry
    stub.behaviour.fail_next = 5
    with pytest.raises(openai.APIStatusError) as failed:
        await client(proxy, "u1").chat.completions.create(**CHAT)
    assert failed.value.status_code == 502
    stub.behaviour.fail_next = 0
    stub.behaviour.reject_with = 400
    with pytest.raises(openai.BadRequestError, match="stub rejects"):
        await client(proxy, "u1").chat.completions.create(**CHAT)


async def test_no_engine_reachable_is_503(proxy_factory):
    proxy = await proxy_factory(["http://127.0.0.1:9"])
    with pytest.raises(openai.APIStatusError) as failed:
        await client(proxy, "n1").chat.completions.create(**CHAT)
    assert failed.value.status_code == 503


async def test_unrecordable_events_make_the_call_a_retryable_503(stub, settings, tmp_path):
    dead_kafka = settings.with_overrides(bootstrap_servers="127.0.0.1:9")
    config = ProxyOptions(
        port=0,
        engines=[{"id": "e0", "url": stub.url}],
        delivery_timeout_s=1,
        listen_control=False,
        discover_engines=False,
    )
    proxy = await ProxyService(dead_kafka, config, team_keys=TeamKeys(tmp_path / "t.json", KEYS)).start()
    try:
        async with httpx.AsyncClient() as http:
            plain = await http.post(proxy.base_url + "/chat/completions", json=CHAT, headers=AUTH)
            streamed = await http.post(
                proxy.base_url + "/chat/completions", json={**CHAT, "stream": True}, headers=AUTH
            )
        assert plain.status_code == 503 and "Retry-After" in plain.headers
        assert streamed.status_code == 200  # headers went out with the first token ...
        assert '"code": 503' in streamed.text and "[DONE]" not in streamed.text  # ... so the stream ends in an error
    finally:
        proxy.server.publisher._producer.purge()
        await proxy.stop()


async def test_metrics_and_healthz(proxy):
    await client(proxy, "mx").chat.completions.create(**CHAT)
    async with httpx.AsyncClient() as http:
        metrics = (await http.get(proxy.base_url.removesuffix("/v1") + "/metrics")).text
        health = (await http.get(proxy.base_url.removesuffix("/v1") + "/healthz")).json()
    assert 'seamlessflow_proxy_events_total{outcome="produced"} 1.0' in metrics
    assert 'seamlessflow_proxy_tokens_total{kind="completion"} 2.0' in metrics
    assert "seamlessflow_proxy_request_seconds_bucket" in metrics and "seamlessflow_proxy_paused 0.0" in metrics
    assert health["status"] == "ok" and health["paused"] is False
