"""The proxy's own options (`proxy:` section of the config), validated here so the service owns them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seamlessflow.core.routing import FitTable, ProfileLearner


class EngineOptions(BaseModel):
    """An inference engine the proxy may route to: its id and base URL (without `/v1`)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    url: str
    weight_version: int = 0
    hardware_tags: list[str] = Field(default_factory=list)  # e.g. [compute, h100]: see `routing`

    @field_validator("url")
    @classmethod
    def _strip(cls, url: str) -> str:
        url = url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url


class RoutingOptions(BaseModel):
    """Hardware-aware routing (`seamlessflow.core.routing`): which hardware tags fit each session profile,
    and how a profile is learnt from a session's calls when the session does not declare one."""

    model_config = ConfigDict(extra="forbid")

    fit: dict[str, list[str]] = Field(default_factory=lambda: {"prefill": ["compute"], "decode": ["bandwidth"]})
    learn: bool = True  # learn undeclared profiles online (prompt tokens fed vs tokens generated)
    ratio: float = 4.0  # prefill-heavy when fed >= ratio x generated
    min_tokens: int = 256  # tokens seen before a profile is decided
    hysteresis: float = 2.0

    @field_validator("fit")
    @classmethod
    def _profiles(cls, fit: dict[str, list[str]]) -> dict[str, list[str]]:
        FitTable.from_mapping(fit)  # raises on a key that is not a profile
        return fit

    def fit_table(self) -> FitTable:
        return FitTable.from_mapping(self.fit)

    def learner(self) -> ProfileLearner:
        return ProfileLearner(ratio=self.ratio, min_tokens=self.min_tokens, hysteresis=self.hysteresis)


class ProxyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = "proxy"  # resource id on the control/status topics
    host: str = "127.0.0.1"
    port: int = 8100
    workers: int = Field(1, ge=1)  # processes `up` starts on host:port (SO_REUSEPORT), resources <id>-<i>
    engines: list[EngineOptions] = Field(default_factory=list)
    routing: RoutingOptions = Field(default_factory=RoutingOptions)
    discover_engines: bool = True  # add rollout engines announced on the status topic
    listen_control: bool = True  # consume the control topic (pause/resume/load_weights)
    served_model: str | None = None  # if set, replaces the client's `model` field upstream
    max_body_bytes: int = 4 * 1024 * 1024
    max_n: int = 64
    max_inflight: int = 512  # calls generating at the engines at once
    max_queued: int = 1024  # calls waiting (for a slot, or while paused); beyond: 429
    retry_after_s: int = 1
    max_attempts: int = 3  # per call: engine connection failures and mid-stream engine failures
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 600.0  # longest silence from an engine mid-generation
    pause_timeout_s: float = 600.0  # longest a queued or cut call waits for resume before 503
    delivery_timeout_s: float = 30.0  # longest wait for Kafka to confirm a call's events
    health_interval_s: float = 2.0
    health_failures: int = 2  # consecutive failed checks before an engine is taken out
    heartbeat_s: float = 5.0  # the proxy's own ResourceStatus period
    max_sessions: int = 100_000  # LRU bound on per-session state (owner team, call counter)
    prompt_deltas: bool = True  # record a prompt as a delta of the session's earlier sequences (upgrade readers first)
    prompt_delta_bases: int = 4  # sequences (recorded choices) kept per session as bases
    prompt_delta_memory_mb: int = 256  # all sessions' kept sequences together; the least recent go first
    end_wait_s: float = 30.0  # how long /end waits for the session's in-flight calls
    producer: dict = Field(default_factory=lambda: {"linger.ms": 0})  # extra librdkafka producer properties

    @classmethod
    def from_settings(cls, settings) -> ProxyOptions:
        return cls.model_validate(settings.section("proxy"))
