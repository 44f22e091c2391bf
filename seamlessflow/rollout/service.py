"""The rollout worker's Kafka loop: control topic in, status topic out, heartbeats on a thread.

The control topic is read without a consumer group (assigned, from the beginning) so the worker
sees the commands for its key in order. The records up to the partitions' ends when the process started
are history: once read, the worker restores from them as `seamlessflow.core.control` says (every epoch
counts, the newest command is carried out); records after them are handled as they come.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from seamlessflow.avro import Codec, codec_for
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import CommandAck, ControlCommand, ResourceStatus
from seamlessflow.rollout.client import EngineClient, EngineError
from seamlessflow.rollout.launch import ensure_model
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.worker import RolloutWorker
from seamlessflow.topics import Topics

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
        self.worker = RolloutWorker(resource_id, self.options, self.options.model_dir(settings), log_dir,
                                    settings.team, settings.run)
        self._rate = TokenRate()
        self._unhealthy = 0

    def run(self, stop: threading.Event) -> None:
        """Until `stop` is set or a shutdown command arrives; the engine is stopped on the way out."""
        consumer = self._control_consumer()
        history = History(self._history_ends(consumer))
        beats = threading.Thread(target=self._heartbeats, args=(stop,), name="rollout-heartbeat", daemon=True)
        beats.start()
        try:
            if not (self.worker.weights_dir / "config.json").exists():
                ensure_model(self.settings, log.info)  # normally done once by `seamlessflow up`
            self.worker.start()
            self.publish_status()
            if history.done:
                self._restore(history)
            while not stop.is_set() and not self.worker.stopped:
                message = consumer.poll(0.2)
                if message is not None:
                    self._on_record(message, history)
                if self.worker.check_engine():
                    self.publish_status()
        finally:
            self.worker.close()
            self.worker.state = "stopped"
            self.publish_status()
            self.producer.flush(10)
            consumer.close()
            stop.set()
            beats.join(timeout=5)

    def publish_status(self, figures: dict[str, float] | None = None) -> ResourceStatus:
        status = self.worker.status(figures if figures is not None else self.worker.base_figures())
        self.producer.send(self.topics.status, self.worker.resource_id, status)
        return status

    def publish_ack(self, ack: CommandAck) -> None:
        self.producer.send(self.topics.status, f"{self.worker.resource_id}/ack", ack)
        self.producer.poll(0)

    def _on_record(self, message, history: History) -> None:
        if message.error():
            if message.error().code() != KafkaError._PARTITION_EOF:
                log.error("control topic: %s", message.error())
            elif not history.done and history.at_end(message.partition()):
                self._restore(history)  # the partition's last offsets were compacted away
            return
        command = self.dead_letters.decode_message(message)
        if not isinstance(command, ControlCommand) or not self.worker.addressed_to_me(command):
            command = None
        if history.done:
            if command is not None:
                self._handle(command)
        elif history.add(message.partition(), message.offset(), command):
            self._restore(history)

    def _restore(self, history: History) -> None:
        restored = self.worker.restore(history.commands)
        for command in ([restored] if restored is not None else []) + history.later:
            self._handle(command)

    def _handle(self, command: ControlCommand) -> None:
        log.info("%s: %s (epoch %d)", self.worker.resource_id, command.command, command.epoch)
        ack = self.worker.handle(command)
        log.info("%s: %s -> %s %s", self.worker.resource_id, command.command, ack.outcome, ack.reason)
        self.publish_ack(ack)
        self.publish_status()

    def _control_consumer(self) -> Consumer:
        consumer = Consumer(consumer_config(self.settings, group_id=f"rollout-{self.worker.resource_id}-reader",
                                            **{"enable.partition.eof": True}))
        topic = self.topics.control
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        return consumer

    def _history_ends(self, consumer: Consumer) -> dict[int, int]:
        return {tp.partition: consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in consumer.assignment()}

    def _heartbeats(self, stop: threading.Event) -> None:
        while not stop.wait(self.options.heartbeat_s):
            try:
                self.publish_status(self._figures())
            except Exception:  # a heartbeat must never take the worker down
                log.exception("heartbeat failed")

    def _figures(self) -> dict[str, float]:
        figures = self.worker.base_figures()
        if self.worker.engine.running() and self.worker.state in ("active", "paused"):
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


class History:
    """The control records up to each partition's end at start; those read past an end meanwhile wait in
    `later` so the restored command goes first."""

    def __init__(self, ends: dict[int, int]):
        self.ends = ends
        self.left = {p for p, end in ends.items() if end > 0}
        self.commands: list[ControlCommand] = []
        self.later: list[ControlCommand] = []

    @property
    def done(self) -> bool:
        return not self.left

    def add(self, partition: int, offset: int, command: ControlCommand | None) -> bool:
        """Take one record; True when this completes the history."""
        if offset >= self.ends.get(partition, 0):
            self.later += [command] if command is not None else []
            return False
        self.commands += [command] if command is not None else []
        return self.at_end(partition) if offset + 1 >= self.ends[partition] else False

    def at_end(self, partition: int) -> bool:
        """The partition's history is read; True when this completes the history."""
        was_done = self.done
        self.left.discard(partition)
        return self.done and not was_done


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
