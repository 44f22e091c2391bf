"""Role intervals from recorded statuses: what `seamlessflow timeline` draws (with seamlessflow.sim.timeline_plot).

Every heartbeat is a sample of (active tag, state) at its `created_at_ms`; a resource is taken to stay as
its last heartbeat said until the next one. Kinds are `core.accounting`'s: `rollout`/`train` (useful work),
`switch` (state switching), `sync` (paused, e.g. around a weight load, starting, and the measured duration of
every acknowledged `load_weights`), `wait-load` (a rollout resource whose `requests_running` figure, vLLM's
sampled at the heartbeat, is 0), `held` (the idle tag), `lent` (a rollout engine in the `train` role),
`failed` (failed or stopped, including the scheduler's verdict on a silent resource). Only the schedulable
kinds are drawn (not proxy, scheduler or agents). A trainer reports `busy_s`, its cumulative seconds in
optimizer steps and publishing: between two of its heartbeats only that much is `train`, the rest
`wait-data` (waiting for a batch is a bubble too). `device_timeline` counts each device once.

Caveat: the status topic is compacted; once the broker compacts it, only the latest record per resource
remains and older history is gone. Draw timelines from runs whose status topic was not compacted yet.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections import defaultdict
from collections.abc import Iterable

from seamlessflow.core.accounting import LENT, device_intervals
from seamlessflow.core.control import CommandKind, Outcome
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag
from seamlessflow.core.timeline import Interval
from seamlessflow.messages import CommandAck, ResourceStatus

SCHEDULED_KINDS = frozenset({ResourceKind.ROLLOUT, ResourceKind.TRAINER})
TIMELINE_FIGURES = frozenset({"requests_running", "running", "busy_s"})  # what `kind_of` and `_between` read


def timeline_sample(status: ResourceStatus) -> ResourceStatus:
    """The heartbeat with only what the timeline reads, for a long history held in memory (the dashboard's):
    its time, resource, kind, state, active tag and the figures above; ids and names shared, not copied.
    ~0.6 KB instead of ~2 KB a rollout worker's heartbeat."""
    return dataclasses.replace(
        status, event_id="", resource_id=sys.intern(status.resource_id), active_tag=sys.intern(status.active_tag),
        capability_tags=[], hardware_tags=[], engine_url=None, team=sys.intern(status.team), run=sys.intern(status.run),
        figures={sys.intern(k): v for k, v in status.figures.items() if k in TIMELINE_FIGURES})


def kind_of(status: ResourceStatus) -> str:
    """The lane kind (`core.accounting`) a heartbeat stands for: a rollout engine in the `train` role is `lent`
    (its device is the trainer's then: `device_timeline`)."""
    if status.state in (ResourceState.FAILED, ResourceState.STOPPED):
        return "failed"
    if status.state is ResourceState.SWITCHING:
        return "switch"
    if status.state in (ResourceState.PAUSED, ResourceState.STARTING):  # a weight load; starting: loading its model
        return "sync"
    if status.state is not ResourceState.ACTIVE or status.active_tag not in (Tag.ROLLOUT, Tag.TRAIN):
        return "held"
    if status.active_tag == Tag.TRAIN:
        return "train" if status.kind is ResourceKind.TRAINER else LENT
    running = status.figures.get("requests_running", status.figures.get("running"))
    return "wait-load" if running is not None and running <= 0 else "rollout"


def intervals_from_records(
    messages: Iterable[object], kinds: frozenset[str] = SCHEDULED_KINDS, origin_ms: float | None = None
) -> list[Interval]:
    """Intervals in seconds from the first record (or from `origin_ms`); `load_weights` acks are carved in
    as `sync`."""
    samples: dict[str, list[tuple[float, str, float | None]]] = defaultdict(list)
    syncs: list[Interval] = []
    items = [m for m in messages if isinstance(m, (ResourceStatus, CommandAck))]
    if not items:
        return []
    origin = (min(m.created_at_ms for m in items) if origin_ms is None else origin_ms) / 1000.0
    for message in sorted(items, key=lambda m: m.created_at_ms):
        t = message.created_at_ms / 1000.0 - origin
        if isinstance(message, ResourceStatus) and message.kind in kinds:
            samples[message.resource_id].append((t, kind_of(message), message.figures.get("busy_s")))
        elif (isinstance(message, CommandAck) and message.command is CommandKind.LOAD_WEIGHTS
              and message.outcome is Outcome.OK):
            syncs.append(Interval(message.resource_id, max(0.0, t - message.duration_ms / 1000.0), t, "sync"))
    end = max(t for points in samples.values() for t, _, _ in points) if samples else 0.0
    out: list[Interval] = []
    for rid, points in samples.items():
        bounded = points + [(end, points[-1][1], None)]  # the last heartbeat holds until the end of the record
        out += _merge([piece for a, b in itertools.pairwise(bounded) for piece in _between(rid, a, b)])
    for sync in syncs:
        if sync.resource_id in samples:
            out = _carve(out, sync)
    return out


def device_timeline(messages: Iterable[object], origin_ms: float | None = None) -> list[Interval]:
    """`intervals_from_records` per device (`core.accounting.device_intervals`): an engine lent to the trainer
    shows what the trainer did then, and the trainer is no device of its own where engines are lent to it."""
    items = list(messages)
    trainers = {m.resource_id for m in items if isinstance(m, ResourceStatus) and m.kind is ResourceKind.TRAINER}
    lanes = intervals_from_records(items, origin_ms=origin_ms)
    return device_intervals([i for i in lanes if i.resource_id not in trainers],
                            [i for i in lanes if i.resource_id in trainers])


def clip(intervals: Iterable[Interval], start: float, end: float) -> list[Interval]:
    """The parts of `intervals` inside [start, end], e.g. a benchmark's steady state without start-up."""
    out = []
    for i in intervals:
        lo, hi = max(i.start, start), min(i.end, end)
        if hi > lo:
            out.append(Interval(i.resource_id, lo, hi, i.kind))
    return out


def _between(rid: str, sample: tuple[float, str, float | None],
             following: tuple[float, str, float | None]) -> list[Interval]:
    """The interval from one heartbeat to the next; a training one only as busy as its `busy_s` grew."""
    (t, kind, busy), (t_next, _, busy_next) = sample, following
    if kind != "train" or busy is None or busy_next is None:
        pieces = [Interval(rid, t, t_next, kind)]
    else:
        worked = min(max(busy_next - busy, 0.0), t_next - t)
        pieces = [Interval(rid, t, t + worked, "train"), Interval(rid, t + worked, t_next, "wait-data")]
    return [piece for piece in pieces if piece.end > piece.start]


def _merge(intervals: list[Interval]) -> list[Interval]:
    """Join neighbours of the same kind, so one role period is one bar."""
    merged: list[Interval] = []
    for interval in intervals:
        if merged and merged[-1].kind == interval.kind and merged[-1].end >= interval.start:
            merged[-1] = Interval(interval.resource_id, merged[-1].start, interval.end, interval.kind)
        else:
            merged.append(interval)
    return merged


def _carve(intervals: list[Interval], sync: Interval) -> list[Interval]:
    """Replace the resource's time inside `sync` by the sync interval."""
    out = [sync]
    for i in intervals:
        if i.resource_id != sync.resource_id or i.end <= sync.start or i.start >= sync.end:
            out.append(i)
            continue
        if i.start < sync.start:
            out.append(Interval(i.resource_id, i.start, sync.start, i.kind))
        if i.end > sync.end:
            out.append(Interval(i.resource_id, sync.end, i.end, i.kind))
    return sorted(out, key=lambda i: (i.resource_id, i.start))


def role_switches(messages: Iterable[object], origin_ms: float | None = None) -> list[tuple[float, str, str, str]]:
    """(seconds from the first status or `origin_ms`, resource, from, to) for every change of active tag."""
    last: dict[str, str] = {}
    switches = []
    items = sorted((m for m in messages if isinstance(m, ResourceStatus)), key=lambda m: m.created_at_ms)
    origin = (origin_ms if origin_ms is not None else items[0].created_at_ms if items else 0.0) / 1000.0
    for status in items:
        before = last.get(status.resource_id)
        if before is not None and before != status.active_tag:
            switches.append((status.created_at_ms / 1000.0 - origin, status.resource_id, before, status.active_tag))
        last[status.resource_id] = status.active_tag
    return switches
