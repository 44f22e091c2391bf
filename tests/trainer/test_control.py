import time

from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import ControlCommand
from seamlessflow.testing.poison import assert_dead_lettered, letters, produce_poison
from seamlessflow.topics import Topics
from seamlessflow.trainer.control import ControlListener, ControlState


def command(epoch, name="set_active", role=None):
    return ControlCommand(event_id=f"c{epoch}", resource_id="trainer-0", epoch=epoch, command=name, team="t",
                          run="r", created_at_ms=0, role=role)


def test_set_active_switches_role_and_acks_ok():
    state = ControlState("trainer-0", "t", "r", role="train")
    decision = state.decide(command(1, role="idle"))
    assert decision.role == "idle" and state.role == "idle"
    assert decision.ack.outcome == "ok" and decision.ack.command_id == "c1" and decision.ack.epoch == 1


def test_stale_epoch_is_ignored():
    state = ControlState("trainer-0", "t", "r", role="train")
    state.decide(command(5, role="idle"))
    decision = state.decide(command(4, role="train"))
    assert decision.role is None and state.role == "idle"
    assert decision.ack.outcome == "ignored_stale"


def test_rollout_role_and_pause_are_rejected_shutdown_accepted():
    state = ControlState("trainer-0", "t", "r", role="train")
    assert state.decide(command(1, role="rollout")).ack.outcome == "rejected"
    assert state.decide(command(2, name="pause")).ack.outcome == "rejected"
    assert state.role == "train"
    decision = state.decide(command(3, name="shutdown"))
    assert decision.shutdown and decision.ack.outcome == "ok"


def test_listener_dead_letters_poison_at_catch_up_and_live_and_still_gets_commands(settings, codec):
    topic = Topics(settings).control
    producer = MessageProducer(settings, codec)
    before = produce_poison(settings, codec, topic, command(1), key="trainer-0")
    producer.send_and_wait(topic, "trainer-0", command(1, role="idle"))
    listener = ControlListener(
        settings, codec, topic, "trainer-0", DeadLetters(settings, codec, "trainer", producer.send)
    )
    try:
        assert [c.epoch for c in listener.catch_up()] == [1]  # the history, poison left out
        after = produce_poison(settings, codec, topic, command(2), key="trainer-0")
        producer.send_and_wait(topic, "trainer-0", command(2, role="train"))
        got, deadline = [], time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = listener.poll()
            time.sleep(0.05)
        assert [c.epoch for c in got] == [2]
    finally:
        listener.close()
    producer.flush()
    found = letters(settings, codec, "trainer")
    assert_dead_lettered(found, before, topic)
    assert_dead_lettered(found, after, topic)
