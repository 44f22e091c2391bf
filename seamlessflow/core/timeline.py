"""Role timelines as numbers: intervals of what each resource did, and the bubble ratio.

Kinds: `rollout` and `train` are useful work; `switch` (changing role) and `sync` (loading weights) are
overhead; `wait-data`, `wait-load` and `held` are a resource with nothing to do, and why (`core.accounting`
names every kind and counts each device once); `failed` is a dead resource. The bubble ratio is idle
resource-time over total resource-time, where everything that is not useful work counts as idle (the
overheads, the waits, and gaps nobody recorded); `failed` time is excluded from both sides.

Why in the core: the simulator (`seamlessflow.sim`) and the real runs' timeline (`seamlessflow.scheduler.
timeline`, from recorded statuses) measure with the same arithmetic; drawing is `seamlessflow.sim.timeline_plot`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BUSY_KINDS = frozenset({"rollout", "train"})


@dataclass(frozen=True)
class Interval:
    resource_id: str
    start: float
    end: float
    kind: str

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)


def span(intervals: Iterable[Interval]) -> tuple[float, float]:
    items = list(intervals)
    if not items:
        return 0.0, 0.0
    return min(i.start for i in items), max(i.end for i in items)


def time_by_kind(intervals: Iterable[Interval]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for interval in intervals:
        totals[interval.kind] += interval.duration
    return dict(totals)


def bubble_ratio(intervals: Sequence[Interval], resource_ids: Iterable[str] | None = None) -> float:
    """Idle resource-time / total resource-time over the recorded span (0.0 when nothing recorded)."""
    ids = set(resource_ids) if resource_ids is not None else {i.resource_id for i in intervals}
    start, end = span(intervals)
    by_kind = time_by_kind(intervals)
    total = len(ids) * (end - start) - by_kind.get("failed", 0.0)
    if total <= 0:
        return 0.0
    busy = sum(by_kind.get(kind, 0.0) for kind in BUSY_KINDS)
    return max(0.0, 1.0 - busy / total)


def exclusive_share(intervals: Sequence[Interval], kind: str) -> float:
    """Share of wall-clock time in which some resource does `kind` and none does other useful work.

    For a synchronous run this is the rollout phase's share of step time, the figure papers report.
    """
    edges: list[tuple[float, int, str]] = []
    for interval in intervals:
        if interval.kind in BUSY_KINDS and interval.duration > 0:
            edges += [(interval.start, 1, interval.kind), (interval.end, -1, interval.kind)]
    start, end = span(intervals)
    if end <= start:
        return 0.0
    active: dict[str, int] = defaultdict(int)
    exclusive, last = 0.0, start
    for time, delta, which in sorted(edges):
        if active[kind] > 0 and all(n == 0 for k, n in active.items() if k != kind):
            exclusive += time - last
        active[which] += delta
        last = time
    return exclusive / (end - start)
