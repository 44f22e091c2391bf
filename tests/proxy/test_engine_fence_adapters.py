"""The engine fence for LoRA adapters' versions (no engine: the stub): a release that names an adapter labels that
adapter's calls on the engine and leaves the base's label (and the other adapters') alone; heartbeats only raise
an adapter's label; a malformed adapter is refused."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from seamlessflow.messages import ResourceStatus, new_id, now_ms
from seamlessflow.model.lora import version_figures, versions_in
from seamlessflow.proxy.routing import EngineTable
from seamlessflow.testing.proxy_harness import client, session_events
from seamlessflow.weights.fence import NoFence, ProxyFence

TEAMS = {"alpha": {"lora": {"name": "alpha-lora", "path": "/adapters/alpha", "rank": 8}}}  # beta: the base


def test_an_adapter_release_sets_that_adapters_version_only_and_ends_the_hold():
    engines = EngineTable()
    engine = engines.add("r0", "http://r0:8000/v1", version=4)
    assert engine.version_of(None) == 4 and engine.version_of("red") == 0  # no adapter version yet: 0
    engines.hold("http://r0:8000")
    assert engine.held and not engine.routable
    assert engines.release("http://r0:8000/", 2, adapter="red") is engine
    assert not engine.held and engine.routable  # an adapter swap holds and releases the whole engine
    assert (engine.version_of(None), engine.version_of("red"), engine.version_of("blue")) == (4, 2, 0)
    engines.release("http://r0:8000", 5)  # a base release leaves the adapters alone
    assert (engine.version, engine.adapter_versions) == (5, {"red": 2})
    engines.release("http://r0:8000", 1, adapter="red")  # exact, even lower (an engine restarted on older files)
    assert engine.version_of("red") == 1
    assert engines.release("http://unknown:1", 1, adapter="red") is None


def test_heartbeats_only_raise_an_adapters_version():
    engines = EngineTable()
    engine = engines.announce("r0", "http://r0:8000", True, 0, adapter_versions={"red": 3})
    engines.announce("r0", "http://r0:8000", True, 0, adapter_versions={"red": 2, "blue": 1})  # a late heartbeat
    assert engine.adapter_versions == {"red": 3, "blue": 1}
    engines.announce("r0", "http://r0:8000", True, 1)  # a sender without adapters: nothing changes
    assert (engine.version, engine.adapter_versions) == (1, {"red": 3, "blue": 1})


def test_the_heartbeat_figures_carry_the_adapters_versions():
    figures = {"engine_up": 1.0, **version_figures({"red": 3, "blue-lora": 0})}
    assert versions_in(figures) == {"red": 3, "blue-lora": 0}
    assert versions_in({"engine_up": 1.0, "adapter_version:": 2.0}) == {}
    NoFence().release("http://r0:8000", 1, adapter="red")  # the protocol's other implementer takes it too


async def test_a_release_naming_an_adapter_labels_that_teams_calls_and_not_the_bases(proxy_factory, stub, settings,
                                                                                      codec):
    proxy = await proxy_factory([stub], teams=TEAMS)
    fence = ProxyFence(lambda: [proxy.server.fence_url])
    try:
        await asyncio.to_thread(fence.hold, stub.url)
        await asyncio.to_thread(fence.release, stub.url, 3, adapter="alpha-lora")
        await client(proxy, "a1").completions.create(model="m", prompt=[5], max_tokens=2)
        await client(proxy, "b1", key="key-beta").completions.create(model="m", prompt=[5], max_tokens=2)
        [engine] = list(proxy.server.engines)
        assert (engine.version, engine.adapter_versions) == (0, {"alpha-lora": 3})
        [adapter_call] = await session_events(settings, codec, "a1")
        [base_call] = await session_events(settings, codec, "b1")
        assert (adapter_call.adapter, adapter_call.versions) == ("alpha-lora", [3, 3])
        assert (base_call.adapter, base_call.versions) == (None, [0, 0])

        await asyncio.to_thread(fence.hold, stub.url)
        await asyncio.to_thread(fence.release, stub.url, 1)  # a base version: the adapter's label stays
        await client(proxy, "a2").completions.create(model="m", prompt=[6], max_tokens=1)
        await client(proxy, "b2", key="key-beta").completions.create(model="m", prompt=[6], max_tokens=1)
        assert (await session_events(settings, codec, "a2"))[0].versions == [3]
        assert (await session_events(settings, codec, "b2"))[0].versions == [1]

        status = ResourceStatus(new_id(), "rollout-0", "rollout", ["rollout"], "rollout", "active", 1,
                                {"engine_up": 1.0, **version_figures({"alpha-lora": 4})}, "default", "default",
                                now_ms(), stub.url)
        proxy.commands.on_message(status)  # a heartbeat that says a newer adapter version raises the label
        assert engine.adapter_versions == {"alpha-lora": 4}
        async with httpx.AsyncClient() as http:
            health = (await http.get(proxy.base_url.removesuffix("/v1") + "/healthz")).json()
        assert health["engines"][0]["adapter_versions"] == {"alpha-lora": 4}
    finally:
        fence.close()


@pytest.mark.parametrize("adapter", [5, "", ["alpha-lora"], True])
async def test_a_release_with_a_malformed_adapter_is_refused(proxy, stub, adapter):
    async with httpx.AsyncClient() as http:
        await http.post(proxy.server.fence_url + "/engines/hold", json={"url": stub.url})
        refused = await http.post(proxy.server.fence_url + "/engines/release",
                                  json={"url": stub.url, "version": 2, "adapter": adapter})
        assert refused.status_code == 400
        assert "adapter" in refused.text
        [engine] = list(proxy.server.engines)
        assert engine.held and engine.adapter_versions == {} and engine.version == 0  # nothing changed
        released = await http.post(proxy.server.fence_url + "/engines/release",
                                   json={"url": stub.url, "version": 2, "adapter": None})  # null: the base
        assert released.status_code == 200 and engine.version == 2 and not engine.held
