"""A compacted topic read as a table: every partition from its beginning, then live, with a way to ask
"have I read everything that was on the topic at this moment?".

Why: state a client expects to find again (stored Responses) lives on a compacted topic keyed by id, and any
process must answer for a record another process wrote a moment ago. A reader that only follows cannot tell
"unknown" from "not read yet"; one that compares its positions with the high watermarks taken when the
question was asked can: once every partition is read up to those marks, what is not in the table was not on
the topic when the question came. A compacted partition can end below its high watermark (its last offsets
compacted away), which only an end-of-partition event reveals: those events count as reaching the end.

One thread polls a `TableFeed`; `marks` uses a consumer of its own, so another thread may ask for them (one
query at a time) while the feed is polled.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config, private_group
from seamlessflow.kafka.reader import Record, record_of, watermarks


class TableUnavailable(RuntimeError):
    """The topic could not be listed or assigned in time (no broker yet, no such topic)."""


class TableFeed:
    """Every partition of `topic` assigned from the beginning (no group, no commits); `poll` gives records
    (`message` None for a tombstone or a record that did not decode: `value` tells which)."""

    def __init__(self, settings: Settings, topic: str, codec: Codec, name: str = "table", timeout_s: float = 30.0):
        self.topic, self.codec, self.timeout_s = topic, codec, timeout_s
        config = consumer_config(settings, group_id=private_group(settings, name), **{"enable.partition.eof": True})
        self._consumer = Consumer(config)
        # watermarks asked on the reading consumer's connection wait behind its fetch (up to fetch.wait.max.ms,
        # 0.5 s a partition, measured): a second consumer that fetches nothing answers at once
        self._marks = Consumer(consumer_config(settings, group_id=private_group(settings, f"{name}-marks")))
        try:
            self.partitions = sorted(self._consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions)
            self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in self.partitions])
            self.marks()  # connects the marks consumer now, not on the first read's clock
        except KafkaException as exc:
            self.close()
            raise TableUnavailable(f"{topic}: {exc}") from exc
        except BaseException:
            self.close()
            raise
        self.read_to: dict[int, int] = {}  # partition -> next offset known to be read (or the end seen)

    def marks(self) -> dict[int, int]:
        """Each partition's high watermark now: what `reached` compares with (TableUnavailable: no answer in time)."""
        deadline = time.monotonic() + self.timeout_s
        try:
            return {p: watermarks(self._marks, self.topic, p, deadline)[1] for p in self.partitions}
        except KafkaException as exc:
            raise TableUnavailable(f"{self.topic}'s ends: {exc}") from exc

    def reached(self, marks: dict[int, int]) -> bool:
        """Whether every record below `marks` has been returned by `poll`."""
        return all(self.read_to.get(p, 0) >= high for p, high in marks.items())

    def poll(self, timeout_s: float, max_records: int = 500) -> list[Record]:
        out: list[Record] = []
        for msg in self._consumer.consume(max_records, timeout_s):
            error, partition, offset = msg.error(), msg.partition(), msg.offset()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and partition is not None and offset is not None:
                    self.read_to[partition] = max(self.read_to.get(partition, 0), offset)
                continue  # other errors: librdkafka retries them itself
            assert partition is not None and offset is not None  # a consumed record has both
            self.read_to[partition] = offset + 1
            out.append(record_of(msg, self.codec) if msg.value() is not None else record_of(msg, None))
        return out

    def close(self) -> None:
        self._consumer.close()
        self._marks.close()

