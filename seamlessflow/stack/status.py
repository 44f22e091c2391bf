"""The stack's status in one dict: its services (as its placement recorded them), the brokers, and every
resource's newest heartbeat; `status --json` prints it, the live table and the dashboard show it."""

from __future__ import annotations

from seamlessflow.config import Settings
from seamlessflow.kafka.admin import brokers
from seamlessflow.stack.placement_choice import recorded
from seamlessflow.stack.processes import pid_alive
from seamlessflow.stack.rows import resource_rows, trainer_version


def stack_status(settings: Settings, resources: list[dict] | None = None) -> dict:
    stack = recorded(settings)
    state = stack.state
    running, services = stack.services()
    # where the stack's `up` put the broker (a Ray-placed stack's listens on the driver's node address)
    announced = (state.get("info") or {}).get("bootstrap_servers") if state.get("placement") else None
    bootstrap = announced or settings.kafka_bootstrap
    client = settings.with_overrides(bootstrap_servers=bootstrap)
    cluster = brokers(client, 10.0)
    reachable = bool(cluster)
    if resources is None:
        resources = resource_rows(client, timeout_s=5.0) if reachable else []
    return {
        "running": running,
        "supervisor_pid": state.get("supervisor_pid") if pid_alive(state.get("supervisor_pid")) else None,
        "supervisor": supervisor_words(state, running),
        "placement": state.get("placement") or {"engine": "local"},
        "bootstrap_servers": bootstrap,
        "broker_reachable": reachable,
        "brokers": cluster,
        "info": state.get("info", {}),
        "services": services,
        "resources": resources,
        "trainer_version": trainer_version(resources),
    }


def supervisor_words(state: dict, running: bool) -> str:
    """The local stack's supervisor while its services run: "pid N", or "gone (pid N)" when it was killed and
    they run on without it (`up` adopts them, `down` stops them). On Ray the cluster holds the services."""
    pid = state.get("supervisor_pid")
    if state.get("placement") or not pid or not running:
        return ""
    return f"pid {pid}" if pid_alive(pid) else f"gone (pid {pid})"
