"""The rollout worker's Kafka loop: control topic in, status topic out, heartbeats on a thread.

The control topic is read by the layer's `CommandFeed` (assigned, no group: the worker sees the commands
for its key in order). The records up to the partitions' ends when the process started are history: read
before the engine starts, the worker restores from them once it runs, as `seamlessflow.core.control` says
(every epoch counts, the newest command is carried out); records after them are handled as they come, after
the restore. The weights topic rides on the same reader.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceState
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.command_feed import CommandFeed
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.heartbeat import Heartbeat
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import CommandAck, ControlCommand, ResourceStatus, WeightVersion
from seamlessflow.model.choice import ensure_model, model_dir
from seamlessflow.model.lora import team_adapters
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.worker import RolloutWorker
from seamlessflow.topics import Topics
from seamlessflow.weights.engine_client import EngineClient, EngineError
from seamlessflow.weights.fence import ProxyFence, proxy_fence_url

log = logging.getLogger(__name__)

UNHEALTHY_HEARTBEATS = 5  # figures unreadable this many times in a row while the process lives: restart it


class RolloutService:
    def __init__(self, settings: Settings, resource_id: str, codec: Codec | None = None,
                 options: RolloutOptions | None = None):
        self.settings = settings
        self.options = options or RolloutOptions.from_settings(settings)
        self.topics = Topics(settings)
        self.codec = codec or codec_for(settings)
        self.producer = MessageProducer(settings, self.codec)
        self.dead_letters = DeadLetters(settings, self.codec, f"rollout:{resource_id}", self.producer.send)
        log_dir = Path(settings.data_dir) / "logs"
        self.proxies: dict[str, str] = {}  # proxy resource id -> its fence URL (its heartbeats, status topic)
        self.fence = ProxyFence(lambda: self.proxies.values())
        self.worker = RolloutWorker(resource_id, self.options, model_dir(settings), log_dir,
                                    settings.team, settings.run, generation=settings.generation, fence=self.fence)
        self.adapter_owners = {a.name: team for team, a in team_adapters(settings).items()}  # its trainer's team
        self._rate = TokenRate()
        self._unhealthy = 0
        self.heartbeat = Heartbeat(self.producer.send, self.topics.status, self.options.heartbeat_s,
                                   lambda: self.worker.status(self._figures()))  # on a thread of its own

    def run(self, stop: threading.Event) -> None:
        """Until `stop` is set or a shutdown command arrives; the engine is stopped on the way out."""
        control = self._command_feed()
        history = control.history()
        for message in control.catch_up(self.topics.weights):  # a starting engine catches up to the newest
            self._hear_of(message)
        for message in control.catch_up(self.topics.status):  # the proxies its engine's starts and loads fence
            self._hear_of(message)
        beats = threading.Thread(target=self.heartbeat.run, args=(stop,), name="rollout-heartbeat", daemon=True)
        beats.start()
        try:
            if not (self.worker.weights_dir / "config.json").exists():
                ensure_model(self.settings, log.info)  # normally done once by `seamlessflow up`
            self.worker.start()
            self.publish_status()
            self._restore(history)
            while not stop.is_set() and not self.worker.stopped:
                self._on_messages(control.poll(0.2))
                if self.worker.check_engine():
                    self.publish_status()
        finally:
            self.worker.close()
            self.worker.state = ResourceState.STOPPED
            self.publish_status()
            self.producer.flush(10)
            control.close()
            self.fence.close()
            stop.set()
            beats.join(timeout=5)

    def _command_feed(self) -> CommandFeed:
        return CommandFeed(self.settings, self.codec, self.dead_letters, self.topics.control,
                           self.worker.addressed_to_me, name=f"rollout-{self.worker.resource_id}-reader")

    def _hear_of(self, message: object) -> None:
        """A version announced for this run (the weights topic, compacted per run): a starting engine catches
        up to the newest before the worker reports it serving (`RolloutWorker.catch_up`). A proxy's heartbeat:
        where to fence the engine when its weights change (`weights.fence`)."""
        if isinstance(message, ResourceStatus) and (message.team, message.run) == (self.settings.team,
                                                                                   self.settings.run):
            fence_url = proxy_fence_url(message)
            if fence_url is not None:
                self.proxies[message.resource_id] = fence_url
        if isinstance(message, WeightVersion) and message.adapter is not None:
            if message.run == self.settings.run and message.team in (self.settings.team,
                                                                     self.adapter_owners.get(message.adapter)):
                self.worker.hear_of_adapter(message.adapter, message.version, message.uri)  # never as base weights
        elif isinstance(message, WeightVersion) and (message.team, message.run) == (self.settings.team,
                                                                                    self.settings.run):
            self.worker.hear_of(message.version, message.uri)

    def _on_messages(self, messages: list[object]) -> None:
        """Live commands for this worker, after the versions announced meanwhile (remembered for the next
        catch-up; an adapter's version goes into the serving engine at once, `rollout.adapters`)."""
        for message in messages:
            self._hear_of(message)
        if any(isinstance(m, WeightVersion) and m.adapter is not None for m in messages):
            for line in self.worker.bring_adapters():
                log.info("%s: %s", self.worker.resource_id, line)
            self.publish_status()
        for message in messages:
            if isinstance(message, ControlCommand):
                self._handle(message)

    def publish_status(self, figures: dict[str, float] | None = None) -> ResourceStatus:
        """The worker's status now (after a command, a start or a stop), besides the periodic heartbeat."""
        status = self.worker.status(figures if figures is not None else self.worker.base_figures())
        self.heartbeat.publish(status)
        return status

    def publish_ack(self, ack: CommandAck) -> None:
        self.producer.send(self.topics.status, f"{self.worker.resource_id}/ack", ack)
        self.producer.poll(0)

    def _restore(self, history: list[ControlCommand]) -> None:
        restored = self.worker.restore(history)
        if restored is not None:
            self._handle(restored)

    def _handle(self, command: ControlCommand) -> None:
        log.info("%s: %s (epoch %d)", self.worker.resource_id, command.command, command.epoch)
        ack = self.worker.handle(command)
        log.info("%s: %s -> %s %s", self.worker.resource_id, command.command, ack.outcome, ack.reason)
        self.publish_ack(ack)
        self.publish_status()

    def _figures(self) -> dict[str, float]:
        figures = self.worker.base_figures()
        if self.worker.engine.running() and self.worker.state in (ResourceState.ACTIVE, ResourceState.PAUSED):
            try:
                engine = EngineClient(self.worker.engine.url, timeout_s=2.0)
                try:
                    figures.update(engine.figures())
                    self._adopt_version(engine)
                finally:
                    engine.close()
                self._unhealthy = 0
            except EngineError:
                self._unhealthy += 1
                if self._unhealthy >= UNHEALTHY_HEARTBEATS:
                    log.error("%s: engine unresponsive; killing it for a restart", self.worker.resource_id)
                    self._unhealthy = 0
                    self.worker.engine.stop(grace_s=5)
        figures["tokens_per_s"] = self._rate.update(figures.get("generation_tokens_total"))
        return figures

    def _adopt_version(self, engine: EngineClient) -> None:
        """A version streamed in by the trainer (weight transfer); an engine without the route is not unhealthy."""
        try:
            self.worker.adopt_engine_version(engine.weight_version())
        except EngineError:
            pass


class TokenRate:
    """Generated tokens per second between two heartbeats (0 after an engine restart resets the counter)."""

    def __init__(self) -> None:
        self.last: tuple[float, float] | None = None

    def update(self, total: float | None) -> float:
        now = time.monotonic()
        if total is None:
            self.last = None
            return 0.0
        previous, self.last = self.last, (now, total)
        if previous is None or total < previous[1]:
            return 0.0
        return (total - previous[1]) / max(now - previous[0], 1e-6)


def run_service(settings: Settings, resource_id: str, stop: threading.Event) -> None:
    RolloutService(settings, resource_id).run(stop)
