"""Which placement runs a stack: a new one by `cluster.engine` (this machine's supervisor, or Ray), and one
already started by what its run directory recorded (local pids, or a Ray namespace).

Why one module: `up`, `down`, `status`, `scale` and the chaos run ask the same of either placement (start the
specs, follow them, stop them, add engines, say where each process is); only here is the engine chosen, so none
of them branches on it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seamlessflow.config import Settings
from seamlessflow.stack.options import ClusterOptions
from seamlessflow.stack.paths import config_path, log_dir, run_dir
from seamlessflow.stack.placement_protocol import Placement, PlacementError, Recorded
from seamlessflow.stack.processes import Adopted, pid_alive, stack_processes, stop_tree
from seamlessflow.stack.ray_placement import RayPlacement, actor_states, connect, namespace_for, stop_actors
from seamlessflow.stack.ray_settings import for_the_cluster
from seamlessflow.stack.rows import service_row
from seamlessflow.stack.supervisor import ServiceState, Supervisor, read_state

ONE_MACHINE = ("no stack placed on Ray runs from this data directory (the local stack runs on one machine, "
               "under its supervisor)")
NO_PIDS_ON_RAY = ("a stack placed on Ray runs its processes on the cluster's nodes, where no pid of this machine "
                  "reaches them: faults by pid need the local stack (cluster.engine: local)")


def placement_for(settings: Settings, say: Callable[[str], None] = print,
                  adopt: dict[str, dict] | None = None) -> tuple[Placement, Settings]:
    """The placement a new stack starts with (`cluster.engine`), and the settings as its services see them
    there (on Ray they run on other hosts: `ray_settings.for_the_cluster`). `adopt`: the services of a dead
    supervisor that the new one takes over (`adoption.take_over`; on this machine only)."""
    cluster = ClusterOptions.from_settings(settings)
    if cluster.engine == "local":
        return Supervisor(run_dir(settings), log_dir(settings), settings.stop_grace_s, say=say, adopt=adopt), settings
    if not cluster.address:
        raise PlacementError("cluster.engine is ray but no address: `up --ray HOST:PORT` or cluster.address")
    placement = RayPlacement(cluster.address, namespace_for(settings.generation), run_dir(settings),
                             cluster.node_data_dir, config_path(settings), settings.stop_grace_s, say,
                             node_wait_s=cluster.node_wait_s if cluster.autoscaler else None)
    return placement, for_the_cluster(settings, placement.driver_ip)


def recorded(settings: Settings) -> Recorded:
    """The stack that this data directory's run records, seen through the placement that started it (with no
    record: a local stack of which nothing runs)."""
    state = read_state(run_dir(settings)) or {}
    return RayRecord(settings, state) if state.get("placement") else LocalRecord(settings, state)


@dataclass
class LocalRecord:
    """A stack of this machine's supervisor: its pid, its services' pids, and every process that carries the
    run directory (`processes.stack_processes`), listed or not."""

    settings: Settings
    state: dict[str, Any] = field(default_factory=dict)

    def running(self) -> str:
        return _holder_words(self.state)

    def services(self) -> tuple[bool, list[dict]]:
        """Each service by its process, as it is now: those of a killed supervisor run on without it."""
        held = pid_alive(self.state.get("supervisor_pid"))
        rows = []
        for name, svc in (self.state.get("services") or {}).items():
            alive = self._alive(svc)
            rows.append(service_row(name, svc, alive, svc.get("state") if held or alive else "stopped"))
        return held or any(row["pid"] for row in rows), rows

    def without_holder(self) -> dict[str, int]:
        """The services that run on though their supervisor is gone (killed with -9, by the OOM killer)."""
        if pid_alive(self.state.get("supervisor_pid")):
            return {}
        return {name: svc["pid"] for name, svc in (self.state.get("services") or {}).items() if self._alive(svc)}

    def _alive(self, svc: dict) -> bool:
        """The recorded process runs still, as that service (not a process that reused its pid)."""
        return Adopted.find(svc, str(run_dir(self.settings))) is not None

    def pids(self) -> dict[str, int | None]:
        services = (read_state(run_dir(self.settings)) or {}).get("services", {})
        return {name: svc.get("pid") if svc.get("state") == "running" else None for name, svc in services.items()}

    def stop(self, say: Callable[[str], object]) -> bool:
        """The supervisor stops its services on SIGTERM (SIGKILL when it takes too long); what it could not stop
        (it was killed, say) and what it never listed (an engine re-parented to init) are stopped here."""
        if not self.state and not stack_processes(run_dir(self.settings)):
            return False
        if _stop_holder(self.state, self.settings):
            os.kill(self.state["supervisor_pid"], signal.SIGKILL)
        for svc in (self.state.get("services") or {}).values():
            if pid_alive(svc.get("pid")):
                stop_tree(svc["pid"], self.settings.stop_grace_s)
        _stop_unlisted(self.settings)
        return True

    def attach(self, say: Callable[[str], None]) -> Placement:
        raise PlacementError(ONE_MACHINE)

    def holder(self) -> int:
        """The pid of the supervisor that holds this stack; PlacementError when none runs."""
        holder = self.state.get("supervisor_pid")
        if holder is None or not pid_alive(holder):
            raise PlacementError("no supervisor holds a stack from this data directory: `seamlessflow up` first")
        return int(holder)

    def scale(self, holder: int, names: list[str], added: bool, say: Callable[[str], None],
              timeout_s: float) -> dict[str, ServiceState]:
        """The effective config names the services `names` more (or no longer): the supervisor `holder`
        reconciles its services with it on SIGUSR1 (`scale.reconcile`). Waits until it started them and they
        are ready (or drained them); returns their states as it records them."""
        os.kill(holder, signal.SIGUSR1)
        say(f"supervisor pid {holder}: {'starting' if added else 'draining'} {', '.join(names)}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and pid_alive(holder):
            services = (read_state(run_dir(self.settings)) or {}).get("services", {})
            done = [n for n in names if (n in services and services[n]["state"] == "running"
                                         and not services[n].get("waiting_for")) == added]
            if len(done) == len(names):
                return {n: ServiceState(**services[n]) if added else ServiceState(n, state="stopped") for n in names}
            time.sleep(0.5)
        raise PlacementError(f"supervisor pid {holder} did not {'start' if added else 'drain'} {', '.join(names)} "
                             f"in time; see `seamlessflow status` and {log_dir(self.settings)}")


@dataclass
class RayRecord:
    """A stack of detached actors in one namespace of a Ray cluster (`state["placement"]`): it outlives the `up`
    that started it, so what runs is asked of the actors, not of a process here."""

    settings: Settings
    state: dict[str, Any]

    def running(self) -> str:
        where = self.state["placement"]
        if holder := _holder_words(self.state):
            return holder
        return f"on Ray ({where['address']}, namespace {where['namespace']})" if self.services()[0] else ""

    def services(self) -> tuple[bool, list[dict]]:
        """As the actors report them now; every service unknown when the cluster cannot be reached."""
        where, names = self.state["placement"], list(self.state.get("services") or {})
        try:
            connect(where["address"], where["namespace"])
            live = actor_states(where["namespace"], names)
        except PlacementError as exc:
            live = {name: {"state": "unknown", "waiting_for": str(exc)} for name in names}
        rows = [service_row(name, svc, svc.get("state") in ("running", "pending", "unknown"), svc.get("state", "gone"))
                for name, svc in live.items()]  # a pending or unknown one: what it waits for is shown
        return any(row["state"] not in ("gone", "stopped", "unknown") for row in rows), rows

    def without_holder(self) -> dict[str, int]:
        """None: detached actors are held by the cluster, by design (`running` names them)."""
        return {}

    def pids(self) -> dict[str, int | None]:
        raise PlacementError(NO_PIDS_ON_RAY)

    def stop(self, say: Callable[[str], object]) -> bool:
        """Stops the foreground `up` (if any), every actor of the namespace with its process, and what ran on
        this machine outside Ray; a cluster that is gone leaves only the last to do."""
        where = self.state["placement"]
        _stop_holder(self.state, self.settings)
        try:
            connect(where["address"], where["namespace"])
            stopped = stop_actors(where["namespace"], None, self.settings.stop_grace_s)
            say(f"stopped {len(stopped)} actor(s) in namespace {where['namespace']}")
        except PlacementError as exc:
            say(f"the cluster is gone or unreachable ({exc}); stopping what runs here")
        _stop_unlisted(self.settings)
        return True

    def attach(self, say: Callable[[str], None]) -> Placement:
        """Whether the cluster adds nodes is the running stack's (its effective config), as are its services'
        requests."""
        cluster = ClusterOptions.from_settings(self.settings)
        effective = config_path(self.settings)
        started = ClusterOptions.from_settings(Settings.load(effective, env={}) if effective.exists()
                                               else self.settings)
        return RayPlacement.attach(self.state, run_dir(self.settings), cluster.node_data_dir,
                                   effective, self.settings.stop_grace_s, say,
                                   node_wait_s=started.node_wait_s if started.autoscaler else None)


def _holder_words(state: dict[str, Any]) -> str:
    """The process that holds the stack (a foreground `up`, or the supervisor a detached one started), while
    it runs."""
    holder = state.get("supervisor_pid")
    return f"(supervisor pid {holder})" if pid_alive(holder) else ""


def _stop_holder(state: dict[str, Any], settings: Settings) -> bool:
    """SIGTERMs the process that holds the stack, which then stops its services, and waits as long as that may
    take; returns whether it still runs."""
    holder = state.get("supervisor_pid")
    if not holder or not pid_alive(holder) or holder == os.getpid():
        return False
    os.kill(holder, signal.SIGTERM)
    deadline = time.monotonic() + settings.stop_grace_s * (len(state.get("services") or {}) + 1) + 5
    while pid_alive(holder) and time.monotonic() < deadline:
        time.sleep(0.2)
    return pid_alive(holder)


def _stop_unlisted(settings: Settings) -> None:
    """Every process of the stack still on this machine, started but never listed or re-parented to init."""
    for proc in stack_processes(run_dir(settings)):
        stop_tree(proc.pid, settings.stop_grace_s)
