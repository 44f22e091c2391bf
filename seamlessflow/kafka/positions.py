"""Looking positions up without reading a topic: watermarks, offsets by time, a group's committed offsets.

`OffsetLookup` answers "where is time T in this topic" (a replay `--since`); `CommittedOffsets` keeps
marks as the committed offsets of a consumer group that never subscribes (the assembler's published
marks): no extra topic, and a read is one request.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config, partitions_of, private_group
from seamlessflow.kafka.reader import watermarks


class OffsetLookup:
    """One topic's partitions, watermarks, offsets for a time and single records' timestamps."""

    def __init__(self, settings: Settings, topic: str, timeout_s: float = 10.0):
        self.topic, self.timeout_s = topic, timeout_s
        self._consumer = Consumer(consumer_config(settings, group_id=private_group(settings, "lookup")))

    def partitions(self) -> list[int]:
        return partitions_of(self._consumer, self.topic, self.timeout_s)

    def watermarks(self, partition: int) -> tuple[int, int]:
        return watermarks(self._consumer, self.topic, partition, time.monotonic() + self.timeout_s)

    def offsets_for_time(self, since_ms: int) -> dict[int, int | None]:
        """Per partition, the broker's answer: the first offset whose timestamp is at/after `since_ms`
        (None: no such record)."""
        answers = self._consumer.offsets_for_times([TopicPartition(self.topic, p, since_ms) for p in self.partitions()],
                                                   timeout=self.timeout_s)
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in answers}

    def timestamp_at(self, partition: int, offset: int, timeout_s: float = 5.0) -> int | None:
        """The timestamp of the record at `offset` (None when there is none, e.g. compacted away)."""
        self._consumer.assign([TopicPartition(self.topic, partition, offset)])
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                msg = self._consumer.poll(0.5)
                if msg is not None and not msg.error() and msg.partition() == partition:
                    return msg.timestamp()[1] if msg.offset() == offset else None
            return None
        finally:
            self._consumer.unassign()

    def close(self) -> None:
        self._consumer.close()


class CommittedOffsets:
    """Per partition of `topic`, an offset kept as the committed offset of group `group_id`."""

    def __init__(self, settings: Settings, group_id: str, topic: str, timeout_s: float = 10.0):
        self.topic, self.timeout_s = topic, timeout_s
        self._consumer = Consumer(consumer_config(settings, group_id))

    def read(self, partitions: list[int]) -> dict[int, int]:
        """Partition -> offset (0 where nothing was saved)."""
        committed = self._consumer.committed([TopicPartition(self.topic, p) for p in partitions], self.timeout_s)
        return {tp.partition: max(tp.offset, 0) for tp in committed}

    def save(self, marks: dict[int, int]) -> None:
        """Synchronously; raises `KafkaException` (see `errors.transient`) when the coordinator moves."""
        if marks:
            offsets = [TopicPartition(self.topic, p, o) for p, o in marks.items()]
            self._consumer.commit(offsets=offsets, asynchronous=False)

    def close(self) -> None:
        self._consumer.close()
