"""Per-resource rows (latest heartbeat per resource) and per-service rows (what a placement recorded), for
`seamlessflow status --json` and the live table.

Why here and not in the CLI: the stack's status watcher (`watch`, used by `up`'s readiness checks)
builds the same rows, and the stack machinery sits below the CLI.
"""

from __future__ import annotations

import time

from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.messages import ResourceStatus
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.topics import Topics


def resource_rows(settings: Settings, timeout_s: float = 10.0) -> list[dict]:
    """Latest ResourceStatus per resource id of the configured team/run, sorted by id.

    Each row: id, kind, capability_tags, hardware_tags, active_tag, state, weight_version, epoch, engine_url,
    figures and
    heartbeat_age_s (seconds since its `created_at_ms`, by this machine's clock). The scheduler's own row
    (kind `scheduler`) carries the trainer's current version as `weight_version` and the pipeline figures.
    """
    latest: dict[str, ResourceStatus] = {}
    for status in messages_until(settings, Topics(settings).status, codec_for(settings), timeout_s=timeout_s):
        if isinstance(status, ResourceStatus) and status.team == settings.team and status.run == settings.run:
            if status.resource_id not in latest or status.created_at_ms >= latest[status.resource_id].created_at_ms:
                latest[status.resource_id] = status
    now_s = time.time()
    return [resource_row(status, now_s) for _, status in sorted(latest.items())]


def resource_row(status: ResourceStatus, now_s: float) -> dict:
    """One row (see `resource_rows`) from one heartbeat."""
    return {
        "id": status.resource_id, "kind": status.kind, "capability_tags": list(status.capability_tags),
        "hardware_tags": list(status.hardware_tags),
        "active_tag": status.active_tag, "state": status.state, "weight_version": status.weight_version,
        "epoch": status.epoch, "engine_url": status.engine_url, "figures": dict(status.figures),
        "heartbeat_age_s": round(max(0.0, now_s - status.created_at_ms / 1000.0), 3), "note": status.note,
    }


def trainer_version(rows: list[dict]) -> int | None:
    """The newest version a trainer reports (None without a trainer row that names one: a starting trainer's
    heartbeat may not yet)."""
    versions = [row["weight_version"] for row in rows
                if row["kind"] == ResourceKind.TRAINER and row["weight_version"] is not None]
    return max(versions) if versions else None


def service_row(name: str, svc: dict, alive: bool, state: str) -> dict:
    """One service as `status` shows it, from what its placement recorded (`svc`): a dead one has no pid."""
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
