"""How many rollouts may be in flight: capacity and staleness arithmetic (pure).

Follows AReaL's staleness manager. A rollout started while the trainer is at version `v` must be trained
by a step whose base version is at most `v + max_staleness`. If every step consumes `batch_size`
trajectories, then by the time version `v` exists at most `(max_staleness + v + 1) * batch_size`
trajectories may have been started in total, otherwise the later ones would be trained too late.
`max_staleness = 0` is synchronous RL (exactly one batch per version); 1 is one-step off-policy.
"""

from __future__ import annotations

from dataclasses import dataclass


def staleness_capacity(current_version: int, max_staleness: int, batch_size: int, started: int) -> int:
    """Rollouts that may still start before the staleness bound is hit (may be negative)."""
    return (max_staleness + current_version + 1) * max(1, batch_size) - started


def rollout_capacity(
    current_version: int, max_staleness: int, batch_size: int, accepted: int, running: int, max_concurrent: int
) -> int:
    """New rollouts allowed now: the tighter of the concurrency and the staleness limits."""
    concurrency = max(1, max_concurrent) - running
    return min(concurrency, staleness_capacity(current_version, max_staleness, batch_size, accepted + running))


def staleness(trained_at_version: int, generated_with_version: int) -> int:
    """Versions between the weights that generated a sample and the weights it is trained against."""
    return trained_at_version - generated_with_version


@dataclass
class RolloutLedger:
    """Counters the rollout manager keeps; `capacity(v)` is what it may submit now.

    Rejected rollouts (filtered, failed) free their slot and never count towards staleness.
    """

    batch_size: int
    max_staleness: int
    max_concurrent: int
    submitted: int = 0
    accepted: int = 0
    rejected: int = 0

    @property
    def running(self) -> int:
        return self.submitted - self.accepted - self.rejected

    def capacity(self, current_version: int) -> int:
        return rollout_capacity(
            current_version, self.max_staleness, self.batch_size, self.accepted, self.running, self.max_concurrent
        )

    def staleness_room(self, current_version: int) -> int:
        """Rollouts the staleness bound alone still allows (for a caller that bounds concurrency itself)."""
        return staleness_capacity(current_version, self.max_staleness, self.batch_size, self.accepted + self.running)

    def on_submitted(self, count: int = 1) -> None:
        self.submitted += count

    def on_accepted(self, count: int = 1) -> None:
        self.accepted += count

    def on_rejected(self, count: int = 1) -> None:
        self.rejected += count
