"""The rollout worker's control loop against the real broker, with an engine that never runs (a stand-in):
poison on the control topic is dead-lettered and the next command is still handled and acknowledged."""

from __future__ import annotations

import time

from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import CommandAck
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.service import RolloutService
from seamlessflow.testing.poison import assert_dead_lettered, letters, produce_poison
from seamlessflow.testing.rollout_fakes import command, make_worker
from seamlessflow.topics import Topics


def test_poison_commands_are_dead_lettered_and_the_next_one_is_acknowledged(settings, codec, tmp_path):
    options = RolloutOptions(workers={"r0": {"capability_tags": ["rollout", "train"], "active_tag": "train"}})
    service = RolloutService(settings, "r0", codec, options)
    service.worker = make_worker(tmp_path)
    topic = Topics(settings).control
    values = produce_poison(settings, codec, topic, command(1, "set_active", role="train"), key="r0")
    good = command(1, "set_active", role="train")
    MessageProducer(settings, codec).send_and_wait(topic, "r0", good)
    control = service._command_feed()
    control.follow(topic)  # no history: every record is live
    try:
        commands, deadline = [], time.monotonic() + 30
        while not commands and time.monotonic() < deadline:
            commands = control.commands(0.2)  # the poison before it is dead-lettered on the way
        service._on_messages(list(commands))
    finally:
        control.close()
    service.producer.flush()
    [ack] = [m for m in read_messages(settings, Topics(settings).status, codec) if isinstance(m, CommandAck)]
    assert (ack.command_id, ack.outcome) == (good.event_id, "ok")
    assert_dead_lettered(letters(settings, codec, "rollout:r0"), values, topic)


def test_history_is_restored_once_and_later_commands_follow_live(settings, codec, tmp_path):
    """Commands on the topic before the service starts are history: the newest is carried out once, after the
    worker starts; commands written later are handled live, each acknowledged exactly once."""
    import threading

    options = RolloutOptions(workers={"r0": {"capability_tags": ["rollout", "train"], "active_tag": "train"}})
    service = RolloutService(settings, "r0", codec, options)
    service.worker = make_worker(tmp_path)
    (service.worker.weights_dir / "config.json").write_text("{}")  # a model is there: nothing to build
    topic = Topics(settings).control
    producer = MessageProducer(settings, codec)
    old, newest = command(1, "set_active", role="train"), command(2, "set_active", role="idle")
    for c in (old, newest):
        producer.send_and_wait(topic, "r0", c)
    stop = threading.Event()
    runner = threading.Thread(target=service.run, args=(stop,), daemon=True)
    runner.start()
    try:
        live, shutdown = command(3, "set_active", role="train"), command(4, "shutdown")
        deadline = time.monotonic() + 30
        while service.worker.active_tag != "idle" and time.monotonic() < deadline:
            time.sleep(0.05)
        for c in (live, shutdown):
            producer.send_and_wait(topic, "r0", c)
        runner.join(timeout=30)
        assert not runner.is_alive()
    finally:
        stop.set()
    acks = [m for m in read_messages(settings, Topics(settings).status, codec) if isinstance(m, CommandAck)]
    assert [(a.command_id, a.outcome) for a in acks] == [(newest.event_id, "ok"), (live.event_id, "ok"),
                                                        (shutdown.event_id, "ok")]
