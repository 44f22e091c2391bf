"""The trainer's side of the control topic: `set_active(train|idle)` and `shutdown`, acks on the status topic.

The rules (epochs, duplicates, restart) are `seamlessflow.core.control`'s; this module only says what a
trainer does. The commands come from the layer's `CommandFeed`: at start the ones already on the (compacted)
topic, from which the protocol restores the newest, so the role survives a restart; after that, new ones as
they arrive.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from seamlessflow.core.control import Capabilities, CommandKind, ControlProtocol, Outcome, Reply
from seamlessflow.core.resources import Tag
from seamlessflow.messages import CommandAck, ControlCommand

ROLES = (Tag.TRAIN, Tag.IDLE)
CAPABILITIES = Capabilities({CommandKind.SET_ACTIVE: None, CommandKind.SHUTDOWN: None}, frozenset(ROLES))


@dataclass
class Decision:
    """What to do about one command: the new role (if any), whether to stop, and the ack to send."""

    role: str | None
    shutdown: bool
    ack: CommandAck


class ControlState:
    """The trainer's command layer: the core protocol, plus what a trainer does (switch role, stop)."""

    def __init__(self, resource_id: str, team: str, run: str, role: str, generation: str | None = None):
        self.resource_id, self.team, self.run = resource_id, team, run
        self.protocol = ControlProtocol(resource_id, CAPABILITIES, role, aliases=(), generation=generation)

    @property
    def role(self) -> str:
        return self.protocol.view.active

    @property
    def epoch(self) -> int:
        return self.protocol.epoch

    def restore(self, history: Iterable[ControlCommand]) -> ControlCommand | None:
        """The command to apply at start (see `core.control`: the newest, never a shutdown)."""
        return self.protocol.restore(history)

    def decide(self, command: ControlCommand) -> Decision:
        start = time.perf_counter()
        reply = self.protocol.admit(command)
        if reply is None:  # a trainer's switch is a flag the loop reads: nothing can fail
            reply = self.protocol.settle(command, Reply(Outcome.OK, _describe(command)))
        applied = reply.ok
        role = self.role if applied and command.command == CommandKind.SET_ACTIVE else None
        shutdown = applied and command.command == CommandKind.SHUTDOWN
        ack = CommandAck.answering(command, self.resource_id, reply.outcome, reply.reason,
                                   (time.perf_counter() - start) * 1000, self.team, self.run)
        return Decision(role, shutdown, ack)


def _describe(command: ControlCommand) -> str:
    return f"role {command.role}" if command.command == CommandKind.SET_ACTIVE else "stopping"
