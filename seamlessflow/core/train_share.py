"""Training time shared by team weight: which of the teams' adapter trainers may train now (pure).

Why: a stack that trains the teams' adapters runs one trainer per team. Where those trainers share devices
(one GPU, one machine's cores) they would split them as the driver or the OS schedules them, whatever each
team is owed. Instead the scheduler gives turns: at most `concurrent` trainers hold the train role at once,
each for a slice of `slice_s`, and a free turn goes to the trainer with a batch waiting that has held turns
least for its weight (turn seconds / weight). Over time each busy trainer's share of the turns follows its
weight, as in weighted fair queueing:

- **Work-conserving.** A trainer with nothing to train is passed over, and a turn ends early once its trainer
  has no batch waiting (not before `min_turn_s`: a role cannot change back faster than the scheduler's dwell
  time, and a turn given and taken back before its trainer even switched would leave both trainers idle); a
  trainer alone with work holds the turns for as long as it has work.
- **No credit saved while idle.** A trainer that waited without work (or is new) comes back level with the
  least served of those with work (WFQ's virtual time): it does not then hold the turns until it has "caught
  up" on the time it did not want.
- **Turns are charged, not steps.** A turn is device time held whether or not the trainer stepped in it, so a
  trainer that looks ready but cannot form a batch does not keep the turn by being charged nothing.

The scheduler applies the turns as roles (`train` for a turn, `idle` otherwise, through the policy's dwell
rules: `core.scheduler.plan`'s `roles`); a trainer finishes the step it is in when its turn ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ShareConfig:
    """The core's frozen view of `scheduler.train_share` (`TrainShareOptions`: defaults and help there)."""

    concurrent: int
    slice_s: float
    min_turn_s: float = 0.0  # a turn ends early, for want of work, no sooner than this (the roles' dwell time)


@dataclass(frozen=True)
class Contender:
    """One adapter trainer as the share sees it: its team's weight and whether a batch of its team's waits."""

    resource_id: str
    weight: float
    ready: bool


@dataclass
class TrainShare:
    """The turns and what each trainer has been served; `step` once per scheduler tick with its clock."""

    config: ShareConfig
    served: dict[str, float] = field(default_factory=dict)  # turn seconds / weight
    held_s: dict[str, float] = field(default_factory=dict)  # turn seconds, unweighted (figures)
    turns: dict[str, float] = field(default_factory=dict)  # holder -> when its turn began
    charged_at: float | None = None

    def step(self, contenders: Sequence[Contender], now: float) -> frozenset[str]:
        """The trainers that hold a turn after this tick."""
        by_id = {c.resource_id: c for c in contenders}
        self._charge(by_id, now)
        self._level(contenders)
        for rid, began in list(self.turns.items()):
            if self._turn_over(by_id.get(rid), now - began):
                del self.turns[rid]
        waiting = sorted((c for c in contenders if c.ready and c.resource_id not in self.turns),
                         key=lambda c: (self.served[c.resource_id], c.resource_id))
        for contender in waiting[:max(0, self.config.concurrent - len(self.turns))]:
            self.turns[contender.resource_id] = now
        return frozenset(self.turns)

    def _turn_over(self, holder: Contender | None, held_s: float) -> bool:
        """Its trainer is gone, its slice is used, or it has no work and has held the turn its minimum."""
        if holder is None or held_s >= self.config.slice_s:
            return True
        return not holder.ready and held_s >= self.config.min_turn_s

    def _charge(self, by_id: dict[str, Contender], now: float) -> None:
        """Each holder pays for the time since the last tick, at its weight (one gone since pays nothing)."""
        elapsed = 0.0 if self.charged_at is None else max(0.0, now - self.charged_at)
        self.charged_at = now
        for rid in self.turns:
            if rid in by_id:
                self.served[rid] = self.served.get(rid, 0.0) + elapsed / by_id[rid].weight
                self.held_s[rid] = self.held_s.get(rid, 0.0) + elapsed

    def _level(self, contenders: Sequence[Contender]) -> None:
        """A new trainer, and one without work, starts no lower than the least served of those with work."""
        busy = [self.served[c.resource_id] for c in contenders
                if c.resource_id in self.served and (c.ready or c.resource_id in self.turns)]
        floor = min(busy, default=0.0)
        for contender in contenders:
            rid = contender.resource_id
            if rid not in self.served or not (contender.ready or rid in self.turns):
                self.served[rid] = max(self.served.get(rid, floor), floor)
