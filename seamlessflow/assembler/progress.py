"""Per source partition, the offset below which the assembler's outputs were already published.

Why: after a crash the assembler re-reads session-events from its committed offset (the oldest open
session's first record) to rebuild state; records below this mark must not publish again. The marks are
committed offsets of a side consumer group that never subscribes: no extra topic, and a read is one
request (no changelog to replay).
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config


class PublishedMarks:
    def __init__(self, settings: Settings, group_id: str, topic: str, timeout_s: float = 10.0):
        self.topic, self.timeout_s = topic, timeout_s
        self._consumer = Consumer(consumer_config(settings, group_id))

    def read(self, partitions: list[int]) -> dict[int, int]:
        committed = self._consumer.committed([TopicPartition(self.topic, p) for p in partitions], self.timeout_s)
        return {tp.partition: max(tp.offset, 0) for tp in committed}

    def save(self, marks: dict[int, int]) -> None:
        if marks:
            offsets = [TopicPartition(self.topic, p, o) for p, o in marks.items()]
            self._consumer.commit(offsets=offsets, asynchronous=False)

    def close(self) -> None:
        self._consumer.close()
