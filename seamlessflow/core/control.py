"""The resource side of the control protocol, written once (pure: no I/O).

Every resource the scheduler commands (trainer, rollout worker, proxy, the scheduling tests' fake) feeds
the `ControlCommand`s addressed to it through one `ControlProtocol`; its Kafka adapter only reads records
in and publishes the `CommandAck` built from the returned `Reply`. The rules:

- **Freshness: a command is applied only if its epoch is strictly greater than the last one consumed;
  an equal epoch is stale.** The scheduler's `EpochBook` issues every command to a resource its own,
  strictly growing epoch (held commands give theirs back unpublished; a restarted scheduler continues
  above the control topic's maximum and above every epoch a heartbeat reports), so it never sends two
  different commands with the same epoch to one resource. An equal epoch is therefore a re-delivery of
  the command already consumed (or a second writer, which must not win): treating it as stale makes the
  result independent of delivery order, matches `resources.command_is_fresh`, and is the rule the
  scheduler's stale-ack logic assumes.
- **Every fresh command consumes its epoch, whatever its outcome** (ok, rejected, failed). The scheduler
  re-decides after a rejected or failed ack with a new epoch; a re-delivered failed command must not run
  a second time, and the heartbeat's `epoch` ("commands handled up to") then means the same everywhere.
- **De-duplication by event id** (the last `memory` ids, bounded): a second delivery of the same record
  is answered `ignored_stale` without acting, whatever its epoch.
- **The transition table** (`resources.TRANSITIONS`): each command moves the resource's life-cycle state
  through `resources.transition`; a move the table forbids is `rejected`.
- **Restart policy: restore the newest command, do not replay.** The control topic is compacted by
  resource id, so which older commands are still on it depends on when the log cleaner last ran; only the
  newest one per key is certain. A starting resource therefore counts every epoch it reads as consumed and
  carries out only the newest command addressed to it, through the same path as a live one (and acks
  it). So the role, pause or weight version the scheduler last asked for survives the restart, and the
  epoch in the first heartbeat is true. A newest `shutdown` is not restored (its epoch still counts): a
  process started after it was started on purpose.
- **Only within one generation.** A *generation* is one start of the whole stack (`seamlessflow up` draws
  a new one; every service it starts, and every restart of one of them, runs with it; the scheduler writes
  it on every command). The restore rule is right for one crashed service inside a running stack and wrong
  for a new start: the durable broker keeps each resource's newest command across `down`/`up`, and a
  worker whose last command was "switch to train" would start in train with no scheduler of its run to send
  it back. So a command of another generation is never carried out on start; its epoch still counts, so
  nothing stale is acted on later. Commands without a generation (written before the field, or by a
  scheduler run by hand without one) restore only into a resource that has none either.
- **The ack**: one `Reply` (outcome, reason) per delivery, turned into a `CommandAck` by
  `CommandAck.answering`; the scheduler acts on `ok`, and on `rejected`/`failed` for its latest epoch.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol, TypeVar

from seamlessflow.core.resources import IllegalTransition, Resource, ResourceState, Tag, command_is_fresh, transition


class CommandKind(StrEnum):
    """Values of `ControlCommand.command`."""

    SET_ACTIVE = "set_active"
    PAUSE = "pause"
    RESUME = "resume"
    LOAD_WEIGHTS = "load_weights"
    SHUTDOWN = "shutdown"


class Outcome(StrEnum):
    """Values of `CommandAck.outcome`."""

    OK = "ok"
    IGNORED_STALE = "ignored_stale"
    REJECTED = "rejected"
    FAILED = "failed"


class PauseMode(StrEnum):
    """Values of `ControlCommand.mode` (for `pause`): what happens to requests in flight."""

    KEEP = "keep"  # stop generating, keep them; they continue after `resume`
    WAIT = "wait"  # let them finish first
    ABORT = "abort"  # cut them now


BROADCAST = "*"


class CommandLike(Protocol):
    """The fields of `messages.ControlCommand` the protocol reads (the core imports no message module)."""

    event_id: str
    resource_id: str
    epoch: int
    generation: str | None
    command: CommandKind
    role: Tag | None
    mode: PauseMode | None
    weight_version: int | None


C = TypeVar("C", bound=CommandLike)


@dataclass(frozen=True)
class Reply:
    outcome: Outcome
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


@dataclass(frozen=True)
class Capabilities:
    """What one kind of resource does. `commands` maps each accepted kind to the roles it is accepted in
    (None: in any role); `roles` are the targets `set_active` may name; `resume_labels`: a `resume` that
    names a weight version makes it the resource's version (the proxy labels its engines with it)."""

    commands: Mapping[CommandKind, frozenset[str] | None]
    roles: frozenset[str] = frozenset()
    resume_labels: bool = False


