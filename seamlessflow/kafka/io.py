"""Small produce/read helpers over confluent-kafka with the project codec.

`MessageProducer` is for services that publish message dataclasses; `read_topic` reads a topic from the
beginning (or given offsets) up to its current end without joining a group: for `tail`, `replay`, the
scheduler's rebuild from compacted topics, and tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from seamlessflow.avro import Codec, CodecError
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config, producer_config
from seamlessflow.service_metrics import observe


class DeliveryFailed(RuntimeError):
    pass


class MessageProducer:
    """Encodes and produces message dataclasses; `send_and_wait` confirms durable delivery."""

    def __init__(self, settings: Settings, codec: Codec, **extra: Any):
        self.codec = codec
        self._producer = Producer(producer_config(settings, **extra))

    def send(self, topic: str, key: str | None, message: Any, on_delivery: Callable | None = None) -> None:
        value = self.codec.encode(message, topic)
        observe(message)  # a heartbeat also feeds the service's /metrics
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: serve callbacks, then retry
                self._producer.poll(0.05)
        self._producer.poll(0)

    def send_and_wait(self, topic: str, key: str | None, message: Any, timeout_s: float = 30.0) -> None:
        errors: list[KafkaError] = []
        self.send(topic, key, message, on_delivery=lambda err, _msg: errors.append(err) if err else None)
        self.flush(timeout_s)
        if errors:
            raise DeliveryFailed(str(errors[0]))

    def poll(self, timeout_s: float = 0.0) -> int:
        return self._producer.poll(timeout_s)

    def flush(self, timeout_s: float = 30.0) -> None:
        remaining = self._producer.flush(timeout_s)
        if remaining:
            raise DeliveryFailed(f"{remaining} records not delivered within {timeout_s} s")


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    message: Any = None  # decoded dataclass, when decoding succeeded
    error: str | None = None  # why decoding failed


def read_topic(
    settings: Settings,
    topic: str,
    codec: Codec | None = None,
    start_offsets: dict[int, int] | None = None,
    timeout_s: float = 30.0,
) -> Iterator[Record]:
    """Yields every record from the start offsets (default: beginning) up to the end of the topic at call
    time (each partition's high watermark then), without joining a group: for `tail`, `replay`, the
    scheduler's rebuild from compacted topics, and tests. Records written later are not waited for."""
    consumer = Consumer(consumer_config(settings, group_id=f"reader-{time.monotonic_ns()}", **{"enable.partition.eof": True}))
    try:
        partitions = consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions
        deadline = time.monotonic() + timeout_s
        marks = {p: _watermarks(consumer, TopicPartition(topic, p), deadline) for p in partitions}
        starts = {p: max((start_offsets or {}).get(p, marks[p][0]), marks[p][0]) for p in partitions}
        behind = {p for p in partitions if marks[p][1] > starts[p]}
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(behind)])
        while behind:
            msg = consumer.poll(0.5)
            if msg is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {topic}: partitions {sorted(behind)} did not reach their end")
                continue
            p, error = msg.partition(), msg.error()
            if error:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                behind.discard(p)  # at the end (below the mark only where the last offsets were compacted away)
                continue
            offset = msg.offset()
            assert offset is not None  # a consumed message always has one (None only before a produce is delivered)
            if p in behind and offset < marks[p][1]:
                yield _record(msg, codec)
            if offset + 1 >= marks[p][1]:
                behind.discard(p)
    finally:
        consumer.close()


TRANSIENT = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
             KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._WAIT_COORD,
             KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
             KafkaError.REBALANCE_IN_PROGRESS}


def transient(exc: KafkaException) -> bool:
    """What a leader election, a moving group coordinator or a just-created topic answers for a moment."""
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and (error.retriable() or error.code() in TRANSIENT)


def _watermarks(consumer: Consumer, tp: TopicPartition, deadline: float) -> tuple[int, int]:
    """(low, high) of a partition, retrying what a leader election or a just-created topic answers for a
    moment (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE, ...) until the deadline."""
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=max(deadline - time.monotonic(), 1.0))
        except KafkaException as exc:
            if not transient(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _record(msg: Any, codec: Codec | None) -> Record:
    record = Record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1])
    if codec is not None:
        try:
            record.message = codec.decode(msg.value())
        except CodecError as exc:
            record.error = str(exc)
    return record


def read_messages(settings: Settings, topic: str, codec: Codec, timeout_s: float = 30.0) -> list[Any]:
    """Decoded messages of a whole topic (raises on a record that does not decode)."""
    out = []
    for record in read_topic(settings, topic, codec, timeout_s=timeout_s):
        if record.error:
            raise CodecError(f"{topic}[{record.partition}]@{record.offset}: {record.error}")
        out.append(record.message)
    return out
