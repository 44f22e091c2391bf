"""Settings for every SeamlessFlow process: defaults < YAML file < SEAMLESSFLOW_* env vars < CLI options.

Top-level fields are shared by all services. Each service keeps its own options in a section
(`settings.section("proxy")`) that its own package validates, so services evolve independently.
Nested env vars use `__`: `SEAMLESSFLOW_PROXY__PORT=8100` sets `proxy.port`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

ENV_PREFIX = "SEAMLESSFLOW_"


class Settings(BaseModel):
    model_config = ConfigDict(extra="allow")

    data_dir: Path = Path(".seamlessflow")
    team: str = "default"
    run: str = "default"
    # Kafka: None means "start the embedded broker"; a value points at an existing cluster.
    bootstrap_servers: str | None = None
    # memory by default: Tansu 0.6's S3 engine loses acknowledged records when several producers write one
    # partition (infra/TANSU.md); `s3` is durable across restarts for single-writer use only.
    broker: Literal["s3", "memory"] = "memory"
    broker_port: int = 19092
    s3_port: int = 19000
    topic_prefix: str = "seamlessflow"
    replication_factor: int = 1
    partitions: dict[str, int] = Field(default_factory=dict)  # per-topic overrides of infra/topics.yaml
    kafka: dict[str, Any] = Field(default_factory=dict)  # extra librdkafka properties (security, SASL, ...)
    schema_registry_url: str | None = None
    schema_registry_conf: dict[str, Any] = Field(default_factory=dict)
    max_record_bytes: int = 1_000_000
    # Token ids/logprobs written as packed bytes (false: as Avro arrays, readable by consumers that predate
    # packing; for a rolling upgrade, upgrade consumers first, then turn this on). Readers take both forms.
    packed_token_arrays: bool = True
    # Idempotent producers: on by default for a real cluster; off for the embedded broker, where Tansu was
    # seen failing idempotent producers with OUT_OF_ORDER_SEQUENCE_NUMBER (infra/TANSU.md). Off means
    # acks=all with one request in flight: order kept, a retry may duplicate (consumers de-dup by event_id).
    idempotent_producer: bool | None = None
    stop_grace_s: float = 10.0

    @property
    def embedded(self) -> bool:
        return not self.bootstrap_servers

    @property
    def producer_idempotent(self) -> bool:
        return self.idempotent_producer if self.idempotent_producer is not None else not self.embedded

    @property
    def kafka_bootstrap(self) -> str:
        return self.bootstrap_servers or f"127.0.0.1:{self.broker_port}"

    def section(self, name: str) -> dict[str, Any]:
        """A service's own options (validated by that service's package)."""
        return dict((self.model_extra or {}).get(name) or {})

    def with_overrides(self, **overrides: Any) -> "Settings":
        data = self.model_dump()
        _deep_merge(data, {k: v for k, v in overrides.items() if v is not None})
        return Settings.model_validate(data)

    def dump_yaml(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(json.loads(self.model_dump_json()), sort_keys=False))
        return path

    @classmethod
    def load(cls, config_path: str | Path | None = None, env: dict[str, str] | None = None, **overrides: Any) -> "Settings":
        env = os.environ if env is None else env
        data: dict[str, Any] = {}
        path = config_path or env.get(ENV_PREFIX + "CONFIG")
        if path:
            data = yaml.safe_load(Path(path).read_text()) or {}
        _deep_merge(data, _from_env(env))
        _deep_merge(data, {k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)


def _from_env(env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in env.items():
        if not key.startswith(ENV_PREFIX) or key == ENV_PREFIX + "CONFIG":
            continue
        path = key[len(ENV_PREFIX):].lower().split("__")
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _parse_scalar(raw)
    return out


def _parse_scalar(raw: str) -> Any:
    """Env values are YAML scalars or flow collections (`{a: 1}`, `[x, y]`)."""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _deep_merge(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value
    return base
