"""Passes over a published task file, as an agent pool sees them end: each pass's mean reward, and the end of
the last one.

Why: `seamlessflow tasks publish --passes N` publishes a task file N times over, and `agent run` used to run
them and then wait in silence. A newcomer wants to see, pass by pass, whether their agent's reward climbs, and
to be told when the passes are spent. Each task names its pass (`Published`, in its payload); a pass is
done once every task of it has ended all the sessions it was published with (retries included), so passes
that end out of order are reported as they end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PUBLISHED_KEY = "published"  # the payload field `file_tasks` writes


@dataclass(frozen=True)
class Published:
    """Which pass of how many a task belongs to, and how many tasks a pass holds."""

    index: int
    passes: int
    tasks: int

    def as_payload(self) -> dict[str, int]:
        return {"pass": self.index, "passes": self.passes, "tasks": self.tasks}

    @staticmethod
    def of(payload: dict[str, Any]) -> Published | None:
        """The task's pass, or None for a task published without one (a task source's, an older file's)."""
        entry = payload.get(PUBLISHED_KEY)
        if not isinstance(entry, dict):
            return None
        try:
            return Published(int(entry["pass"]), int(entry["passes"]), int(entry["tasks"]))
        except (TypeError, KeyError, ValueError):
            return None


@dataclass(frozen=True)
class PassEnd:
    """A pass whose every session ended: its mean reward over them."""

    index: int
    passes: int
    mean_reward: float
    sessions: int


@dataclass
class _Pass:
    rewards: list[float] = field(default_factory=list)
    owed: dict[str, int] = field(default_factory=dict)  # task id -> sessions still to end
    ended: bool = False


@dataclass
class PassTally:
    """Rewards by pass; `add` answers the passes that ended with it."""

    passes: dict[int, _Pass] = field(default_factory=dict)
    total: int | None = None  # passes published (the last task's word)

    def add(self, task_id: str, published: Published, group_size: int, rewards: list[float]) -> list[PassEnd]:
        """A task's sessions ended (`rewards`: those that count; `group_size`: the sessions it was run with,
        fewer than the first delivery's on a retry)."""
        self.total = published.passes
        entry = self.passes.setdefault(published.index, _Pass())
        owed = entry.owed.setdefault(task_id, group_size)
        entry.owed[task_id] = max(0, owed - len(rewards))
        entry.rewards.extend(rewards)
        ended = (not entry.ended and len(entry.owed) >= published.tasks and not any(entry.owed.values()))
        if not ended:
            return []
        entry.ended = True
        return [self.end_of(published.index)]

    def end_of(self, index: int) -> PassEnd:
        rewards = self.passes[index].rewards
        return PassEnd(index, self.total or 0, sum(rewards) / len(rewards) if rewards else 0.0, len(rewards))

    @property
    def spent(self) -> bool:
        """Every published pass ended."""
        return self.total is not None and all(
            self.passes.get(i, _Pass()).ended for i in range(self.total))

    def first_and_last(self) -> tuple[PassEnd, PassEnd]:
        """The first and the last pass (call once `spent`)."""
        assert self.total, "no pass published"
        return self.end_of(0), self.end_of(self.total - 1)


@dataclass
class PassPace:
    """When a pass may start: once the one before it ended and the policy moved past the version it ended on,
    or `patience_s` after it ended (a policy that does not move holds nobody up for long).

    Why: `tasks publish --passes N` publishes every pass at once, and an agent pool runs them as fast as it can:
    on two cores all ten passes of a scaffold ran on the first weights before the trainer's first step, so the
    per-pass rewards could not show the policy learning. One pass per policy update makes each pass's mean
    reward a point on the pool's own learning curve."""

    tally: PassTally
    patience_s: float = 120.0
    ended: dict[int, tuple[int, float]] = field(default_factory=dict)  # pass -> (version, time) when it ended
    started: set[int] = field(default_factory=set)

    def note_ends(self, ends: list[PassEnd], version: int, now_s: float) -> None:
        for end in ends:
            self.ended.setdefault(end.index, (version, now_s))

    def may_start(self, index: int, version: int, now_s: float) -> bool:
        """Whether a task of pass `index` may start now, the policy being at `version`."""
        if index == 0 or index in self.started:
            return self._start(index)
        before = self.ended.get(index - 1)
        if before is None:
            return False
        ended_on, ended_at = before
        return self._start(index) if version > ended_on or now_s - ended_at >= self.patience_s else False

    def _start(self, index: int) -> bool:
        self.started.add(index)
        return True
