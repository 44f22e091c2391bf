"""More engines for a running stack, without a restart: `seamlessflow scale rollout=+N`.

Why it needs nothing but a new service: an engine announces itself on the status topic, where the proxies
discover it and the scheduler takes it into its tables, and a starting rollout worker catches up to the newest
weight version by itself. So adding capacity is adding a rollout worker to the stack's effective config (so a
restarted actor finds its spec) and placing its service; Ray puts it on a node that has what it asks for (a node
that just joined, say). The local supervisor places services on one machine it has already filled: there,
scale by configuring `rollout.workers` and starting again.
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
        raise ValueError("scale adds engines: give +N with N >= 1 (stopping engines of a running stack is `down`'s)")
    numbers = [int(m.group(1)) for rid in workers if (m := ENGINE_ID.match(rid))]
    template = {k: v for k, v in (workers[list(workers)[-1]] if workers else {}).items() if k not in OWN_FIELDS}
    first = max(numbers, default=-1) + 1
    return {f"rollout-{first + i}": dict(template) for i in range(count)}


def parse_change(change: str) -> tuple[str, int]:
    """`rollout=+2` -> ("rollout", 2)."""
    role, sep, amount = change.partition("=")
    if not sep or not amount.startswith("+") or not amount[1:].isdigit():
        raise ValueError(f"{change!r}: write ROLE=+N, e.g. rollout=+1")
    return role, int(amount[1:])


def scale_stack(settings: Settings, count: int, say: Callable[[str], None]) -> dict[str, ServiceState]:
    """Adds `count` engines to the stack running from this data directory, through the placement that runs it
    (`PlacementError` where it cannot add any: the local stack). Returns each new engine's state."""
    from seamlessflow.stack.placements import recorded
    from seamlessflow.stack.services import config_path

    placement = recorded(settings).attach(say)
    added = scale_engines(config_path(settings), count, placement.start)
    return {name: placement.states[name] for name in added}


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
