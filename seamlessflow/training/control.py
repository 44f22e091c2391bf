"""The trainer's side of the control topic: `set_active(train|idle)` with epochs, acks on the status topic.

Commands are on a compacted topic, so at start the latest command for this resource is read back and
applied (the role survives a restart); after that, new commands are applied as they arrive. A command
whose epoch is not newer than the last applied one is acknowledged as `ignored_stale`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.io import read_topic
from seamlessflow.messages import CommandAck, ControlCommand, new_id

ROLES = ("train", "idle")


@dataclass
class Decision:
    """What to do about one command: the new role (if any), whether to stop, and the ack to send."""

    role: str | None
    shutdown: bool
    ack: CommandAck


class ControlState:
    """Pure decision logic: epoch ordering and which commands a trainer accepts."""

    def __init__(self, resource_id: str, team: str, run: str, role: str):
        self.resource_id, self.team, self.run = resource_id, team, run
        self.role = role
        self.epoch = -1

    def decide(self, command: ControlCommand) -> Decision:
        start = time.perf_counter()
        role, shutdown, outcome, reason = None, False, "ok", ""
        if command.epoch <= self.epoch:
            outcome, reason = "ignored_stale", f"epoch {command.epoch} <= applied {self.epoch}"
        elif command.command == "set_active" and command.role in ROLES:
            role = command.role
        elif command.command == "shutdown":
            shutdown = True
        else:
            outcome, reason = "rejected", f"a trainer does not do {command.command}({command.role or ''})"
        if outcome != "ignored_stale":
            self.epoch = command.epoch
        if role is not None:
            self.role = role
        ack = CommandAck.answering(command, self.resource_id, outcome, reason,
                                   (time.perf_counter() - start) * 1000, self.team, self.run)
        return Decision(role, shutdown, ack)


class ControlListener:
    """Reads this resource's commands: the latest one at start, then new ones as they come."""

    def __init__(self, settings: Settings, codec: Codec, topic: str, resource_id: str, dead_letters: DeadLetters):
        self.codec, self.topic, self.resource_id = codec, topic, resource_id
        self.dead_letters = dead_letters
        self._settings = settings
        self._consumer: Consumer | None = None

    def catch_up(self) -> ControlCommand | None:
        """The newest command for this resource already on the topic; starts live reading after it."""
        latest, ends = None, {}
        for record in read_topic(self._settings, self.topic, self.codec):
            ends[record.partition] = record.offset + 1
            message = self.dead_letters.decode_record(record)
            if self._mine(message) and (latest is None or message.epoch >= latest.epoch):
                latest = message
        self._consumer = Consumer(consumer_config(self._settings, group_id=f"control-{new_id()}"))
        partitions = self._consumer.list_topics(self.topic, timeout=30).topics[self.topic].partitions
        self._consumer.assign([TopicPartition(self.topic, p, ends.get(p, 0)) for p in partitions])
        return latest

    def poll(self) -> list[ControlCommand]:
        commands = []
        for msg in self._consumer.consume(64, 0):
            if msg.error():
                continue
            message = self.dead_letters.decode_message(msg)
            if self._mine(message):
                commands.append(message)
        return commands

    def _mine(self, message) -> bool:
        return isinstance(message, ControlCommand) and message.resource_id == self.resource_id

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
