"""Which offsets a consumer may commit: per partition, the lowest offset whose record is not finished yet.

Why: records finish out of order (an agent's tasks run concurrently; a trajectory trained in step 5 may sit
above one still waiting for its group), but a Kafka commit says "everything before this offset is done".
Committing past an unfinished record would lose it after a crash, so a partition's commit point stops
below it; the finished records above the point are remembered (by id) so a restart that reads them again
can skip them (the trainer keeps them in its checkpoint). A revoked partition is forgotten: its records
belong to another consumer now, and a late `finish` for it is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable


class OffsetTracker:
    """Records seen per partition (offset -> record id) and which of them are finished."""

    def __init__(self) -> None:
        self._pending: dict[int, dict[int, str]] = {}
        self._finished: dict[int, dict[int, str]] = {}
        self._next: dict[int, int] = {}  # one past the highest offset seen
        self._committed: dict[int, int] = {}  # the last point committed (or where reading began)

    def seen(self, partition: int, offset: int, record_id: str = "") -> None:
        self._pending.setdefault(partition, {})[offset] = record_id
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)
        self._committed.setdefault(partition, offset)  # reading began here: nothing to commit below it

    def finish(self, partition: int, offset: int) -> None:
        """Marks a seen record finished (trained, discarded, done); unknown or revoked offsets are ignored."""
        record_id = self._pending.get(partition, {}).pop(offset, None)
        if record_id is not None:
            self._finished.setdefault(partition, {})[offset] = record_id

    def commit_points(self) -> dict[int, int]:
        """Partition -> offset to commit (the next record a restart must read), for every partition seen."""
        return {p: min(pending) if (pending := self._pending.get(p)) else end for p, end in self._next.items()}

    def moved(self) -> dict[int, int]:
        """The commit points that moved since the last `committed` (nothing to send for the others)."""
        return {p: point for p, point in self.commit_points().items() if point != self._committed.get(p)}

    def committed(self, points: dict[int, int]) -> None:
        """The points were committed: bookkeeping below them is dropped."""
        for partition, point in points.items():
            if partition not in self._next:
                continue  # revoked meanwhile
            self._committed[partition] = point
            done = self._finished.get(partition, {})
            for offset in [o for o in done if o < point]:
                del done[offset]

    def finished_above_commit(self) -> list[str]:
        """Ids already finished that a restart from the commit points would read again."""
        points = self.commit_points()
        return [rid for p, done in self._finished.items() for off, rid in done.items() if off >= points[p]]

    def in_flight(self, partitions: set[int] | None = None) -> int:
        """Records seen and not finished (in the given partitions, or all)."""
        return sum(len(pending) for p, pending in self._pending.items() if partitions is None or p in partitions)

    def drop(self, partitions: Iterable[int]) -> None:
        """The partitions were revoked: their records belong to another consumer now."""
        for partition in partitions:
            for book in (self._pending, self._finished, self._next, self._committed):
                book.pop(partition, None)
