"""Pause/resume through the control topic: in-flight calls are cut, kept, and continued with new versions."""

from __future__ import annotations

import asyncio

from seamlessflow.loadtest.stub_engine import token_at
from seamlessflow.messages import new_id, now_ms
from seamlessflow.testing.proxy_harness import acks, client, send_command, session_events, until


async def test_cut_call_continues_after_resume_with_two_versions(proxy, stub, settings, codec):
    stub.behaviour.hold_after_tokens = 2
    agent = client(proxy, "pr1")

    async def call():
        stream = await agent.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "ab"}], max_tokens=5, stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    task = asyncio.create_task(call())
    await until(lambda: stub.tokens_sent == 2, what="two tokens generated")
    pause = await send_command(settings, codec, "pause", mode="keep", epoch=1)
    await until(lambda: proxy.server.gate.paused and not proxy.server.gate.active, what="the call to be cut")
    stub.behaviour.hold_after_tokens = None
    stub.behaviour.release.set()
    queued = asyncio.create_task(
        agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "c"}], max_tokens=1)
    )
    await asyncio.sleep(0.2)
    assert not task.done() and not queued.done()  # nothing dispatched while paused
    resume = await send_command(settings, codec, "resume", weight_version=3, epoch=2)
    text = await task
    await queued

    expected = [token_at(2 + k) for k in range(5)]
    assert text == "".join(f"t{t} " for t in expected)  # one seamless answer
    first = next(e for e in await session_events(settings, codec, "pr1") if e.prompt_ids == [97, 98])
    assert first.completion_ids == expected
    assert first.versions == [0, 0, 3, 3, 3]
    [continuation] = [body for kind, body in stub.requests if kind == "completions"]
    assert continuation["prompt"] == [97, 98, token_at(2), token_at(3)] and continuation["max_tokens"] == 3
    assert [a.outcome for a in await acks(settings, codec, pause.event_id)] == ["ok"]
    assert [a.outcome for a in await acks(settings, codec, resume.event_id)] == ["ok"]


async def test_non_streaming_and_n_choices_survive_a_pause(proxy, stub, settings, codec):
    stub.behaviour.hold_after_tokens = 1
    task = asyncio.create_task(client(proxy, "pr2").completions.create(model="m", prompt=[5, 6], max_tokens=3, n=2))
    await until(lambda: stub.tokens_sent == 2, what="first token of both choices")
    await send_command(settings, codec, "pause", epoch=1)
    await until(lambda: proxy.server.gate.paused and not proxy.server.gate.active, what="the call to be cut")
    stub.behaviour.hold_after_tokens = None
    stub.behaviour.release.set()
    await send_command(settings, codec, "resume", weight_version=1, epoch=2)
    reply = await task
    assert [c.text for c in reply.choices] == ["".join(f"t{token_at(2 + k)} " for k in range(3))] * 2
    events = await session_events(settings, codec, "pr2")
    assert sorted(e.choice_index for e in events) == [0, 1]
    assert all(e.versions == [0, 1, 1] and e.completion_ids == [token_at(2), token_at(3), token_at(4)] for e in events)


async def test_stale_and_foreign_commands_are_not_applied(proxy, settings, codec):
    await send_command(settings, codec, "resume", epoch=5)
    stale = await send_command(settings, codec, "pause", epoch=4)
    foreign = await send_command(settings, codec, "pause", resource_id="rollout-0", epoch=9)
    await until(lambda: proxy.commands.last_epoch == 5, what="resume applied")
    await asyncio.sleep(0.3)
    assert not proxy.server.gate.paused
    assert [a.outcome for a in await acks(settings, codec, stale.event_id)] == ["ignored_stale"]
    later = await send_command(settings, codec, "resume", epoch=6)  # commands are read in order: once this
    assert [a.outcome for a in await acks(settings, codec, later.event_id)] == ["ok"]  # is acked, the foreign
    assert await acks(settings, codec, foreign.event_id, wait_s=0) == []  # one had its turn and got none


async def test_calls_on_an_engine_switched_to_train_move_to_another_engine(proxy_factory, settings, codec):
    """Preemption: the scheduler switches a {rollout, train} resource to train while a call generates on it;
    the call continues on the remaining engine, and the agent gets one whole answer."""
    from seamlessflow.kafka.io import MessageProducer
    from seamlessflow.loadtest.stub_engine import StubEngine
    from seamlessflow.messages import ResourceStatus
    from seamlessflow.topics import Topics

    flexible, steady = await StubEngine().start(), await StubEngine().start()
    producer = MessageProducer(settings, codec)

    async def announce(resource_id, engine, role):
        status = ResourceStatus(new_id(), resource_id, "rollout", ["rollout", "train"], role, "active", 0, {},
                                "default", settings.run, now_ms(), engine_url=engine.url)
        await asyncio.to_thread(producer.send_and_wait, Topics(settings).status, resource_id, status)

    try:
        proxy = await proxy_factory([])
        await announce("flexible", flexible, "rollout")
        await until(lambda: proxy.server.engines.routable_count == 1, what="one engine routable")
        flexible.behaviour.hold_after_tokens = 2
        task = asyncio.create_task(client(proxy, "moved").completions.create(model="m", prompt=[5, 6], max_tokens=4))
        await until(lambda: flexible.tokens_sent == 2, what="two tokens on the flexible engine")
        await announce("steady", steady, "rollout")
        await announce("flexible", flexible, "train")
        reply = await task
        assert reply.choices[0].text == "".join(f"t{token_at(2 + k)} " for k in range(4))
        [event] = await session_events(settings, codec, "moved")
        assert event.completion_ids == [token_at(2 + k) for k in range(4)]
        [continuation] = [body for kind, body in steady.requests if kind == "completions"]
        assert continuation["prompt"] == [5, 6, token_at(2), token_at(3)] and continuation["max_tokens"] == 2
    finally:
        flexible.behaviour.release.set()
        await flexible.stop()
        await steady.stop()
