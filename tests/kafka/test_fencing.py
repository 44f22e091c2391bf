"""A role's writer against the real broker: a replacement fences the old one, whose open transaction is aborted
and whose later writes and offset commits the broker refuses; `read_committed` readers never see them, and are
not held back by what the old one left open. Process-level checks (SIGSTOP, SIGCONT) are in
tests/services/test_single_writers.py."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from seamlessflow.kafka import fencing
from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.fencing import WRITER_HEADER, Fenced, RoleWriter, bounded, transactional_id
from seamlessflow.kafka.group import GroupMember
from seamlessflow.kafka.io import MessageProducer, read_topic
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.messages import WeightVersion
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics

pytestmark = pytest.mark.timeout(120)


def version(n: int) -> WeightVersion:
    return WeightVersion(f"v{n}", n, f"file:///w/v{n}", n, "hf-safetensors", "trainer-0", "default", "default", 0)


def versions_on(settings, codec) -> list[int]:
    return [r.message.version for r in read_topic(settings, Topics(settings).weights, codec)]


def produce(settings, codec, count: int) -> str:
    topic = Topics(settings).trajectories
    producer = MessageProducer(settings, codec)
    for i in range(count):
        producer.send(topic, "one-group", dataclasses.replace(SAMPLES[2], event_id=f"tr-{i}"))
    producer.flush()
    return topic


def committed(settings, group: str, topic: str) -> dict[int, int]:
    marks = CommittedOffsets(settings, group, topic)
    try:
        return {p: o for p, o in marks.read([0]).items() if o}
    finally:
        marks.close()


def test_the_id_names_stack_team_run_and_role_and_readers_read_committed(settings):
    expected = f"{settings.topic_prefix}.default.default.trainer.trainer-0"
    assert transactional_id(settings, "trainer.trainer-0") == expected
    assert consumer_config(settings, "g")["isolation.level"] == "read_committed"


def test_a_replacement_fences_the_old_writer_and_aborts_what_it_left_open(settings, codec):
    weights = Topics(settings).weights
    old = RoleWriter(settings, codec, "trainer.trainer-0")
    old.deliver(weights, "default", version(1))
    old.send(weights, "default", version(2))
    old.poll(1.0)  # on the broker, in a transaction left open (the process froze here)
    MessageProducer(settings, codec).send_and_wait(weights, "default", version(3))  # a writer without a role
    assert versions_on(settings, codec) == [1]  # readers stop at the open transaction, version 3 too

    new = RoleWriter(settings, codec, "trainer.trainer-0")  # aborts version 2, fences `old`
    new.deliver(weights, "default", version(4))
    with pytest.raises(Fenced):
        old.send(weights, "default", version(5))
        old.commit()
    with pytest.raises(Fenced):
        old.commit()  # and it stays fenced

    assert versions_on(settings, codec) == [1, 3, 4]
    writers = {r.message.version: (r.headers or {}).get(WRITER_HEADER) for r in read_topic(settings, weights, codec)}
    assert writers[1] == writers[4] == new.writer.encode() and writers[3] is None


def test_offsets_commit_in_the_writers_transaction_and_a_fenced_one_moves_none(settings, codec):
    settings = settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:10]}", partitions={"trajectories": 1})
    ensure_topics(settings)
    topic = produce(settings, codec, 4)
    letters = DeadLetters(settings, codec, "test", MessageProducer(settings, codec).send)
    old = RoleWriter(settings, codec, "trainer.trainer-0")
    member = GroupMember(settings, topic, "g-role", letters, with_checkpoint=True, writer=old)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 4 and time.monotonic() < deadline:
        got += member.poll_many(0.2, 4 - len(got))
    for delivery in got[:2]:
        member.done(delivery.partition, delivery.offset)
    assert member.commit() == {got[0].partition: 2}
    assert committed(settings, "g-role", topic) == {got[0].partition: 2}

    RoleWriter(settings, codec, "trainer.trainer-0")  # the replacement
    for delivery in got[2:]:
        member.done(delivery.partition, delivery.offset)
    with pytest.raises(Fenced):
        member.commit()
    member.close()
    assert committed(settings, "g-role", topic) == {got[0].partition: 2}


def test_roles_of_other_runs_are_not_fenced(settings, codec):
    weights = Topics(settings).weights
    first = RoleWriter(settings, codec, "scheduler.scheduler")
    RoleWriter(settings.with_overrides(run="other"), codec, "scheduler.scheduler")
    first.deliver(weights, "default", version(1))
    assert versions_on(settings, codec) == [1]


class CommitTimingOut:
    """librdkafka's producer where a commit times out `times` times (the broker away) and goes on in the
    background; like librdkafka, it refuses an abort while that commit is unresolved (_CONFLICT)."""

    def __init__(self, times: int):
        self.times, self.commits, self.aborts = times, 0, 0

    def commit_transaction(self, timeout_s):
        self.commits += 1
        if self.commits <= self.times:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "1 message(s) remaining", retriable=True))

    def abort_transaction(self, timeout_s):
        self.aborts += 1
        raise KafkaException(KafkaError(KafkaError._CONFLICT, "Conflicting commit_transaction API call"))


@pytest.mark.parametrize("times", [3, 10**9])
def test_a_commit_that_times_out_is_resumed_never_aborted_and_one_that_never_ends_fences(settings, codec,
                                                                                        monkeypatch, times):
    """The trainer stuck after a broker kill: its commit timed out, the abort it tried was refused, and every
    later call too. Now the same commit is made again until it ends; one that never does is `Fenced` (the
    process is replaced), never a producer left stuck."""
    monkeypatch.setattr(fencing, "COMMIT_PATIENCE_S", 5.0 if times == 3 else 1.0)
    writer = RoleWriter(settings, codec, "trainer")
    producer = CommitTimingOut(times)
    writer._producer, writer._open = producer, True  # a transaction with records in it
    if times == 3:
        writer.commit(timeout_s=0.1)
        assert (producer.commits, producer.aborts, writer._open) == (4, 0, False)
        return
    for _ in range(2):
        with pytest.raises(Fenced, match="neither committed nor failed"):
            writer.commit(timeout_s=0.1)
    assert producer.aborts == 0


class OffsetsNeverSent:
    """librdkafka's producer right after the group coordinator's broker died: `send_offsets_to_transaction` blocks
    past its own timeout, for good (confluentinc/librdkafka#5456, #5511; reproduced on a 3-broker cluster by
    killing the group's coordinator just before a commit with offsets). Here until the test lets it go."""

    def __init__(self):
        self.release, self.calls = threading.Event(), 0

    def begin_transaction(self):
        pass

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout_s):
        self.calls += 1
        self.release.wait()


