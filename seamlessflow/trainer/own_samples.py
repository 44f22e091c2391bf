"""Which assembled trajectories a trainer trains: its own policy's, and never an evaluation pass's.

Why one place: a trainer reads a topic every team's sessions reach. An evaluation session is measured, never
trained; a team's adapter trainer trains only its team's trajectories; and whatever the team, the samples must be
its own policy's (`Trajectory.adapter`: the base never learns from an adapter's tokens, nor an adapter from the
base's or another adapter's; records older than the field are the base's). Anything else is finished untrained
and counted by why, so its heartbeat says what it passed over.
"""

from __future__ import annotations

from collections import Counter

from seamlessflow.core.evaluation import is_eval_group
from seamlessflow.messages import Trajectory


class OwnSamples:
    def __init__(self, adapter: str | None, team: str | None):
        """``adapter``: the adapter this trainer trains (None: the base); ``team``: an adapter trainer's team."""
        self.adapter, self.team = adapter, team
        self.skipped: Counter[str] = Counter()

    def passes_over(self, trajectory: Trajectory) -> bool:
        """True (and counted) for a trajectory this trainer does not train."""
        if is_eval_group(trajectory.group_id):
            return True
        if self.team is not None and trajectory.team != self.team:
            self.skipped["other_teams_skipped"] += 1  # another team's adapter wrote it: its own trainer trains it
            return True
        if trajectory.adapter != self.adapter:
            self.skipped["other_adapters_skipped"] += 1
            return True
        return False

    def figures(self) -> dict[str, float]:
        """The heartbeat's counts; `other_teams_skipped` only for an adapter's trainer, as before."""
        out = {"other_adapters_skipped": float(self.skipped["other_adapters_skipped"])}
        if self.team is not None:
            out["other_teams_skipped"] = float(self.skipped["other_teams_skipped"])
        return out
