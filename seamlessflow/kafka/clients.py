"""Kafka client settings, in one place for every client library the project uses.

One configuration for the embedded broker and a real cluster: acks=all with idempotent producers, manual
commits. Short group-session timeouts (6 s) move a dead consumer's partitions to the living within
seconds rather than librdkafka's default 45 s. `settings.kafka` adds properties for real clusters
(security.protocol, sasl.*, ssl.*) to every librdkafka client.
"""

from __future__ import annotations

from typing import Any

from seamlessflow.config import Settings

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
METADATA_MAX_AGE_MS = 5000


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
    """Manual commits (after the work is done), from the earliest offset on first join."""
    return {
        **common_config(settings),
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        **extra,
    }


def aiokafka_kwargs(settings: Settings) -> dict[str, Any]:
    """The same settings for aiokafka (which Faust uses underneath)."""
    return {
        "bootstrap_servers": settings.kafka_bootstrap,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
    }


def faust_app_kwargs(settings: Settings) -> dict[str, Any]:
    """Arguments for `faust.App(...)`. aiokafka learns that a partition's leader moved only from a metadata
    refresh, and after a broker dies its fetcher can wait for the periodic one (5 min by default) before it
    reads that partition again; a short period bounds that stall to seconds (librdkafka refreshes on errors)."""
    return {
        "broker": f"kafka://{settings.kafka_bootstrap}",
        "consumer_metadata_max_age_ms": METADATA_MAX_AGE_MS,
        "producer_metadata_max_age_ms": METADATA_MAX_AGE_MS,
        "broker_session_timeout": SESSION_TIMEOUT_MS / 1000,
        "broker_heartbeat_interval": HEARTBEAT_INTERVAL_MS / 1000,
        **({"topic_replication_factor": settings.replication_factor} if settings.replication_factor else {}),
        "topic_allow_declare": False,  # topics are created up front (infra/topics.yaml)
    }
