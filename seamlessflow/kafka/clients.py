"""Kafka client settings, in one place for every client library the project uses.

One configuration for the embedded broker and a real cluster: acks=all with idempotent producers, manual
commits, readers that see committed records only (`fencing`). Short group-session timeouts (6 s) move a
dead consumer's partitions to the living within seconds rather than librdkafka's default 45 s.
`settings.kafka` adds properties for real clusters (security.protocol, sasl.*, ssl.*) to every librdkafka
client.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException

from seamlessflow.config import Settings

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
REFUSED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED})  # metadata errors that are a refusal, not a gap


def common_config(settings: Settings) -> dict[str, Any]:
    return {"bootstrap.servers": settings.kafka_bootstrap, **settings.kafka}


def producer_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """acks=all, so an acknowledged record is never lost; idempotent, so a retry is never duplicated or
    reordered (else one request in flight, so a retry can duplicate but never reorder a session's events)."""
    delivery = ({"enable.idempotence": True} if settings.idempotent_producer
                else {"enable.idempotence": False, "max.in.flight.requests.per.connection": 1})
    return {
        **common_config(settings),
        **delivery,
        "acks": "all",
        "linger.ms": 2,
        "message.max.bytes": settings.max_record_bytes + 65536,
        **extra,
    }


def private_group(settings: Settings, name: str) -> str:
    """A group id of one reader that never commits (history readers, live followers, lookups). Under the stack's
    topic prefix, as every group of ours: on a cluster with ACLs a team's one PREFIXED group grant on
    `<topic_prefix>.` covers it; a bare `reader-<n>` was refused there (GROUP_AUTHORIZATION_FAILED), even
    for the team's own topics (tests/broker/test_team_acls.py)."""
    return f"{settings.topic_prefix}.{name}-{time.monotonic_ns()}"


def partitions_of(consumer: Consumer, topic: str, timeout_s: float) -> list[int]:
    """The topic's partitions from the broker's metadata; [] for a topic not created yet. A refusal is raised:
    another team's topic on a cluster with ACLs answers TOPIC_AUTHORIZATION_FAILED with no partitions, which
    read as "empty" would hide the refusal."""
    meta = consumer.list_topics(topic, timeout=timeout_s).topics[topic]
    if meta.error is not None and meta.error.code() in REFUSED:
        raise KafkaException(meta.error)
    return sorted(meta.partitions)


def consumer_config(settings: Settings, group_id: str, **extra: Any) -> dict[str, Any]:
    """Manual commits (after the work is done), from the earliest offset on first join. `read_committed`, the
    rule for every reader: a record of a role's writer is delivered only once its transaction committed, so
    what a fenced writer left (`fencing`) reaches no one; records written without a transaction come as
    before. (librdkafka's default too; said here so a client library of other defaults keeps the rule.)"""
    return {
        **common_config(settings),
        "group.id": group_id,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        **extra,
    }
