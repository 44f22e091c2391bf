"""Kafka client settings, in one place for every client library the project uses.

One configuration for the embedded broker and a real cluster: acks=all with idempotent producers, manual
commits, readers that see committed records only (`fencing`). Short group-session timeouts (6 s) move a
dead consumer's partitions to the living within seconds rather than librdkafka's default 45 s.
`settings.kafka` adds properties for real clusters (security.protocol, sasl.*, ssl.*) to every librdkafka
client.
"""

from __future__ import annotations

from typing import Any

from seamlessflow.config import Settings

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000


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
