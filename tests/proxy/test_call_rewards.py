"""Rewards for single calls: the reward route and the end's `call_rewards`, through the real proxy in front of a
StubEngine, driven by the openai SDK; the EpisodeEnd read back from the broker carries them."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import EpisodeEnd, TokenIO
from seamlessflow.topics import Topics

ALPHA = {"Authorization": "Bearer key-alpha"}


async def session_events(settings, codec, session_id: str) -> list:
    messages = await asyncio.to_thread(read_messages, settings, Topics(settings).session_events, codec)
    return [m for m in messages if m.session_id == session_id]


def base(proxy, session_id: str) -> str:
    return proxy.session_url(session_id).removesuffix("/v1")


async def three_calls(proxy, session_id: str) -> None:
    """Three turns; the second sent with a call key the agent chose."""
    agent = openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key="key-alpha", max_retries=0)
    messages = [{"role": "user", "content": "1"}]
    for turn in range(3):
        headers = {"Idempotency-Key": "lookup-step"} if turn == 1 else {}
        reply = await agent.chat.completions.create(model="stub-model", messages=messages, max_tokens=2,
                                                    extra_headers=headers)
        messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                     {"role": "user", "content": str(turn + 2)}]


async def test_rewards_by_position_and_by_call_key_travel_on_the_episode_end(proxy, settings, codec):
    await three_calls(proxy, "cr1")
    async with httpx.AsyncClient() as http:
        by_position = await http.post(base(proxy, "cr1") + "/calls/0/reward", headers=ALPHA, json={"reward": 0.5})
        by_key = await http.post(base(proxy, "cr1") + "/calls/lookup-step/reward", headers=ALPHA, json={"reward": -1})
        end = await http.post(base(proxy, "cr1") + "/end", headers=ALPHA,
                              json={"reward": 1.0, "call_rewards": {"2": 0.75, "0": 0.25}})
    assert (by_position.status_code, by_key.status_code, end.status_code) == (200, 200, 200)
    assert by_position.json()["call"] == "#0"
    events = await session_events(settings, codec, "cr1")
    calls = [e for e in events if isinstance(e, TokenIO)]
    (ended,) = [e for e in events if isinstance(e, EpisodeEnd)]
    keyed = calls[1].call_id  # the record of the call sent with the key: the route named that very record
    assert by_key.json()["call"] == keyed
    assert ended.call_rewards == {"#0": 0.25, keyed: -1.0, "#2": 0.75}  # the end's own value for call 0 wins


@pytest.mark.parametrize(
    ("call", "body", "status", "words"),
    [
        ("0", {"reward": "1"}, 400, "invalid call reward"),
        ("0", {}, 400, "invalid call reward"),
        ("0", {"reward": 1, "extra": 2}, 400, "invalid call reward"),
        ("9999999", {"reward": 1}, 400, "invalid call position"),
        ("k" * 129, {"reward": 1}, 400, "is named by its position"),
    ],
)
async def test_a_malformed_call_reward_gets_400_with_the_reason(proxy, call, body, status, words):
    async with httpx.AsyncClient() as http:
        answer = await http.post(base(proxy, "cr2") + f"/calls/{call}/reward", headers=ALPHA, json=body)
    assert answer.status_code == status and words in answer.json()["error"]["message"]


async def test_malformed_rewards_on_the_end_and_other_teams_sessions_are_refused(proxy):
    async with httpx.AsyncClient() as http:
        not_json = await http.post(base(proxy, "cr3") + "/calls/0/reward", headers=ALPHA, content=b"{")
        text_reward = await http.post(base(proxy, "cr3") + "/end", headers=ALPHA,
                                      json={"reward": 1.0, "call_rewards": {"0": "high"}})
        bad_call = await http.post(base(proxy, "cr3") + "/end", headers=ALPHA,
                                   json={"reward": 1.0, "call_rewards": {"12345678": 1.0}})
        await http.post(base(proxy, "cr4") + "/calls/0/reward", headers=ALPHA, json={"reward": 1})
        other_team = await http.post(base(proxy, "cr4") + "/calls/0/reward",
                                     headers={"Authorization": "Bearer key-beta"}, json={"reward": 1})
        no_key = await http.post(base(proxy, "cr4") + "/calls/0/reward", json={"reward": 1})
    assert not_json.status_code == 400 and "not valid JSON" in not_json.json()["error"]["message"]
    assert text_reward.status_code == 400 and "call_rewards" in text_reward.json()["error"]["message"]
    assert bad_call.status_code == 400 and "invalid call position" in bad_call.json()["error"]["message"]
    assert (other_team.status_code, no_key.status_code) == (403, 401)


async def test_with_several_workers_the_route_points_to_the_end(proxy_factory, stub):
    proxy = await proxy_factory([stub], workers=2)
    async with httpx.AsyncClient() as http:
        answer = await http.post(base(proxy, "cr5") + "/calls/0/reward", headers=ALPHA, json={"reward": 1})
    assert answer.status_code == 409 and "call_rewards" in answer.json()["error"]["message"]


def two_calls_rewarded(task, client):
    """An agent of `seamlessflow agent run`: two calls, the second with a call key, each rewarded in its info."""
    for turn in range(2):
        headers = {"X-Request-Id": "check"} if turn else {}
        client.chat.completions.create(model="stub-model", messages=[{"role": "user", "content": str(turn)}],
                                       max_tokens=2, extra_headers=headers)
    return 1.0, {"call_rewards": {0: 0.5, "check": -0.5}, "note": "kept"}


async def test_an_agent_worker_s_agent_rewards_its_calls_through_its_info(proxy, settings, codec):
    from seamlessflow.agents.episode import run_session
    from seamlessflow.agents.options import AgentOptions
    from seamlessflow.agents.proxy import ProxyClient
    from seamlessflow.testing.samples import SAMPLES

    task = next(m for m in SAMPLES if type(m).__name__ == "Task")
    root = proxy.base_url.removesuffix("/v1")
    ends = ProxyClient(root, "key-alpha")
    try:
        outcome = await asyncio.to_thread(run_session, two_calls_rewarded, task, "cr6", 0, "key-alpha",
                                          AgentOptions(proxy_url=root), ends, {})
        bad = await asyncio.to_thread(run_session, lambda t, c: (0.0, {"call_rewards": {0: float("nan")}}), task,
                                      "cr7", 0, "key-alpha", AgentOptions(proxy_url=root), ends, {})
    finally:
        ends.close()
    assert outcome.end_error is None and bad.end_error is None  # a bad reward costs the rewards, not the end
    events = await session_events(settings, codec, "cr6")
    calls = [e for e in events if isinstance(e, TokenIO)]
    (ended,) = [e for e in events if isinstance(e, EpisodeEnd)]
    assert ended.call_rewards == {"#0": 0.5, calls[1].call_id: -0.5}
    assert json.loads(ended.info_json) == {"note": "kept"}
    (bad_end,) = [e for e in await session_events(settings, codec, "cr7") if isinstance(e, EpisodeEnd)]
    assert bad_end.call_rewards == {} and "call_rewards_error" in json.loads(bad_end.info_json)
