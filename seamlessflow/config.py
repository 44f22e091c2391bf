"""Settings for every SeamlessFlow process: defaults < YAML file < SEAMLESSFLOW_* env vars < CLI options.

Top-level fields are shared by all services. Each service keeps its own options in a section
(`settings.section("proxy")`) that its own package validates, so services evolve independently.
Nested env vars use `__`: `SEAMLESSFLOW_PROXY__PORT=8100` sets `proxy.port`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

ENV_PREFIX = "SEAMLESSFLOW_"
# SEAMLESSFLOW_* variables that are not settings: each is read where it is used, and the generic mapping
# (`SEAMLESSFLOW_X__Y` -> `x.y`) must not also take it, or its value could land on a setting or a service's
# section of the same name and break every command.
PROCESS_VARIABLES = {
    "CONFIG": "the YAML settings file",
    "ACCEL": "cpu | gpu: which builds `make install` installs",
    "TOPICS_FILE": "another topics.yaml",
    "SCHEMAS_DIR": "another folder of .avsc files",
    "JAVA": "the java binary that runs the embedded broker",
    "KAFKA_LIBS": "where the embedded broker's jars are",
    "BROKER_JVM_OPTIONS": "more JVM options for the embedded broker (the test suite: C1 only, for short-lived brokers)",
    "MAVEN_REPO": "a Maven repository mirror for the broker's jars",
    "MODEL": "the model name the example agents send",
    "NATIVE_TOOLS": "1: the tool-use example agent sends OpenAI tools",
    "TEST_TIMEOUT_S": "the code-test example agent's time limit per test",
    "METRICS_PORT": "the port of a service's Prometheus /metrics (`up` sets one per service)",
    "STACK": "the run directory of the stack that started this process (`down` finds every process by it)",
}


class Settings(BaseModel):
    """The fields every process shares; each service's own options are a section of their own."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    data_dir: Path = Path(".seamlessflow")
    """Where keys, models, logs, checkpoints and the run's state are kept."""
    team: str = "default"
    """The team this process acts for (its API key: <data_dir>/<team>.key)."""
    run: str = "default"
    """The run's name: it names consumer groups, task groups and the TensorBoard directory."""
    bootstrap_servers: str | None = None
    """A Kafka cluster's bootstrap servers; None: start the embedded broker (Apache Kafka, KRaft)."""
    brokers: int = Field(1, ge=1, le=9)
    """Embedded KRaft nodes (`up --brokers 3`: replication factor 3, min.insync.replicas 2)."""
    broker_port: int = 19092
    """Embedded node N listens on broker_port + N - 1."""
    # the address the embedded broker listens on and advertises: another host's services reach it there
    # (`up --ray` sets the driver's node address when this is left at loopback)
    broker_host: str = "127.0.0.1"
    """The address the embedded broker listens on and advertises (other hosts' services reach it there)."""
    controller_port: int | None = None
    """Embedded node N's controller listens on controller_port + N - 1; None: the next free port."""
    topic_prefix: str = "seamlessflow"
    """Topic names are `<topic_prefix>.<name>` (infra/topics.yaml)."""
    replication_factor: int | None = None
    """Replicas of each topic created; None: the cluster's default.replication.factor."""
    partitions: dict[str, int] = Field(default_factory=dict)
    """Per-topic partition counts over those of infra/topics.yaml."""
    kafka: dict[str, Any] = Field(default_factory=dict)
    """Extra librdkafka properties of every client (security, SASL, ...)."""
    schema_registry_url: str | None = None
    """A Confluent Schema Registry for the Avro schemas; None: local deterministic schema ids."""
    schema_registry_conf: dict[str, Any] = Field(default_factory=dict)
    """Extra configuration of the Schema Registry client (auth, TLS, ...)."""
    max_record_bytes: int = 1_000_000
    """Largest encoded record a producer sends; a larger one is refused before it is sent."""
    # Token ids/logprobs written as packed bytes (false: as Avro arrays, readable by consumers that predate
    # packing; for a rolling upgrade, upgrade consumers first, then turn this on). Readers take both forms.
    packed_token_arrays: bool = True
    """Write token ids and logprobs as packed bytes; false: as Avro arrays (readers take both)."""
    # Idempotent producers (with acks=all): a retried produce is never duplicated or reordered. Off only for
    # a cluster that refuses them (no IDEMPOTENT_WRITE permission); then one request is kept in flight.
    idempotent_producer: bool = True
    """Idempotent producers (acks=all): a retried produce is never duplicated or reordered."""
    # Team API keys besides those issued by `seamlessflow team add`: {team: key}, or in an env var or on the
    # command line the form "team=key,team2=key2" (SEAMLESSFLOW_TEAM_KEYS=red=k1,blue=k2).
    team_keys: dict[str, str] = Field(default_factory=dict)
    """Team API keys besides those of `seamlessflow team add`: {team: key}, or "team=key,team2=key2"."""
    stop_grace_s: float = 10.0
    """Seconds between SIGTERM and SIGKILL when a service is stopped."""
    # One start of the whole stack: `seamlessflow up` draws a new one (unless given), every service it
    # starts and restarts runs with it, and the scheduler writes it on every command, so a resource restores
    # on start only commands of its own start (core/control.py). "": none (a service run by hand).
    generation: str = ""
    """One start of the whole stack (`up` draws one): a resource restores only its own start's commands."""

    @field_validator("team_keys", mode="before")
    @classmethod
    def _team_keys_from_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
            if any(len(pair) != 2 for pair in pairs):
                raise ValueError(f"team_keys: expected 'team=key,team2=key2', got {value!r}")
            return {team.strip(): key.strip() for team, key in pairs}
        return value

    @property
    def embedded(self) -> bool:
        return not self.bootstrap_servers

    @property
    def kafka_bootstrap(self) -> str:
        if self.bootstrap_servers:
            return self.bootstrap_servers
        return ",".join(f"{self.broker_host}:{self.broker_port + i}" for i in range(self.brokers))

    def section(self, name: str) -> dict[str, Any]:
        """A service's own options (validated by that service's package; `seamlessflow.sections` lists them)."""
        return dict((self.model_extra or {}).get(name) or {})

    def with_overrides(self, **overrides: Any) -> Settings:
        data = self.model_dump()
        _deep_merge(data, {k: v for k, v in overrides.items() if v is not None})
        return Settings.model_validate(data)

    def dump_yaml(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(json.loads(self.model_dump_json()), sort_keys=False))
        return path

    @classmethod
    def load(
        cls, config_path: str | Path | None = None, env: dict[str, str] | None = None, **overrides: Any
    ) -> Settings:
        source: Mapping[str, str] = os.environ if env is None else env
        data: dict[str, Any] = {}
        path = config_path or source.get(ENV_PREFIX + "CONFIG")
        if path:
            data = yaml.safe_load(Path(path).read_text()) or {}
        _deep_merge(data, _from_env(source))
        _deep_merge(data, {k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)


class SectionOptions(BaseModel):
    """The options of one section (`rollout:`, `proxy:`, ...), validated by the package that owns it.

    The section's name is written once, on the class (`SECTION`), and every section is read one way:
    `from_settings`, with a command's own options (those given) over it."""

    SECTION: ClassVar[str]

    @classmethod
    def section_data(cls, settings: Settings) -> dict[str, Any]:
        """The section as written; a section whose defaults follow another's fills them in here."""
        return settings.section(cls.SECTION)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: object) -> Self:
        data = cls.section_data(settings)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in env.items():
        if not key.startswith(ENV_PREFIX) or key[len(ENV_PREFIX):] in PROCESS_VARIABLES:
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
