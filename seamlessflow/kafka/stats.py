"""librdkafka's own memory, logged on request: what a consumer holds in its fetch queues, next to the RSS.

A service's resident memory includes librdkafka's prefetch (up to `queued.max.messages.kbytes` per consumer,
64 MiB by default), which Python's tracing never sees. `SEAMLESSFLOW_KAFKA_STATS_S=N` makes consumers built
with `stats_config` log, every N seconds, the bytes and messages in their fetch queue (librdkafka's
statistics, `fetchq_size` and `fetchq_cnt`) with the process's RSS, so a soak's slope can be split between
the client's buffers and the rest.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import psutil

ENV = "SEAMLESSFLOW_KAFKA_STATS_S"
log = logging.getLogger("seamlessflow.kafka.stats")


def stats_config(name: str) -> dict[str, Any]:
    """The consumer settings that log its fetch queues every `$SEAMLESSFLOW_KAFKA_STATS_S` (none if unset)."""
    every_s = float(os.environ.get(ENV, "0") or 0)
    if every_s <= 0:
        return {}
    return {"statistics.interval.ms": int(every_s * 1000), "stats_cb": lambda raw: log_fetch_queues(name, raw)}


def fetch_queues(raw: str) -> tuple[int, int]:
    """(bytes, messages) in a group consumer's fetch queue, from one librdkafka statistics document.

    In a group consumer every assigned partition's fetch queue forwards to the consumer's one queue, and each
    partition's statistics report that queue's size: the largest is the queue, a sum would count it once per
    partition (shown against the real broker in `tests/kafka/test_stats.py`).
    """
    stats = json.loads(raw)
    partitions = [p for topic in stats.get("topics", {}).values() for p in topic.get("partitions", {}).values()]
    return (max((p.get("fetchq_size", 0) for p in partitions), default=0),
            max((p.get("fetchq_cnt", 0) for p in partitions), default=0))


def log_fetch_queues(name: str, raw: str) -> None:
    size, count = fetch_queues(raw)
    rss = psutil.Process().memory_info().rss
    log.info("%s: librdkafka fetch queues %.1f MiB in %d records; process RSS %.1f MiB", name, size / 2**20,
             count, rss / 2**20)
