"""A topic read by a plain Kafka consumer that shares no code with the project's readers.

Why a separate reader: the durability tests check that every acknowledged record is on the broker; reading
it back through the project's own reader would let one bug hide another. This is the one module outside
`seamlessflow/kafka` (and the tests of that layer and of the broker) that uses the Kafka client directly
(`tests/test_layering.py` names it).
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError


def independent_read(bootstrap: str, topic: str, timeout_s: float = 60) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) in the topic, by a fresh group reading from the earliest offset until it is idle."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"audit-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.subscribe([topic])
    values: list[tuple[bytes | None, bytes | None]] = []
    at_end: set[int | None] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                if at_end and len(at_end) == len(consumer.assignment()):
                    break
                continue
            error = msg.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            values.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return values
