"""Applies control commands and engine heartbeats to the proxy's gate and engine table; acks commands.

See `seamlessflow.proxy.control` for the contract with the scheduler.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from seamlessflow.messages import CommandAck, ControlCommand, ResourceStatus
from seamlessflow.proxy.control import addressed_to
from seamlessflow.proxy.generation import PauseGate
from seamlessflow.proxy.routing import EngineTable

log = logging.getLogger(__name__)


class CommandHandler:
    def __init__(self, proxy_id: str, gate: PauseGate, engines: EngineTable, publish_ack, team: str, run: str, drain_timeout_s: float):
        self.proxy_id = proxy_id
        self.gate = gate
        self.engines = engines
        self.publish_ack = publish_ack  # async (CommandAck) -> None
        self.team = team
        self.run = run
        self.drain_timeout_s = drain_timeout_s
        self.last_epoch = -1
        self._seen: deque[str] = deque(maxlen=4096)
        self._tasks: set[asyncio.Task] = set()

    def on_message(self, message: Any) -> None:
        """Called on the event loop for each control/status record."""
        if isinstance(message, ResourceStatus):
            self._on_status(message)
        elif isinstance(message, ControlCommand) and addressed_to(message, self.proxy_id):
            if message.event_id in self._seen:
                return
            self._seen.append(message.event_id)
            task = asyncio.get_running_loop().create_task(self.apply(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _on_status(self, status: ResourceStatus) -> None:
        if not status.engine_url or status.resource_id == self.proxy_id:
            return
        if status.kind != "rollout" and status.active_tag != "rollout":
            return
        # a worker switched to train keeps reporting "active" and its URL while its engine is stopped
        serving = status.state == "active" and status.active_tag == "rollout" and status.figures.get("engine_up", 1.0) >= 1
        engine = self.engines.announce(status.resource_id, status.engine_url, serving, status.weight_version,
                                       frozenset(status.hardware_tags))
        if status.active_tag != "rollout":  # preempted (e.g. to train): its calls move to other engines
            moved = self.gate.cut_on(engine.url)
            if moved:
                log.info("%s left rollout: %d in-flight call(s) continue on other engines", status.resource_id, moved)

    async def apply(self, command: ControlCommand) -> CommandAck:
        started = time.monotonic()
        if command.epoch < self.last_epoch:
            outcome, reason = "ignored_stale", f"epoch {command.epoch} < last applied {self.last_epoch}"
        else:
            outcome, reason = await self._apply(command)
            if outcome == "ok":
                self.last_epoch = max(self.last_epoch, command.epoch)
        ack = CommandAck.answering(command, self.proxy_id, outcome, reason,
                                   (time.monotonic() - started) * 1000, self.team, self.run)
        try:
            await self.publish_ack(ack)
        except Exception:  # noqa: BLE001 - the command is applied; a lost ack is logged, not fatal
            log.exception("could not publish ack for %s", command.event_id)
        return ack

    async def _apply(self, command: ControlCommand) -> tuple[str, str]:
        if command.command == "pause":
            keep_running = command.mode == "wait"
            cut = self.gate.close(cut=not keep_running)
            idle = await self.gate.wait_idle(self.drain_timeout_s)
            if not idle:
                return "failed", f"calls still generating after {self.drain_timeout_s} s"
            return "ok", f"paused ({'drained' if keep_running else f'cut {cut} in-flight calls'})"
        if command.command == "resume":
            if command.weight_version is not None:
                self.engines.set_all_versions(command.weight_version)
            self.gate.open()
            return "ok", f"resumed at version {command.weight_version}" if command.weight_version is not None else "resumed"
        if command.command == "load_weights" and command.weight_version is not None:
            self.engines.set_all_versions(command.weight_version)
            return "ok", f"engines labelled with version {command.weight_version}"
        return "rejected", f"the proxy does not handle {command.command!r}"
