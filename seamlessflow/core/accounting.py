"""Every resource-second of a run, in one account each, each physical resource counted once (pure).

A run's timeline is recorded per *lane*: one per process that heartbeats (a rollout engine, the trainer). A
lane is not a physical resource: a `{rollout, train}` engine lent to the trainer sleeps while the trainer
computes on its device, so counting both lanes counts one GPU (one core, on CPU) twice, and the engine's
sleep as a bubble while its device trains. Here each engine lane is a device; an engine lent to `train`
takes, for that time, the trainer's state (training, or waiting for data when the trainer has nothing to
train); a trainer that no engine lends a device to (a trainer on GPUs of its own) is one device itself.

The accounts (`ACCOUNTS`, in the order they are shown):

- generating, training: the useful work (`core.timeline.BUSY_KINDS`: `rollout`, `train`);
- switching: a role change in flight (`switch`); loading weights: a weight version going in, or an engine
  starting (`sync`);
- waiting for data: a trainer, or a device lent to it, with nothing to train (`wait-data`);
- waiting for load: an engine that could generate and has no request (`wait-load`);
- held by the policy: a resource kept in a role it does not use: the `idle` role, or lent to a trainer that
  does not report (`held`);
- failed: a dead resource (`failed`), shown but outside the bubble, as in `core.timeline.bubble_ratio`.

The bubble is the sum of every account but the useful two and `failed`, over the whole less `failed`.
Why in the core: the simulator, `seamlessflow timeline`, the dashboard and `benchmarks/bench_loop.py` all
print this split, with the same arithmetic.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from seamlessflow.core.timeline import Interval, span, time_by_kind

LENT = "lent"  # a lane's kind only: an engine in the `train` role, whose device the trainer's state decides
ACCOUNTS: dict[str, str] = {  # interval kind -> the account's name, as printed
    "rollout": "generating",
    "train": "training",
    "switch": "switching",
    "sync": "loading weights",
    "wait-data": "waiting for data",
    "wait-load": "waiting for load",
    "held": "held by the policy",
    "failed": "failed",
}
OVERHEAD_KINDS = frozenset({"switch", "sync"})  # a resource changing role or weights
WAITING_KINDS = frozenset({"wait-data", "wait-load", "held"})  # a resource with nothing to do, and why
BUBBLE_KINDS = OVERHEAD_KINDS | WAITING_KINDS


@dataclass(frozen=True)
class Accounting:
    """Seconds per account (keys of `ACCOUNTS`, all present) over `devices` x the run's span."""

    seconds: dict[str, float]
    devices: int
    span_s: float

    @property
    def live_s(self) -> float:
        return sum(self.seconds.values()) - self.seconds["failed"]

    @property
    def bubble(self) -> float:
        """The bubble accounts' share of live resource-time (0.0 when nothing was recorded)."""
        live = self.live_s
        return sum(self.seconds[kind] for kind in BUBBLE_KINDS) / live if live > 0 else 0.0

    def shares(self) -> dict[str, float]:
        """Each account's share of all resource-time, failed included (they sum to 1)."""
        total = sum(self.seconds.values())
        return {kind: (seconds / total if total > 0 else 0.0) for kind, seconds in self.seconds.items()}

    def lines(self) -> list[str]:
        """One line per account with time in it, then the bubble: what the CLI and the benchmark print."""
        shares = self.shares()
        out = [f"  {ACCOUNTS[kind]:<19} {self.seconds[kind]:9.1f} s  {shares[kind]:6.1%}"
               for kind in ACCOUNTS if self.seconds[kind] > 0]
        return out + [f"  {'bubble':<19} {self.bubble:19.1%}  ({self.devices} devices x {self.span_s:.0f} s)"]


def device_intervals(engines: Sequence[Interval], trainer: Sequence[Interval] = ()) -> list[Interval]:
    """One timeline per device: the engines' own, each `lent` stretch replaced by what the trainer did then
    (`train` or `wait-data`, several trainers `overlay`ed; `held` where none covers it); the trainers' as devices
    of their own when no engine was ever lent to them."""
    if not any(interval.kind == LENT for interval in engines):
        return [*engines, *trainer]
    trained = overlay(trainer, "trainer")
    ends = [t.end for t in trained]
    out: list[Interval] = []
    for interval in engines:
        out += _as_trainer(interval, trained, ends) if interval.kind == LENT else [interval]
    return out


def account(intervals: Iterable[Interval], unrecorded: str = "sync") -> Accounting:
    """The accounts of device intervals (`device_intervals`); a device's time before its first interval or after
    its last within the run's span, which nothing recorded, goes to `unrecorded` (by default loading weights: a
    resource that has not reported yet is starting, loading its model)."""
    items = list(intervals)
    unknown = {i.kind for i in items} - set(ACCOUNTS)
    if unknown:
        raise ValueError(f"kinds with no account: {sorted(unknown)} (known: {sorted(ACCOUNTS)})")
    start, end = span(items)
    devices = {i.resource_id for i in items}
    seconds = {kind: 0.0 for kind in ACCOUNTS} | time_by_kind(items)
    seconds[unrecorded] += max(0.0, len(devices) * (end - start) - sum(i.duration for i in items))
    return Accounting(seconds, len(devices), end - start)


TRAINER_PRIORITY = ("train", "sync", "switch", "wait-data", "held", "failed")  # several trainers: the busiest shows


def overlay(intervals: Sequence[Interval], resource_id: str) -> list[Interval]:
    """Several lanes as one timeline: at each instant the kind first in `TRAINER_PRIORITY` that some lane is in
    (adapter trainers taking turns on one device: one trains while the others are held)."""
    edges = sorted((t, delta, i.kind) for i in intervals if i.end > i.start
                   for t, delta in ((i.start, 1), (i.end, -1)))
    active = dict.fromkeys(TRAINER_PRIORITY, 0)
    out: list[Interval] = []
    for (t, delta, kind), following in zip(edges, [*edges[1:], None], strict=True):
        active[kind] = active.get(kind, 0) + delta
        shown = next((k for k in TRAINER_PRIORITY if active.get(k, 0) > 0), None)
        if following is not None and following[0] > t and shown is not None:
            if out and out[-1].kind == shown and out[-1].end == t:
                out[-1] = Interval(resource_id, out[-1].start, following[0], shown)
            else:
                out.append(Interval(resource_id, t, following[0], shown))
    return out


def _as_trainer(lent: Interval, trainer: Sequence[Interval], ends: Sequence[float]) -> list[Interval]:
    """The lent stretch as the trainer's timeline then (`trainer` sorted and disjoint, as `overlay` gives it, `ends`
    its ends: the first that overlaps is found by bisection, a dashboard redraws long histories); what none of it
    covers is `held`."""
    pieces, cursor = [], lent.start
    first = bisect.bisect_right(ends, lent.start)
    for t in itertools.takewhile(lambda t: t.start < lent.end, trainer[first:]):
        lo, hi = max(t.start, cursor), min(t.end, lent.end)
        if lo > cursor:
            pieces.append(Interval(lent.resource_id, cursor, lo, "held"))
        if hi > lo:
            pieces.append(Interval(lent.resource_id, lo, hi, t.kind))
            cursor = hi
    if cursor < lent.end:
        pieces.append(Interval(lent.resource_id, cursor, lent.end, "held"))
    return pieces