class ControlProtocol:
    """One resource's command state: `admit` a delivery, carry it out if told to, then `settle` it.

    `view` is the resource as the commands left it (`Resource`: active role, life-cycle state, weight
    version); `epoch` the last epoch consumed; `stopping` once a shutdown was applied; `generation` the
    stack start this resource belongs to ("" or None: none), which `restore` keeps to.
    """

    def __init__(self, resource_id: str, capabilities: Capabilities, role: str,
                 aliases: Iterable[str] = (BROADCAST,), weight_version: int = 0, memory: int = 4096,
                 generation: str | None = None):
        self.capabilities = capabilities
        self.generation = generation or None
        self.addresses = frozenset({resource_id, *aliases})
        self.view = Resource(resource_id, frozenset(capabilities.roles), role, ResourceState.ACTIVE, weight_version)
        self.epoch = 0
        self.stopping = False
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._memory = memory

    @property
    def resource_id(self) -> str:
        return self.view.id

    def addressed(self, command: CommandLike) -> bool:
        return command.resource_id in self.addresses

    def admit(self, command: CommandLike) -> Reply | None:
        """None: fresh and allowed, the adapter carries it out now and then calls `settle`.
        A Reply: answer with it and do nothing (duplicate, stale, or not something this resource does)."""
        if command.event_id in self._seen:
            return Reply(Outcome.IGNORED_STALE, "duplicate delivery of a command already handled")
        self._remember(command.event_id)
        if not command_is_fresh(command.epoch, self.epoch):
            return Reply(Outcome.IGNORED_STALE, f"epoch {command.epoch} <= last consumed {self.epoch}")
        self.epoch = command.epoch
        refusal = self._refusal(command)
        return Reply(Outcome.REJECTED, refusal) if refusal else None

    def settle(self, command: CommandLike, reply: Reply) -> Reply:
        """Record what carrying out an admitted command did; the view changes only when it is ok."""
        if reply.ok:
            self.view = self._effect(command)
            self.stopping = self.stopping or command.command == CommandKind.SHUTDOWN
        return reply

    def restore(self, history: Iterable[C]) -> C | None:
        """At start: every epoch read counts as consumed; returns the newest command to carry out (through
        `admit` like a live one), or None (nothing addressed here, the newest is a shutdown, or it was
        issued to another generation of the stack)."""
        newest = None
        for command in history:
            if (
                self.addressed(command)
                and command.epoch > self.epoch
                and (newest is None or command.epoch > newest.epoch)
            ):
                newest = command
        if newest is None:
            return None
        if newest.command != CommandKind.SHUTDOWN and self.same_generation(newest):
            return newest
        self.epoch = newest.epoch
        self._remember(newest.event_id)
        return None

    def same_generation(self, command: CommandLike) -> bool:
        return (command.generation or None) == self.generation

    # -- rules ------------------------------------------------------------------------------------------

    def _refusal(self, command: CommandLike) -> str:
        caps = self.capabilities
        try:
            kind = CommandKind(command.command)
        except ValueError:
            return f"unknown command {command.command!r}"
        if self.stopping:
            return "shutting down"
        if kind not in caps.commands:
            return f"{self.resource_id} does not do {kind}"
        roles = caps.commands[kind]
        if roles is not None and self.view.active not in roles:
            return f"cannot {kind} in role '{self.view.active}' (only {', '.join(sorted(roles))})"
        if kind is CommandKind.SET_ACTIVE and command.role not in caps.roles:
            return f"{self.resource_id} has no '{command.role}' role (roles: {', '.join(sorted(caps.roles))})"
        if kind is CommandKind.PAUSE and command.mode not in (None, *PauseMode):
            return f"unknown pause mode {command.mode!r}"
        if kind is CommandKind.LOAD_WEIGHTS and command.weight_version is None:
            return "load_weights needs a weight_version"
        try:
            self._effect(command)
        except IllegalTransition as exc:
            return f"not allowed now: {exc}"
        return ""

    def _effect(self, command: CommandLike) -> Resource:
        view = self.view
        if command.command == CommandKind.SET_ACTIVE:
            if command.role == view.active:
                return view  # already in that role: nothing to switch (a paused resource stays paused)
            assert command.role is not None  # _refusal: a set_active names one of the resource's roles
            switching = transition(view, ResourceState.SWITCHING)
            return transition(replace(switching, active=command.role), ResourceState.ACTIVE)
        if command.command == CommandKind.PAUSE:
            return transition(view, ResourceState.PAUSED)
        if command.command == CommandKind.RESUME:
            resumed = transition(view, ResourceState.ACTIVE)
            if self.capabilities.resume_labels and command.weight_version is not None:
                resumed = replace(resumed, weight_version=command.weight_version)
            return resumed
        if command.command == CommandKind.LOAD_WEIGHTS:
            assert command.weight_version is not None  # _refusal: load_weights needs a weight_version
            return replace(view, weight_version=command.weight_version)
        return view

    def _remember(self, event_id: str) -> None:
        self._seen[event_id] = None
        if len(self._seen) > self._memory:
            self._seen.popitem(last=False)
