"""How the simulator hands queued rollouts to engines: a shared queue, or the proxy's session routing.

- `least-loaded` (default, what the scheduler comparisons use): any engine with a free slot takes the next
  rollout, least-loaded first. Work-conserving and tag-blind; no real proxy does this per session, but
  it isolates the scheduler policies from routing.
- `blind`: the proxy's routing without profiles: each rollout (a session) is pinned by rendezvous hashing
  over the engines serving rollouts, and waits for *that* engine (as a request queues inside vLLM).
- `affinity`: the same with the session's declared profile, so it is pinned to an engine whose hardware
  tags fit (failover to any engine when none fits): `core.routing.route`, the function the proxy calls.

A rollout's engine is re-chosen whenever the set of engines serving rollouts changes (a role switch, a
failure), as the proxy's choice would be.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from seamlessflow.core.resources import Tag
from seamlessflow.core.routing import FitTable, parse_profile, route

if TYPE_CHECKING:
    from seamlessflow.sim.simulated_engine import Rollout, SimEngine

ROUTINGS = ("least-loaded", "blind", "affinity")


def least_loaded(queue: deque[Rollout], engines: list[SimEngine], now: float) -> set[SimEngine]:
    """Least-loaded first, one rollout per engine per pass, so a burst spreads evenly."""
    touched: set[SimEngine] = set()
    open_engines = sorted((e for e in engines if e.free_slots > 0), key=lambda e: (len(e.running), e.id))
    while queue and open_engines:
        still_open = []
        for engine in open_engines:
            if not queue:
                break
            if not engine.fits(queue[0]):
                continue
            engine.admit(queue.popleft(), now)
            touched.add(engine)
            if engine.free_slots > 0:
                still_open.append(engine)
        open_engines = still_open
    return touched


class HashedDispatch:
    """Per-engine waiting lines filled by session routing (`blind` or `affinity`)."""

    def __init__(self, mode: str, fit: FitTable | None = None):
        if mode not in ("blind", "affinity"):
            raise ValueError(f"unknown routing {mode!r}; known: {', '.join(ROUTINGS)}")
        self.mode, self.fit = mode, fit or FitTable()
        self.lines: dict[str, deque[Rollout]] = {}
        self._serving: tuple[str, ...] = ()

    @property
    def waiting(self) -> int:
        return sum(len(line) for line in self.lines.values())

    def __call__(self, queue: deque[Rollout], engines: list[SimEngine], now: float) -> set[SimEngine]:
        serving = [e for e in engines if e.alive and e.role == Tag.ROLLOUT and e.pending_role in (None, Tag.ROLLOUT)
                   and not e.draining]
        ids = tuple(e.id for e in serving)
        if ids != self._serving:  # re-route everything that waits, as the proxy would
            for line in self.lines.values():
                queue.extend(line)
            self.lines = {e.id: deque() for e in serving}
            self._serving = ids
        if serving:
            while queue:
                rollout = queue.popleft()
                profile = parse_profile(rollout.profile) if self.mode == "affinity" else None
                target = route(rollout.session_id, profile, serving, self.fit)
                assert target is not None  # route() answers None only for no candidates
                line = self.lines[target.id]
                line.appendleft(rollout) if not rollout.fresh else line.append(rollout)  # resumed ones first
        touched: set[SimEngine] = set()
        for engine in serving:
            line = self.lines[engine.id]
            while line and engine.free_slots > 0 and engine.fits(line[0]):
                engine.admit(line.popleft(), now)
                touched.add(engine)
        return touched


def make_dispatch(routing: str, fit: FitTable | None = None
                  ) -> Callable[[deque[Rollout], list[SimEngine], float], set[SimEngine]]:
    if routing == "least-loaded":
        return least_loaded
    return HashedDispatch(routing, fit)
