"""The rollout worker's control loop against the real broker, with an engine that never runs (a stand-in):
poison on the control topic is dead-lettered and the next command is still handled and acknowledged."""

from __future__ import annotations

import time

from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import CommandAck
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.service import RolloutService
from seamlessflow.topics import Topics
from tests.poison import assert_dead_lettered, letters, produce_poison
from tests.rollout.test_worker import command, make_worker


def test_poison_commands_are_dead_lettered_and_the_next_one_is_acknowledged(settings, codec, tmp_path):
    options = RolloutOptions(workers={"r0": {"capability_tags": ["rollout", "train"], "active_tag": "train"}})
    service = RolloutService(settings, "r0", codec, options)
    service.worker = make_worker(tmp_path)
    topic = Topics(settings).control
    values = produce_poison(settings, codec, topic, command(1, "set_active", role="train"), key="r0")
    good = command(1, "set_active", role="train")
    MessageProducer(settings, codec).send_and_wait(topic, "r0", good)
    control = service._control_subscriber()
    control.follow(topic)  # no history: every record is live
    try:
        commands, deadline = [], time.monotonic() + 30
        while not commands and time.monotonic() < deadline:
            commands = service._commands(control, 0.2)  # the poison before it is dead-lettered on the way
        for c in commands:
            service._handle(c)
    finally:
        control.close()
    service.producer.flush()
    [ack] = [m for m in read_messages(settings, Topics(settings).status, codec) if isinstance(m, CommandAck)]
    assert (ack.command_id, ack.outcome) == (good.event_id, "ok")
    assert_dead_lettered(letters(settings, codec, "rollout:r0"), values, topic)
