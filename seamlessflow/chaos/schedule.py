"""A seeded fault schedule: which services die (or freeze) when, each in turn and some in pairs, and which
single-writer roles are frozen and replaced (`REPLACE`).

Why seeded: a failing run must be repeatable. Why round-robin over a shuffled order: every target is hit
equally often (the issue asks for each service killed at least three times in a long run), while the
order and the moments vary with the seed. Pure: the same seed and targets give the same schedule.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

KILL = "kill"  # SIGKILL; the supervisor restarts the service
FREEZE = "freeze"  # SIGSTOP for `hold_s`, then SIGCONT: a stalled process whose sockets stay open
# SIGSTOP, a replacement started as for a process believed dead, SIGCONT once it holds the role: a zombie
REPLACE = "replace"
SINGLE_WRITERS = ("trainer", "scheduler")  # the roles one process at a time may hold (kafka/fencing.py)


@dataclass(frozen=True)
class Fault:
    at_s: float  # seconds after the faults begin
    targets: tuple[str, ...]  # one service, or two at once
    action: str = KILL
    hold_s: float = 0.0  # FREEZE only

    def describe(self) -> str:
        what = " + ".join(self.targets)
        return f"{self.action} {what}" + (f" for {self.hold_s:.0f} s" if self.action == FREEZE else "")


def plan(seed: int, targets: Sequence[str], count: int, every_s: float, pair_every: int = 3,
         freeze_share: float = 0.2, freeze_s: float = 5.0, replace: Collection[str] = ()) -> list[Fault]:
    """`count` faults `every_s` apart (±30% jitter). Every `pair_every`-th fault hits two targets at once;
    a `freeze_share` of single faults freeze instead of kill. Targets come round-robin in a shuffled order.
    Each target in `replace` also gets one `REPLACE` fault, at a seeded moment within the same span: extra,
    so the kills and freezes (and their seeded schedule) stay what they were without it."""
    if not targets:
        return []
    faults = _kills_and_freezes(seed, targets, count, every_s, pair_every, freeze_share, freeze_s)
    rng = random.Random(f"{seed}/replace")  # its own stream: the schedule above does not move
    extra = [Fault(round(rng.uniform(0.0, max(count - 1, 0) * every_s), 2), (target,), REPLACE)
             for target in targets if target in replace]
    return sorted(faults + extra, key=lambda f: f.at_s)


def _kills_and_freezes(seed: int, targets: Sequence[str], count: int, every_s: float, pair_every: int,
                       freeze_share: float, freeze_s: float) -> list[Fault]:
    rng = random.Random(seed)
    order = list(targets)
    rng.shuffle(order)
    faults, turn = [], 0
    for i in range(count):
        at = i * every_s + rng.uniform(-0.3, 0.3) * every_s * (i > 0)
        pair = pair_every > 0 and len(order) > 1 and i % pair_every == pair_every - 1
        hit = tuple(order[(turn + k) % len(order)] for k in range(2 if pair else 1))
        turn += len(hit)
        freeze = not pair and rng.random() < freeze_share
        faults.append(Fault(round(max(at, 0.0), 2), hit, FREEZE if freeze else KILL, freeze_s if freeze else 0.0))
    return faults
