"""The `scheduler:` and `manager:` config sections, validated here (the service owns its options); `manager:`
holds its task sources (`scheduler.sources`) and the run's stages (`scheduler.stages`)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seamlessflow.config import SectionOptions, Settings
from seamlessflow.core.autoscale import ScalingLimits
from seamlessflow.core.policies import SchedulerConfig
from seamlessflow.core.resources import ResourceKind
from seamlessflow.core.stages import StageEnd
from seamlessflow.core.train_share import ShareConfig

_LIMITS = ScalingLimits()  # the policy's defaults, read once: the options below start from them


class AutoscaleOptions(BaseModel):
    """`scheduler.autoscale`: the autoscaling policy (`core.autoscale`) run live in the scheduler: it logs and
    publishes how many rollout engines it would run and why; with `act`, the supervisor of a stack on one machine
    carries that out (`stack.scale.AdviceActor`), else an operator does (`seamlessflow scale`). Every field but
    `enabled`, `act` and `trainer_idle_window_s` is a `ScalingLimits` field."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = False
    """Evaluate the policy every tick and publish its target and reason."""
    act: bool = False
    """The process holding the stack starts and drains engines as advised: on one machine its supervisor (`up` in
    the foreground or detached), on Ray a foreground `up --ray` (a detached stack on Ray has no such process:
    advice only there). False: advice only, carried out by `seamlessflow scale`."""
    min_engines: int = Field(default=_LIMITS.min_engines, ge=0)
    """Fewest rollout engines the policy asks for."""
    max_engines: int = Field(default=_LIMITS.max_engines, ge=0)
    """Most rollout engines the policy asks for."""
    cooldown_s: float = Field(default=_LIMITS.cooldown_s, ge=0)
    """No change within this many seconds of the last one (an engine takes about a model load to serve)."""
    down_after_s: float = Field(default=_LIMITS.down_after_s, ge=0)
    """The load must have fitted on fewer engines this long before one goes."""
    up_waiting_per_engine: float = Field(default=_LIMITS.up_waiting_per_engine, ge=0)
    """Grow when more sessions than this wait per engine (at the proxies and queued in the engines)."""
    sessions_per_engine: int = Field(default=_LIMITS.sessions_per_engine, ge=1)
    """Sessions one more engine absorbs (vLLM `max_num_seqs`): turns a backlog into engines."""
    max_step_up: int = Field(default=_LIMITS.max_step_up, ge=1)
    """Most engines added by one decision."""
    max_step_down: int = Field(default=_LIMITS.max_step_down, ge=1)
    """Most engines drained by one decision."""
    down_kv_target: float = Field(default=_LIMITS.down_kv_target, gt=0, lt=1)
    """Shrink only if the running load fits below this share of KV cache on fewer engines."""
    trainer_behind_batches: float = Field(default=_LIMITS.trainer_behind_batches, ge=0)
    """With this many batches waiting for the trainer and the trainer busy, more engines would not help: hold."""
    trainer_busy: float = Field(default=_LIMITS.trainer_busy, ge=0, le=1)
    """The trainer counts as busy when idle less than this share of `trainer_idle_window_s`."""
    trainer_starved: float = Field(default=_LIMITS.trainer_starved, ge=0, le=1)
    """The trainer idle more than this share, and the engines `engine_full`: any backlog asks for an engine."""
    engine_full: float = Field(default=_LIMITS.engine_full, ge=0, le=1)
    """Mean KV-cache use (0..1) of the serving engines at which they count as full."""
    trainer_idle_window_s: float = Field(default=60.0, gt=0)
    """Window over which the trainer's idle share is measured (from the growth of its `busy_s` figure)."""

    @model_validator(mode="after")
    def _valid_limits(self) -> AutoscaleOptions:
        self.limits()  # the policy's own checks (min <= max, ...) as a config error
        return self

    def limits(self) -> ScalingLimits:
        """The frozen limits the pure policy takes: every option of the same name."""
        names = {f.name for f in fields(ScalingLimits)}
        return ScalingLimits(**{k: v for k, v in self.model_dump().items() if k in names})


