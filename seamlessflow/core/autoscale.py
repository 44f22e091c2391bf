"""When to add or remove rollout engines: the autoscaling policy as arithmetic on signals the stack has (pure).

Why a pure function: the simulator (`seamlessflow.sim.elastic`) and the tests call it with plain values, as
they do `core.staleness`, and the scheduler service calls the same code (`scheduler.autoscaling`, as advice).
The whole state of the policy is its last decision (when the count last changed, since when the load has been
low).

Load is counted in engines' worth: the KV cache in use on the serving engines plus the sessions waiting, at
`sessions_per_engine` each. The rules, in order:

1. A count outside `[min_engines, max_engines]` is put back at once: that is a limit, not a load reading.
2. Grow when more than `up_waiting_per_engine` sessions wait per engine, or when any wait while the trainer
   starves and the engines are full; by the backlog not already covered by engines still starting, in whole
   engines, bounded by `max_step_up` and `max`. Hold instead when the trainer is the bottleneck (a batch is
   already waiting and it has hardly idled): more engines would only fill the buffer.
3. Otherwise shrink, when the load would fit on fewer engines under `down_kv_target` and has done so for
   `down_after_s`; by up to `max_step_down`. Hysteresis in load and in time, so a steady load never flaps:
   growing leaves the engines over the target, and shrinking leaves too few waiting to grow again.
4. No change within `cooldown_s` of the last one, whichever way.

A full KV cache with nobody waiting is not a reason to grow: the backlog says it more directly, and growing on
cache use alone would keep adding engines to a load that exactly fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CapacitySignals:
    """What the stack already reports, read at one moment.

    `queue_depth` and `kv_use` are per serving engine (requests waiting inside it; the share of its KV cache in
    use, 0..1); engines still starting report neither and are counted in `engines_starting`. `trainer_idle` is
    the share of a recent window in which the trainer waited for data (0..1)."""

    waiting_sessions: int = 0
    queue_depth: tuple[int, ...] = ()
    kv_use: tuple[float, ...] = ()
    trajectories_waiting: int = 0
    batch_threshold: int = 1
    trainer_idle: float = 0.0
    engines_starting: int = 0

    @property
    def backlog(self) -> int:
        """Sessions no engine is generating for yet: at the proxies and queued inside the engines."""
        return self.waiting_sessions + sum(self.queue_depth)

    @property
    def batches_waiting(self) -> float:
        return self.trajectories_waiting / max(1, self.batch_threshold)

    @property
    def kv_mean(self) -> float:
        return self.kv_total / len(self.kv_use) if self.kv_use else 0.0

    @property
    def kv_total(self) -> float:
        """The running load in engines' worth of KV cache (two half-full engines are one engine of load)."""
        return sum(self.kv_use)


@dataclass(frozen=True)
class ScalingLimits:
    """The operator's bounds and the policy's thresholds; the defaults suit engines of ~64 sessions each."""

    min_engines: int = 1
    max_engines: int = 8
    cooldown_s: float = 60.0  # after a change, before the next (an engine takes about a model load to serve)
    down_after_s: float = 180.0  # the load must have been low this long before an engine goes
    up_waiting_per_engine: float = 2.0  # sessions waiting per engine above which we grow
    sessions_per_engine: int = 64  # what one more engine absorbs (vLLM max_num_seqs): backlog -> engines
    max_step_up: int = 8
    max_step_down: int = 4
    down_kv_target: float = 0.6  # shrink only if the running sessions fit below this share of KV on fewer engines
    trainer_behind_batches: float = 1.0  # a batch waiting ...
    trainer_busy: float = 0.25  # ... and the trainer idle less than this: the trainer is the bottleneck
    trainer_starved: float = 0.5  # the trainer idle more than this ...
    engine_full: float = 0.9  # ... and the engines this full: any backlog is the engines' to take

    def __post_init__(self) -> None:
        if not 0 <= self.min_engines <= self.max_engines:
            raise ValueError(f"need 0 <= min_engines <= max_engines, got {self.min_engines}, {self.max_engines}")
        if self.max_step_up < 1 or self.max_step_down < 1 or self.sessions_per_engine < 1:
            raise ValueError("max_step_up, max_step_down and sessions_per_engine must be at least 1")
        if not 0 < self.down_kv_target < 1:
            raise ValueError(f"down_kv_target must be in (0, 1), got {self.down_kv_target}")


@dataclass(frozen=True)
class ScaleDecision:
    """One answer: add `change` engines (negative: drain that many) to reach `target`, and why.

    `changed_at` (the last time the count changed, this decision included) and `quiet_since` (since when the
    load has allowed a shrink) carry the policy's state to the next call."""

    change: int
    target: int
    reason: str
    at: float
    changed_at: float = -math.inf
    quiet_since: float | None = None


