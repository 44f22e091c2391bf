"""The proxy's view of the control plane: commands addressed to it, and rollout engines' heartbeats.

Contract (tell the scheduler): the proxy acts on `ControlCommand`s on the control topic whose
`resource_id` is `"proxy"`, its own configured id, or `"*"` (every resource):

- `pause` (mode `keep`, `abort` or unset): stop dispatching (new calls queue), cut in-flight generations
  at the engines keeping their tokens; the `CommandAck` (key `<proxy id>/ack` on the status topic) is sent
  once no call of the proxy is generating anywhere. Mode `wait`: stop dispatching, let in-flight calls
  finish, ack when they have.
- `resume` (optional `weight_version`): if a version is given, every engine is labelled with it from
  now on; then cut calls continue as token-in continuations and queued calls are dispatched.
- `load_weights` addressed to the proxy: only labels every engine with `weight_version` (the proxy loads
  nothing; rollout workers do).
- Commands with an epoch older than the last applied one are acked `ignored_stale`; others `rejected`.

`ResourceStatus` records that carry an `engine_url` add that engine (id = resource_id) to routing while
their `state` is `active`, raise its known `weight_version`, and set its `hardware_tags` (what sessions of
each profile are routed by: `seamlessflow.core.routing`).

The consumer is assigned (no group, no commits) and reads both compacted topics from the beginning, so a
restarted proxy learns the engines and its own last command at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.messages import ControlCommand, ResourceStatus

log = logging.getLogger(__name__)

BROADCAST = "*"


def addressed_to(command: ControlCommand, proxy_id: str) -> bool:
    return command.resource_id in ("proxy", proxy_id, BROADCAST)


class ControlListener:
    """Reads control and status topics in a thread; hands decoded messages to `on_message` on the loop."""

    def __init__(self, settings: Settings, codec: Codec, topics: list[str], on_message: Callable[[Any], None],
                 dead_letters: DeadLetters):
        self.settings = settings
        self.codec = codec
        self.dead_letters = dead_letters
        self.topics = topics
        self.on_message = on_message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proxy-control", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.ready = threading.Event()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        consumer = Consumer(consumer_config(self.settings, group_id=f"proxy-reader-{time.monotonic_ns()}"))
        try:
            assignment = []
            for topic in self.topics:
                meta = consumer.list_topics(topic, timeout=30).topics[topic]
                assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
            consumer.assign(assignment)
            self.ready.set()
            while not self._stop.is_set():
                msg = consumer.poll(0.1)
                if msg is None or msg.error():
                    continue
                self._deliver(msg)
        except Exception:  # noqa: BLE001 - a dead listener must be visible, not silent
            log.exception("control listener stopped")
        finally:
            consumer.close()

    def _deliver(self, msg: Any) -> None:
        message = self.dead_letters.decode_message(msg)  # poison is dead-lettered, a tombstone skipped
        if isinstance(message, (ControlCommand, ResourceStatus)):
            self._loop.call_soon_threadsafe(self.on_message, message)