class TrainShareOptions(BaseModel):
    """`scheduler.train_share`: training time shared by team weight (`core.train_share`), for a stack that trains
    the teams' adapters (`trainer.target: adapters`) on devices its trainers share. Each team's weight is its
    trainer's `share_weight` (`trainer.teams.<team>.share_weight`, default 1)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = False
    """Give the adapter trainers turns (train role) by weight; false: every trainer trains whenever it has work."""
    concurrent: int = Field(default=1, ge=1)
    """Trainers that hold a turn at once (1: the devices go to one team's trainer at a time)."""
    slice_s: float = Field(default=60.0, gt=0)
    """A turn's length: then the turn goes to the busy trainer least served for its weight (maybe the same one).
    Keep it above `min_dwell_s`, which bounds how fast a role can change."""

    def share_config(self, min_dwell_s: float = 0.0) -> ShareConfig:
        """The core's view; a turn lasts at least the roles' dwell time (`scheduler.min_dwell_s`)."""
        return ShareConfig(concurrent=self.concurrent, slice_s=self.slice_s, min_turn_s=min(min_dwell_s, self.slice_s))


class SchedulerOptions(SectionOptions):
    """`policy` picks the core policy; the `*_s` knobs price switches (see core.policies.base)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "scheduler"

    enabled: bool = True
    """Read by nothing: `services.scheduler` says whether `up` runs the scheduler (kept so configs validate)."""
    resource_id: str = "scheduler"
    """Its resource id on the control and status topics."""
    policy: Literal["colocated", "disaggregated", "multiplexed"] = "multiplexed"
    """How roles are given: colocated | disaggregated | multiplexed (`core.policies`)."""
    tick_s: float = Field(default=1.0, gt=0)
    """Seconds between two scheduling decisions."""
    heartbeat_timeout_s: float = Field(default=10.0, gt=0)
    """A resource whose heartbeat is older than this is taken as failed and left out."""
    command_timeout_s: float = Field(default=30.0, gt=0)
    """An unacknowledged command stops blocking after this."""
    switch_cost_s: float = Field(default=8.0, ge=0)
    """Expected seconds one rollout <-> train switch costs, until the trainer reports a measured one."""
    min_dwell_s: float = Field(default=16.0, ge=0)
    """A resource keeps a role at least this long after a switch."""
    stay_margin: float = Field(default=1.0, ge=0)
    """A resource stays on train if the next batch is due within this many switch round trips."""
    train_pool_size: int | None = None
    """Fixed train pool of `disaggregated`; None: every train-capable resource, or half of them."""
    batch_threshold: int = Field(default=8, ge=1)
    """Trajectories per training step; default: the trainer's batch_threshold x group_size."""
    resource_kinds: list[ResourceKind] = Field(default_factory=lambda: [ResourceKind.ROLLOUT, ResourceKind.TRAINER])
    """Kinds of resources whose status it follows and schedules."""
    rate_window_s: float = Field(default=30.0, gt=0)
    """Window over which the rate of arriving trajectories is measured."""
    coordinate_proxy: bool = True
    """Wrap weight loads in a proxy pause and resume (`scheduler.proxy_sync`)."""
    autoscale: AutoscaleOptions = Field(default_factory=AutoscaleOptions)
    """The autoscaling policy, advisory: how many rollout engines it would run, and why (`scheduler.autoscaling`)."""
    train_share: TrainShareOptions = Field(default_factory=TrainShareOptions)
    """Training time shared by team weight among the teams' adapter trainers (`scheduler.train_turns`)."""

    @classmethod
    def section_data(cls, settings: Settings) -> dict[str, Any]:
        """`batch_threshold` defaults to the trainer's batch (groups x group size), so the scheduler calls a
        batch ready exactly when the trainer can take one."""
        section = settings.section(cls.SECTION)
        trainer = settings.section("trainer")
        if "batch_threshold" not in section and trainer.get("threshold_kind", "groups") == "groups":
            section["batch_threshold"] = int(trainer.get("batch_threshold", 2)) * int(trainer.get("group_size", 4))
        return section

    def scheduler_config(self) -> SchedulerConfig:
        """The frozen plain view the pure core's policies take."""
        return SchedulerConfig(
            switch_cost_s=self.switch_cost_s, min_dwell_s=self.min_dwell_s,
            heartbeat_timeout_s=self.heartbeat_timeout_s, stay_margin=self.stay_margin,
            train_pool_size=self.train_pool_size,
        )


class SourceOptions(BaseModel):
    """One entry of `manager.sources`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The source's name; its task ids get the prefix `<name>:`."""
    source: str = "demo"
    """`demo` (seeded arithmetic) or a JSONL task file."""
    kind: str = "arithmetic"
    """Kind of its tasks: the agent pools that run them (`agents.kinds`)."""
    weight: float = Field(1.0, gt=0)
    """Its share of every batch, relative to the other sources' weights."""
    verifier: str | None = None
    """The reward workers' pool (`rewards.pool`) that scores its sessions, put in each task's payload."""
    team: str | None = None
    """The team its tasks are published for (default: the run's team)."""
    demo_seed: int = 0
    """Seed of its demo tasks."""
    demo_count: int = Field(256, ge=1)
    """How many demo tasks it generates."""
    demo_max_operand: int = Field(99, ge=1)
    """The demo's sums: operands 0..demo_max_operand."""


class StageEndOptions(BaseModel):
    """`core.stages.StageEnd` in a config: {step: N}, {version: N} or {metric: NAME, above|below: X}."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    step: int | None = Field(None, ge=1)
    """The stage ends at this trainer step."""
    version: int | None = Field(None, ge=1)
    """The stage ends at this weight version."""
    metric: str | None = None
    """The stage ends on a recent figure: recent_reward | recent_length | source.<name>.recent_reward | ..."""
    above: float | None = None
    """With `metric`: the stage ends once the figure is above this."""
    below: float | None = None
    """With `metric`: the stage ends once the figure is below this."""

    @model_validator(mode="after")
    def _one_condition(self) -> StageEndOptions:
        if self.step is None and self.version is None and self.metric is None:
            raise ValueError("a stage's `until` needs step, version or metric")
        if self.metric is not None and (self.above is None) == (self.below is None):
            raise ValueError(f"metric {self.metric!r} needs exactly one of above / below")
        return self

    def rule(self) -> StageEnd:
        return StageEnd(self.step, self.version, self.metric, self.above, self.below)


class StageOptions(BaseModel):
    """One entry of `manager.stages`: the weights of the sources that feed it (named in `manager.sources`;
    the others sit it out) and when it ends (the last stage has no end)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """The stage's name."""
    weights: dict[str, float] = Field(min_length=1)
    """Source name -> its weight in this stage (the sources not named sit it out)."""
    until: StageEndOptions | None = None
    """When the stage ends; only the last stage may have none."""


class ManagerOptions(SectionOptions):
    """Task source and pacing. `source`: "demo" (seeded arithmetic) or a JSONL path (seamlessflow.tasks);
    `sources`, when given, replace it with several named sources, each with its kind and share."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "manager"

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

    @classmethod
    def section_data(cls, settings: Settings) -> dict[str, Any]:
        """`group_size` and `success_reward` default to the trainer's: every published task is one GRPO group it
        can use, and a task is too easy by the trainer's own measure."""
        section, trainer = settings.section(cls.SECTION), settings.section("trainer")
        for key, kind in (("group_size", int), ("success_reward", float)):
            if key not in section and key in trainer:
                section[key] = kind(trainer[key])
        return section