def decide(signals: CapacitySignals, engines: int, now: float, last: ScaleDecision | None = None,
           limits: ScalingLimits | None = None) -> ScaleDecision:
    """The change to make now to `engines` (serving or starting, not draining) given the signals."""
    limits = limits or ScalingLimits()
    changed_at = last.changed_at if last else -math.inf
    quiet = _quiet_since(signals, engines, now, last, limits)
    if engines < limits.min_engines:
        return _make(engines, limits.min_engines - engines, f"below min {limits.min_engines}", now, quiet)
    if engines > limits.max_engines:
        return _make(engines, limits.max_engines - engines, f"above max {limits.max_engines}", now, quiet)
    change, why = _wanted(signals, engines, now, quiet, limits)
    left = changed_at + limits.cooldown_s - now
    if change and left > 0:
        return ScaleDecision(0, engines, f"{why}; cool-down {left:.0f} s left", now, changed_at, quiet)
    if not change:
        return ScaleDecision(0, engines, why, now, changed_at, quiet)
    return _make(engines, change, why, now, quiet)


def _make(engines: int, change: int, why: str, now: float, quiet: float | None) -> ScaleDecision:
    return ScaleDecision(change, engines + change, f"{why}: {change:+d}", now, now, quiet)


def _wanted(signals: CapacitySignals, engines: int, now: float, quiet: float | None,
            limits: ScalingLimits) -> tuple[int, str]:
    """The change the load asks for, before the cool-down, with its reason (rules 2 and 3)."""
    grow = _grow(signals, engines, limits)
    return grow if grow is not None else _shrink(signals, engines, now, quiet, limits)


def _grow(signals: CapacitySignals, engines: int, limits: ScalingLimits) -> tuple[int, str] | None:
    """None when nothing asks for more engines."""
    backlog, idle = signals.backlog, signals.trainer_idle
    per_engine = backlog / max(1, engines)
    if not backlog:
        return None
    if engines == 0:
        why = f"{backlog} sessions waiting and no engine"
    elif per_engine > limits.up_waiting_per_engine:
        why = f"{per_engine:.1f} sessions waiting per engine > {limits.up_waiting_per_engine:g}"
    elif idle > limits.trainer_starved and signals.kv_mean >= limits.engine_full:
        why = (f"trainer idle {idle:.0%} > {limits.trainer_starved:.0%}, engines {signals.kv_mean:.0%} full, "
               f"{backlog} sessions waiting")
    else:
        return None
    if signals.batches_waiting >= limits.trainer_behind_batches and idle < limits.trainer_busy:
        return 0, (f"{why}; trainer behind ({signals.batches_waiting:.1f} batches waiting, idle {idle:.0%}): "
                   f"more engines would not help")
    uncovered = backlog - signals.engines_starting * limits.sessions_per_engine
    if uncovered <= 0:
        return 0, f"{why}; {signals.engines_starting} engines starting cover it"
    add = min(math.ceil(uncovered / limits.sessions_per_engine), limits.max_step_up,
              limits.max_engines - engines)
    return (add, why) if add > 0 else (0, f"{why}; at max {limits.max_engines}")


def _shrink(signals: CapacitySignals, engines: int, now: float, quiet: float | None,
            limits: ScalingLimits) -> tuple[int, str]:
    load = _load(signals, limits)
    if engines <= limits.min_engines:
        return 0, f"load {load:.1f} engines' worth; at min {limits.min_engines}"
    if quiet is None:
        return 0, f"load {load:.1f} engines' worth would be over {limits.down_kv_target:.0%} on {engines - 1}"
    if now - quiet < limits.down_after_s:
        return 0, f"load {load:.1f} engines' worth; quiet for {now - quiet:.0f} s of {limits.down_after_s:g}"
    remove = 1
    while remove < limits.max_step_down and _fits(signals, engines - remove - 1, limits):
        remove += 1
    return -remove, f"load {load:.1f} engines' worth fits on {engines - remove} under {limits.down_kv_target:.0%}"


def _load(signals: CapacitySignals, limits: ScalingLimits) -> float:
    """Engines' worth of work: the KV cache in use plus the few sessions waiting, as whole engines would take them."""
    return signals.kv_total + signals.backlog / limits.sessions_per_engine


def _fits(signals: CapacitySignals, engines: int, limits: ScalingLimits) -> bool:
    """The load would fit on `engines` engines under the shrink target (and the floor holds)."""
    return engines >= limits.min_engines and _load(signals, limits) <= limits.down_kv_target * engines


def _quiet_since(signals: CapacitySignals, engines: int, now: float, last: ScaleDecision | None,
                 limits: ScalingLimits) -> float | None:
    """Since when a shrink by one has been possible (None: it is not now); kept across calls by the decision."""
    if not _fits(signals, engines - 1, limits) or _grow(signals, engines, limits) is not None:
        return None
    return last.quiet_since if last and last.quiet_since is not None else now


@dataclass
class Autoscaler:
    """`decide` with its limits and last decision kept, for a caller that asks on a timer."""

    limits: ScalingLimits
    last: ScaleDecision | None = None

    def step(self, signals: CapacitySignals, engines: int, now: float) -> ScaleDecision:
        self.last = decide(signals, engines, now, self.last, self.limits)
        return self.last
