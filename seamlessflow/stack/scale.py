"""More or fewer engines for a running stack, without a restart: `seamlessflow scale rollout=+N` (or `-N`).

Why it needs nothing but a new service: an engine announces itself on the status topic, where the proxies
discover it and the scheduler takes it into its tables, and a starting rollout worker catches up to the newest
weight version by itself. So adding capacity is adding a rollout worker to the stack's effective config (so a
restarted actor finds its spec) and placing its service; Ray puts it on a node that has what it asks for (a node
that just joined, say). The local supervisor places services on one machine it has already filled: there,
scale by configuring `rollout.workers` and starting again.

Fewer engines: the placement stops the newest ones the way `down` stops any: the rollout worker takes its
engine out of routing at every proxy first (`RolloutWorker.retire`), so the calls it was generating continue
on the other engines as token-in continuations, exact in tokens and versions as across a weight update; then
its engine stops, its actor ends for good, and Ray has its resources back. The engines leave the effective
config, so nothing starts them again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import yaml

from seamlessflow.config import Settings
from seamlessflow.stack.supervisor import ServiceSpec, ServiceState

ENGINE_ID = re.compile(r"rollout-(\d+)$")
# what is one engine's own and must not be copied into another's spec: its port, its cores, its GPUs
OWN_FIELDS = ("port", "cpus", "gpu")


def added_engines(workers: dict[str, dict], count: int) -> dict[str, dict]:
    """`count` new rollout workers after the highest `rollout-<n>`, each like the last configured one (its
    capability and hardware tags, its starting role), without what was that one's own (`OWN_FIELDS`)."""
    if count < 1:
        raise ValueError("scale adds engines with +N, N >= 1")
    numbers = [int(m.group(1)) for rid in workers if (m := ENGINE_ID.match(rid))]
    template = {k: v for k, v in (workers[list(workers)[-1]] if workers else {}).items() if k not in OWN_FIELDS}
    first = max(numbers, default=-1) + 1
    return {f"rollout-{first + i}": dict(template) for i in range(count)}


def removed_engines(workers: dict[str, dict], count: int) -> list[str]:
    """The `count` newest engines (highest `rollout-<n>`, what scale-ups added last); one always stays."""
    numbered = sorted((int(m.group(1)), rid) for rid in workers if (m := ENGINE_ID.match(rid)))
    if count < 1 or count >= len(workers):
        raise ValueError(f"scale can remove 1 to {len(workers) - 1} of the {len(workers)} engines (one stays)")
    if len(numbered) < count:
        raise ValueError(f"only {len(numbered)} engines are named rollout-<n>; stop others with `down`")
    return [rid for _, rid in numbered[-count:]]


def parse_change(change: str) -> tuple[str, int]:
    """`rollout=+2` -> ("rollout", 2); `rollout=-1` -> ("rollout", -1)."""
    role, sep, amount = change.partition("=")
    if not sep or amount[:1] not in "+-" or not amount[1:].isdigit() or int(amount[1:]) == 0:
        raise ValueError(f"{change!r}: write ROLE=+N or ROLE=-N, e.g. rollout=+1")
    return role, int(amount)


def scale_stack(settings: Settings, count: int, say: Callable[[str], None]) -> dict[str, ServiceState]:
    """Adds `count` engines to the stack running from this data directory (or removes `-count`), through the
    placement that runs it (`PlacementError` where it cannot: the local stack). Returns each engine's state."""
    from seamlessflow.stack.placements import recorded
    from seamlessflow.stack.services import config_path

    placement = recorded(settings).attach(say)
    if count > 0:
        added = scale_engines(config_path(settings), count, placement.start)
        return {name: placement.states[name] for name in added}
    drained = drain_engines(config_path(settings), -count, placement.stop)
    gone = {name: placement.states.pop(name) for name in drained}  # no longer the stack's: `status` omits them
    placement.write_state()
    return gone


def drain_engines(effective: Path, count: int, stop: Callable[[str], None]) -> list[str]:
    """Stops the `count` newest engines of the stack whose effective config is `effective` through `stop` (a
    placement's: the worker retires its engine from routing before it stops it), then drops them from the
    config. Returns their resource ids."""
    data = yaml.safe_load(effective.read_text()) or {}
    workers = (data.get("rollout") or {}).get("workers") or {}
    gone = removed_engines(workers, count)
    for resource_id in gone:
        stop(resource_id)
    data["rollout"]["workers"] = {rid: spec for rid, spec in workers.items() if rid not in gone}
    effective.write_text(yaml.safe_dump(data, sort_keys=False))
    return gone


def scale_engines(effective: Path, count: int, start: Callable[[ServiceSpec], None]) -> list[str]:
    """Adds `count` engines to the stack whose effective config is `effective` (written by `up`) and starts
    each through `start` (a placement's). Returns the new resource ids."""
    from seamlessflow.rollout.options import RolloutOptions
    from seamlessflow.stack.services import python_service, with_requests
    from seamlessflow.stack.watch import engines_up

    data = yaml.safe_load(effective.read_text()) or {}
    workers = data.setdefault("rollout", {}).setdefault("workers", {}) or {}
    new = added_engines(workers, count)
    data["rollout"]["workers"] = {**workers, **new}
    effective.write_text(yaml.safe_dump(data, sort_keys=False))  # a restarted actor reads its spec from here
    settings = Settings.model_validate(data)
    rollout = RolloutOptions.from_settings(settings)
    for resource_id in new:
        spec = python_service(settings, resource_id, "--resource-id", resource_id, module="rollout")
        spec.ready, spec.ready_timeout_s = engines_up(settings, [resource_id]), rollout.health_timeout_s
        start(with_requests(settings, [spec], rollout)[0])
    return list(new)
