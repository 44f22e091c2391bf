"""Where a replay starts reading: the beginning, given offsets, or a timestamp verified against the data.

Why verify: an offset-for-timestamp lookup answers by the records' timestamps, which producers set (clock
skew between hosts, CreateTime vs LogAppendTime), and an earlier embedded broker answered wrongly. The broker's
answer is accepted only if the record there is at/after the time and the one before it is
earlier; otherwise that partition is scanned from its start. Either way records are also filtered by
timestamp on the client, so a wrong lookup can cost time but never drop or add records.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.io import Record, read_topic
from seamlessflow.kafka.positions import OffsetLookup


@dataclass
class StartPlan:
    offsets: dict[int, int]  # partition -> first offset to read
    notes: list[str] = field(default_factory=list)  # how each start was decided, for the user


def verified_start(
    found: int | None, since_ms: int, low: int, timestamp_at: Callable[[int], int | None]
) -> tuple[int, str]:
    """The offset to start from given the broker's answer `found` (None: "no record at/after since")."""
    if found is None:
        return low, "broker found no record at/after the time: scanning from the start"
    if found < low:
        return low, f"broker answered offset {found} below the log start {low}: scanning"
    at = timestamp_at(found)
    if at is None or at < since_ms:
        return low, f"record at broker's offset {found} has timestamp {at}, before {since_ms}: scanning"
    if found > low:
        before = timestamp_at(found - 1)
        if before is None or before >= since_ms:
            return low, f"record before broker's offset {found} is not earlier than {since_ms}: scanning"
    return found, f"broker's offset {found} verified"


def plan_since(settings: Settings, topic: str, since_ms: int, timeout_s: float = 10.0) -> StartPlan:
    lookup = OffsetLookup(settings, topic, timeout_s)
    try:
        plan = StartPlan({})
        for partition, found in sorted(lookup.offsets_for_time(since_ms).items()):
            low, high = lookup.watermarks(partition)
            if high <= low:
                plan.offsets[partition] = low
                plan.notes.append(f"{topic}[{partition}]: empty")
                continue
            start, note = verified_start(found, since_ms, low, functools.partial(lookup.timestamp_at, partition))
            plan.offsets[partition] = start
            plan.notes.append(f"{topic}[{partition}]: {note}")
        return plan
    finally:
        lookup.close()


def read_from(settings: Settings, topic: str, codec: Codec, offsets: dict[int, int] | None = None,
              since_ms: int | None = None, notes: list[str] | None = None) -> Iterator[Record]:
    """Records of `topic` from the given offsets, or from a verified timestamp, or from the beginning."""
    if since_ms is not None and offsets is None:
        plan = plan_since(settings, topic, since_ms)
        offsets = plan.offsets
        if notes is not None:
            notes.extend(plan.notes)
    return read_topic(settings, topic, codec, start_offsets=offsets)
