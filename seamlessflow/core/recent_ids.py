"""A set that remembers only the newest ids: de-duplication for a stream that runs for days.

The trainer skips a trajectory it has already taken and a sample of a group it already closed. Remembering
every id ever seen grows without end (about 120 bytes an id: a trainer taking 200 trajectories a second
gains 2 GB a day). A duplicate can only come close behind its original: an assembler that crashed publishes
again what it published since its last commit (seconds of records), and a restarted trainer re-reads only
what lies above its checkpoint's offsets (whose finished ids the checkpoint carries). So a window of the
newest `capacity` ids is as good as all of them, and its memory is bounded.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator


class RecentIds:
    """The newest `capacity` ids added (adding one again makes it newest); the oldest fall out."""

    def __init__(self, capacity: int, ids: Iterable[str] = ()) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()
        for id_ in ids:
            self.add(id_)

    def add(self, id_: str) -> None:
        self._ids[id_] = None
        self._ids.move_to_end(id_)
        if len(self._ids) > self.capacity:
            self._ids.popitem(last=False)

    def discard(self, id_: str) -> None:
        self._ids.pop(id_, None)

    def __contains__(self, id_: object) -> bool:
        return id_ in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)
