"""Follows the status topic incrementally: the live table of `up`, and readiness checks of the stack."""

from __future__ import annotations

import time
from collections.abc import Callable

from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import ResourceStatus, now_ms
from seamlessflow.stack.rows import resource_row
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



def engines_up(settings: Settings, resource_ids: list[str]) -> Callable[[], str]:
    """A readiness check (`supervisor.Awaiting`): what is missing until every named rollout worker has reported,
    since this call, its engine up ("" then).

    Not "serving in the rollout role": a role is the scheduler's to change, and the scheduler starts after
    the engines, so a wait for a role could never end. Heartbeats older than the call are a previous run's
    (the status topic keeps each resource's newest across `down`/`up`) and say nothing of this one."""
    watcher, since_ms = ResourceWatcher(settings), now_ms()

    def awaiting() -> str:
        watcher.rows()  # drains the topic into `watcher.latest`
        missing = [_engine_awaited(rid, watcher.latest.get(rid), since_ms) for rid in resource_ids]
        return "; ".join(m for m in missing if m)
    return awaiting


def _engine_awaited(resource_id: str, status: ResourceStatus | None, since_ms: int) -> str:
    if status is None or status.created_at_ms < since_ms:
        return f"{resource_id} to send a heartbeat"
    if status.state not in (ResourceState.ACTIVE, ResourceState.PAUSED):
        return f"{resource_id}'s engine to start (worker {status.state})"
    if status.figures.get("engine_up", 1.0) < 1:
        return f"{resource_id}'s engine to answer"
    return ""
