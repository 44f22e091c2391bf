"""Which engines must hold a policy version before it is announced, and which the trainer should join.

Why a rule of its own: the WeightVersion record tells the scheduler, the proxies and the trainer's data
path that a version is live. With weights streamed engine-to-engine, announcing it while a serving engine
still generates with the previous weights would label that engine's tokens wrongly. So a version is
announced only once every engine that serves the policy through a transfer group holds it, or has been
taken out of routing (it failed; it catches up from files or the next join). Engines without a transfer
backend are fed from files after the announcement, as before (the announcement is what starts their load).

Pure: the trainer's adapter (seamlessflow/weights/transfer.py) reads heartbeats into `EngineSeen`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineSeen:
    """One rollout engine as its latest heartbeat describes it.

    `up`: its engine process answers (it may still be catching up, not yet routed); `serving`: the proxy
    routes to it now (active, rollout role, engine up); `transfer`: it was started with a weight-transfer
    backend, so it can join a group; `version`: the version it reports holding; `pid`: its engine
    process, so a restart behind the same URL is told apart (its old group died with it)."""

    resource_id: str
    url: str
    version: int
    up: bool
    serving: bool
    transfer: bool
    pid: int = 0


def to_join(engines: Iterable[EngineSeen], joined: Collection[str]) -> list[EngineSeen]:
    """Engines that can take versions through a transfer group and are not in one yet (by URL)."""
    return [e for e in engines if e.transfer and e.up and e.url not in joined]


def stale(engines: Iterable[EngineSeen], joined: Mapping[str, int]) -> list[str]:
    """Joined URLs (-> engine pid at the join) whose engine went down or was restarted: leave their groups."""
    now = {e.url: e for e in engines}
    return [url for url, pid in joined.items() if url in now and (not now[url].up or now[url].pid != pid)]


def behind(engines: Iterable[EngineSeen], version: int, joined: Collection[str]) -> list[EngineSeen]:
    """Joined engines that report an older version than `version` (a restart, a late join): catch them up."""
    return [e for e in engines if e.url in joined and e.up and e.version < version]


def awaited(version: int, engines: Iterable[EngineSeen], holding: Collection[str],
            routed_out: Collection[str]) -> list[EngineSeen]:
    """The serving transfer engines that neither hold `version` (by report or by delivery: `holding`, URLs)
    nor were taken out of routing (`routed_out`, URLs). The version may be announced when this is empty."""
    return [e for e in engines if e.serving and e.transfer and e.version < version
            and e.url not in holding and e.url not in routed_out]


def may_announce(version: int, engines: Iterable[EngineSeen], holding: Collection[str],
                 routed_out: Collection[str]) -> bool:
    return not awaited(version, engines, holding, routed_out)
