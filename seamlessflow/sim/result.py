"""What one simulated run reports, per policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from seamlessflow.core.accounting import OVERHEAD_KINDS, WAITING_KINDS, Accounting, account
from seamlessflow.core.timeline import Interval, bubble_ratio, exclusive_share, time_by_kind


class FinishedRun(Protocol):
    """What a result is read from: the simulator after its run (named here, so the result does not import the
    simulator that returns it)."""

    spec: Any
    gpus: int
    train_capable: int
    trained_steps: int
    batch_size: int
    now: float
    trained_tokens: int
    intervals: list[Interval]
    staleness: list[int]
    engines: list[Any]


@dataclass(frozen=True)
class SimResult:
    """Throughput is trained tokens (prompt + response) per second of simulated wall time, over the whole
    run from a cold start. `bubble_ratio` counts idle, switching and weight-loading resource-time as
    bubble; `idle_ratio` (waiting for data or load, held by the policy) and `overhead_ratio` split it;
    `accounts()` gives every account (`core.accounting`). Staleness is, per trained trajectory, the trainer's
    version minus the version of the weights that generated its first tokens. `rollout_share` is the
    share of wall time in which only rollout work happened (the synchronous rollout phase)."""

    policy: str
    gpus: int
    train_capable: int
    steps: int
    batch_size: int
    seconds: float
    trained_tokens: int
    throughput: float
    bubble_ratio: float
    idle_ratio: float
    overhead_ratio: float
    staleness_mean: float
    staleness_max: int
    rollout_share: float
    intervals: tuple[Interval, ...] = field(repr=False, default=())

    @classmethod
    def from_run(cls, sim: FinishedRun) -> SimResult:
        intervals = tuple(sim.intervals)
        by_kind = time_by_kind(intervals)
        live = sum(by_kind.values()) - by_kind.get("failed", 0.0)
        staleness = sim.staleness or [0]
        return cls(
            policy=sim.spec.name, gpus=sim.gpus, train_capable=sim.train_capable, steps=sim.trained_steps,
            batch_size=sim.batch_size, seconds=sim.now, trained_tokens=sim.trained_tokens,
            throughput=sim.trained_tokens / sim.now if sim.now > 0 else 0.0,
            bubble_ratio=bubble_ratio(intervals, [e.id for e in sim.engines]),
            idle_ratio=sum(by_kind.get(kind, 0.0) for kind in WAITING_KINDS) / live if live else 0.0,
            overhead_ratio=sum(by_kind.get(kind, 0.0) for kind in OVERHEAD_KINDS) / live if live else 0.0,
            staleness_mean=sum(staleness) / len(staleness), staleness_max=max(staleness),
            rollout_share=exclusive_share(intervals, "rollout"), intervals=intervals,
        )

    def accounts(self) -> Accounting:
        return account(self.intervals)

    def summary(self) -> dict[str, float | int | str]:
        """JSON-ready figures (no intervals)."""
        return {
            "policy": self.policy, "gpus": self.gpus, "train_capable": self.train_capable, "steps": self.steps,
            "batch_size": self.batch_size, "seconds": round(self.seconds, 3), "trained_tokens": self.trained_tokens,
            "throughput": round(self.throughput, 3), "bubble_ratio": round(self.bubble_ratio, 5),
            "idle_ratio": round(self.idle_ratio, 5), "overhead_ratio": round(self.overhead_ratio, 5),
            "staleness": round(self.staleness_mean, 4), "staleness_max": self.staleness_max,
            "rollout_share": round(self.rollout_share, 4),
        }
