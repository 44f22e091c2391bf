"""Each agent pool's own curve: the mean reward of the sessions it ended, and how many it ended a minute, one
point per trainer step (`pool/<pool>/reward_mean`, `pool/<pool>/sessions_per_min`).

Why from session ends: one policy trains on every pool's sessions (the stack's demo beside a newcomer's own
agent), so the trainer's reward is a blend, and a newcomer watching it sees the demo's curve, not theirs.
Every session's end names the pool that ran it (the agent worker's `pool` in its info), so the split needs
no new record. Sessions that ended in a trainable status count (an aborted one is run again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.messages import EpisodeEnd

COUNTED = (EpisodeStatus.DONE, EpisodeStatus.FAILED)


@dataclass
class PoolRewards:
    """Rewards by pool since the last trainer step."""

    rewards: dict[str, list[float]] = field(default_factory=dict)
    last_wall_s: float | None = None

    def end(self, message: EpisodeEnd) -> None:
        if message.status not in COUNTED:
            return
        try:
            pool = json.loads(message.info_json).get("pool")
        except (ValueError, AttributeError):
            return
        if isinstance(pool, str) and pool:
            self.rewards.setdefault(pool, []).append(message.reward)

    def points(self, step: int, wall_s: float) -> list[tuple[str, float]]:
        """(tag, value) for each pool that ended sessions since the last step; starts the next step's count."""
        since = wall_s - self.last_wall_s if self.last_wall_s is not None and wall_s > self.last_wall_s else None
        out = []
        for pool, rewards in sorted(self.rewards.items()):
            out.append((f"pool/{pool}/reward_mean", sum(rewards) / len(rewards)))
            if since is not None:
                out.append((f"pool/{pool}/sessions_per_min", 60.0 * len(rewards) / since))
        self.rewards, self.last_wall_s = {}, wall_s
        return out
