"""A gang on Ray: the members of a multi-node trainer, one per node, reserved all at once.

Why a placement group: torch's rendezvous waits for every node, so members placed one by one could hold some
nodes while the others wait for capacity that never frees (two gangs each holding half of what both need). Ray
reserves every bundle or none (`STRICT_SPREAD`: each bundle on a node of its own) and restarts a member inside
its bundle. Member i runs `python -m services.trainer` with `trainer.node_rank` i and `trainer.master_addr` at
member 0's node, given through the environment (`SEAMLESSFLOW_TRAINER__*`), so each member's launcher
(`seamlessflow.trainer.launch`) joins the same rendezvous.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from seamlessflow.stack.placement_protocol import PlacementError, resource_words
from seamlessflow.stack.supervisor import ServiceSpec

NODE_RANK_ENV = "SEAMLESSFLOW_TRAINER__NODE_RANK"
MASTER_ADDR_ENV = "SEAMLESSFLOW_TRAINER__MASTER_ADDR"
RESERVE_TIMEOUT_S = 60.0


def group_name(service: str) -> str:
    return f"{service}-gang"


def bundle(spec: ServiceSpec) -> dict[str, float]:
    """One member's request as a placement-group bundle (a gang spreads: it cannot be pinned to one node)."""

    if spec.resources.node:
        raise PlacementError(f"{spec.name} runs on {spec.gang} nodes and cannot be pinned to one "
                             f"(cluster.resources: node {spec.resources.node}); ask for a custom resource instead")
    return spec.resources.wanted() or {"CPU": 0.001}  # Ray refuses an empty bundle


def reserve(spec: ServiceSpec, nodes: list[dict[str, Any]]) -> tuple[Any, list[str]]:
    """Reserves one bundle per member on distinct nodes; returns the group and each bundle's node address.
    A gang the cluster cannot hold at once is an error naming what it asked for, never a wait."""
    import ray
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group


    wanted = bundle(spec)
    group = placement_group([dict(wanted) for _ in range(spec.gang)], strategy="STRICT_SPREAD",
                            name=group_name(spec.name), lifetime="detached")
    if not group.wait(timeout_seconds=RESERVE_TIMEOUT_S):
        remove_placement_group(group)
        have = "; ".join(f"{n['ip']}: {resource_words(n['resources'])}" for n in nodes) or "no alive node"
        raise PlacementError(f"{spec.name} needs {spec.gang} nodes each with {resource_words(wanted)} at once, "
                             f"which the cluster could not give within {RESERVE_TIMEOUT_S:.0f} s ({have})")
    by_bundle = placement_group_table(group)["bundles_to_node_id"]
    addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    return group, [addresses[by_bundle[i]] for i in range(spec.gang)]


def members(spec: ServiceSpec, addresses: list[str]) -> list[ServiceSpec]:
    """The gang's members: the first keeps the service's name (its heartbeats, status and logs), the others
    are `<name>-<i>`; each runs `services.<role>` (which starts its node's launcher) with its node rank."""
    config = spec.argv[spec.argv.index("--config") + 1]
    argv = [sys.executable, "-m", f"services.{spec.role}", "--config", config]
    return [dataclasses.replace(spec, name=spec.name if i == 0 else f"{spec.name}-{i}", argv=argv, gang=1,
                                env={**spec.env, NODE_RANK_ENV: str(i), MASTER_ADDR_ENV: addresses[0]})
            for i in range(spec.gang)]


def release(names: list[str]) -> None:
    """Removes the placement groups of the named gangs (after their members stopped), where there is one."""
    from ray.util import get_placement_group, remove_placement_group

    for name in names:
        try:
            remove_placement_group(get_placement_group(group_name(name)))
        except ValueError:  # not a gang, or removed before
            continue
