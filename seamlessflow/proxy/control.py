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
- Epochs, duplicates and the ack follow `seamlessflow.core.control` (a command whose epoch is not newer
  than the last consumed one is acked `ignored_stale`; `set_active`, `shutdown` and unknown ones
  `rejected`); commands are carried out one at a time, in arrival order.

`ResourceStatus` records that carry an `engine_url` add that engine (id = resource_id) to routing while
their `state` is `active`, raise its known `weight_version`, and set its `hardware_tags` (what sessions of
each profile are routed by: `seamlessflow.core.routing`).

The consumer is assigned (no group, no commits) and reads both compacted topics from the beginning, so a
restarted proxy learns the engines at once; the control records already there are handed over first, as
history, and the proxy restores its newest command from them (`core.control`), then takes new ones live.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from seamlessflow.core.control import BROADCAST

from seamlessflow.avro import Codec, CodecError
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.io import read_topic
from seamlessflow.messages import ControlCommand, ResourceStatus

log = logging.getLogger(__name__)

HISTORY_ATTEMPTS = 60  # half a second apart
ALIASES = ("proxy", BROADCAST)  # besides its own id, the proxy answers to these resource ids


class ControlListener:
    """Reads control and status topics in a thread; hands decoded messages to `on_message` on the loop.

    With `control` (the control topic, one of `topics`), the records already on it at start are handed to
    `on_history` in one list first, and live reading of that topic continues after them."""

    def __init__(self, settings: Settings, codec: Codec, topics: list[str], on_message: Callable[[Any], None],
                 control: str | None = None, on_history: Callable[[list[ControlCommand]], None] | None = None):
        self.settings = settings
        self.codec = codec
        self.topics = topics
        self.on_message = on_message
        self.control, self.on_history = control, on_history
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
            starts = self._read_history()
            assignment = []
            for topic in self.topics:
                meta = consumer.list_topics(topic, timeout=30).topics[topic]
                assignment += [TopicPartition(topic, p, starts.get((topic, p), OFFSET_BEGINNING)) for p in meta.partitions]
            consumer.assign(assignment)
            self.ready.set()
            while not self._stop.is_set():
                msg = consumer.poll(0.1)
                if msg is None or msg.error():
                    continue
                self._deliver(msg.value())
        except Exception:  # noqa: BLE001 - a dead listener must be visible, not silent
            log.exception("control listener stopped")
        finally:
            consumer.close()

    def _read_history(self) -> dict[tuple[str, int], int]:
        """Hands the control topic's records so far to `on_history`; returns where live reading starts."""
        if self.control is None or self.on_history is None:
            return {}
        for attempt in range(HISTORY_ATTEMPTS):
            try:
                records = list(read_topic(self.settings, self.control, self.codec))
                break
            except KafkaException as exc:  # a topic just created may have no leader yet
                if attempt + 1 == HISTORY_ATTEMPTS or self._stop.wait(0.5):
                    raise
                log.info("control topic not readable yet (%s); retrying", exc)
        starts = {(self.control, r.partition): r.offset + 1 for r in records}
        history = [r.message for r in records if isinstance(r.message, ControlCommand)]
        self._loop.call_soon_threadsafe(self.on_history, history)
        return starts

    def _deliver(self, value: bytes | None) -> None:
        if value is None:
            return  # tombstone
        try:
            message = self.codec.decode(value)
        except CodecError as exc:
            log.warning("undecodable record on control/status: %s", exc)
            return
        if isinstance(message, (ControlCommand, ResourceStatus)):
            self._loop.call_soon_threadsafe(self.on_message, message)
