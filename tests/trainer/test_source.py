"""The trainer's trajectory source against the real broker: poison is dead-lettered and finished, the next
trajectory still comes out, the commit point moves past the poison; and every wire form reads alike."""

from __future__ import annotations

import dataclasses
import time

from seamlessflow.avro import Codec
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import Trajectory
from seamlessflow.testing.poison import assert_dead_lettered, letters, produce_poison
from seamlessflow.testing.samples import SAMPLES, encode_before_packing
from seamlessflow.topics import Topics
from seamlessflow.trainer.source import TrajectorySource

TRAJECTORY = next(s for s in SAMPLES if isinstance(s, Trajectory))


def test_poison_trajectories_are_dead_lettered_and_the_next_one_is_read(settings, codec):
    topic = Topics(settings).trajectories
    producer = MessageProducer(settings, codec)
    values = produce_poison(settings, codec, topic, TRAJECTORY, key="g1")
    producer.send_and_wait(topic, "g1", TRAJECTORY)
    source = TrajectorySource(
        settings, codec, topic, "trainer-test", DeadLetters(settings, codec, "trainer", producer.send)
    )
    try:
        got, deadline = [], time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = source.poll(0.5)
        assert [item.trajectory for item in got] == [TRAJECTORY]
        partition, offset = got[0].partition, got[0].offset
        assert source.commit_points() == {partition: offset}  # the three poison records are finished
    finally:
        source.close()
    producer.flush()
    assert_dead_lettered(letters(settings, codec, "trainer"), values, topic)


def test_packed_array_and_pre_packing_trajectories_read_alike(settings, codec):
    topic = Topics(settings).trajectories
    forms = [Codec().encode(dataclasses.replace(TRAJECTORY, event_id="s1/0"), topic),
             Codec(packed=False).encode(dataclasses.replace(TRAJECTORY, event_id="s1/1"), topic),
             encode_before_packing(dataclasses.replace(TRAJECTORY, event_id="s1/2"))]
    producer = MessageProducer(settings, codec)
    for value in forms:
        producer.send_bytes(topic, b"g1", value)
    producer.flush(30)
    letters_out = MessageProducer(settings, codec)
    source = TrajectorySource(
        settings, codec, topic, "trainer-test", DeadLetters(settings, codec, "trainer", letters_out.send)
    )
    try:
        got, deadline = [], time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += source.poll(1.0)
    finally:
        source.close()
    assert [i.trajectory for i in got] == [dataclasses.replace(TRAJECTORY, event_id=f"s1/{n}") for n in range(3)]


def test_a_reader_that_waited_and_found_nothing_has_read_up_and_a_paused_one_has_not(settings, codec):
    """`read_up` lets the scheduler true up its backlog estimate: only a wait that fetched and found nothing new."""
    topic = Topics(settings).trajectories
    producer = MessageProducer(settings, codec)
    producer.send_and_wait(topic, "g1", TRAJECTORY)
    source = TrajectorySource(settings, codec, topic, "trainer-read-up",
                              DeadLetters(settings, codec, "trainer", producer.send))
    try:
        source.set_reading(True)
        got, deadline = [], time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = source.poll(0.5)
        assert got and not source.read_up  # it found a record: more may follow
        assert source.poll(0.0) == [] and not source.read_up  # no wait, no verdict
        assert source.poll(0.5) == [] and source.read_up
        source.set_reading(False)
        assert not source.read_up
        producer.send_and_wait(topic, "g1", dataclasses.replace(TRAJECTORY, event_id="later"))
        assert source.poll(0.5) == [] and not source.read_up  # paused: the new record waits unread
    finally:
        source.close()
