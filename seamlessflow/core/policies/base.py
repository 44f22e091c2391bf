"""What every scheduler policy reads and returns: pipeline state, config and commands (pure).

A policy is a function `(resources, pipeline, config, now) -> list[Command]`. It is called again and
again (on every status change and on a timer), so it must be idempotent: it only acts on resources that
are *settled* (ACTIVE, no command in flight) and describes the target, not a sequence of steps to replay.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from seamlessflow.core.control import CommandKind, PauseMode
from seamlessflow.core.resources import Resource, Tag


@dataclass(frozen=True)
class SetActive:
    """Give a resource a new active tag (its in-flight rollouts move elsewhere via partial rollout)."""

    resource_id: str
    role: Tag
    kind: CommandKind = CommandKind.SET_ACTIVE


@dataclass(frozen=True)
class Pause:
    """Stop generating but keep in-flight requests (`mode="keep"`), e.g. around a weight load."""

    resource_id: str
    mode: PauseMode = PauseMode.KEEP
    kind: CommandKind = CommandKind.PAUSE


@dataclass(frozen=True)
class Resume:
    resource_id: str
    kind: CommandKind = CommandKind.RESUME


@dataclass(frozen=True)
class LoadWeights:
    resource_id: str
    version: int
    kind: CommandKind = CommandKind.LOAD_WEIGHTS


Command = SetActive | Pause | Resume | LoadWeights


@dataclass(frozen=True)
class PipelineState:
    """What the rollout manager and trainer report, as the policy sees it.

    `buffered`: finished trajectories the trainer has not consumed. `current_version`: newest weights the
    trainer published; while `training`, it is producing `current_version + 1`. `trajectory_rate`:
    recently measured finished trajectories per second (0 when unknown), used to price a switch.
    `weight_update_s`: the trainer's recent measured seconds to put one version into the engines (pause,
    transfer, resume; 0 when not measured yet), which prices a switch instead of the configured constant.
    """

    queued_tasks: int = 0
    in_flight: int = 0
    buffered: int = 0
    batch_threshold: int = 1
    current_version: int = 0
    training: bool = False
    max_staleness: int = 1
    trajectory_rate: float = 0.0
    weight_update_s: float = 0.0

    @property
    def batch_ready(self) -> bool:
        return self.buffered >= self.batch_threshold

    def seconds_to_batch(self) -> float:
        """Expected wait until the buffer holds a batch, at the measured rate."""
        missing = self.batch_threshold - self.buffered
        if missing <= 0:
            return 0.0
        return missing / self.trajectory_rate if self.trajectory_rate > 0 else math.inf


@dataclass(frozen=True)
class SchedulerConfig:
    """Knobs that price role switches so roles do not thrash.

    `switch_cost_s`: expected seconds one rollout<->train switch costs (offload KV cache, onload optimizer
    state). `min_dwell_s`: a resource keeps a role at least this long after a switch. A flexible resource
    stays on `train` after a step if the next batch is expected within `stay_margin` round trips of
    switching (2 * switch_cost_s each), since leaving and coming back would cost more than waiting.
    `train_pool_size`: fixed train pool for `disaggregated` (None: every train-capable resource when some
    resources are rollout-only, else half of them).

    The core's frozen view of the `scheduler:` section, built by `SchedulerOptions.scheduler_config()`: the
    defaults and their help are written there, once.
    """

    switch_cost_s: float
    min_dwell_s: float
    heartbeat_timeout_s: float
    stay_margin: float
    train_pool_size: int | None


Policy = Callable[[Sequence[Resource], PipelineState, SchedulerConfig, float], list[Command]]


def switch_cost(pipeline: PipelineState, config: SchedulerConfig) -> float:
    """Seconds one switch is expected to cost: the measured weight update when the trainer reported one
    (a resource coming back to rollout waits for exactly that), else the configured `switch_cost_s`."""
    return pipeline.weight_update_s if pipeline.weight_update_s > 0 else config.switch_cost_s


def may_switch(resource: Resource, now: float, config: SchedulerConfig) -> bool:
    """A settled resource whose minimum dwell time in its current role has passed."""
    return resource.settled and now - resource.last_switch >= config.min_dwell_s


def weight_update(resource_id: str, version: int) -> list[Command]:
    """The paper's update sequence: pause (keep in-flight) -> load version -> resume."""
    return [Pause(resource_id), LoadWeights(resource_id, version), Resume(resource_id)]


def keep_generating(resource: Resource, pipeline: PipelineState) -> list[Command]:
    """A settled rollout resource only needs newer weights when the trainer published some."""
    if resource.settled and resource.weight_version < pipeline.current_version:
        return weight_update(resource.id, pipeline.current_version)
    return []


def switch_to(resource: Resource, role: Tag, pipeline: PipelineState) -> list[Command]:
    """Change role; a resource entering rollout also loads the newest weights."""
    commands: list[Command] = [SetActive(resource.id, role)]
    if role == Tag.ROLLOUT and resource.weight_version < pipeline.current_version:
        commands.append(LoadWeights(resource.id, pipeline.current_version))
    return commands


def hold_role(
    resource: Resource, role: Tag, pipeline: PipelineState, config: SchedulerConfig, now: float
) -> list[Command]:
    """Steer one resource towards `role`, respecting dwell time; refresh weights if it generates."""
    if resource.active != role:
        return switch_to(resource, role, pipeline) if may_switch(resource, now, config) else []
    return keep_generating(resource, pipeline) if role == Tag.ROLLOUT else []
