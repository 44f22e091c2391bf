"""The proxy's control/status listener against the real broker: poison on either topic is dead-lettered,
and the records after it still act (a pause is acknowledged, an announced engine becomes routable)."""

from __future__ import annotations

import asyncio
import dataclasses

from seamlessflow.kafka.io import MessageProducer, read_topic
from seamlessflow.messages import CommandAck, ResourceStatus
from seamlessflow.testing.poison import assert_dead_lettered, letters, produce_poison
from seamlessflow.testing.proxy_harness import send_command, until
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics

STATUS = next(s for s in SAMPLES if isinstance(s, ResourceStatus))


async def test_poison_on_control_and_status_is_dead_lettered_and_the_next_records_act(
    proxy_factory, stub, settings, codec
):
    topics = Topics(settings)
    status = dataclasses.replace(
        STATUS, resource_id="gpu-9", engine_url="http://127.0.0.1:9", team="default", run=settings.run
    )
    proxy = await proxy_factory([stub])
    on_control = await asyncio.to_thread(
        produce_poison, settings, codec, topics.control, await _command(settings, codec), "proxy"
    )
    on_status = await asyncio.to_thread(produce_poison, settings, codec, topics.status, status, "gpu-9")
    await asyncio.to_thread(MessageProducer(settings, codec).send_and_wait, topics.status, "gpu-9", status)
    pause = await send_command(settings, codec, "pause", epoch=2)
    await until(lambda: any(e.id == "gpu-9" for e in proxy.server.engines), what="the announced engine")
    for _ in range(100):
        if await acks(settings, codec, pause.event_id):
            break
        await asyncio.sleep(0.1)
    assert [a.outcome for a in await acks(settings, codec, pause.event_id)] == ["ok"]
    found = await asyncio.to_thread(letters, settings, codec, "proxy:proxy")
    assert_dead_lettered(found, on_control, topics.control)
    assert_dead_lettered(found, on_status, topics.status)


async def acks(settings, codec, command_id):
    """Like helpers.acks, but past the poison this test wrote on the status topic."""
    records = await asyncio.to_thread(list, read_topic(settings, Topics(settings).status, codec))
    return [r.message for r in records if isinstance(r.message, CommandAck) and r.message.command_id == command_id]


async def _command(settings, codec):
    """A real command (epoch 1, addressed elsewhere) whose encoding the poison is made from."""
    return await send_command(settings, codec, "resume", resource_id="someone-else", epoch=1)
