"""Helpers for rollout tests: a status-topic watcher and command sending (new weights: seamlessflow.testing.weights)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import CommandAck, ControlCommand, ResourceStatus, new_id, now_ms
from seamlessflow.topics import Topics


class StatusWatcher:
    """Collects every decoded record of the status topic on a thread; `wait_for` polls the collection."""

    def __init__(self, settings, codec):
        self.codec, self.records = codec, []
        topic = Topics(settings).status
        self._consumer = Consumer(consumer_config(settings, group_id=f"watch-{new_id()}"))
        parts = self._consumer.list_topics(topic, timeout=30).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.1)
            if msg is not None and not msg.error():
                self.records.append(self.codec.decode(msg.value()))
        self._consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def wait_for(self, predicate: Callable[[Any], bool], timeout_s: float = 600, what: str = "record") -> Any:
        deadline, seen = time.monotonic() + timeout_s, 0
        while time.monotonic() < deadline:
            for record in self.records[seen:]:
                if predicate(record):
                    return record
            seen = len(self.records)
            time.sleep(0.1)
        raise TimeoutError(f"no {what} on the status topic within {timeout_s} s")

    def ack_for(self, command: ControlCommand, timeout_s: float = 600) -> CommandAck:
        return self.wait_for(lambda r: isinstance(r, CommandAck) and r.command_id == command.event_id,
                             timeout_s, f"ack for {command.command}#{command.epoch}")

    def status(self, resource_id: str, predicate: Callable[[ResourceStatus], bool], timeout_s: float = 600):
        return self.wait_for(lambda r: isinstance(r, ResourceStatus) and r.resource_id == resource_id
                             and predicate(r), timeout_s, f"matching status of {resource_id}")


def send_command(settings, codec, resource_id: str, epoch: int, command: str, **fields) -> ControlCommand:
    message = ControlCommand(new_id(), resource_id, epoch, command, settings.team, settings.run, now_ms(), **fields)
    MessageProducer(settings, codec).send_and_wait(Topics(settings).control, resource_id, message)
    return message

