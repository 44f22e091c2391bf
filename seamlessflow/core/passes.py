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
