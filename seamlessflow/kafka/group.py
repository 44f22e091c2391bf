"""A consumer-group member that hands out decoded records and commits only below what its owner finished.

Why one member: every group reader here (agent pools, reward pools, the trainer) makes the same few moves:
subscribe, decode with the dead-letter policy, remember each record's offset until its work is finished (out
of order), commit contiguously below the first unfinished record, pause while full, and drop the bookkeeping
of partitions the group moved away. Callers see message dataclasses and `(partition, offset)`, never a
confluent-kafka object. Built on the layer's `Subscriber` (decoding, the dead-letter policy) and its one
`OffsetTracker`.

Two commit rules, one bookkeeping:
- **as done** (worker pools): the owner commits as work finishes; before partitions move to another member it
  finishes what it can (`Settling`, bounded) and commits, so the next owner does not redo it.
- **with checkpoint** (the trainer): a trained record is durable only once a checkpoint holds the step, so
  offsets move only when the owner commits next to its checkpoint (all commit points, and the ids finished
  above them go into the checkpoint); a revoke commits nothing and only drops the bookkeeping.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from seamlessflow.config import Settings
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.offsets import OffsetTracker
from seamlessflow.kafka.subscriber import Subscriber

if TYPE_CHECKING:
    from seamlessflow.kafka.fencing import RoleWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """One decoded record and where it was read (what `done` takes back)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    message: Any
    headers: dict[str, bytes] = field(default_factory=dict)


def _never() -> bool:
    return False


@dataclass(frozen=True)
class Settling:
    """How a worker pool finishes its in-flight work before letting partitions go: `drain(wait_s)` takes in
    what finished meanwhile (and marks it `done`); waiting ends after `grace_s`, or early once `give_up()`."""

    drain: Callable[[float], object]
    grace_s: float
    give_up: Callable[[], bool] = _never


class GroupMember:
    """One member of `group` on `topic`; not thread-safe: call it from one thread (the owner's loop).

    `settling`: the as-done rule's finishing step (None: commit what is done, wait for nothing).
    `with_checkpoint`: the checkpoint rule (see the module). `on_revoke(partitions)`: the owner's own
    clean-up, called after the member let the partitions go. `start_offsets`: where reading starts on a
    partition's first assignment (a checkpoint may be ahead of the group's commit). `writer`: the owner's
    role writer (`fencing`), whose transactions then carry the commits: a fenced owner moves no offset."""

    def __init__(self, settings: Settings, topic: str, group: str, dead_letters: DeadLetters,
                 settling: Settling | None = None, on_revoke: Callable[[set[int]], None] | None = None, *,
                 with_checkpoint: bool = False, start_offsets: dict[int, int] | None = None,
                 errors: Literal["log", "raise"] = "log", consumer: dict[str, Any] | None = None,
                 writer: RoleWriter | None = None):
        self.topic, self.group, self.dead_letters = topic, group, dead_letters
        self.settled = 0  # records finished while settling (before partitions moved, or at close)
        self._settling, self._on_revoke, self._with_checkpoint = settling, on_revoke, with_checkpoint
        self._tracker = OffsetTracker()
        self._writer = writer
        self._assigned = threading.Event()
        self._closing = False
        self._subscriber = Subscriber(settings, dead_letters.codec, dead_letters, group_id=group, errors=errors,
                                      config=consumer)
        self._subscriber.subscribe(topic, start_offsets, on_assign=lambda _partitions: self._assigned.set(),
                                   on_revoke=self._revoke)

    def wait_assigned(self, timeout_s: float) -> bool:
        return self._assigned.wait(timeout_s)

    def poll(self, timeout_s: float) -> Delivery | None:
        """The next usable record, or None."""
        deliveries = self.poll_many(timeout_s, 1)
        return deliveries[0] if deliveries else None

    def poll_many(self, timeout_s: float, max_records: int) -> list[Delivery]:
        """The usable records that arrived; poison (dead-lettered by the subscriber) and tombstones are
        finished here, so they never hold a commit back."""
        out = []
        for record in self._subscriber.poll(timeout_s, max_records):
            self._tracker.seen(record.partition, record.offset, getattr(record.message, "event_id", ""))
            if record.message is None:
                self._tracker.finish(record.partition, record.offset)
                continue
            out.append(Delivery(record.partition, record.offset, record.key, record.value or b"", record.message,
                                record.headers or {}))
        return out

    def done(self, partition: int, offset: int) -> None:
        """The record's work is durable: its offset may be committed once those before it are too."""
        self._tracker.finish(partition, offset)

    def in_flight(self, partitions: set[int] | None = None) -> int:
        return self._tracker.in_flight(partitions)

    def commit_points(self) -> dict[int, int]:
        """Partition -> the next offset a restart must read (what a checkpoint stores)."""
        return self._tracker.commit_points()

    def finished_above_commit(self) -> list[str]:
        """Event ids finished above the commit points: a restart reads them again and must skip them."""
        return self._tracker.finished_above_commit()

    def commit(self) -> dict[int, int]:
        """Commits synchronously (as done: the points that moved; with checkpoint: every point) and returns
        them; {} when the group refused the commit for now (a later commit covers these offsets)."""
        points = self._tracker.commit_points() if self._with_checkpoint else self._tracker.moved()
        if not points or not self._subscriber.commit(points, writer=self._writer):
            return {}
        self._tracker.committed(points)
        return points

    def settle(self, partitions: set[int] | None = None) -> int:
        """Finishes in-flight work of `partitions` (all: None) within the grace, then commits what is done;
        returns how many records finished meanwhile."""
        before = self.in_flight(partitions)
        if self._settling is not None:
            deadline = time.monotonic() + self._settling.grace_s
            while self.in_flight(partitions) and time.monotonic() < deadline and not self._settling.give_up():
                self._settling.drain(0.1)
        finished = before - self.in_flight(partitions)
        self.settled += finished
        self._commit_quietly()
        return finished

    def set_paused(self, paused: bool) -> None:
        """Stop fetching while the owner is full (membership stays alive through `poll`)."""
        self._subscriber.set_paused(paused)

    def close(self) -> None:
        """Leaves the group without waiting for work (settle first where that is wanted): what is not
        committed goes to another member."""
        self._closing = True
        self._subscriber.close()

    def _revoke(self, partitions: list[int]) -> None:
        revoked = set(partitions)
        if self._with_checkpoint:
            pass  # offsets move only with a checkpoint: the next owner reads from the last one
        elif self._settling is not None and not self._closing:
            self.settle(revoked)
        else:
            self._commit_quietly()
        self._tracker.drop(revoked)
        if self._on_revoke is not None:
            self._on_revoke(revoked)

    def _commit_quietly(self) -> None:
        try:
            self.commit()  # what finished is not redone by the next owner
        except Exception as exc:  # a commit during a rebalance may be refused; the next owner redoes the work
            log.warning("%s: commit while settling: %s", self.group, exc)
