"""Hardware-aware routing through the proxy, with StubEngines (fakes, not engines) tagged differently.

Sessions land on the engines their profile asks for (declared by header, or learnt from their calls),
stay there, and move only when those engines are unreachable: first to another fitting engine, then, when
none is left, to any healthy one.
"""

from __future__ import annotations

import asyncio

import openai
import pytest

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.loadtest.stub_engine import StubEngine
from seamlessflow.messages import ResourceStatus, new_id, now_ms
from seamlessflow.testing.proxy_harness import call, engines_of, session_events, until
from seamlessflow.topics import Topics

TAGS = {"c0": ["compute", "h100"], "c1": ["compute", "h100"], "b0": ["bandwidth", "h20"], "b1": ["bandwidth", "h20"]}


@pytest.fixture
async def tagged_stubs():
    stubs = {name: await StubEngine().start() for name in TAGS}
    yield stubs
    for stub in stubs.values():
        await stub.stop()


async def test_declared_profiles_land_on_fitting_engines_and_move_only_when_those_fail(
    proxy_factory, tagged_stubs, settings, codec
):
    engines = [{"id": name, "url": stub.url, "hardware_tags": TAGS[name]} for name, stub in tagged_stubs.items()]
    proxy = await proxy_factory(engines)
    prefill, decode = [f"p{i}" for i in range(6)], [f"d{i}" for i in range(6)]
    for _ in range(2):
        for s in prefill:
            await call(proxy, s, "prefill")
        for s in decode:
            await call(proxy, s, "decode")
    before = await engines_of(settings, codec, prefill + decode)
    home = {s: e[0] for s, e in before.items()}
    assert all(len(set(e)) == 1 for e in before.values())  # sticky
    assert {home[s] for s in prefill} == {"c0", "c1"} and {home[s] for s in decode} == {"b0", "b1"}
    old_events = await session_events(settings, codec)

    await tagged_stubs["b0"].stop()  # one bandwidth engine fails: only its sessions move, to the other one
    for s in prefill + decode:
        await call(proxy, s, "prefill" if s in prefill else "decode")
    after_one = await engines_of(settings, codec, prefill + decode, skip=old_events)
    assert all(after_one[s] == [home[s]] for s in prefill)
    assert all(after_one[s] == ["b1"] for s in decode)
    old_events = await session_events(settings, codec)

    await tagged_stubs["b1"].stop()  # no fitting engine left: failover to any healthy (compute) engine
    for s in decode:
        await call(proxy, s, "decode")
    after_both = await engines_of(settings, codec, decode, skip=old_events)
    assert {e for engines in after_both.values() for e in engines} <= {"c0", "c1"}
    assert all(len(e) == 1 for e in after_both.values())


async def test_undeclared_sessions_are_routed_by_the_profile_learnt_from_their_first_call(
    proxy_factory, tagged_stubs, settings, codec
):
    engines = [{"id": name, "url": stub.url, "hardware_tags": TAGS[name]} for name, stub in tagged_stubs.items()]
    proxy = await proxy_factory(engines, routing={"min_tokens": 200})
    long_prompt, long_answer = [f"lp{i}" for i in range(6)], [f"la{i}" for i in range(6)]
    for _ in range(3):
        for s in long_prompt:
            await call(proxy, s, content="x" * 600, max_tokens=2)  # fed 600 >> 4 x 2 generated: prefill
        for s in long_answer:
            await call(proxy, s, content="q", max_tokens=250)  # fed 1, 250 generated: decode
    served = await engines_of(settings, codec, long_prompt + long_answer)
    assert all(set(served[s][1:]) <= {"c0", "c1"} for s in long_prompt)  # from the second call on
    assert all(set(served[s][1:]) <= {"b0", "b1"} for s in long_answer)
    assert all(len(set(served[s][1:])) == 1 for s in served)  # and sticky once learnt
    assert proxy.server.sessions.get("lp0").learner.profile == "prefill"


async def test_hardware_tags_announced_on_heartbeats_steer_routing(proxy_factory, tagged_stubs, settings, codec):
    producer = MessageProducer(settings, codec)
    for name in ("c0", "b0"):
        status = ResourceStatus(new_id(), name, "rollout", ["rollout"], "rollout", "active", 0, {"engine_up": 1.0},
                                "default", settings.run, now_ms(), tagged_stubs[name].url, 0, TAGS[name])
        await asyncio.to_thread(producer.send_and_wait, Topics(settings).status, name, status)
    proxy = await proxy_factory([])
    await until(lambda: proxy.server.engines.routable_count == 2, what="both engines announced")
    assert {e.id: sorted(e.hardware_tags) for e in proxy.server.engines} == {
        "c0": ["compute", "h100"],
        "b0": ["bandwidth", "h20"],
    }
    sessions = [f"h{i}" for i in range(8)]
    for s in sessions:
        await call(proxy, s, "decode")
    assert {e for engines in (await engines_of(settings, codec, sessions)).values() for e in engines} == {"b0"}


async def test_an_unknown_declared_profile_is_a_400(proxy_factory, tagged_stubs):
    proxy = await proxy_factory([tagged_stubs["c0"]])
    with pytest.raises(openai.BadRequestError, match="unknown session profile"):
        await call(proxy, "x1", "turbo")
