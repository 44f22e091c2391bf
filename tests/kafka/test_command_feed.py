"""The command feed against the real broker: the history holds only the commands the protocol addresses
here (poison dead-lettered), live commands follow without one lost or repeated, commands for others are
left out, and another topic read alongside comes out of the same poll."""

from __future__ import annotations

import time

from seamlessflow.core.control import BROADCAST, Capabilities, CommandKind, ControlProtocol
from seamlessflow.kafka.command_feed import CommandFeed
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import ControlCommand, WeightVersion
from seamlessflow.testing.poison import assert_dead_lettered, letters, produce_poison
from seamlessflow.topics import Topics


def command(epoch: int, resource_id: str = "trainer-0") -> ControlCommand:
    return ControlCommand(event_id=f"c{epoch}", resource_id=resource_id, epoch=epoch, command="shutdown", team="t",
                          run="r", created_at_ms=0)


def version(number: int) -> WeightVersion:
    return WeightVersion(event_id=f"v{number}", version=number, uri="", step=number, format="hf-safetensors",
                         trainer_id="trainer-0", team="t", run="r", created_at_ms=0)


def test_history_then_live_commands_addressed_here_with_another_topic_alongside(settings, codec):
    topics = Topics(settings)
    protocol = ControlProtocol("trainer-0", Capabilities({CommandKind.SHUTDOWN: None}), "train")
    producer = MessageProducer(settings, codec)
    before = produce_poison(settings, codec, topics.control, command(1), key="trainer-0")
    for message in (command(1), command(2, "gpu-1"), command(3, BROADCAST)):
        producer.send_and_wait(topics.control, message.resource_id, message)
    producer.send_and_wait(topics.weights, "r", version(1))
    feed = CommandFeed(settings, codec, DeadLetters(settings, codec, "trainer", producer.send), topics.control,
                       protocol.addressed)
    try:
        assert [c.epoch for c in feed.history()] == [1, 3]  # gpu-1's left out, the broadcast kept, poison filed
        assert [v.version for v in feed.catch_up(topics.weights)] == [1]
        after = produce_poison(settings, codec, topics.control, command(4), key="trainer-0")
        for message in (command(4), command(5, "gpu-1")):
            producer.send_and_wait(topics.control, message.resource_id, message)
        producer.send_and_wait(topics.weights, "r", version(2))
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got += feed.poll(0.2)
    finally:
        feed.close()
    assert sorted(m.event_id for m in got) == ["c4", "v2"]
    producer.flush()
    found = letters(settings, codec, "trainer")
    assert_dead_lettered(found, before, topics.control)
    assert_dead_lettered(found, after, topics.control)
