"""The engine fence through its HTTP routes (driven by the weights package's `ProxyFence`, as the trainer
drives it): a hold cuts the engine's calls and keeps their tokens with the old version, a release labels
what follows with the new one; calls wait for a held engine instead of failing."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from seamlessflow.loadtest.stub_engine import StubEngine, token_at
from seamlessflow.messages import ResourceStatus, new_id, now_ms
from seamlessflow.ports import free_port
from seamlessflow.testing.proxy_harness import client, session_events, until
from seamlessflow.weights.fence import FenceError, ProxyFence


async def test_a_hold_cuts_the_engines_calls_and_the_release_labels_the_tokens_after_it(proxy, stub, settings, codec):
    stub.behaviour.hold_after_tokens = 2
    fence = ProxyFence(lambda: [proxy.server.fence_url])
    cut = asyncio.create_task(client(proxy, "f1").completions.create(model="m", prompt=[5, 6], max_tokens=5))
    await until(lambda: stub.tokens_sent == 2, what="two tokens generated")
    await asyncio.to_thread(fence.hold, stub.url)
    assert not proxy.server.gate.active  # nothing reads from the held engine any more
    queued = asyncio.create_task(client(proxy, "f2").completions.create(model="m", prompt=[7], max_tokens=1))
    await asyncio.sleep(0.3)
    assert not cut.done() and not queued.done()  # both wait for the engine; neither fails
    stub.behaviour.hold_after_tokens = None
    stub.behaviour.release.set()
    await asyncio.to_thread(fence.release, stub.url, 7)
    await cut
    await queued

    [first] = await session_events(settings, codec, "f1")
    assert first.completion_ids == [token_at(2 + k) for k in range(5)]
    assert first.versions == [0, 0, 7, 7, 7]  # split exactly where the hold cut the stream
    [second] = await session_events(settings, codec, "f2")
    assert second.versions == [7]
    [continuation] = [body for kind, body in stub.requests if kind == "completions" and body["prompt"][0] == 5
                      and len(body["prompt"]) > 2]
    assert continuation["prompt"] == [5, 6, token_at(2), token_at(3)] and continuation["max_tokens"] == 3
    fence.close()


async def test_the_fence_skips_a_proxy_that_is_down_and_fails_on_one_that_refuses(proxy, stub):
    fence = ProxyFence(lambda: [f"http://127.0.0.1:{free_port()}", proxy.server.fence_url])
    await asyncio.to_thread(fence.hold, stub.url)
    assert not proxy.server.engines.pick("s")  # the live proxy holds it
    with pytest.raises(FenceError):
        await asyncio.to_thread(fence.release, stub.url, -1)
    await asyncio.to_thread(fence.release, stub.url, 2)
    assert proxy.server.engines.pick("s").version == 2
    fence.close()


async def test_the_heartbeat_names_the_fence_and_several_workers_each_serve_it_on_a_port_of_their_own(
        proxy_factory, stub):
    alone = await proxy_factory([stub])
    assert alone._status().engine_url == alone.server.fence_url != f"http://127.0.0.1:{alone.server.port}"
    async with httpx.AsyncClient() as client:  # the agents' port has no fence: an agent cannot hold an engine
        refused = await client.post(f"http://127.0.0.1:{alone.server.port}/engines/hold", json={"url": stub.url})
    assert refused.status_code == 404 and alone.server.engines.pick("s") is not None
    shared = await proxy_factory([stub], workers=2)
    assert shared.server.fence_port != shared.server.port
    assert shared._status().engine_url == shared.server.fence_url
    fence = ProxyFence(lambda: [shared.server.fence_url])
    await asyncio.to_thread(fence.hold, stub.url)
    assert shared.server.engines.pick("s") is None and alone.server.engines.pick("s") is not None
    fence.close()


async def test_a_retired_engine_moves_its_calls_to_another_at_once_and_its_last_heartbeat_ends_the_hold(
        proxy_factory, settings, codec):
    """What a scale-down's rollout worker does before it stops its engine (`RolloutWorker.retire`): the hold
    cuts the call streaming from it, which continues on the other engine at once, token for token; the
    worker's last heartbeat (stopped) ends the hold, and the engine is never routed to again."""
    leaving, staying = await StubEngine().start(), await StubEngine().start()
    fence = ProxyFence(lambda: [proxy.server.fence_url])
    try:
        proxy = await proxy_factory([leaving, staying])
        session = next(s for s in (f"r{i}" for i in range(64)) if proxy.server.engines.pick(s).url == leaving.url)
        leaving.behaviour.hold_after_tokens = 2
        call = asyncio.create_task(client(proxy, session).completions.create(model="m", prompt=[5, 6], max_tokens=5))
        await until(lambda: leaving.tokens_sent == 2, what="two tokens from the engine that leaves")
        await asyncio.to_thread(fence.hold, leaving.url)
        await asyncio.wait_for(call, 10)  # no release: it finished on the other engine
        [event] = await session_events(settings, codec, session)
        assert event.completion_ids == [token_at(2 + k) for k in range(5)]
        stopped = ResourceStatus(new_id(), "rollout-9", "rollout", ["rollout"], "rollout", "stopped", 0, {},
                                 "default", settings.run, now_ms(), leaving.url, 0, [])
        proxy.commands.on_message(stopped)
        assert not proxy.server.engines.any_held
        assert {proxy.server.engines.pick(f"r{i}").url for i in range(64)} == {staying.url}
    finally:
        leaving.behaviour.release.set()
        fence.close()
        await leaving.stop()
        await staying.stop()

