"""One stack description, two placements: what `start_stack` needs of whatever places the services.

The local placement is the `Supervisor` (this machine, the embedded default, unchanged); `RayPlacement`
(`ray_placement.py`) places the same specs on a Ray cluster. Both start specs in the order given, each awaited
by its readiness check before the next; both record every service's state, pid, host/node and restarts in the
run directory's `state.json`, which `status` and `down` read from another process.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from seamlessflow.service_metrics import PORT_ENV
from seamlessflow.stack.supervisor import ServiceSpec, ServiceState


class Placement(Protocol):
    info: dict[str, str]
    ready: bool
    states: dict[str, ServiceState]
    shares_disk: bool  # whether the services read `up`'s data_dir (else each node's own)

    def check_all(self, specs: list[ServiceSpec]) -> None:
        """Raises if a spec can be placed nowhere, before anything starts."""

    def start(self, spec: ServiceSpec) -> None:
        """Starts one service and waits for its readiness check, if it has one."""

    def check(self) -> None:
        """Refreshes the services' states (and restarts dead ones, where the placement does that itself)."""

    def stop_all(self) -> None:
        """Stops every service, in reverse start order."""

    def write_state(self) -> None:
        """Records the services' states in the run directory."""


def expand_replicas(specs: list[ServiceSpec]) -> list[ServiceSpec]:
    """A spec with `replicas: n` becomes n specs `<name>-r<i>` (consumer-group members, interchangeable). Only
    the first keeps the metrics port: copies on one machine would fight over it."""
    out = []
    for spec in specs:
        if spec.replicas == 1:
            out.append(spec)
            continue
        for i in range(spec.replicas):
            env = dict(spec.env) if i == 0 else {k: v for k, v in spec.env.items() if k != PORT_ENV}
            out.append(dataclasses.replace(spec, name=f"{spec.name}-r{i}", env=env, replicas=1))
    return out


class PlacementError(RuntimeError):
    """The cluster cannot be reached, or cannot give a service what it asks for."""


def resource_words(resources: dict[str, float]) -> str:
    """A resource request or a node's resources as a reader says them ("CPU 2, memory 512 MiB")."""
    shown = {k: v for k, v in resources.items() if not k.startswith(("node:", "object_store_memory"))}
    return ", ".join(f"{k} {v / 2**20:.0f} MiB" if k == "memory" else f"{k} {v:g}" for k, v in sorted(shown.items()))
