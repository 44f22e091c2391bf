"""One resource's commands on the control topic: its history at start, then each new one as it comes.

Why one feed: every commanded resource (trainer, rollout worker, proxy, the simulator's engines through the
same protocol) reads the control topic the same way, and each used to write it again. The rules are the
core's `ControlProtocol`: the feed keeps only the commands the protocol says are addressed here (its id and
aliases) and hands them over whole; epochs, duplicates and the transition table are judged by the protocol
when the resource admits each one, so every delivery still gets exactly one ack. At start the records
already on the compacted topic are the history a resource restores from (`ControlProtocol.restore`, once,
in the resource's own start-up); live reading continues right after them, so no command is lost or seen
twice. The reader is assigned (no consumer group, no commits): every resource sees every command in order.

A resource that reads other topics alongside (the rollout worker the weights topic, the proxy the status
topic) rides them on the same reader: their messages come out of `poll` with the commands, in arrival order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import ControlCommand


class CommandFeed:
    """`addressed(command)`: the resource's `ControlProtocol.addressed`. Poison on any topic read is
    dead-lettered (and skipped) by the subscriber."""

    def __init__(self, settings: Settings, codec: Codec, dead_letters: DeadLetters, control_topic: str,
                 addressed: Callable[[ControlCommand], bool], name: str = "control"):
        self.topic, self.addressed = control_topic, addressed
        self._subscriber = Subscriber(settings, codec, dead_letters, name=name)

    def history(self) -> list[ControlCommand]:
        """The commands addressed here already on the topic (what the resource restores from); live reading of
        the topic starts right after them."""
        return [m for m in self._subscriber.catch_up(self.topic) if self._mine(m)]

    def catch_up(self, topic: str) -> list[Any]:
        """Another topic on this reader: its usable messages now; the live ones come out of `poll`."""
        return self._subscriber.catch_up(topic)

    def follow(self, topic: str) -> None:
        """Another topic on this reader, live from its beginning (through `poll`)."""
        self._subscriber.follow(topic)

    def poll(self, timeout_s: float = 0.0, max_records: int = 64) -> list[Any]:
        """The live commands addressed here (once `history` started reading the control topic) and the
        messages of the other topics read, in arrival order."""
        return [m for m in self._subscriber.messages(timeout_s, max_records)
                if not isinstance(m, ControlCommand) or self._mine(m)]

    def commands(self, timeout_s: float = 0.0, max_records: int = 64) -> list[ControlCommand]:
        """`poll` for a resource that reads nothing but the control topic."""
        return [m for m in self.poll(timeout_s, max_records) if isinstance(m, ControlCommand)]

    def close(self) -> None:
        self._subscriber.close()

    def _mine(self, message: Any) -> bool:
        return isinstance(message, ControlCommand) and self.addressed(message)
