"""The subscriber: live records decoded, poison dead-lettered once with its reason, reading goes on."""

import dataclasses
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.group import GroupMember
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.offsets import OffsetTracker
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.testing.poison import assert_dead_lettered, letters, produce_poison, produce_raw
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics

COMMAND, TASK = SAMPLES[4], SAMPLES[3]


def _poll_until(subscriber: Subscriber, count: int, timeout_s: float = 20.0) -> list:
    records, deadline = [], time.monotonic() + timeout_s
    while len(records) < count and time.monotonic() < deadline:
        records += subscriber.poll(0.2)
    return records


def _commands(n: int, start: int = 0) -> list:
    return [dataclasses.replace(COMMAND, event_id=f"cmd-{i}", epoch=i) for i in range(start, start + n)]


def test_catch_up_returns_history_and_live_reading_continues_after_it(settings, codec):
    topic = Topics(settings).control
    producer = MessageProducer(settings, codec)
    history, live = _commands(3), _commands(2, start=3)
    for command in history:
        producer.send(topic, command.resource_id, command)
    producer.flush()
    subscriber = Subscriber(settings, codec, DeadLetters(settings, codec, "test", producer.send))
    try:
        assert subscriber.catch_up(topic) == history
        for command in live:
            producer.send(topic, command.resource_id, command)
        producer.flush()
        assert [r.message for r in _poll_until(subscriber, 2)] == live  # none of the history again
    finally:
        subscriber.close()


def test_poison_is_dead_lettered_with_its_reason_and_reading_goes_on(settings, codec):
    topic = Topics(settings).control
    producer = MessageProducer(settings, codec)
    values = produce_poison(settings, codec, topic, COMMAND)
    producer.send_bytes(topic, "gone", None)  # a tombstone: skipped, no letter
    producer.send(topic, COMMAND.resource_id, COMMAND)
    producer.send(topic, "misplaced", SAMPLES[7])  # a WeightVersion on the control topic
    producer.flush()
    subscriber = Subscriber(settings, codec, DeadLetters(settings, codec, "sub-test", producer.send))
    subscriber.follow(topic)
    try:
        records = _poll_until(subscriber, 6)
    finally:
        subscriber.close()
    producer.flush()
    assert [r.message for r in records] == [None, None, None, None, COMMAND, None]
    found = letters(settings, codec, "sub-test")
    assert_dead_lettered(found, values, topic)
    assert len(found) == 4 and any("unexpected WeightVersion" in d.reason for d in found)


def test_a_viewer_without_dead_letters_files_nothing(settings, codec):
    topic = Topics(settings).control
    produce_raw(settings, topic, b"\x07junk")
    subscriber = Subscriber(settings, codec, None)
    subscriber.follow(topic)
    try:
        [record] = _poll_until(subscriber, 1)
    finally:
        subscriber.close()
    assert record.message is None and record.error
    assert letters(settings, codec, "reader") == []


def test_a_group_member_resumes_after_its_commit(settings, codec):
    """Commit only what is finished; the next member of the group starts at that point."""
    topic = Topics(settings).trajectories
    producer = MessageProducer(settings, codec)
    trajectories = [dataclasses.replace(SAMPLES[2], event_id=f"tr-{i}") for i in range(6)]
    for t in trajectories:
        producer.send(topic, "one-group", t)  # one key: one partition, in order
    producer.flush()
    dead_letters = DeadLetters(settings, codec, "test", producer.send)
    first = Subscriber(settings, codec, dead_letters, group_id=f"{settings.topic_prefix}.g")
    first.subscribe(topic)
    tracker = OffsetTracker()
    try:
        records = _poll_until(first, 6)
        for r in records:
            tracker.seen(r.partition, r.offset, r.message.event_id)
        for r in records[:4]:
            tracker.finish(r.partition, r.offset)
        first.commit(tracker.moved())
    finally:
        first.close()
    second = Subscriber(settings, codec, dead_letters, group_id=f"{settings.topic_prefix}.g")
    second.subscribe(topic)
    try:
        again = _poll_until(second, 2)
    finally:
        second.close()
    assert [r.message for r in again] == trajectories[4:]


def test_start_offsets_override_the_group_commit_on_first_assignment(settings, codec):
    topic = Topics(settings).trajectories
    producer = MessageProducer(settings, codec)
    trajectories = [dataclasses.replace(SAMPLES[2], event_id=f"tr-{i}") for i in range(4)]
    for t in trajectories:
        producer.send(topic, "one-group", t)
    producer.flush()
    subscriber = Subscriber(settings, codec, None, group_id=f"{settings.topic_prefix}.h")
    assigned: list[int] = []
    probe = next(r for r in _read_all(settings, codec, topic))
    subscriber.subscribe(topic, start_offsets={probe.partition: probe.offset + 3}, on_assign=assigned.extend)
    try:
        got = _poll_until(subscriber, 1)
    finally:
        subscriber.close()
    assert [r.message for r in got] == trajectories[3:] and sorted(assigned) == [0, 1]


