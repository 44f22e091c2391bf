"""Time to recover after each fault, read from durable records only.

The loop has recovered from a fault when, after it ended (kill: at once; freeze: once thawed), the proxy
acknowledged a call again (the driver's ledger), the assembler published a trajectory again, and, where a
trainer runs, a weight version was published again (record timestamps on the topics). The slowest of the
three is the fault's recovery time (and which came back last is kept: what a slow recovery waited for). Pure.
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
    last: str = ""  # the stream that came back last (or, not recovered, the first one missing)


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
    return out


def _first_after(times: Sequence[int], after: int) -> int | None:
    i = bisect.bisect_right(times, after)
    return times[i] if i < len(times) else None
