"""One stack description, two placements: what `start_stack`, `up`, `down`, `scale` and the chaos run need of
whatever places the services, and of a stack that another process placed.

The local placement is the `Supervisor` (this machine, the embedded default, unchanged); `RayPlacement`
(`ray_placement.py`) places the same specs on a Ray cluster. Both start specs in the order given, each awaited
by its readiness check before the next; both record every service's state, pid, host/node and restarts in the
run directory's `state.json`. A `Recorded` stack is that file read from another process (`status`, `down`,
`scale`, the chaos run's faults): local pids, or a Ray namespace. `placement_choice.py` picks one of each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from seamlessflow.service_metrics import PORT_ENV
from seamlessflow.stack.supervisor import ServiceSpec, ServiceState


class Placement(Protocol):
    """What places the stack's services, in the process that starts them (`up`, `scale`, the chaos run)."""

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

    def stop(self, name: str, grace_s: float | None = None) -> None:
        """Stops one service for good (it is not restarted): e.g. the load generators before a drain. `grace_s`:
        how long it may take after SIGTERM (None: the stack's grace), e.g. a drained agent worker's hand-back."""

    def stop_all(self) -> None:
        """Stops every service, in reverse start order."""

    def write_state(self) -> None:
        """Records the services' states in the run directory."""


class Recorded(Protocol):
    """A stack as its run directory's `state.json` records it, seen from any process: the stack outlives the
    process that started it (a detached `up`), so `status`, `down` and `scale` find it only there."""

    state: dict[str, Any]

    def running(self) -> str:
        """Where the stack runs, as `up` words it after "already running" ("" when nothing runs)."""

    def services(self) -> tuple[bool, list[dict]]:
        """Whether the stack runs, and one `rows.service_row` per service as it is now."""

    def without_holder(self) -> dict[str, int]:
        """{service: pid} of the services running on though the process that held them is gone ({} when it
        runs, or where the placement itself holds them): what a new `up` adopts or stops first."""

    def pids(self) -> dict[str, int | None]:
        """Each service's main process on this machine, read afresh (None: not running): where a fault lands."""

    def stop(self, say: Callable[[str], object]) -> bool:
        """Stops every process of the stack, whatever state its `up` reached; False when nothing ran."""

    def attach(self, say: Callable[[str], None]) -> Placement:
        """The placement of the running stack, to start more services in it (`scale`)."""


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
