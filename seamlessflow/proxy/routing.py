"""Which engine serves a session: `core.routing.route` over the routable engines (hardware-aware hashing).

A session with a profile (prefill- or decode-heavy, declared or learnt) goes to the engines whose hardware
tags fit it, and among them always lands on the same engine while that engine is healthy (its prefix
cache stays warm); when an engine is taken out only its own sessions move, to another fitting engine, or
to any healthy one when no fitting engine is left; they move back when it recovers. Without hardware tags
or a profile this is plain rendezvous hashing over the healthy engines. Engines come from the config and
from rollout workers' heartbeats on the status topic (with their hardware tags); each carries the policy
version the proxy believes it serves, which labels the tokens it generates.

That version is exact because whoever changes an engine's weights fences it first (`engine_fence.py`):
`hold` takes the engine out of routing and cuts its streams before the engine pauses, `release` sets its
version before it resumes. A heartbeat only ever raises a version (it lags, never leads).

A team's LoRA adapter (`proxy.teams.<team>.lora`) has versions of its own, per engine (`adapter_versions`): a
release that names an adapter sets that one (the rollout worker loaded it into the engine inside the same hold),
leaving the base's version alone; a call to the adapter is labelled with it (`version_of`), 0 before any.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from seamlessflow.core.routing import FitTable, Profile, route


@dataclass
class Engine:
    id: str
    url: str  # base URL, without /v1
    version: int = 0
    healthy: bool = True
    announced: bool = True  # config engines always; status engines while their state is "active"
    failures: int = 0  # consecutive failed health checks
    source: str = "config"  # config | status
    hardware_tags: frozenset[str] = field(default_factory=frozenset)
    held_at: int | None = None  # the version when a weight update fenced it (`hold`); None: not held
    adapter_versions: dict[str, int] = field(default_factory=dict)  # LoRA adapter name -> its version here

    def version_of(self, adapter: str | None) -> int:
        """The version that labels a token of this engine: its base's, or (a call to `adapter`) that adapter's."""
        return self.version if adapter is None else self.adapter_versions.get(adapter, 0)

    @property
    def held(self) -> bool:
        return self.held_at is not None

    @property
    def routable(self) -> bool:
        return self.healthy and self.announced and not self.held


class EngineTable:
    def __init__(self, health_failures: int = 2, fit: FitTable | None = None):
        self.health_failures = health_failures
        self.fit = fit or FitTable()
        self._by_url: dict[str, Engine] = {}

    def __iter__(self) -> Iterator[Engine]:
        return iter(list(self._by_url.values()))

    def __len__(self) -> int:
        return len(self._by_url)

    def add(self, engine_id: str, url: str, version: int = 0, source: str = "config",
            hardware_tags: frozenset[str] = frozenset()) -> Engine:
        url = url.rstrip("/").removesuffix("/v1")
        engine = self._by_url.get(url)
        if engine is None:
            engine = self._by_url[url] = Engine(
                engine_id, url, version, source=source, hardware_tags=frozenset(hardware_tags)
            )
        return engine

    def announce(self, engine_id: str, url: str, active: bool, version: int,
                 hardware_tags: frozenset[str] | None = None, stopped: bool = False,
                 adapter_versions: Mapping[str, int] | None = None) -> Engine:
        """A rollout worker's heartbeat: routable while it says it is active; its version only goes up; its
        hardware tags are what it says now (None: a sender that predates them, keep what we know). Its last
        (`stopped`) ends a hold: a worker retires its engine with one before it stops (`RolloutWorker.retire`),
        and nothing releases it."""
        engine = self.add(engine_id, url, version, source="status")
        if engine.source == "status":  # one first known by a hold before its first heartbeat was named by its URL:
            engine.id = engine_id  # its tokens are recorded with its resource id from here on
        engine.announced = active
        if stopped:
            engine.held_at = None
        if hardware_tags is not None:
            engine.hardware_tags = frozenset(hardware_tags)
        self.observe_version(engine, version)
        for adapter, adapter_version in (adapter_versions or {}).items():  # they only go up, as the base's
            engine.adapter_versions[adapter] = max(engine.adapter_versions.get(adapter, 0), adapter_version)
        return engine

    def observe_version(self, engine: Engine, version: int) -> None:
        """A heartbeat's version: it only raises the label. One newer than the version an engine was held at
        also ends the hold: its worker loaded a version by itself (files) after a fenced update failed."""
        engine.version = max(engine.version, version)
        if engine.held_at is not None and version > engine.held_at:
            engine.held_at = None

    def hold(self, url: str) -> Engine | None:
        """A weight update is about to change the engine's weights: no call is routed to it until `release`."""
        engine = self._by_url.get(url.rstrip("/").removesuffix("/v1"))
        if engine is not None and engine.held_at is None:
            engine.held_at = engine.version
        return engine

    def release(self, url: str, version: int, adapter: str | None = None) -> Engine | None:
        """The engine holds `version` now (it has not resumed yet) of its base weights, or with `adapter` of that
        LoRA adapter (the base's label and the other adapters' stay): the label is set exactly, even lower (an
        engine restarted on an older version, or on an adapter's files it could not bring up to date), and the
        engine is routable again."""
        engine = self._by_url.get(url.rstrip("/").removesuffix("/v1"))
        if engine is not None:
            if adapter is None:
                engine.version = version
            else:
                engine.adapter_versions[adapter] = version
            engine.held_at = None
        return engine

    @property
    def any_held(self) -> bool:
        return any(e.held for e in self._by_url.values())

    def set_all_versions(self, version: int) -> None:
        """A `resume`/`load_weights` command's version: raises every label but ends no hold (that command
        says nothing about whether a held engine's update finished)."""
        for engine in self._by_url.values():
            engine.version = max(engine.version, version)

    def pick(
        self, session_id: str, exclude: frozenset[str] = frozenset(), profile: Profile | None = None
    ) -> Engine | None:
        """The session's engine among the routable ones not in `exclude` (URLs); see `core.routing.route`."""
        candidates = [e for e in self._by_url.values() if e.routable and e.url not in exclude]
        return route(session_id, profile, candidates, self.fit)

    def fits(self, engine: Engine, profile: Profile | None) -> bool:
        return self.fit.fits(profile, engine.hardware_tags)

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
