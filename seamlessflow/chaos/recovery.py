"""Time to recover after each fault, read from durable records only.

The loop has recovered from a fault when, after it ended (kill: at once; freeze: once thawed), the proxy
acknowledged a call again (the driver's ledger), the assembler published a trajectory again, and, where a
trainer runs, a weight version was published again (record timestamps on the topics). The slowest of the
three is the fault's recovery time. Pure.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from seamlessflow.chaos.inject import Injected


@dataclass(frozen=True)
class Recovery:
    injected: Injected
    seconds: float | None  # None: not seen before the run ended
    waited_s: float  # how long the run went on after the fault (bounds what "not seen" means)


def recoveries(injected: Sequence[Injected], end_ms: int, acks_ms: Sequence[int], trajectories_ms: Sequence[int],
               weights: Sequence[tuple[int, int]] | None) -> list[Recovery]:
    """`weights`: (timestamp ms, version) of each WeightVersion record; a version counts as progress only if
    it is newer than every version published before the fault (a restart re-publishes its last one)."""
    streams = [sorted(acks_ms), sorted(trajectories_ms)]
    out = []
    for item in injected:
        over = item.at_ms + int(item.fault.hold_s * 1000)
        firsts = [_first_after(stream, over) for stream in streams]
        if weights is not None:
            before = max((v for t, v in weights if t <= item.at_ms), default=0)
            firsts.append(_first_after(sorted(t for t, v in weights if v > before), over))
        seen = [t for t in firsts if t is not None]
        seconds = (max(seen) - item.at_ms) / 1000 if len(seen) == len(firsts) else None
        out.append(Recovery(item, seconds, (end_ms - item.at_ms) / 1000))
    return out


def _first_after(times: Sequence[int], after: int) -> int | None:
    i = bisect.bisect_right(times, after)
    return times[i] if i < len(times) else None
