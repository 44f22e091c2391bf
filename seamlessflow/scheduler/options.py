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

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Read by nothing: `services.scheduler` says whether `up` runs the scheduler (kept so configs validate)."""
    resource_id: str = "scheduler"
    """Its resource id on the control and status topics."""
    policy: Literal["colocated", "disaggregated", "multiplexed"] = "multiplexed"
    """How roles are given: colocated | disaggregated | multiplexed (`core.policies`)."""
    tick_s: float = Field(1.0, gt=0)
    """Seconds between two scheduling decisions."""
    heartbeat_timeout_s: float = Field(10.0, gt=0)
    """A resource whose heartbeat is older than this is taken as failed and left out."""
    command_timeout_s: float = Field(30.0, gt=0)
    """An unacknowledged command stops blocking after this."""
    switch_cost_s: float = Field(8.0, ge=0)
    """Expected seconds one rollout <-> train switch costs, until the trainer reports a measured one."""
    min_dwell_s: float = Field(16.0, ge=0)
    """A resource keeps a role at least this long after a switch."""
    stay_margin: float = Field(1.0, ge=0)
    """A resource stays on train if the next batch is due within this many switch round trips."""
    train_pool_size: int | None = None
    """Fixed train pool of `disaggregated`; None: every train-capable resource, or half of them."""
    batch_threshold: int = Field(8, ge=1)
    """Trajectories per training step; default: the trainer's batch_threshold x group_size."""
    resource_kinds: list[ResourceKind] = Field(default_factory=lambda: [ResourceKind.ROLLOUT, ResourceKind.TRAINER])
    """Kinds of resources whose status it follows and schedules."""
    rate_window_s: float = Field(30.0, gt=0)
    """Window over which the rate of arriving trajectories is measured."""
    coordinate_proxy: bool = True
    """Wrap weight loads in a proxy pause and resume (`scheduler.proxy_sync`)."""

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(
            switch_cost_s=self.switch_cost_s, min_dwell_s=self.min_dwell_s,
            heartbeat_timeout_s=self.heartbeat_timeout_s, stay_margin=self.stay_margin,
            train_pool_size=self.train_pool_size,
        )


class ManagerOptions(BaseModel):
    """Task source and pacing. `source`: "demo" (seeded arithmetic) or a JSONL path (seamlessflow.tasks);
    `sources`, when given, replace it with several named sources, each with its kind and share."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Run the rollout manager that publishes tasks (false: the scheduler only schedules)."""
    source: str = "demo"
    """The task source: `demo` (seeded arithmetic) or a JSONL task file (`seamlessflow.tasks`)."""
    demo_seed: int = 0
    """Seed of the demo's generated tasks."""
    demo_count: int = Field(256, ge=1)
    """How many demo tasks are generated (published in an endless cycle)."""
    demo_max_operand: int = Field(99, ge=1)
    """The demo's sums: operands 0..demo_max_operand."""
    kind: str = "arithmetic"
    """Kind of the tasks: the agent pools that run them (`agents.kinds`)."""
    group_size: int = Field(4, ge=1)
    """Sessions per task (one GRPO group); default: the trainer's group_size."""
    max_in_flight: int = Field(8, ge=1)
    """Task groups published and not yet finished."""
    max_staleness: int | None = None
    """Weight versions a published task may run ahead of the trainer's; None: the policy's own bound."""
    max_tasks: int | None = None
    """Stop publishing after this many groups (None: cycle forever)."""
    task_timeout_s: float = Field(600.0, gt=0)
    """A group unfinished this long is given up (frees its slot)."""
    resample_too_easy: bool = True
    """Skip source tasks a whole group solved (SRPO history resampling)."""
    success_reward: float = 1.0
    """A group whose rewards all reach this marks its task too easy; default: the trainer's."""
    sources: list[SourceOptions] = Field(default_factory=list)
    """Several named task sources mixed by weight; when given, they replace `source` and `kind`."""
    stages: list[StageOptions] = Field(default_factory=list)
    """Stages of the run, each with its own mix of `sources` and its end; none: the sources' own weights."""
    stage_window: int = Field(32, ge=1)
    """Recent trajectories per source that a stage's metric is taken over."""


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
