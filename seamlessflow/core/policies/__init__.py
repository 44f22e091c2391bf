"""Scheduler policies, selected by name.

Each entry also states the staleness bound the rollout manager must enforce with it and the placement it
is defined for, so the real loop and the simulator configure themselves the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from seamlessflow.core.policies.base import (
    Command,
    LoadWeights,
    Pause,
    PipelineState,
    Policy,
    Resume,
    SchedulerConfig,
    SetActive,
    hold_role,
)
from seamlessflow.core.policies.colocated import colocated
from seamlessflow.core.policies.disaggregated import disaggregated, train_pool
from seamlessflow.core.policies.multiplexed import multiplexed


@dataclass(frozen=True)
class PolicySpec:
    """A policy plus what it assumes: `max_staleness` for the rollout manager and whether every
    resource must carry both tags (`all_train_capable`, true for colocated placement)."""

    name: str
    decide: Policy
    max_staleness: int
    all_train_capable: bool
    summary: str


POLICIES: dict[str, PolicySpec] = {
    spec.name: spec
    for spec in (
        PolicySpec("colocated", colocated, 0, True, "all resources alternate: generate a batch, train, sync"),
        PolicySpec("disaggregated", disaggregated, 1, False, "fixed pools, one-step off-policy rollout"),
        PolicySpec("multiplexed", multiplexed, 1, False, "fixed pools + {rollout,train} resources fill trainer waits"),
    )
}


def get_policy(name: str) -> PolicySpec:
    try:
        return POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None


__all__ = [
    "POLICIES",
    "Command",
    "LoadWeights",
    "Pause",
    "PipelineState",
    "Policy",
    "PolicySpec",
    "Resume",
    "SchedulerConfig",
    "SetActive",
    "get_policy",
    "hold_role",
    "train_pool",
]