def _read_all(settings, codec, topic):
    from seamlessflow.kafka.reader import read_topic

    return list(read_topic(settings, topic, codec))


def test_a_partition_paused_when_it_moved_away_is_read_when_it_comes_back(settings, codec):
    """A member pauses while full; the group moves its partitions; it drains and unpauses before the new
    assignment arrives. librdkafka keeps a partition's pause flag across unassign and assign, so unless the
    subscriber sets it again on assignment, the partition it gets back stays paused and its records wait
    forever (a reward worker stuck with 3 of 12 trajectories this way)."""
    topic, group = Topics(settings).trajectories, f"{settings.topic_prefix}.p"
    owned: set[int] = set()
    revoked: list[int] = []
    full = Subscriber(settings, codec, None, group_id=group)
    full.subscribe(
        topic, on_assign=owned.update, on_revoke=lambda ps: (owned.difference_update(ps), revoked.extend(ps))
    )
    other = Subscriber(settings, codec, None, group_id=group)
    try:
        deadline = time.monotonic() + 20
        while len(owned) < 2:
            assert time.monotonic() < deadline, "never assigned"
            full.poll(0.1)
        full.set_paused(True)
        other.subscribe(topic)
        while not revoked:  # the join of `other` takes both partitions away (eager rebalance)
            assert time.monotonic() < deadline, "never revoked"
            other.poll(0.05)
            full.poll(0)
        assert not owned  # between the revoke and the next assignment
        full.set_paused(False)
        producer = MessageProducer(settings, codec)
        trajectories = [dataclasses.replace(SAMPLES[2], event_id=f"tr-{i}", group_id=f"g-{i}") for i in range(8)]
        for t in trajectories:
            producer.send(topic, t.group_id, t)  # spread over both partitions
        producer.flush()
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < len(trajectories) and time.monotonic() < deadline:
            got += [r.message.event_id for r in full.poll(0.1) + other.poll(0.1)]
    finally:
        full.close()
        other.close()
    assert sorted(got) == sorted(t.event_id for t in trajectories)


class _RefusingConsumer:
    """The real consumer, but its commits answer what a restarted broker answered a member it forgot (seen
    in a chaos run: the trainer died on it at its next checkpoint)."""

    def __init__(self, consumer, code):
        self._consumer, self._code, self.refused = consumer, code, 0

    def commit(self, *args, **kwargs):
        self.refused += 1
        raise KafkaException(KafkaError(self._code, "Commit failed: Broker: Unknown member"))

    def __getattr__(self, name):
        return getattr(self._consumer, name)


def test_a_commit_the_group_refuses_for_now_is_reported_not_raised_and_other_errors_raise(settings, codec):
    subscriber = Subscriber(settings, codec, None, group_id=f"{settings.topic_prefix}.refused")
    subscriber.subscribe(Topics(settings).trajectories)
    real = subscriber._consumer
    try:
        for code in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
                     KafkaError._TRANSPORT):
            subscriber._consumer = _RefusingConsumer(real, code)
            assert subscriber.commit({0: 3}) is False
        subscriber._consumer = _RefusingConsumer(real, KafkaError.TOPIC_AUTHORIZATION_FAILED)
        with pytest.raises(KafkaException):
            subscriber.commit({0: 3})
        subscriber._consumer = real
        assert subscriber.commit({}) is True
    finally:
        subscriber._consumer = real
        subscriber.close()


def test_a_group_member_keeps_refused_offsets_and_commits_them_next_time(settings, codec):
    topic = Topics(settings).trajectories
    producer = MessageProducer(settings, codec)
    for i in range(3):
        producer.send(topic, "one-group", dataclasses.replace(SAMPLES[2], event_id=f"tr-{i}"))
    producer.flush()
    member = GroupMember(
        settings, topic, f"{settings.topic_prefix}.gm", DeadLetters(settings, codec, "test", producer.send)
    )
    real = member._subscriber._consumer
    try:
        deadline, deliveries = time.monotonic() + 20, []
        while len(deliveries) < 3 and time.monotonic() < deadline:
            delivery = member.poll(0.2)
            if delivery is not None:
                deliveries.append(delivery)
        for d in deliveries:
            member.done(d.partition, d.offset)
        member._subscriber._consumer = _RefusingConsumer(real, KafkaError.UNKNOWN_MEMBER_ID)
        member.commit()
        assert member._tracker.moved(), "refused offsets stay to be committed"
        member._subscriber._consumer = real
        member.commit()
        assert not member._tracker.moved()
    finally:
        member._subscriber._consumer = real
        member.close()
