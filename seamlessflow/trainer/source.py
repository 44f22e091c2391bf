"""The trajectories topic as the trainer reads it: the layer's group member under its checkpoint rule.

At-least-once by construction: offsets are committed only to the commit points, which stop below any record
not yet trained or discarded, and only next to a checkpoint (`GroupMember`'s "with checkpoint" rule). The
checkpoint carries the same points, and on the first assignment the member seeks there (the checkpoint is
saved before the commit, so it may be ahead). What this adds: trajectories typed as such, and a flag the
loop reads to rebuild its buffers after partitions moved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.group import GroupMember
from seamlessflow.messages import Trajectory

if TYPE_CHECKING:
    from seamlessflow.kafka.fencing import RoleWriter


@dataclass
class Incoming:
    """One trajectory and where it was read."""

    partition: int
    offset: int
    trajectory: Trajectory


class TrajectorySource:
    def __init__(self, settings: Settings, codec: Codec, topic: str, group_id: str, dead_letters: DeadLetters,
                 start_offsets: dict[int, int] | None = None, fetch_queue_mib: float | None = None,
                 writer: RoleWriter | None = None):
        """`fetch_queue_mib`: librdkafka's prefetch bound (`trainer.fetch_queue_mib`); None keeps its default.
        `writer`: the trainer's role writer, whose transactions carry the commits (a fenced trainer moves none)."""
        self.topic = topic
        self.codec = codec
        self.dead_letters = dead_letters  # poison is filed there and finished at once: never trained, never blocking
        self.revoked = False  # set when partitions were taken away: the caller rebuilds its buffers
        self.reading = False  # it fetches (`set_reading`)
        self.read_up = False  # it fetched, waited and found nothing new: every record so far has been read
        self._member = GroupMember(settings, topic, group_id, dead_letters, on_revoke=self._on_revoke,
                                   with_checkpoint=True, start_offsets=start_offsets, errors="raise",
                                   consumer={} if fetch_queue_mib is None else
                                   {"queued.max.messages.kbytes": max(1, int(fetch_queue_mib * 1024))},
                                   writer=writer)

    def _on_revoke(self, _partitions: set[int]) -> None:
        self.revoked = True

    def poll(self, timeout_s: float, max_records: int = 256) -> list[Incoming]:
        """The records that arrived within `timeout_s`; a wait that found nothing while reading sets `read_up`
        (the trainer's heartbeat says so: the scheduler trues up its backlog estimate with it)."""
        records = [Incoming(d.partition, d.offset, d.message) for d in self._member.poll_many(timeout_s, max_records)]
        if timeout_s:
            self.read_up = self.reading and not records
        return records

    def done(self, partition: int, offset: int) -> None:
        """Trained or discarded: the offset may be committed with the next checkpoint."""
        self._member.done(partition, offset)

    def commit_points(self) -> dict[int, int]:
        return self._member.commit_points()

    def finished_above_commit(self) -> list[str]:
        return self._member.finished_above_commit()

    def commit(self) -> dict[int, int]:
        """Commits the commit points synchronously; returns them ({} when the group refused the commit for
        now: the checkpoint saved just before carries the same points, and the next commit covers them)."""
        return self._member.commit()

    def set_reading(self, reading: bool) -> None:
        """Fetches only while `reading`; paused, the group membership stays alive through polls, and records it
        does not fetch may be waiting (so it is not `read_up`)."""
        self.reading = reading
        self.read_up = self.read_up and reading
        self._member.set_paused(not reading)

    def close(self) -> None:
        self._member.close()
