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
their `state` is `active`, raise its known `weight_version` (and its LoRA adapters' versions, the figures
`adapter_version:<name>`), and set its `hardware_tags` (what sessions of each profile are routed by:
`seamlessflow.core.routing`).

The reader (the Kafka layer's `CommandFeed`) is assigned (no group, no commits) and reads both compacted
topics from the beginning, so a restarted proxy learns the engines at once; the proxy's commands already on
the control topic are handed over first, as history, and the proxy restores its newest command from them
(`core.control`), then takes new ones live.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.control import BROADCAST, CommandLike
from seamlessflow.kafka.command_feed import CommandFeed
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.messages import ControlCommand, ResourceStatus

log = logging.getLogger(__name__)

ALIASES = ("proxy", BROADCAST)  # besides its own id, the proxy answers to these resource ids


class ControlListener:
    """Reads control and status topics in a thread (the layer's `CommandFeed`); hands decoded messages to
    `on_message` on the loop: commands `addressed` to the proxy, and statuses.

    With `control` (the control topic, one of `topics`), the commands for the proxy already on it at start
    are handed to `on_history` in one list first, and live reading of that topic continues after them. Poison
    on either topic is dead-lettered and skipped."""

    def __init__(self, settings: Settings, codec: Codec, topics: list[str], on_message: Callable[[Any], None],
                 dead_letters: DeadLetters, addressed: Callable[[CommandLike], bool], control: str,
                 on_history: Callable[[list[ControlCommand]], None]):
        self.settings = settings
        self.codec = codec
        self.dead_letters = dead_letters
        self.topics = topics
        self.on_message, self.addressed = on_message, addressed
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
        feed = CommandFeed(self.settings, self.codec, self.dead_letters, self.control, self.addressed,
                           name="proxy-reader")
        try:
            for topic in self.topics:
                if topic == self.control:
                    self._hand_over_history(feed.history())
                else:
                    feed.follow(topic)
            self.ready.set()
            while not self._stop.is_set():
                for message in feed.poll(0.1, 100):
                    self._deliver(message)
        except Exception:  # noqa: BLE001 - a dead listener must be visible, not silent
            log.exception("control listener stopped")
        finally:
            feed.close()

    def _hand_over_history(self, history: list[ControlCommand]) -> None:
        """Hands the proxy's commands on the control topic so far to `on_history` (live reading continues
        after them)."""
        assert self._loop is not None  # set by start(), before the thread runs
        self._loop.call_soon_threadsafe(self.on_history, history)

    def _deliver(self, message: Any) -> None:
        if isinstance(message, (ControlCommand, ResourceStatus)):  # poison was dead-lettered, a tombstone skipped
            assert self._loop is not None  # set by start(), before the listener thread runs
            self._loop.call_soon_threadsafe(self.on_message, message)
