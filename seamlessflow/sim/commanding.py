"""The simulated engines obey the scheduler's commands through the core's control protocol, as real ones do.

Why: the simulator is only worth its figures if it runs the system's rules, and the resource side of those
rules (strictly growing epochs, duplicates, the life-cycle transition table, what a role allows) is
`core.control.ControlProtocol`. Each engine gets one, and every command the scheduler stamps is admitted by
it before the simulator carries it out with its costs; a command the protocol would answer without acting
(stale, duplicate, not allowed now) changes nothing, as on a real resource. No Kafka: the delivery is a value.
"""

from __future__ import annotations

from dataclasses import dataclass

from seamlessflow.core.control import Capabilities, CommandKind, ControlProtocol, Outcome, PauseMode, Reply
from seamlessflow.core.policies import LoadWeights, Pause, SetActive
from seamlessflow.core.resources import Tag
from seamlessflow.core.scheduler import StampedCommand


@dataclass
class Delivery:
    """One stamped command as a resource receives it (the fields `ControlProtocol` reads)."""

    event_id: str
    resource_id: str
    epoch: int
    command: CommandKind
    role: Tag | None = None
    mode: PauseMode | None = None
    weight_version: int | None = None
    generation: str | None = None  # one simulated run: one generation


def delivery(item: StampedCommand) -> Delivery:
    """What the scheduler service would publish for `item` (`scheduler.commands.to_message`), as a value."""
    command = item.command
    delivered = Delivery(f"{command.resource_id}#{item.epoch}", command.resource_id, item.epoch, command.kind)
    if isinstance(command, SetActive):
        delivered.role = command.role
    elif isinstance(command, Pause):
        delivered.mode = command.mode
    elif isinstance(command, LoadWeights):
        delivered.weight_version = command.version
    return delivered


def engine_protocol(resource_id: str, tags: frozenset[str], role: str) -> ControlProtocol:
    """A simulated engine takes every command kind in any role, and switches to its tags or idle."""
    capabilities = Capabilities(dict.fromkeys(CommandKind), frozenset({*tags, Tag.IDLE}))
    return ControlProtocol(resource_id, capabilities, role, aliases=())


def admitted(protocol: ControlProtocol, item: StampedCommand) -> Delivery | None:
    """The delivery to carry out now (then `carried_out`), or None when the protocol answers it without acting."""
    command = delivery(item)
    return command if protocol.admit(command) is None else None


def carried_out(protocol: ControlProtocol, command: Delivery) -> None:
    """A simulated engine carries out whatever it admitted."""
    protocol.settle(command, Reply(Outcome.OK))
