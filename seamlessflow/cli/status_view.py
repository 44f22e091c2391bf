"""The status table `up` shows live and `status` prints once, and its JSON form."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from rich.console import Group
from rich.table import Table

from seamlessflow.avro import CodecError, codec_for
from seamlessflow.cli.resources import _row, resource_rows, trainer_version
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import broker_ready
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.messages import ResourceStatus
from seamlessflow.stack import run_dir
from seamlessflow.supervisor import pid_alive, read_state
from seamlessflow.topics import Topics

SPARK = "▁▂▃▄▅▆▇█"


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
        })
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    reachable = broker_ready(client, 1.0)
    if resources is None:
        resources = resource_rows(client, timeout_s=5.0) if reachable else []
    return {
        "running": running,
        "supervisor_pid": state.get("supervisor_pid") if running else None,
        "bootstrap_servers": settings.kafka_bootstrap,
        "broker_reachable": reachable,
        "info": state.get("info", {}),
        "services": services,
        "resources": resources,
        "trainer_version": trainer_version(resources),
    }


class ResourceWatcher:
    """Follows the status topic incrementally for the live table (latest heartbeat per resource, and the
    trainer's reward per step for the reward curve)."""

    def __init__(self, settings: Settings):
        self.settings = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
        self.codec = codec_for(self.settings)
        self.latest: dict[str, ResourceStatus] = {}
        self.rewards: dict[int, float] = {}
        self._consumer: Consumer | None = None

    def rows(self) -> list[dict]:
        try:
            self._drain()
        except Exception:  # the broker may be restarting; the table shows what it has
            self._consumer = None
        now_s = time.time()
        return [_row(status, now_s) for _, status in sorted(self.latest.items())]

    def _drain(self) -> None:
        if self._consumer is None:
            topic = Topics(self.settings).status
            self._consumer = Consumer(consumer_config(self.settings, f"status-view-{time.monotonic_ns()}",
                                                      **{"fetch.wait.max.ms": 50}))
            self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        for msg in self._consumer.consume(1000, timeout=0.2):
            if msg.error():
                continue
            try:
                status = self.codec.decode(msg.value())
            except CodecError:
                continue
            if isinstance(status, ResourceStatus) and status.team == self.settings.team and status.run == self.settings.run:
                self.latest[status.resource_id] = status
                if status.kind == "trainer" and "reward_mean" in status.figures:
                    self.rewards[int(status.figures.get("step", 0))] = status.figures["reward_mean"]


def reward_curve(rewards: dict[int, float], width: int = 40) -> str:
    if not rewards:
        return "no training step yet"
    values = [rewards[k] for k in sorted(rewards)][-width:]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    spark = "".join(SPARK[int((v - low) / span * (len(SPARK) - 1))] for v in values)
    return f"reward/step {spark}  first {values[0]:.3f} last {values[-1]:.3f} (steps {min(rewards)}..{max(rewards)})"


def render_status(data: dict, rewards: dict[int, float] | None = None) -> Group:
    head = (f"stack: {'running' if data['running'] else 'stopped'}   Kafka {data['bootstrap_servers']}: "
            f"{'reachable' if data['broker_reachable'] else 'unreachable'}   trainer version: "
            f"{data.get('trainer_version')}")
    services = Table("service", "state", "pid", "restarts", "uptime", title=head, title_justify="left")
    for svc in data["services"]:
        uptime = f"{svc['uptime_s']:.0f}s" if svc["uptime_s"] is not None else "-"
        services.add_row(svc["name"], svc["state"], str(svc["pid"] or "-"), str(svc["restarts"]), uptime)
    resources = Table("resource", "kind", "tags", "active", "state", "version", "tokens/s", "queue", "age")
    for row in data.get("resources", []):
        figures = row["figures"]
        queue = figures.get("requests_waiting", figures.get("queued", figures.get("pending_samples")))
        resources.add_row(
            row["id"], row["kind"], ",".join(row["capability_tags"]), row["active_tag"], row["state"],
            str(row["weight_version"]), f"{figures.get('tokens_per_s', 0):.0f}" if "tokens_per_s" in figures else "-",
            f"{queue:.0f}" if queue is not None else "-", f"{row['heartbeat_age_s']:.0f}s",
        )
    parts = [services, resources]
    if rewards is not None:
        parts.append(reward_curve(rewards))
    return Group(*parts)
