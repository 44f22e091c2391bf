"""The status table `up` shows live and `status` prints once, and its JSON form."""

from __future__ import annotations

import time

from rich.console import Group
from rich.table import Table

from seamlessflow.config import Settings
from seamlessflow.kafka.admin import broker_ready
from seamlessflow.stack import run_dir
from seamlessflow.supervisor import pid_alive, read_state


def stack_status(settings: Settings) -> dict:
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
        })
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    return {
        "running": running,
        "supervisor_pid": state.get("supervisor_pid") if running else None,
        "bootstrap_servers": settings.kafka_bootstrap,
        "broker_reachable": broker_ready(client, 1.0),
        "info": state.get("info", {}),
        "services": services,
    }


def render_status(data: dict) -> Group:
    head = (f"stack: {'running' if data['running'] else 'stopped'}   Kafka {data['bootstrap_servers']}: "
            f"{'reachable' if data['broker_reachable'] else 'unreachable'}")
    table = Table("service", "state", "pid", "restarts", "uptime", title=head, title_justify="left")
    for svc in data["services"]:
        uptime = f"{svc['uptime_s']:.0f}s" if svc["uptime_s"] is not None else "-"
        table.add_row(svc["name"], svc["state"], str(svc["pid"] or "-"), str(svc["restarts"]), uptime)
    return Group(table)
