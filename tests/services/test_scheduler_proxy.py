"""The scheduler and the real proxy (in-process, in front of the proxy's StubEngine) agree on the weight
update: proxy pause acknowledged -> engine loads (fake rollout resource) -> proxy resumed with the version."""

import asyncio

import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import CommandAck, ControlCommand
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.testing.in_process import ServiceThread
from seamlessflow.testing.scheduler_fakes import FakeResource, publish_weights, wait_until
from seamlessflow.topics import Topics

pytestmark = pytest.mark.timeout(180)


async def test_real_proxy_is_paused_around_engine_loads_and_labels_the_new_version(settings, codec, proxy):
    await proxy.wait_listening()
    engine = FakeResource(settings, codec, "r0", ["rollout"])
    engine.heartbeat()
    options = SchedulerOptions(policy="disaggregated", tick_s=0.2, min_dwell_s=0)
    running = ServiceThread(SchedulerService(settings, options, ManagerOptions(enabled=False), codec))
    try:
        await asyncio.to_thread(wait_until, lambda: proxy.options.id in running.service.view.proxies, [engine])
        publish_weights(settings, codec, 1)
        await asyncio.to_thread(wait_until, lambda: engine.weight_version == 1 and running.service.proxy_sync.update
                                is None and running.service.proxy_sync.labelled_version == 1, [engine])
        await asyncio.to_thread(wait_until, lambda: all(e.version == 1 for e in proxy.server.engines), [engine])
    finally:
        running.close()
        engine.close()
    commands = [(c.resource_id, c.command) for c in read_messages(settings, Topics(settings).control, codec)
                if isinstance(c, ControlCommand)]
    pid = proxy.options.id
    assert commands == [(pid, "pause"), ("r0", "pause"), ("r0", "load_weights"), ("r0", "resume"), (pid, "resume")]
    acks = [(a.command, a.outcome) for a in read_messages(settings, Topics(settings).status, codec)
            if isinstance(a, CommandAck) and a.resource_id == pid]
    assert acks == [("pause", "ok"), ("resume", "ok")]
