"""Time to recover after each fault, read from durable records only.

The loop has recovered from a fault when, after it ended (kill: at once; freeze: once thawed), the proxy
acknowledged a call again (the driver's ledger), the assembler published a trajectory again, and, where a
trainer runs, a weight version was published again (record timestamps on the topics). The slowest of the
three is the fault's recovery time (and which came back last is kept: what a slow recovery waited for).

Faults overlap: a fault struck while the loop was still recovering from an earlier one delays that earlier
recovery by its own. The earlier fault is then marked `overlapped_by` the later one and judged with it (the last
fault of such a chain is timed from its own start; an earlier one fails only if it went unrecovered longer than
the limit before the next struck), so a freeze is not blamed for a trainer kill that came after it. Pure.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from seamlessflow.chaos.inject import Injected


@dataclass(frozen=True)
class Recovery:
    injected: Injected
    seconds: float | None  # None: not seen before the run ended
    waited_s: float  # how long the run went on after the fault (bounds what "not seen" means)
    last: str = ""  # the stream that came back last (or, not recovered, the first one missing)
    overlapped_by: Injected | None = None  # a later fault struck before this one was recovered from

    @property
    def unrecovered_s(self) -> float | None:
        """How long an overlapped fault went unrecovered before the later fault struck (None: not overlapped)."""
        return None if self.overlapped_by is None else (self.overlapped_by.at_ms - self.injected.at_ms) / 1000


def recoveries(injected: Sequence[Injected], end_ms: int, acks_ms: Sequence[int], trajectories_ms: Sequence[int],
               weights: Sequence[tuple[int, int]] | None) -> list[Recovery]:
    """`weights`: (timestamp ms, version) of each WeightVersion record; a version counts as progress only if
    it is newer than every version published before the fault (a restart re-publishes its last one)."""
    streams = [sorted(acks_ms), sorted(trajectories_ms)]
    names = ["calls", "trajectories", "weights"]
    out = []
    for item in injected:
        over = item.at_ms + int(item.fault.hold_s * 1000)
        firsts = [_first_after(stream, over) for stream in streams]
        if weights is not None:
            before = max((v for t, v in weights if t <= item.at_ms), default=0)
            firsts.append(_first_after(sorted(t for t, v in weights if v > before), over))
        missing = [name for name, t in zip(names, firsts, strict=False) if t is None]
        if missing:
            out.append(Recovery(item, None, (end_ms - item.at_ms) / 1000, missing[0]))
            continue
        last = max(range(len(firsts)), key=lambda i: firsts[i] or 0)
        out.append(Recovery(item, ((firsts[last] or 0) - item.at_ms) / 1000, (end_ms - item.at_ms) / 1000, names[last]))
    return _mark_overlaps(out)


def _mark_overlaps(found: list[Recovery]) -> list[Recovery]:
    """A fault is overlapped by the first later one injected before its recovery (or at all, if never seen)."""
    out = []
    for r in found:
        until = r.injected.at_ms + r.seconds * 1000 if r.seconds is not None else float("inf")
        later = [o.injected for o in found if r.injected.at_ms < o.injected.at_ms < until]
        first = min(later, key=lambda i: i.at_ms, default=None)
        out.append(dataclasses.replace(r, overlapped_by=first) if first else r)
    return out


def _first_after(times: Sequence[int], after: int) -> int | None:
    i = bisect.bisect_right(times, after)
    return times[i] if i < len(times) else None
