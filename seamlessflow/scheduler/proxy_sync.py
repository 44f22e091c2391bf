"""Weight updates together with the proxy's partial rollout.

The paper's sequence is: pause generation (cutting in-flight calls, keeping their tokens) -> load version
N+1 on the engines -> resume (cut calls continue with the new weights, their later tokens labelled N+1).
The proxy implements the cut and the labelling (seamlessflow/proxy/control_view.py: `pause`, then `resume` with
`weight_version`); the engines implement the load. This module orders the two:

1. the policy wants an engine to load version v that the proxies are not labelling yet: hold the engine
   commands (their epochs are skipped, which is harmless) and send `pause(keep)` to every proxy;
2. once every proxy acknowledged the pause (it does so when nothing of its own is generating), or after
   `command_timeout_s`, let the engine commands through and remember their `load_weights` epochs;
3. once every such load is acknowledged (or its resource failed, or the timeout passed): `resume` every
   proxy with `weight_version = v`.

A scheduler that dies between 1 and 3 leaves the proxies paused, and its successor starts with no update
in hand: a proxy whose heartbeat says it is paused by the newest command it was ever issued ("stranded")
is resumed when no update is under way (found by a chaos run: every call queued until its timeout).

Proxies are discovered from the status topic (kind `proxy`); with none, engine commands pass unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from seamlessflow.core.policies import Command, LoadWeights, Pause, Resume
from seamlessflow.core.resources import EpochBook


@dataclass
class ProxyUpdate:
    version: int
    pause_epochs: dict[str, int]  # proxy id -> epoch of its pause
    started_at: float
    loads: dict[str, int] = field(default_factory=dict)  # engine id -> epoch of its load_weights
    released_at: float | None = None


@dataclass
class ProxySync:
    """Decides, per tick, which commands go out now and which proxy commands go with them."""

    timeout_s: float
    labelled_version: int = 0
    update: ProxyUpdate | None = None

    def filter(self, proxies: dict[str, int], stamped: list[tuple[int, Command]], epochs: EpochBook, now: float,
               gone: set[str], stranded: frozenset[str] = frozenset(),
               ) -> tuple[list[tuple[int, Command]], list[tuple[int, Command]]]:
        """Returns (engine commands to publish now, proxy commands to publish before them).

        `proxies`: live proxy id -> the version it labels now; `stamped`: the policy's (epoch, command)
        pairs; `gone`: engine ids that failed (their loads are no longer awaited); `stranded`: live proxies
        left paused by an update nobody finishes (resumed when none is under way). Only the commands of
        engines that load weights are held; role switches of other resources always pass."""
        if not proxies:
            return stamped, []
        loading = {c.resource_id for _, c in stamped if isinstance(c, LoadWeights)}
        wanted = max((c.version for _, c in stamped if isinstance(c, LoadWeights)), default=0)
        held = [(e, c) for e, c in stamped if c.resource_id in loading]
        free = [(e, c) for e, c in stamped if c.resource_id not in loading]
        if self.update is None:
            if wanted <= max(self.labelled_version, min(proxies.values())):
                return stamped, [(epochs.issue(p), Resume(p)) for p in sorted(stranded & proxies.keys())]
            self.update = ProxyUpdate(wanted, {p: epochs.issue(p) for p in sorted(proxies)}, now)
            _unissue(held, epochs)
            return free, [(e, Pause(p)) for p, e in self.update.pause_epochs.items()]
        update = self.update
        if update.released_at is None:
            paused = all(epochs.acked.get(p, 0) >= e for p, e in update.pause_epochs.items())
            if not paused and now - update.started_at < self.timeout_s:
                _unissue(held, epochs)
                return free, []
            update.released_at = now
        for epoch, command in held:
            if isinstance(command, LoadWeights):
                update.loads[command.resource_id] = epoch
                update.version = max(update.version, command.version)
        loaded = all(epochs.acked.get(r, 0) >= e or r in gone for r, e in update.loads.items())
        if (update.loads and loaded) or now - update.released_at >= self.timeout_s:
            self.labelled_version, self.update = update.version, None
            return stamped, [(epochs.issue(p), Resume(p)) for p in sorted(proxies)]
        return stamped, []


def _unissue(held: list[tuple[int, Command]], epochs: EpochBook) -> None:
    """Held commands are never published: give their epochs back, so the resource is not seen as having a
    command in flight (the policy emits them again next tick)."""
    for epoch, command in sorted(held, key=lambda pair: pair[0], reverse=True):
        epochs.issued[command.resource_id] = min(epochs.issued[command.resource_id], epoch - 1)
