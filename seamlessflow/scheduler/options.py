"""The `scheduler:` and `manager:` config sections, validated here (the service owns its options)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from seamlessflow.config import Settings
from seamlessflow.core.policies import SchedulerConfig
from seamlessflow.core.resources import ResourceKind
from seamlessflow.scheduler.sources import SourceOptions
from seamlessflow.scheduler.stages import StageOptions


class SchedulerOptions(BaseModel):
    """`policy` picks the core policy; the `*_s` knobs price switches (see core.policies.base)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    resource_id: str = "scheduler"
    policy: Literal["colocated", "disaggregated", "multiplexed"] = "multiplexed"
    tick_s: float = Field(1.0, gt=0)
    heartbeat_timeout_s: float = Field(10.0, gt=0)
    command_timeout_s: float = Field(30.0, gt=0)  # an unacknowledged command stops blocking after this
    switch_cost_s: float = Field(8.0, ge=0)
    min_dwell_s: float = Field(16.0, ge=0)
    stay_margin: float = Field(1.0, ge=0)
    train_pool_size: int | None = None
    batch_threshold: int = Field(8, ge=1)  # trajectories per training step (default: from `trainer:`)
    resource_kinds: list[ResourceKind] = Field(default_factory=lambda: [ResourceKind.ROLLOUT, ResourceKind.TRAINER])
    rate_window_s: float = Field(30.0, gt=0)
    coordinate_proxy: bool = True  # weight loads wrapped in proxy pause/resume (scheduling.proxy_sync)

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(
            switch_cost_s=self.switch_cost_s, min_dwell_s=self.min_dwell_s,
            heartbeat_timeout_s=self.heartbeat_timeout_s, stay_margin=self.stay_margin,
            train_pool_size=self.train_pool_size,
        )


class ManagerOptions(BaseModel):
    """Task source and pacing. `source`: "demo" (seeded arithmetic) or a JSONL path (seamlessflow.tasks);
    `sources`, when given, replace it with several named sources, each with its kind and share."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    source: str = "demo"
    demo_seed: int = 0
    demo_count: int = Field(256, ge=1)
    demo_max_operand: int = Field(99, ge=1)  # the demo's sums: operands 0..demo_max_operand
    kind: str = "arithmetic"
    group_size: int = Field(4, ge=1)
    max_in_flight: int = Field(8, ge=1)  # task groups published and not yet finished
    max_staleness: int | None = None  # default: the policy's own bound
    max_tasks: int | None = None  # stop publishing after this many groups (None: cycle forever)
    task_timeout_s: float = Field(600.0, gt=0)  # a group unfinished this long is given up (frees its slot)
    resample_too_easy: bool = True  # skip source tasks a whole group solved (SRPO history resampling)
    success_reward: float = 1.0  # default: the trainer's
    sources: list[SourceOptions] = Field(default_factory=list)  # several task sources mixed by weight (sources.py)
    stages: list[StageOptions] = Field(default_factory=list)  # the mix changing with the run (stages.py)
    stage_window: int = Field(32, ge=1)  # recent trajectories per source that a stage's metric is taken over


def scheduler_options(settings: Settings) -> SchedulerOptions:
    """`batch_threshold` defaults to the trainer's batch (groups x group size), so the scheduler calls a
    batch ready exactly when the trainer can take one."""
    section = settings.section("scheduler")
    trainer = settings.section("trainer")
    if "batch_threshold" not in section and trainer.get("threshold_kind", "groups") == "groups":
        section["batch_threshold"] = int(trainer.get("batch_threshold", 2)) * int(trainer.get("group_size", 4))
    return SchedulerOptions.model_validate(section)


def manager_options(settings: Settings) -> ManagerOptions:
    """`group_size` and `success_reward` default to the trainer's: every published task is one GRPO group it
    can use, and a task is too easy by the trainer's own measure."""
    section, trainer = settings.section("manager"), settings.section("trainer")
    for key, kind in (("group_size", int), ("success_reward", float)):
        if key not in section and key in trainer:
            section[key] = kind(trainer[key])
    return ManagerOptions.model_validate(section)
