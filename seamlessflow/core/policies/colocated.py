"""Colocated placement: every resource generates a batch, then all train, sync, repeat.

The synchronous, verl-like baseline. It needs the rollout manager to run with `max_staleness=0` (exactly
one batch of rollouts per weight version), so "batch ready" also means "nothing left in flight".
Rollout-only resources, if any, stay on rollout and simply wait through the training phase.
"""

from __future__ import annotations

from collections.abc import Sequence

from seamlessflow.core.policies.base import Command, PipelineState, SchedulerConfig, hold_role
from seamlessflow.core.resources import Resource, Tag


def colocated(
    resources: Sequence[Resource], pipeline: PipelineState, config: SchedulerConfig, now: float
) -> list[Command]:
    train_phase = pipeline.training or pipeline.batch_ready
    commands: list[Command] = []
    for resource in resources:
        role = Tag.TRAIN if train_phase and resource.can(Tag.TRAIN) else _home_role(resource)
        commands += hold_role(resource, role, pipeline, config, now)
    return commands


def _home_role(resource: Resource) -> Tag:
    return Tag.ROLLOUT if resource.can(Tag.ROLLOUT) else Tag.TRAIN
