"""A consumer-group member that hands out decoded records and commits only what its owner marked done.

Why a helper: a stateless worker pool (reward workers, and the shape agent pools share) needs the same
few moves every time: subscribe, decode with the dead-letter policy, remember each record's offset until
its work is finished (out of order), commit contiguously, pause while full, and drop the bookkeeping of
partitions the group moved away. Callers see message dataclasses and `(partition, offset)`, never a
confluent-kafka object. Built on the layer's `Subscriber` (decoding, the dead-letter policy) and its one
`OffsetTracker`.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from seamlessflow.config import Settings
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.offsets import OffsetTracker
from seamlessflow.kafka.reader import Record
from seamlessflow.kafka.subscriber import Subscriber

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
        self._buffered: deque[Record] = deque()
        self._subscriber = Subscriber(settings, dead_letters.codec, dead_letters, group_id=group)
        self._subscriber.subscribe(topic, on_assign=lambda _partitions: self._assigned.set(), on_revoke=self._revoke)

    def wait_assigned(self, timeout_s: float) -> bool:
        return self._assigned.wait(timeout_s)

    def poll(self, timeout_s: float) -> Delivery | None:
        """The next usable record (poison is dead-lettered and finished here), or None."""
        if not self._buffered:
            self._buffered.extend(self._subscriber.poll(timeout_s, max_records=1))
        while self._buffered:
            record = self._buffered.popleft()
            self._tracker.seen(record.partition, record.offset)
            if record.message is None:  # poison (now dead-lettered) or a tombstone: nothing to do
                self._tracker.finish(record.partition, record.offset)
                continue
            return Delivery(record.partition, record.offset, record.key, record.value or b"", record.message)
        return None

    def done(self, partition: int, offset: int) -> None:
        """The record's work is durable: its offset may be committed once those before it are too."""
        self._tracker.finish(partition, offset)

    def in_flight(self, partitions: set[int] | None = None) -> int:
        return self._tracker.in_flight(partitions)

    def commit(self) -> None:
        moved = self._tracker.moved()
        if moved and self._subscriber.commit(moved):
            self._tracker.committed(moved)

    def set_paused(self, paused: bool) -> None:
        """Stop fetching while the owner is full (membership stays alive through `poll`)."""
        self._subscriber.set_paused(paused)

    def close(self) -> None:
        self._subscriber.close()

    def _revoke(self, partitions: list[int]) -> None:
        revoked = set(partitions)
        if self._settle is not None:
            self._settle(revoked)
        try:
            self.commit()  # what finished is not redone by the next owner
        except Exception as exc:  # a commit during a rebalance may be refused; the next owner redoes the work
            log.warning("%s: commit on revoke: %s", self.group, exc)
        self._tracker.drop(revoked)
