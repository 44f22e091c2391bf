"""Disaggregated placement: a fixed train pool and a fixed rollout pool.

Rollout never stops: it keeps generating with the previous weights while the trainer trains (one-step
off-policy, bounded by the rollout manager's `max_staleness`, normally 1) and loads each new version as
soon as it is published. The pool is fixed, but not blind: when a train resource fails, the next
train-capable resource takes its place so the pool keeps its size.
"""

from __future__ import annotations

from collections.abc import Sequence

from seamlessflow.core.policies.base import Command, PipelineState, SchedulerConfig, hold_role
from seamlessflow.core.resources import Resource, Tag


def disaggregated(
    resources: Sequence[Resource], pipeline: PipelineState, config: SchedulerConfig, now: float
) -> list[Command]:
    pool = train_pool(resources, config)
    commands: list[Command] = []
    for resource in resources:
        role = Tag.TRAIN if resource.id in pool or not resource.can(Tag.ROLLOUT) else Tag.ROLLOUT
        commands += hold_role(resource, role, pipeline, config, now)
    return commands


def train_pool(resources: Sequence[Resource], config: SchedulerConfig) -> set[str]:
    """Ids of the train pool: those already training first (stable), then by id.

    Default size: every train-capable resource when some resources are rollout-only (the tags already
    describe the split), otherwise half of them (at least one).
    """
    capable = [r for r in resources if r.can(Tag.TRAIN)]
    size = config.train_pool_size
    if size is None:
        has_rollout_only = any(not r.can(Tag.TRAIN) for r in resources)
        size = len(capable) if has_rollout_only else max(1, len(capable) // 2)
    ranked = sorted(capable, key=lambda r: (r.active != Tag.TRAIN, r.id))
    return {r.id for r in ranked[:size]}
