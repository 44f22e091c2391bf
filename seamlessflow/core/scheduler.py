"""The tag scheduler's pure decision step: failures, policy, epochs, one injected clock.

The scheduler service (Kafka in, Kafka out) and the simulator both call this module, so the simulator
exercises exactly the code that runs in production. One step:

1. resources whose heartbeat is older than `heartbeat_timeout_s` are declared failed and left out, so the
   policy reassigns their role to the healthy ones;
2. the named policy maps (healthy resources, pipeline state, now) to commands, except for resources whose role
   is decided outside it (`roles`: the training time share's turns, `core.train_share`), which are steered to
   that role under the same dwell rules;
3. each command is stamped with the resource's next epoch.

`expect` gives the state a resource should be in once it has received a command; the service uses it
between issuing a command and hearing the ack, so the next step does not issue the same command again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from seamlessflow.core.policies import (
    Command,
    LoadWeights,
    Pause,
    PipelineState,
    PolicySpec,
    Resume,
    SchedulerConfig,
    SetActive,
    get_policy,
    hold_role,
)
from seamlessflow.core.resources import EpochBook, Resource, ResourceState, Tag, heartbeat_expired


@dataclass(frozen=True)
class Plan:
    """Commands to publish and resources newly declared failed (heartbeat timeout)."""

    commands: tuple[Command, ...]
    failed: tuple[str, ...] = ()


@dataclass(frozen=True)
class StampedCommand:
    epoch: int
    command: Command


def split_failed(resources: Iterable[Resource], now: float, timeout_s: float) -> tuple[list[Resource], list[str]]:
    """Healthy resources, and ids of resources that just timed out (already-failed ones are dropped)."""
    healthy: list[Resource] = []
    newly_failed: list[str] = []
    for resource in resources:
        if resource.state is ResourceState.FAILED:
            continue
        if heartbeat_expired(resource, now, timeout_s):
            newly_failed.append(resource.id)
        else:
            healthy.append(resource)
    return healthy, newly_failed


def plan(
    policy: str | PolicySpec,
    resources: Sequence[Resource],
    pipeline: PipelineState,
    config: SchedulerConfig,
    now: float,
    roles: Mapping[str, Tag] | None = None,
) -> Plan:
    spec = get_policy(policy) if isinstance(policy, str) else policy
    healthy, failed = split_failed(resources, now, config.heartbeat_timeout_s)
    roles = roles or {}
    commands = [c for c in spec.decide(healthy, pipeline, config, now) if c.resource_id not in roles]
    for resource in healthy:
        if resource.id in roles:
            commands += hold_role(resource, roles[resource.id], pipeline, config, now)
    return Plan(tuple(commands), tuple(failed))


def expect(resource: Resource, command: Command, now: float) -> Resource:
    """The state `resource` moves to on receiving `command` (the version changes only on its ack)."""
    if isinstance(command, SetActive):
        return replace(resource, active=command.role, state=ResourceState.SWITCHING, last_switch=now)
    if isinstance(command, Pause):
        return replace(resource, state=ResourceState.PAUSED)
    if isinstance(command, Resume):
        return replace(resource, state=ResourceState.ACTIVE)
    if isinstance(command, LoadWeights) and resource.state is ResourceState.ACTIVE:
        return replace(resource, state=ResourceState.SWITCHING)
    return resource


def expect_all(resources: Sequence[Resource], commands: Iterable[Command], now: float) -> list[Resource]:
    by_id = {r.id: r for r in resources}
    for command in commands:
        by_id[command.resource_id] = expect(by_id[command.resource_id], command, now)
    return [by_id[r.id] for r in resources]


@dataclass
class Scheduler:
    """A policy bound to its config, an epoch book and one injected clock (`time.monotonic`, or the
    simulator's clock)."""

    policy: str
    clock: Callable[[], float]
    config: SchedulerConfig
    epochs: EpochBook = field(default_factory=EpochBook)

    @property
    def spec(self) -> PolicySpec:
        return get_policy(self.policy)

    def step(
        self, resources: Sequence[Resource], pipeline: PipelineState, roles: Mapping[str, Tag] | None = None
    ) -> tuple[list[StampedCommand], tuple[str, ...]]:
        decision = plan(self.spec, resources, pipeline, self.config, self.clock(), roles)
        stamped = [StampedCommand(self.epochs.issue(c.resource_id), c) for c in decision.commands]
        return stamped, decision.failed
