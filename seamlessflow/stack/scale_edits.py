"""What `seamlessflow scale` changes in a stack's effective config for the roles that are counts: assembler
workers (`assembler.workers`), an agent pool's workers (`agent_pools[].workers`) and each team's teacher workers
(`teacher.workers`). Pure edits of the loaded
YAML; the engines, which are entries of their own (`rollout.workers.<id>`), are `scale.edit_engines`'.

Why a count in the config and not `cluster.resources.<name>.replicas`: the copies `expand_replicas` makes are
named `<name>-r<i>` from two on, so going from one to two would rename (stop and restart) the running process;
`services.copies` keeps the first under its name. Replicas still multiply what a count gives (each copy is a
spec a placement may replicate), as at `up`.
"""

from __future__ import annotations

from typing import Any

SCALABLE = ("rollout", "assembler", "agents", "teacher")
DEFAULT_POOL = "default"  # `AgentPoolOptions.pool`'s default


def split_role(role: str) -> tuple[str, str | None]:
    """`agents:red-default` -> ("agents", "red-default"); `assembler` -> ("assembler", None)."""
    base, _, which = role.partition(":")
    if base not in SCALABLE or (which and base != "agents") or (not which and role.endswith(":")):
        raise ValueError(f"{role!r}: scale rollout, assembler or agents (agents:<team>-<pool> for one pool), "
                         "or teacher (every team's teacher workers)")
    return base, which or None


def with_count(current: int, count: int, what: str) -> int:
    """`current + count`, refused when that leaves none (one always stays)."""
    if current + count < 1:
        raise ValueError(f"scale can remove 1 to {current - 1} of the {current} {what} (one stays)")
    return current + count


def scale_assemblers(data: dict[str, Any], count: int) -> int:
    """Adds `count` assembler workers to the loaded effective config (`-count`: removes); returns how many
    it names now."""
    section = data.get("assembler") or {}
    section["workers"] = with_count(int(section.get("workers", 1)), count, "assembler workers")
    data["assembler"] = section
    return int(section["workers"])


def scale_teachers(data: dict[str, Any], count: int) -> int:
    """Adds `count` teacher workers for each team with a teacher (`-count`: removes); returns the count per team."""
    section = data.get("teacher") or {}
    section["workers"] = with_count(int(section.get("workers", 1)), count, "teacher workers of each team")
    data["teacher"] = section
    return int(section["workers"])


def pool_names(pools: list[dict[str, Any]], team: str) -> list[str]:
    """Each pool as `scale` names it: `<team>-<pool>` (its service is `agents-<team>-<pool>`)."""
    return [f"{p.get('team') or team}-{p.get('pool') or DEFAULT_POOL}" for p in pools]


def chosen_pool(pools: list[dict[str, Any]], which: str | None, team: str) -> dict[str, Any]:
    """The pool `which` names (`<team>-<pool>`); with None, the only one there is."""
    names = pool_names(pools, team)
    if not pools:
        raise ValueError("the stack runs no agent pool (agent_pools is empty)")
    if which is None and len(pools) > 1:
        raise ValueError(f"{len(pools)} agent pools: name one, e.g. agents:{names[0]}=+1 (pools: {', '.join(names)})")
    if which is not None and which not in names:
        raise ValueError(f"no agent pool {which!r} (pools: {', '.join(names)})")
    return pools[0 if which is None else names.index(which)]


def scale_pool(data: dict[str, Any], which: str | None, count: int, team: str) -> int:
    """Adds `count` workers to the agent pool `which` (`<team>-<pool>`; None: the only one) in the loaded
    effective config (`-count`: removes); `team`: the run's, for a pool that names none. Returns its count."""
    pool = chosen_pool(data.get("agent_pools") or [], which, team)
    pool["workers"] = with_count(int(pool.get("workers", 1)), count, "workers of the pool")
    return int(pool["workers"])
