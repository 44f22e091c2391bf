"""Which offsets may be committed: the lowest offset per partition whose record is not finished yet.

Groups complete out of order, so a record trained in step 5 may sit above one still waiting for its
group. Committing past the waiting record would lose it after a crash; so the commit point stops below
it, and the finished records above the commit point are remembered (by trajectory id) in the checkpoint
so a replay does not train them twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OffsetTracker:
    """Records seen per partition (offset -> trajectory id) and which of them are finished."""

    _pending: dict[int, dict[int, str]] = field(default_factory=dict)
    _finished: dict[int, dict[int, str]] = field(default_factory=dict)
    _next: dict[int, int] = field(default_factory=dict)  # one past the highest offset seen

    def seen(self, partition: int, offset: int, trajectory_id: str) -> None:
        self._pending.setdefault(partition, {})[offset] = trajectory_id
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def finish(self, partition: int, offset: int) -> None:
        trajectory_id = self._pending.get(partition, {}).pop(offset, None)
        if trajectory_id is not None:
            self._finished.setdefault(partition, {})[offset] = trajectory_id

    def commit_points(self) -> dict[int, int]:
        """Partition -> offset to commit (the next record a restart must read)."""
        points = {}
        for partition, end in self._next.items():
            pending = self._pending.get(partition)
            points[partition] = min(pending) if pending else end
        return points

    def finished_above_commit(self) -> list[str]:
        """Ids already trained or discarded that a restart from the commit points would read again."""
        points = self.commit_points()
        return [tid for p, done in self._finished.items() for off, tid in done.items() if off >= points[p]]

    def forget_below_commit(self) -> None:
        """Drop bookkeeping below the commit points (after they were committed)."""
        points = self.commit_points()
        for partition, done in self._finished.items():
            for offset in [o for o in done if o < points[partition]]:
                del done[offset]

    def drop_partition(self, partition: int) -> None:
        for book in (self._pending, self._finished, self._next):
            book.pop(partition, None)
