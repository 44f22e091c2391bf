"""An agent worker's sessions in flight, adapted to the engines' load as the status topic reports it.

The rule is the core's (`core.sessions_in_flight`); this reads its inputs: the newest heartbeat of every rollout
engine of the run that serves (active, in the `rollout` role, heard from within `stale_s`) and the run's trainers'
`steps_ready`. The status topic is compacted and keyed by resource, so reading it from its beginning gives every
resource's newest heartbeat at once, then each new one as it comes. A broker that does not answer yet leaves the
limit where it is (the worker goes on with it) and is asked again at the next decision.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag
from seamlessflow.core.sessions_in_flight import EngineLoad, FlightBounds, FlightDecision, next_in_flight
from seamlessflow.kafka.io import KafkaException
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import ResourceStatus, now_ms
from seamlessflow.topics import Topics

log = logging.getLogger(__name__)


class FlightControl:
    def __init__(self, settings: Settings, codec: Codec, bounds: FlightBounds, start: int, name: str,
                 every_s: float = 2.0, stale_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.settings, self.codec, self.bounds, self.name = settings, codec, bounds, name
        self.every_s, self.stale_s, self.clock = every_s, stale_s, clock
        self.decision = FlightDecision(bounds.clamp(start), "the configured start")
        self._latest: dict[str, ResourceStatus] = {}
        self._feed: Subscriber | None = None
        self._decided_at = clock()

    @property
    def limit(self) -> int:
        return self.decision.limit

    def update(self) -> int:
        """Reads what the status topic has now (never waits) and, every `every_s`, decides the limit again."""
        if self.clock() - self._decided_at < self.every_s:
            self._read(self._feed)
            return self.limit
        self._decided_at = self.clock()
        self._read(self._feed or self._open())  # a broker not there yet is asked again at the next decision
        decision = next_in_flight(self.limit, self.engines(), self.steps_ready(), self.bounds)
        if decision.limit != self.limit:
            log.info("%s: sessions in flight %d -> %d: %s", self.name, self.limit, decision.limit, decision.reason)
        self.decision = decision
        return self.limit

    def engines(self) -> list[EngineLoad]:
        return [EngineLoad(s.figures.get("requests_running", 0.0), s.figures.get("requests_waiting", 0.0),
                           s.figures.get("kv_cache_usage", 0.0))
                for s in self._fresh(ResourceKind.ROLLOUT)
                if s.state is ResourceState.ACTIVE and s.active_tag == Tag.ROLLOUT]

    def steps_ready(self) -> float | None:
        """The most batches any of the run's trainers has ready and not trained (None: no trainer reports it)."""
        ready = [s.figures["steps_ready"] for s in self._fresh(ResourceKind.TRAINER) if "steps_ready" in s.figures]
        return max(ready) if ready else None

    def close(self) -> None:
        if self._feed is not None:
            self._feed.close()

    def _fresh(self, kind: ResourceKind) -> list[ResourceStatus]:
        oldest = now_ms() - self.stale_s * 1000
        return [s for s in self._latest.values() if s.kind is kind and s.created_at_ms >= oldest]

    def _read(self, feed: Subscriber | None) -> None:
        if feed is None:
            return
        for status in feed.messages(0.0):
            if isinstance(status, ResourceStatus) and status.run == self.settings.run:
                self._latest[status.resource_id] = status

    def _open(self) -> Subscriber | None:
        feed = Subscriber(self.settings, self.codec, None, name=f"flight-{self.name}")
        try:
            if feed.follow(Topics(self.settings).status, timeout_s=2.0):
                self._feed = feed
                return feed
            reason = "no status topic yet"
        except KafkaException as exc:
            reason = str(exc)
        feed.close()
        log.warning("%s: sessions in flight stay at %d: %s", self.name, self.limit, reason)
        return None
