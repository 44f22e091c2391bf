"""A consumer-group member that hands out decoded records and commits only what its owner marked done.

Why a helper: a stateless worker pool (reward workers, and the shape agent pools share) needs the same
few moves every time: subscribe, decode with the dead-letter policy, remember each record's offset until
its work is finished (out of order), commit contiguously, pause while full, and drop the bookkeeping of
partitions the group moved away. Callers see message dataclasses and `(partition, offset)`, never a
confluent-kafka object.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from seamlessflow.agents.offsets import OffsetTracker
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.dead_letters import DeadLetters

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """One decoded record and where it was read (what `done` takes back)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    message: Any


class GroupMember:
    """One member of `group` on `topic`; not thread-safe: call it from one thread (the worker's loop)."""

    def __init__(self, settings: Settings, topic: str, group: str, dead_letters: DeadLetters,
                 settle: Callable[[set[int]], None] | None = None):
        """`settle(partitions)`: called (from `poll`) when partitions are about to move to another member,
        to finish and mark done what it can first; what it marks done is committed before they move."""
        self.topic, self.group, self.dead_letters = topic, group, dead_letters
        self._settle = settle
        self._tracker = OffsetTracker()
        self._assigned = threading.Event()
        self._paused = False
        self._consumer = Consumer(consumer_config(settings, group))
        self._consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def wait_assigned(self, timeout_s: float) -> bool:
        return self._assigned.wait(timeout_s)

    def poll(self, timeout_s: float) -> Delivery | None:
        """The next usable record (poison is dead-lettered and finished here), or None."""
        msg = self._consumer.poll(timeout_s)
        if msg is None:
            return None
        error = msg.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                log.warning("%s: %s", self.topic, error)
            return None
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None and offset is not None  # a consumed record always has both
        self._tracker.started(partition, offset)
        message = self.dead_letters.decode_message(msg)
        if message is None:
            self._tracker.done(partition, offset)
            return None
        return Delivery(partition, offset, msg.key(), msg.value() or b"", message)

    def done(self, partition: int, offset: int) -> None:
        """The record's work is durable: its offset may be committed once those before it are too."""
        self._tracker.done(partition, offset)

    def in_flight(self, partitions: set[int] | None = None) -> int:
        return self._tracker.in_flight(partitions)

    def commit(self) -> None:
        moved = self._tracker.committable()
        if moved:
            self._consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in moved.items()],
                                  asynchronous=False)

    def set_paused(self, paused: bool) -> None:
        """Stop fetching while the owner is full (membership stays alive through `poll`)."""
        if paused != self._paused:
            assignment = self._consumer.assignment()
            (self._consumer.pause if paused else self._consumer.resume)(assignment)
            self._paused = paused

    def close(self) -> None:
        self._consumer.close()

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._paused:
            consumer.pause(partitions)
        self._assigned.set()

    def _revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = {tp.partition for tp in partitions}
        if self._settle is not None:
            self._settle(revoked)
        try:
            self.commit()  # what finished is not redone by the next owner
        except Exception as exc:  # a commit during a rebalance may be refused; the next owner redoes the work
            log.warning("%s: commit on revoke: %s", self.group, exc)
        self._tracker.forget(revoked)
