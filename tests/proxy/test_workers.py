"""Two proxy workers on one port (SO_REUSEPORT): whichever serves a call, a session keeps its engine.

In one test process (two ProxyService instances, each with its own socket on the shared port, as the
worker processes have): the kernel spreads connections over the sockets the same way.
"""

import aiohttp

from seamlessflow.loadtest.stub_engine import StubEngine
from seamlessflow.messages import EpisodeEnd, TokenIO
from seamlessflow.testing.proxy_harness import session_events


def calls_served(service) -> float:
    return sum(s.value for m in service.server.metrics.requests.collect() for s in m.samples
               if s.name.endswith("_total") and s.labels.get("code") == "200")


async def test_sessions_keep_their_engine_whichever_worker_serves_and_any_worker_takes_the_end(proxy_factory, settings,
                                                                                               codec):
    engines = [await StubEngine().start() for _ in range(3)]
    try:
        first = await proxy_factory(engines, workers=2)
        second = await proxy_factory(engines, workers=2, port=first.server.port)
        assert second.server.port == first.server.port
        sessions = [f"w{i}" for i in range(24)]
        auth = {"Authorization": "Bearer key-alpha"}
        for turn in range(3):
            for sid in sessions:  # a fresh connection per call, so the kernel picks a socket each time
                async with aiohttp.ClientSession() as http:
                    body = {"model": "m", "messages": [{"role": "user", "content": f"{sid} turn {turn}"}]}
                    async with http.post(f"{first.session_url(sid)}/chat/completions", json=body, headers=auth) as r:
                        assert r.status == 200, await r.text()
        for sid in sessions:
            async with aiohttp.ClientSession() as http:
                async with http.post(f"{first.server.base_url[:-3]}/sessions/{sid}/end", json={"reward": 1.0},
                                     headers=auth) as r:
                    assert r.status == 200, await r.text()
        served = [calls_served(first), calls_served(second)]
        events = await session_events(settings, codec)
    finally:
        for engine in engines:
            await engine.stop()
    assert all(served) and sum(served) == len(sessions) * 4  # both workers served calls and ends
    engine_of: dict[str, set[str]] = {}
    for event in events:
        if isinstance(event, TokenIO):
            engine_of.setdefault(event.session_id, set()).add(event.engine_id)
    assert all(len(engine_of[sid]) == 1 for sid in sessions)  # sticky across workers
    assert len({e for ids in engine_of.values() for e in ids}) == 3  # and sessions spread over the engines
    ends = [e for e in events if isinstance(e, EpisodeEnd)]
    assert sorted(e.session_id for e in ends) == sorted(sessions)
    assert {e.num_calls for e in ends} == {-1}  # no worker knows every call of a session: count unknown
