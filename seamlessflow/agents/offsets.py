"""Which task offsets may be committed: only those below the first task that is not finished yet.

Why: tasks run concurrently and finish out of order, but a Kafka commit says "everything before this
offset is done". Committing past an unfinished task would lose it if this worker crashed, so a partition's
commit point only moves over a contiguous run of finished offsets.
"""

from __future__ import annotations


class OffsetTracker:
    """Per partition: offsets handed out in order, marked done in any order, committed contiguously."""

    def __init__(self) -> None:
        self._open: dict[int, dict[int, bool]] = {}  # partition -> {offset: done}, in arrival order
        self._next: dict[int, int] = {}  # partition -> offset to commit next (not committed yet)

    def started(self, partition: int, offset: int) -> None:
        self._open.setdefault(partition, {})[offset] = False

    def done(self, partition: int, offset: int) -> None:
        """Marks an offset finished; ignored when its partition was revoked meanwhile."""
        pending = self._open.get(partition)
        if pending is not None and offset in pending:
            pending[offset] = True

    def committable(self) -> dict[int, int]:
        """Partition -> offset to commit (next to read), for partitions whose commit point moved."""
        moved = {}
        for partition, pending in self._open.items():
            finished = []
            for offset, is_done in pending.items():
                if not is_done:
                    break
                finished.append(offset)
            for offset in finished:
                del pending[offset]
            if finished:
                self._next[partition] = finished[-1] + 1
                moved[partition] = finished[-1] + 1
        return moved

    def in_flight(self, partitions: set[int] | None = None) -> int:
        return sum(
            1 for p, pending in self._open.items() if partitions is None or p in partitions
            for is_done in pending.values() if not is_done
        )

    def forget(self, partitions: set[int]) -> None:
        """The partitions were revoked: their unfinished offsets belong to another worker now."""
        for partition in partitions:
            self._open.pop(partition, None)
            self._next.pop(partition, None)
