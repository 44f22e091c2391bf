"""The trajectories topic as a consumer group whose commits follow training, never precede it.

At-least-once by construction: offsets are committed only to the tracker's commit points, which stop
below any record not yet trained or discarded. The checkpoint carries the same points, and on the first
assignment the consumer seeks there (the checkpoint is saved before the commit, so it may be ahead).
"""

from __future__ import annotations

from dataclasses import dataclass

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.offsets import OffsetTracker
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import Trajectory


@dataclass
class Incoming:
    """One trajectory and where it was read."""

    partition: int
    offset: int
    trajectory: Trajectory


class TrajectorySource:
    def __init__(self, settings: Settings, codec: Codec, topic: str, group_id: str, dead_letters: DeadLetters,
                 start_offsets: dict[int, int] | None = None):
        self.topic = topic
        self.codec = codec
        self.dead_letters = dead_letters  # poison is filed there and finished at once: never trained, never blocking
        self.tracker = OffsetTracker()
        self.revoked = False  # set when partitions were taken away: the caller rebuilds its buffers
        self._subscriber = Subscriber(settings, codec, dead_letters, group_id=group_id, errors="raise")
        self._subscriber.subscribe(topic, start_offsets, on_revoke=self._on_revoke)

    def _on_revoke(self, partitions: list[int]) -> None:
        self.tracker.drop(partitions)
        self.revoked = True

    def poll(self, timeout_s: float, max_records: int = 256) -> list[Incoming]:
        out = []
        for record in self._subscriber.poll(timeout_s, max_records):
            trajectory = record.message
            self.tracker.seen(record.partition, record.offset, trajectory.event_id if trajectory else "")
            if trajectory is None:
                self.tracker.finish(record.partition, record.offset)
            else:
                out.append(Incoming(record.partition, record.offset, trajectory))
        return out

    def commit(self) -> dict[int, int]:
        """Commits the tracker's commit points synchronously; returns them ({} when the group refused the
        commit for now: the checkpoint saved just before carries the same points, and the next commit covers them)."""
        points = self.tracker.commit_points()
        if points and not self._subscriber.commit(points):
            return {}
        if points:
            self.tracker.committed(points)
        return points

    def set_paused(self, paused: bool) -> None:
        """Stops fetching while idle (the group membership stays alive through polls)."""
        self._subscriber.set_paused(paused)

    def close(self) -> None:
        self._subscriber.close()
