"""Spatiotemporal multiplexing (the SeamlessFlow paper's policy).

Disaggregated, except that `{rollout, train}` resources do not sit idle while the trainer waits for data:
they generate, are preempted to `train` when a batch is ready (their in-flight calls move to other engines
through the proxy's partial rollout), and return to rollout after the weight update. `{rollout}`-only
resources never stop; they keep generating with the previous weights (one step off-policy).

Switching is priced: a flexible resource that just finished a step goes back to rollout only if there is
a backlog of tasks the rollout-only resources cannot take (`queued_tasks > 0`: otherwise it would find
nothing to generate) and the next batch is not expected sooner than a round trip of switches would take,
or when the pipeline has no work at all (it then waits for new tasks on rollout with the newest weights);
no resource switches again before its minimum dwell time. So roles do not thrash when batches arrive at
about the rate the trainer eats them.

Why a flexible resource waits on `train` when nothing is queued, although the trainer then waits for data
(issue #65 asks it to leave whenever the wait exceeds a round trip of switches): under a staleness bound of 1
the wait (~25 s a step in the simulator's 64-GPU run) is set by the bound and the long tail, and a round trip
(two 8 s switches and a weight load) eats most of it. Measured: leaving, even with in-flight rollouts moved
onto it, cut the bubble from 17.2 % to 12.4 % but throughput by 7 %; it pays only with ~1 s switches. A train
set sized from the rates is worse still (the rollout rate follows the trainer's versions). Figures:
docs/performance/scheduler.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from seamlessflow.core.policies.base import Command, PipelineState, SchedulerConfig, hold_role, switch_cost
from seamlessflow.core.resources import Resource, Tag


def multiplexed(
    resources: Sequence[Resource], pipeline: PipelineState, config: SchedulerConfig, now: float
) -> list[Command]:
    commands: list[Command] = []
    for resource in resources:
        commands += hold_role(resource, _role(resource, pipeline, config), pipeline, config, now)
    return commands


def _role(resource: Resource, pipeline: PipelineState, config: SchedulerConfig) -> Tag:
    if not resource.flexible:
        return Tag.ROLLOUT if resource.can(Tag.ROLLOUT) else Tag.TRAIN
    if pipeline.batch_ready:
        return Tag.TRAIN
    if resource.active == Tag.TRAIN and (pipeline.training or not _worth_leaving(pipeline, config)):
        return Tag.TRAIN
    return Tag.ROLLOUT


def _worth_leaving(pipeline: PipelineState, config: SchedulerConfig) -> bool:
    """There is work nobody takes, and waiting for the next batch is dearer than two switches; or there is
    no work at all, so nothing will need training soon: wait for new work on rollout, with fresh weights."""
    if pipeline.queued_tasks == 0 and pipeline.in_flight == 0:
        return True
    return pipeline.queued_tasks > 0 and not _next_batch_is_close(pipeline, config)


def _next_batch_is_close(pipeline: PipelineState, config: SchedulerConfig) -> bool:
    """Waiting is cheaper than leaving and coming back (two switches)."""
    return pipeline.seconds_to_batch() <= config.stay_margin * 2 * switch_cost(pipeline, config)
