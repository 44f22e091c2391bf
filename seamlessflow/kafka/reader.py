"""Reading every partition of a topic from a position up to its high watermarks, without a consumer group.

Why one reader: `tail`, `replay`, the scheduler's rebuild, each resource's control history at start and
the tests all need "what is on this topic now", and it has traps written once here: a just-created topic
or a leader election answers the watermark request with a transient error for a moment; a compacted
partition can end below its high watermark (the last offsets were compacted away), which only an EOF
event reveals; records produced while reading are not part of "now".
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from seamlessflow.avro import Codec, CodecError
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config, partitions_of, private_group
from seamlessflow.kafka.errors import retry_transient


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
    headers: dict[str, bytes] | None = None


class TopicReader:
    """One topic's partitions, assigned from start offsets (default: each partition's beginning).

    The high watermarks are taken when the reader opens: `records()` yields what lay below them then (the
    history), and `ends` is where each partition's history stops, i.e. where live reading of the same
    topic continues (`Subscriber.follow(topic, reader.ends)`) without a record lost or seen twice."""

    def __init__(self, settings: Settings, topic: str, codec: Codec | None = None,
                 start_offsets: dict[int, int] | None = None, timeout_s: float = 30.0):
        self.topic, self.codec, self.timeout_s = topic, codec, timeout_s
        self._consumer = Consumer(consumer_config(settings, group_id=private_group(settings, "reader"),
                                                  **{"enable.partition.eof": True}))
        try:
            partitions = partitions_of(self._consumer, topic, timeout_s)
            deadline = time.monotonic() + timeout_s
            self.marks = {p: watermarks(self._consumer, topic, p, deadline) for p in partitions}
        except BaseException:
            self._consumer.close()
            raise
        self.starts = {p: max((start_offsets or {}).get(p, low), low) for p, (low, _high) in self.marks.items()}
        self.ends = {p: max(high, self.starts[p]) for p, (_low, high) in self.marks.items()}

    def records(self) -> Iterator[Record]:
        """Every record from the start offsets up to the marks taken at open; then the reader is closed."""
        try:
            yield from self._read()
        finally:
            self.close()

    def _read(self) -> Iterator[Record]:
        behind = {p for p in self.marks if self.ends[p] > self.starts[p]}
        self._consumer.assign([TopicPartition(self.topic, p, self.starts[p]) for p in sorted(behind)])
        deadline = time.monotonic() + self.timeout_s
        while behind:
            msg = self._consumer.poll(0.5)
            if msg is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {self.topic}: partitions {sorted(behind)} did not reach their end")
                continue
            p, error = msg.partition(), msg.error()
            if error:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                behind.discard(p)  # at the end (below the mark only where the last offsets were compacted away)
                continue
            offset = msg.offset()
            # a consumed message always has both (None only before a produce is delivered)
            assert offset is not None and p is not None
            if p in behind and offset < self.ends[p]:
                yield record_of(msg, self.codec)
            if offset + 1 >= self.ends[p]:
                behind.discard(p)

    def close(self) -> None:
        self._consumer.close()


def watermarks(consumer: Consumer, topic: str, partition: int, deadline: float) -> tuple[int, int]:
    """(low, high) of a partition, retrying what a leader election or a just-created topic answers for a
    moment (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE, ...) until the deadline."""
    tp = TopicPartition(topic, partition)
    return retry_transient(lambda: consumer.get_watermark_offsets(tp, timeout=max(deadline - time.monotonic(), 1.0)),
                           deadline)


def record_of(msg: Any, codec: Codec | None) -> Record:
    """A consumed confluent-kafka message as a `Record`, decoded when a codec is given."""
    headers = msg.headers()
    record = Record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1],
                    headers=dict(headers) if headers else None)
    if codec is not None:
        try:
            record.message = codec.decode(msg.value())
        except CodecError as exc:
            record.error = str(exc)
    return record


def read_topic(settings: Settings, topic: str, codec: Codec | None = None,
               start_offsets: dict[int, int] | None = None, timeout_s: float = 30.0) -> Iterator[Record]:
    """Yields every record from the start offsets (default: beginning) up to the end of the topic at call
    time (each partition's high watermark then). Records written later are not waited for."""
    yield from TopicReader(settings, topic, codec, start_offsets, timeout_s).records()


def read_messages(settings: Settings, topic: str, codec: Codec, timeout_s: float = 30.0) -> list[Any]:
    """Decoded messages of a whole topic (raises on a record that does not decode)."""
    out = []
    for record in read_topic(settings, topic, codec, timeout_s=timeout_s):
        if record.error:
            raise CodecError(f"{topic}[{record.partition}]@{record.offset}: {record.error}")
        out.append(record.message)
    return out
