"""Which engine serves a session: rendezvous hashing over the healthy engines.

A session always lands on the same engine while that engine is healthy (its prefix cache stays warm);
when an engine is taken out only its own sessions move, and they move back when it recovers. Engines come
from the config and from rollout workers' heartbeats on the status topic; each carries the policy version
the proxy believes it serves, which labels the tokens it generates.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass
class Engine:
    id: str
    url: str  # base URL, without /v1
    version: int = 0
    healthy: bool = True
    announced: bool = True  # config engines always; status engines while their state is "active"
    failures: int = 0  # consecutive failed health checks
    source: str = "config"  # config | status

    @property
    def routable(self) -> bool:
        return self.healthy and self.announced


def _score(engine_id: str, session_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{engine_id}|{session_id}".encode(), digest_size=8).digest(), "big")


class EngineTable:
    def __init__(self, health_failures: int = 2):
        self.health_failures = health_failures
        self._by_url: dict[str, Engine] = {}

    def __iter__(self):
        return iter(list(self._by_url.values()))

    def __len__(self) -> int:
        return len(self._by_url)

    def add(self, engine_id: str, url: str, version: int = 0, source: str = "config") -> Engine:
        url = url.rstrip("/").removesuffix("/v1")
        engine = self._by_url.get(url)
        if engine is None:
            engine = self._by_url[url] = Engine(engine_id, url, version, source=source)
        return engine

    def announce(self, engine_id: str, url: str, active: bool, version: int) -> Engine:
        """A rollout worker's heartbeat: routable while it says it is active; its version only goes up."""
        engine = self.add(engine_id, url, version, source="status")
        engine.announced = active
        self.observe_version(engine, version)
        return engine

    def observe_version(self, engine: Engine, version: int) -> None:
        engine.version = max(engine.version, version)

    def set_all_versions(self, version: int) -> None:
        for engine in self._by_url.values():
            self.observe_version(engine, version)

    def pick(self, session_id: str, exclude: frozenset[str] = frozenset()) -> Engine | None:
        candidates = [e for e in self._by_url.values() if e.routable and e.url not in exclude]
        if not candidates:
            return None
        return max(candidates, key=lambda e: _score(e.id, session_id))

    def health_result(self, engine: Engine, ok: bool) -> None:
        if ok:
            engine.failures = 0
            engine.healthy = True
        else:
            engine.failures += 1
            if engine.failures >= self.health_failures:
                engine.healthy = False

    def mark_down(self, engine: Engine) -> None:
        """A request could not reach it: out at once; the health checker brings it back."""
        engine.failures = max(engine.failures, self.health_failures)
        engine.healthy = False

    @property
    def routable_count(self) -> int:
        return sum(1 for e in self._by_url.values() if e.routable)
