"""The stack's status in one dict: its services (from the supervisor's state file), the brokers, and every
resource's newest heartbeat; `status --json` prints it, the live table and the dashboard show it."""

from __future__ import annotations

import time

from seamlessflow.config import Settings
from seamlessflow.kafka.admin import brokers
from seamlessflow.stack.rows import resource_rows, trainer_version
from seamlessflow.stack.services import run_dir
from seamlessflow.stack.supervisor import pid_alive, read_state


def stack_status(settings: Settings, resources: list[dict] | None = None) -> dict:
    state = read_state(run_dir(settings)) or {}
    if state.get("placement"):
        running, services = ray_services(state)
    else:
        running, services = local_services(state)
    # where the stack's `up` put the broker (a Ray-placed stack's listens on the driver's node address)
    recorded = (state.get("info") or {}).get("bootstrap_servers") if state.get("placement") else None
    bootstrap = recorded or settings.kafka_bootstrap
    client = settings.with_overrides(bootstrap_servers=bootstrap)
    cluster = brokers(client, 1.0)
    reachable = bool(cluster)
    if resources is None:
        resources = resource_rows(client, timeout_s=5.0) if reachable else []
    return {
        "running": running,
        "supervisor_pid": state.get("supervisor_pid") if pid_alive(state.get("supervisor_pid")) else None,
        "placement": state.get("placement") or {"engine": "local"},
        "bootstrap_servers": bootstrap,
        "broker_reachable": reachable,
        "brokers": cluster,
        "info": state.get("info", {}),
        "services": services,
        "resources": resources,
        "trainer_version": trainer_version(resources),
    }


def local_services(state: dict) -> tuple[bool, list[dict]]:
    """The supervisor's services on this machine, as its state file has them (alive only while it is)."""
    running = pid_alive(state.get("supervisor_pid"))
    services = []
    for name, svc in (state.get("services") or {}).items():
        alive = running and pid_alive(svc.get("pid"))
        services.append(service_row(name, svc, alive, svc.get("state") if running else "stopped"))
    return running, services


def ray_services(state: dict) -> tuple[bool, list[dict]]:
    """A Ray-placed stack's services as their actors report them now (the stack outlives the `up` that
    started it); every service unknown when the cluster cannot be reached."""
    from seamlessflow.stack.placement import PlacementError
    from seamlessflow.stack.ray_placement import actor_states, connect

    placement, names = state["placement"], list(state.get("services") or {})
    try:
        connect(placement["address"], placement["namespace"])
        live = actor_states(placement["namespace"], names)
    except PlacementError as exc:
        live = {name: {"state": "unknown", "waiting_for": str(exc)} for name in names}
    services = [service_row(name, svc, svc.get("state") == "running", svc.get("state", "gone"))
                for name, svc in live.items()]
    return any(s["state"] not in ("gone", "stopped", "unknown") for s in services), services


def service_row(name: str, svc: dict, alive: bool, state: str) -> dict:
    return {
        "name": name, "pid": svc.get("pid") if alive else None,
        "state": state,
        "restarts": svc.get("restarts", 0),
        "uptime_s": round(time.time() - svc["started_at"], 1) if alive and svc.get("started_at") else None,
        "log": svc.get("log"),
        "waiting_for": svc.get("waiting_for", "") if alive else "",
        "host": svc.get("host", ""),  # where it runs: the machine, and its node's address
        "node_ip": svc.get("node_ip", ""),
    }
