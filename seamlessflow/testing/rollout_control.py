"""Driving rollout workers in tests: a status-topic watcher and command sending (new weights:
seamlessflow.testing.weights)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, cast

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.control import CommandKind
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import CommandAck, ControlCommand, ResourceStatus, new_id, now_ms
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics


class StatusWatcher:
    """Collects every decoded record of the status topic on a thread; `wait_for` polls the collection."""

    def __init__(self, settings: Settings, codec: Codec) -> None:
        self.codec, self.records = codec, list[Any]()
        self._consumer = Subscriber(settings, codec, None, name="watch")
        self._consumer.follow(Topics(settings).status)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.records += self._consumer.messages(0.1)
        self._consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def wait_for(self, predicate: Callable[[Any], bool], timeout_s: float = 600, what: str = "record") -> Any:
        return wait_until(lambda: next((r for r in list(self.records) if predicate(r)), None), timeout_s,
                          f"{what} on the status topic")

    def ack_for(self, command: ControlCommand, timeout_s: float = 600) -> CommandAck:
        return self.wait_for(lambda r: isinstance(r, CommandAck) and r.command_id == command.event_id,
                             timeout_s, f"ack for {command.command}#{command.epoch}")

    def status(self, resource_id: str, predicate: Callable[[ResourceStatus], bool],
               timeout_s: float = 600) -> ResourceStatus:
        return self.wait_for(lambda r: isinstance(r, ResourceStatus) and r.resource_id == resource_id
                             and predicate(r), timeout_s, f"matching status of {resource_id}")


def send_command(settings: Settings, codec: Codec, resource_id: str, epoch: int, command: str,
                 **fields: Any) -> ControlCommand:
    """`command` may be a kind the protocol does not know, which the worker must refuse."""
    message = ControlCommand(new_id(), resource_id, epoch, cast(CommandKind, command), settings.team, settings.run,
                             now_ms(), **fields)
    MessageProducer(settings, codec).send_and_wait(Topics(settings).control, resource_id, message)
    return message

