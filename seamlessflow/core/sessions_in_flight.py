"""How many sessions an agent pool keeps in flight: enough that every rollout engine works at its capacity,
fewer when the trainer falls behind (pure).

Why: a pool that runs a fixed number of sessions leaves an engine waiting for load whenever its share of those
sessions sits between calls (a tool runs, a reward is judged), and overfills the engines when the trainer cannot
keep up, which only makes the data staler. The engines' own heartbeat figures say which it is: vLLM's
`requests_waiting` (a queue: more sessions only wait longer) and `kv_cache_usage` (near full: requests get
preempted). So the pool's limit moves like a congestion window: up by `step` while some engine has room, down by
`step` when every engine queues, halved (`backoff`) when the trainer has `behind_steps` batches it has not
trained (`steps_ready`), never outside [`minimum`, `maximum`]. The staleness bound is not this module's: the
rollout manager publishes no more tasks than it allows, so a pool never runs ahead of it however high its limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineLoad:
    """One serving engine's load, as its last heartbeat reported it."""

    running: float  # requests it decodes now
    waiting: float  # requests queued behind them
    kv_usage: float = 0.0  # share of its KV cache in use, 0..1


@dataclass(frozen=True)
class FlightBounds:
    minimum: int
    maximum: int
    step: int = 1
    backoff: float = 0.5
    queue_per_engine: float = 1.0  # an engine with more requests queued than this is full
    kv_high: float = 0.9  # ... and one whose KV cache is this full
    behind_steps: float = 2.0  # batches ready and not trained that mean the trainer is behind

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.maximum:
            raise ValueError(f"sessions in flight bounds must be 1 <= minimum <= maximum, got {self}")

    def clamp(self, limit: int) -> int:
        return min(self.maximum, max(self.minimum, limit))


@dataclass(frozen=True)
class FlightDecision:
    limit: int
    reason: str


def next_in_flight(current: int, engines: Sequence[EngineLoad], steps_ready: float | None,
                   bounds: FlightBounds) -> FlightDecision:
    """The pool's next limit from its current one, the serving engines' loads and the trainer's backlog (None:
    no trainer reports one)."""
    if steps_ready is not None and steps_ready >= bounds.behind_steps:
        lowered = max(bounds.minimum, math.floor(current * bounds.backoff))
        return FlightDecision(lowered, f"the trainer is behind ({steps_ready:g} batches ready)")
    if not engines:
        return FlightDecision(bounds.clamp(current), "no serving engine reports its load")
    full = sum(1 for e in engines if _full(e, bounds))
    if full == len(engines):
        return FlightDecision(max(bounds.minimum, current - bounds.step), "every engine queues or its KV cache is full")
    if any(e.waiting <= 0 and e.kv_usage < bounds.kv_high for e in engines):
        return FlightDecision(min(bounds.maximum, current + bounds.step), "an engine has room")
    return FlightDecision(bounds.clamp(current), "the engines are at capacity")


def _full(engine: EngineLoad, bounds: FlightBounds) -> bool:
    return engine.waiting > bounds.queue_per_engine or engine.kv_usage >= bounds.kv_high
