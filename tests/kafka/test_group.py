"""The one group member's two commit rules against the real broker. As done (worker pools): what finished
is committed on the way out of the group, never past an unfinished record, and the settle hands in what
finishes within the grace. With checkpoint (the trainer): leaving commits nothing; only the owner's commit
moves the offsets, to every commit point, and the ids finished above them are the checkpoint's."""

from __future__ import annotations

import dataclasses
import time

from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.group import Delivery, GroupMember, Settling
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics

TRAJECTORY = SAMPLES[2]


def produce(settings, codec, count: int) -> str:
    topic = Topics(settings).trajectories
    producer = MessageProducer(settings, codec)
    for i in range(count):
        producer.send(topic, "one-group", dataclasses.replace(TRAJECTORY, event_id=f"tr-{i}"))
    producer.flush()
    return topic


def take(member: GroupMember, count: int) -> list[Delivery]:
    got: list[Delivery] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        got += member.poll_many(0.2, count - len(got))
    assert len(got) == count
    return got


def committed(settings, group: str, topic: str) -> dict[int, int]:
    marks = CommittedOffsets(settings, group, topic)
    try:
        return {
            p: o for p, o in marks.read(list(range(Topics(settings).specs["trajectories"].partitions))).items() if o
        }
    finally:
        marks.close()


def test_as_done_settles_within_the_grace_and_commits_below_the_first_unfinished(settings, codec):
    topic = produce(settings, codec, 4)
    letters = DeadLetters(settings, codec, "test", MessageProducer(settings, codec).send)
    finishing: list[Delivery] = []

    def drain(_wait_s: float) -> None:
        while finishing:
            delivery = finishing.pop()
            member.done(delivery.partition, delivery.offset)

    member = GroupMember(settings, topic, "g-done", letters, Settling(drain, 2.0))
    got = take(member, 4)
    member.done(got[0].partition, got[0].offset)
    member.done(got[3].partition, got[3].offset)  # finished above the unfinished two
    finishing.append(got[1])  # finishes while settling; got[2] never does
    assert member.settle() == 1 and member.settled == 1
    member.close()
    partition = got[0].partition
    assert committed(settings, "g-done", topic) == {partition: got[2].offset}


def test_with_checkpoint_only_the_owner_commits_and_leaving_commits_nothing(settings, codec):
    topic = produce(settings, codec, 3)
    letters = DeadLetters(settings, codec, "test", MessageProducer(settings, codec).send)
    member = GroupMember(settings, topic, "g-ckpt", letters, with_checkpoint=True)
    got = take(member, 3)
    for d in (got[0], got[2]):
        member.done(d.partition, d.offset)
    points = member.commit_points()
    assert points == {got[0].partition: got[1].offset} and member.finished_above_commit() == ["tr-2"]
    assert member.commit() == points
    member.done(got[1].partition, got[1].offset)  # trained after the checkpoint: not committed by leaving
    member.close()
    assert committed(settings, "g-ckpt", topic) == points
