"""Topic names and specs, read from `infra/topics.yaml` (the one place topics are declared)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from seamlessflow.config import Settings


def topics_file() -> Path:
    env = os.environ.get("SEAMLESSFLOW_TOPICS_FILE")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "infra" / "topics.yaml"


@dataclass(frozen=True)
class TopicSpec:
    name: str  # short name, e.g. "session-events"
    full_name: str  # "<prefix>.<name>"
    partitions: int
    replication_factor: int  # -1: the cluster's default.replication.factor
    cleanup_policy: str
    retention_ms: int
    key: str
    values: tuple[str, ...]
    doc: str

    @property
    def config(self) -> dict[str, str]:
        return {"cleanup.policy": self.cleanup_policy, "retention.ms": str(self.retention_ms)}


def topic_specs(settings: Settings) -> list[TopicSpec]:
    declared = yaml.safe_load(topics_file().read_text())["topics"]
    return [
        TopicSpec(
            name=name,
            full_name=f"{settings.topic_prefix}.{name}",
            partitions=settings.partitions.get(name, spec["partitions"]),
            replication_factor=settings.replication_factor or -1,
            cleanup_policy=spec["cleanup_policy"],
            retention_ms=spec["retention_ms"],
            key=spec["key"],
            values=tuple(spec["values"]),
            doc=spec["doc"],
        )
        for name, spec in declared.items()
    ]


class Topics:
    """Full topic names by attribute: `Topics(settings).session_events`."""

    def __init__(self, settings: Settings):
        self.specs = {spec.name: spec for spec in topic_specs(settings)}

    def __getattr__(self, attr: str) -> str:
        try:
            return self.specs[attr.replace("_", "-")].full_name
        except KeyError:
            raise AttributeError(f"no topic {attr!r} in {topics_file()}") from None
