"""Applies control commands and engine heartbeats to the proxy's gate and engine table; acks commands.

See `seamlessflow.proxy.control_view` for the contract with the scheduler, `seamlessflow.core.control` for the
rules every resource shares (epochs, duplicates, restart).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from seamlessflow.core.control import Capabilities, CommandKind, ControlProtocol, Outcome, PauseMode, Reply
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag
from seamlessflow.messages import CommandAck, ControlCommand, ResourceStatus
from seamlessflow.model.lora import versions_in
from seamlessflow.proxy.control_view import ALIASES
from seamlessflow.proxy.generation import PauseGate
from seamlessflow.proxy.routing import EngineTable

log = logging.getLogger(__name__)


CAPABILITIES = Capabilities({CommandKind.PAUSE: None, CommandKind.RESUME: None, CommandKind.LOAD_WEIGHTS: None},
                            resume_labels=True)


class CommandHandler:
    """The proxy's command layer: the core protocol admits each command (in arrival order, on the loop);
    admitted ones are carried out one at a time on the gate and engine table, then settled and acked."""

    def __init__(self, proxy_id: str, gate: PauseGate, engines: EngineTable,
                 publish_ack: Callable[[CommandAck], Awaitable[None]], team: str, run: str,
                 drain_timeout_s: float, generation: str | None = None) -> None:
        self.proxy_id = proxy_id
        self.gate = gate
        self.engines = engines
        self.publish_ack = publish_ack  # async (CommandAck) -> None
        self.team = team
        self.run = run
        self.drain_timeout_s = drain_timeout_s
        self.protocol = ControlProtocol(proxy_id, CAPABILITIES, role=ResourceKind.PROXY, aliases=ALIASES,
                                        generation=generation)
        self._turn = asyncio.Lock()  # FIFO: commands are carried out in the order they were admitted
        self._tasks: set[asyncio.Task] = set()

    @property
    def last_epoch(self) -> int:
        return self.protocol.epoch

    def on_message(self, message: Any) -> None:
        """Called on the event loop for each control/status record."""
        if isinstance(message, ResourceStatus):
            self._on_status(message)
        elif isinstance(message, ControlCommand) and self.protocol.addressed(message):
            self._spawn(self.apply(message))

    def on_history(self, commands: list[ControlCommand]) -> None:
        """The control records on the topic when the proxy started: restore from them (`core.control`)."""
        restored = self.protocol.restore(commands)
        if restored is not None:
            self._spawn(self.apply(restored))

    def _spawn(self, coroutine: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def apply(self, command: ControlCommand) -> CommandAck:
        """Admit `command` now (synchronously, so epochs are consumed in arrival order), carry it out when
        its turn comes, and publish the ack."""
        started = time.monotonic()
        reply = self.protocol.admit(command)
        if reply is None:
            async with self._turn:
                reply = self.protocol.settle(command, await self._carry_out(command))
        ack = CommandAck.answering(command, self.proxy_id, reply.outcome, reply.reason,
                                   (time.monotonic() - started) * 1000, self.team, self.run)
        try:
            await self.publish_ack(ack)
        except Exception:  # noqa: BLE001 - the command is applied; a lost ack is logged, not fatal
            log.exception("could not publish ack for %s", command.event_id)
        return ack

    def _on_status(self, status: ResourceStatus) -> None:
        if not status.engine_url or status.resource_id == self.proxy_id:
            return
        if status.kind != ResourceKind.ROLLOUT and status.active_tag != Tag.ROLLOUT:
            return
        # a worker switched to train keeps reporting "active" and its URL while its engine is stopped
        serving = (
            status.state == ResourceState.ACTIVE
            and status.active_tag == Tag.ROLLOUT
            and status.figures.get("engine_up", 1.0) >= 1
        )
        engine = self.engines.announce(
            status.resource_id, status.engine_url, serving, status.weight_version, frozenset(status.hardware_tags),
            stopped=status.state == ResourceState.STOPPED, adapter_versions=versions_in(status.figures),
        )
        if status.active_tag != Tag.ROLLOUT:  # preempted (e.g. to train): its calls move to other engines
            moved = self.gate.cut_on(engine.url)
            if moved:
                log.info("%s left rollout: %d in-flight call(s) continue on other engines", status.resource_id, moved)

    async def _carry_out(self, command: ControlCommand) -> Reply:
        outcome, reason = await self._do(command)
        return Reply(outcome, reason)

    async def _do(self, command: ControlCommand) -> tuple[Outcome, str]:
        if command.command == CommandKind.PAUSE:
            keep_running = command.mode == PauseMode.WAIT
            cut = self.gate.close(cut=not keep_running)
            idle = await self.gate.wait_idle(self.drain_timeout_s)
            if not idle:
                return Outcome.FAILED, f"calls still generating after {self.drain_timeout_s} s"
            return Outcome.OK, f"paused ({'drained' if keep_running else f'cut {cut} in-flight calls'})"
        if command.command == CommandKind.RESUME:
            if command.weight_version is not None:
                self.engines.set_all_versions(command.weight_version)
            self.gate.open()
            return (
                Outcome.OK,
                f"resumed at version {command.weight_version}" if command.weight_version is not None else "resumed",
            )
        assert command.weight_version is not None  # load_weights is admitted only with a version
        self.engines.set_all_versions(command.weight_version)  # load_weights (with a version: admitted)
        return Outcome.OK, f"engines labelled with version {command.weight_version}"
