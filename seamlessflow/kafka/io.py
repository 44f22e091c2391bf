"""The producer every service uses, and the names callers outside this package need from Kafka.

`MessageProducer` encodes message dataclasses with the project codec and produces them with the settings of
`clients.producer_config` (acks=all, idempotent): `send` queues (waiting while librdkafka's local queue is
full, or failing at once with `block=False`), `send_and_wait` returns once the broker has the record, and
`try_send` is for heartbeats that must never block or fail their caller. Reading lives in `reader`
(history up to the high watermarks) and `subscriber` (live, typed, poison dead-lettered).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Producer

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import producer_config
from seamlessflow.kafka.errors import TRANSIENT, KafkaException, transient
from seamlessflow.kafka.reader import Record, TopicReader, read_messages, read_topic
from seamlessflow.service_metrics import observe

__all__ = ["TRANSIENT", "DeliveryFailed", "KafkaException", "MessageProducer", "QueueFull", "Record", "TopicReader",
           "read_messages", "read_topic", "transient"]

log = logging.getLogger(__name__)

Key = str | bytes | None
Headers = list[tuple[str, str | bytes | None]] | None
OnDelivery = Callable[[Any, Any], None]  # (error or None, message), called from poll()/flush()


class DeliveryFailed(RuntimeError):
    pass


class QueueFull(DeliveryFailed):
    """librdkafka's local queue is full and the caller asked not to wait (`block=False`)."""


def _collect_errors(errors: list[KafkaError]) -> OnDelivery:
    return lambda err, _msg: errors.append(err) if err else None


class MessageProducer:
    """Encodes and produces message dataclasses; `send_and_wait` confirms durable delivery."""

    def __init__(self, settings: Settings, codec: Codec, **extra: Any):
        self.codec = codec
        self._config = producer_config(settings, **extra)
        self._producer = Producer(self._config)

    def send(self, topic: str, key: Key, message: Any, on_delivery: OnDelivery | None = None,
             headers: Headers = None, block: bool = True, timestamp_ms: int = 0) -> None:
        value = self.codec.encode(message, topic)
        observe(message)  # a heartbeat also feeds the service's /metrics
        self.send_bytes(topic, key, value, on_delivery, headers, block, timestamp_ms)

    def send_bytes(self, topic: str, key: Key, value: bytes | None, on_delivery: OnDelivery | None = None,
                   headers: Headers = None, block: bool = True, timestamp_ms: int = 0) -> None:
        """An already encoded value (a replay re-publishes records as they were). With `block=False` the
        caller serves delivery callbacks itself (`poll`, e.g. from a thread of its own). `timestamp_ms` 0:
        the producer's clock."""
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery,
                                       timestamp=timestamp_ms)
                break
            except BufferError as exc:  # local queue full: serve callbacks, then retry
                if not block:
                    raise QueueFull(f"producer queue full: {exc}") from exc
                self._producer.poll(0.05)
            except KafkaException as exc:
                raise self._failed(exc) from exc
        if block:
            self._producer.poll(0)

    def _failed(self, exc: KafkaException) -> Exception:
        """What a refused `produce` raises. A fatal error never recovers: the next call gets a fresh producer
        (a role's transactional writer raises `Fenced` instead: a fresh one would fence its replacement)."""
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.fatal():
            self._producer = Producer(self._config)
        return DeliveryFailed(f"producer error: {exc}")

    def send_and_wait(self, topic: str, key: Key, message: Any, timeout_s: float = 30.0,
                      headers: Headers = None) -> None:
        errors: list[KafkaError] = []
        self.send(topic, key, message, on_delivery=_collect_errors(errors),
                  headers=headers)
        self.flush(timeout_s)
        if errors:
            raise DeliveryFailed(str(errors[0]))

    def deliver(self, topic: str, key: Key, message: Any, patience_s: float = 300.0, wait_s: float = 30.0) -> None:
        """`send_and_wait` for a record that must outlast a broker restart (a weight version's announcement):
        a flush that runs out is waited again (the record is still queued; the idempotent producer keeps
        retrying it), and a record whose delivery failed is sent again, until `patience_s` has passed. The
        message is encoded from the same dataclass each time, so a copy that did land is the same record."""
        deadline = time.monotonic() + patience_s
        while True:
            errors: list[KafkaError] = []
            try:
                self.send(topic, key, message, on_delivery=_collect_errors(errors))
                while self._producer.flush(wait_s) and time.monotonic() < deadline:
                    log.warning("%s: record not delivered within %.0f s; still waiting for the broker", topic, wait_s)
                self.flush(0)
                if not errors:
                    return
                problem: Exception = DeliveryFailed(str(errors[0]))
            except DeliveryFailed as exc:
                problem = exc
            if time.monotonic() >= deadline:
                raise problem
            log.warning("%s: record not delivered (%s); sending it again", topic, problem)
            time.sleep(1.0)

    def try_send(self, topic: str, key: Key, message: Any) -> bool:
        """Fire and forget, never blocking: False (logged) when the record could not even be queued."""
        try:
            self.send(topic, key, message, block=False)
            self._producer.poll(0)
            return True
        except DeliveryFailed as exc:
            log.warning("%s: record not queued: %s", topic, exc)
            return False

    def poll(self, timeout_s: float = 0.0) -> int:
        return self._producer.poll(timeout_s)

    def flush(self, timeout_s: float = 30.0) -> None:
        remaining = self._producer.flush(timeout_s)
        if remaining:
            raise DeliveryFailed(f"{remaining} records not delivered within {timeout_s} s")

    def purge(self) -> None:
        """Drops what is queued and not yet sent (a producer whose broker is gone, at shutdown)."""
        self._producer.purge()

    def close(self, timeout_s: float = 10.0) -> int:
        """Flush what is queued and let librdkafka's threads go now; returns the records left undelivered."""
        left = self._producer.flush(timeout_s)
        del self._producer
        return left
