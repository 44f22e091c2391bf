"""The resource model the tag scheduler reasons about (pure: no I/O).

A *resource* is one schedulable unit of hardware (an engine, a GPU, a GPU group). Its *capability tags*
say what it can do (`rollout`, `train`); its *hardware tags* what it is good at (`compute`, `bandwidth`, a GPU
model; the proxy routes sessions by them, `core.routing`); its *active tag* says what it does now. The scheduler
only changes active tags and weights; it never learns what a resource runs inside.

Why a transition table: the allowed state changes are written once, here, so the scheduler service and the
simulator agree on them and a reader sees the whole life cycle at a glance.

Why epochs: control commands are published on a compacted topic and may be re-delivered or reordered
across a scheduler restart. Every command carries a per-resource epoch that only grows; a resource applies
a command only if its epoch is strictly newer than the last it consumed (the whole resource side, written
once for every resource, is `core.control`), and the scheduler ignores acks for epochs it has since
superseded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum


class Tag(StrEnum):
    """Roles a resource can be given (values match `ControlCommand.role`)."""

    ROLLOUT = "rollout"
    TRAIN = "train"
    IDLE = "idle"


class ResourceState(StrEnum):
    """Life-cycle state (values match `ResourceStatus.state`)."""

    STARTING = "starting"
    ACTIVE = "active"
    SWITCHING = "switching"
    PAUSED = "paused"
    FAILED = "failed"
    STOPPED = "stopped"  # shut down on purpose: a resource's last heartbeat; the scheduler counts it as failed


class ResourceKind(StrEnum):
    """What sends a heartbeat (values match `ResourceStatus.kind`); the scheduler commands rollout and trainer."""

    ROLLOUT = "rollout"
    TRAINER = "trainer"
    PROXY = "proxy"
    ASSEMBLER = "assembler"
    SCHEDULER = "scheduler"
    AGENT = "agent"
    REWARD = "reward"
    TEACHER = "teacher"  # a teacher worker (on-policy distillation, `seamlessflow.teacher`)


_S = ResourceState
TRANSITIONS: dict[ResourceState, frozenset[ResourceState]] = {
    _S.STARTING: frozenset({_S.ACTIVE, _S.FAILED, _S.STOPPED}),
    _S.ACTIVE: frozenset({_S.SWITCHING, _S.PAUSED, _S.FAILED, _S.STOPPED}),
    _S.SWITCHING: frozenset({_S.ACTIVE, _S.FAILED, _S.STOPPED}),
    _S.PAUSED: frozenset({_S.ACTIVE, _S.SWITCHING, _S.FAILED, _S.STOPPED}),
    _S.FAILED: frozenset({_S.STARTING, _S.STOPPED}),
    _S.STOPPED: frozenset({_S.STARTING}),
}


class IllegalTransition(ValueError):
    """A state change the life-cycle table does not allow."""


@dataclass(frozen=True)
class Resource:
    """One schedulable unit as the scheduler last saw it.

    `active` is the role the resource has or is switching to (while `state` is SWITCHING it is the
    target). `throughput` is tokens/s in its current role and `memory_gb` its accelerator memory: figures
    policies may weigh. `last_switch` is when its active tag last changed (for the minimum dwell time).
    """

    id: str
    tags: frozenset[str]
    active: str = Tag.IDLE
    state: ResourceState = ResourceState.STARTING
    weight_version: int = 0
    throughput: float = 0.0
    memory_gb: float = 0.0
    last_heartbeat: float = 0.0
    last_switch: float = -math.inf
    hardware_tags: frozenset[str] = frozenset()  # what it is good at (compute, bandwidth, h100): see core.routing

    def can(self, tag: str) -> bool:
        return tag in self.tags

    @property
    def flexible(self) -> bool:
        """Can both generate and train: the resources spatiotemporal multiplexing moves."""
        return self.can(Tag.ROLLOUT) and self.can(Tag.TRAIN)

    @property
    def settled(self) -> bool:
        """Active and not in the middle of a command: the only state a policy acts on."""
        return self.state is ResourceState.ACTIVE


def make_resource(resource_id: str, *tags: str, **fields: object) -> Resource:
    """Shorthand for tests and the simulator: `make_resource("r0", "rollout", "train")`."""
    return Resource(id=resource_id, tags=frozenset(tags), **fields)  # type: ignore[arg-type]


def transition(resource: Resource, new_state: ResourceState) -> Resource:
    """Return `resource` in `new_state`, or raise if the life-cycle table forbids it."""
    if new_state is resource.state:
        return resource
    if new_state not in TRANSITIONS[resource.state]:
        raise IllegalTransition(f"{resource.id}: {resource.state} -> {new_state}")
    return replace(resource, state=new_state)


def heartbeat_expired(resource: Resource, now: float, timeout_s: float) -> bool:
    """True when a live resource has been silent longer than `timeout_s`."""
    return resource.state is not ResourceState.FAILED and now - resource.last_heartbeat > timeout_s


def command_is_fresh(command_epoch: int, last_applied_epoch: int) -> bool:
    """Resource side of the epoch rule: apply a command only if it is strictly newer than the last consumed
    (an equal epoch is a re-delivery: see `core.control`)."""
    return command_epoch > last_applied_epoch


@dataclass
class EpochBook:
    """Scheduler side of the epoch rule: monotonic epochs per resource, stale acks ignored.

    Rebuild it after a restart with `EpochBook(issued={rid: last_epoch_seen_on_control_topic})` so new
    commands continue above every epoch a resource may already have applied.
    """

    issued: dict[str, int] = field(default_factory=dict)
    acked: dict[str, int] = field(default_factory=dict)

    def issue(self, resource_id: str) -> int:
        epoch = self.issued.get(resource_id, 0) + 1
        self.issued[resource_id] = epoch
        return epoch

    def ack(self, resource_id: str, epoch: int) -> bool:
        """Record an ack; True only for the latest issued epoch (older ones are stale)."""
        if epoch != self.issued.get(resource_id, 0):
            return False
        self.acked[resource_id] = max(epoch, self.acked.get(resource_id, 0))
        return True

    def pending(self, resource_id: str) -> bool:
        """A command was issued that the resource has not acknowledged yet."""
        return self.acked.get(resource_id, 0) < self.issued.get(resource_id, 0)
