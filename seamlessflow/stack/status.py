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
    running = pid_alive(state.get("supervisor_pid"))
    services = []
    for name, svc in (state.get("services") or {}).items():
        alive = running and pid_alive(svc.get("pid"))
        services.append({
            "name": name, "pid": svc.get("pid") if alive else None,
            "state": svc.get("state") if running else "stopped",
            "restarts": svc.get("restarts", 0),
            "uptime_s": round(time.time() - svc["started_at"], 1) if alive and svc.get("started_at") else None,
            "log": svc.get("log"),
            "waiting_for": svc.get("waiting_for", "") if alive else "",
        })
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    cluster = brokers(client, 1.0)
    reachable = bool(cluster)
    if resources is None:
        resources = resource_rows(client, timeout_s=5.0) if reachable else []
    return {
        "running": running,
        "supervisor_pid": state.get("supervisor_pid") if running else None,
        "bootstrap_servers": settings.kafka_bootstrap,
        "broker_reachable": reachable,
        "brokers": cluster,
        "info": state.get("info", {}),
        "services": services,
        "resources": resources,
        "trainer_version": trainer_version(resources),
    }
