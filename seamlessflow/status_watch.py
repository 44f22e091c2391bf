"""Follows the status topic incrementally: the live table of `up`, and readiness checks of the stack."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from seamlessflow.avro import CodecError, codec_for
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.messages import ResourceStatus
from seamlessflow.status_rows import resource_row
from seamlessflow.topics import Topics


class ResourceWatcher:
    """Follows the status topic incrementally for the live table (latest heartbeat per resource, and the
    trainer's reward per step for the reward curve)."""

    def __init__(self, settings: Settings):
        self.settings = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
        self.codec = codec_for(self.settings)
        self.latest: dict[str, ResourceStatus] = {}
        self.rewards: dict[int, float] = {}
        self._consumer: Consumer | None = None

    def rows(self) -> list[dict]:
        try:
            self._drain()
        except Exception:  # the broker may be restarting; the table shows what it has
            self._consumer = None
        now_s = time.time()
        return [resource_row(status, now_s) for _, status in sorted(self.latest.items())]

    def _drain(self) -> None:
        if self._consumer is None:
            topic = Topics(self.settings).status
            self._consumer = Consumer(consumer_config(self.settings, f"status-view-{time.monotonic_ns()}",
                                                      **{"fetch.wait.max.ms": 50}))
            self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        for msg in self._consumer.consume(1000, timeout=0.2):
            if msg.error():
                continue
            try:
                status = self.codec.decode(msg.value())
            except CodecError:
                continue
            if isinstance(status, ResourceStatus) and status.team == self.settings.team and status.run == self.settings.run:
                self.latest[status.resource_id] = status
                if status.kind == ResourceKind.TRAINER and "reward_mean" in status.figures:
                    self.rewards[int(status.figures.get("step", 0))] = status.figures["reward_mean"]



def engines_serving(settings: Settings, resource_ids: list[str]) -> Callable[[], bool]:
    """A readiness check: true once every named rollout worker reports its engine up in the rollout role."""
    watcher = ResourceWatcher(settings)

    def ready() -> bool:
        rows = {row["id"]: row for row in watcher.rows()}
        return all(
            rid in rows and rows[rid]["state"] == ResourceState.ACTIVE and rows[rid]["active_tag"] == Tag.ROLLOUT
            and rows[rid]["figures"].get("engine_up", 1.0) >= 1
            for rid in resource_ids
        )
    return ready
