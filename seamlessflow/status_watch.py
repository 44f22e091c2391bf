"""Follows the status topic incrementally: the live table of `up`, and readiness checks of the stack."""

from __future__ import annotations

import time
from collections.abc import Callable

from seamlessflow.avro import codec_for
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag
from seamlessflow.kafka.subscriber import Subscriber
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
        self._consumer: Subscriber | None = None

    def rows(self) -> list[dict]:
        try:
            self._drain()
        except Exception:  # the broker may be restarting; the table shows what it has
            self._consumer = None
        now_s = time.time()
        return [resource_row(status, now_s) for _, status in sorted(self.latest.items())]

    def _drain(self) -> None:
        if self._consumer is None:
            # a viewer, not a service: it files no dead letters (the services reading the topic do)
            self._consumer = Subscriber(self.settings, self.codec, None, name="status-view",
                                        config={"fetch.wait.max.ms": 50})
            self._consumer.follow(Topics(self.settings).status)
        for status in self._consumer.messages(0.2, 1000):
            if (
                isinstance(status, ResourceStatus)
                and status.team == self.settings.team
                and status.run == self.settings.run
            ):
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