def test_offsets_sent_into_a_transaction_that_never_return_fence_the_writer_within_the_patience(settings, codec,
                                                                                              monkeypatch):
    """The trainer hung after a broker kill between publishing a version and naming its checkpoint (the test of
    tests/broker/test_cluster.py, 300 s and more): its checkpoint's offsets were sent to the new transaction while
    the group's coordinator was the broker just killed. Now the call is waited for up to the commit's patience;
    one that does not return fences the writer (the process is replaced), and every later call says so."""
    monkeypatch.setattr(fencing, "COMMIT_PATIENCE_S", 1.0)
    monkeypatch.setattr(fencing, "BOUNDED_GRACE_S", 0.5)
    writer = RoleWriter(settings, codec, "trainer")
    producer = OffsetsNeverSent()
    writer._producer = producer
    started = time.monotonic()
    try:
        with pytest.raises(Fenced, match="neither committed nor failed"):
            writer.commit(timeout_s=0.1, offsets=[TopicPartition("t", 0, 5)], group_metadata=object())
        assert time.monotonic() - started < 5  # the patience (1 s) and the grace, not for good
        with pytest.raises(Fenced):
            writer.commit(offsets=[TopicPartition("t", 0, 6)], group_metadata=object())
        assert producer.calls == 1  # the stuck producer is not called again
    finally:
        producer.release.set()
    assert bounded(lambda timeout_s: timeout_s * 2, 1.5, 0.1) == 3.0  # a call that returns: its value

    def refused(_timeout_s):
        raise KafkaException(KafkaError(KafkaError._FENCED))

    with pytest.raises(KafkaException):  # and one that raises: its error, in the caller's thread
        bounded(refused, 1.0, 0.1)
