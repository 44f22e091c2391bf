"""The proxy's own options (`proxy:` section of the config), validated here so the service owns them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seamlessflow.config import SectionOptions
from seamlessflow.core.routing import (
    DEFAULT_FIT,
    LEARNER_HYSTERESIS,
    LEARNER_MIN_TOKENS,
    LEARNER_RATIO,
    FitTable,
    ProfileLearner,
)
from seamlessflow.model.lora import TeamAdapter


class EngineOptions(BaseModel):
    """An inference engine the proxy may route to: its id and base URL (without `/v1`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    """The engine's resource id (as its rollout worker names it on the status topic)."""
    url: str
    """Its base URL, without `/v1` (a trailing `/v1` is dropped)."""
    weight_version: int = 0
    """The weight version it is taken to serve until a command or status says otherwise."""
    hardware_tags: list[str] = Field(default_factory=list)
    """What its hardware is good at, e.g. [compute, h100]: see `routing`."""

    @field_validator("url")
    @classmethod
    def _strip(cls, url: str) -> str:
        url = url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url


class RoutingOptions(BaseModel):
    """Hardware-aware routing (`seamlessflow.core.routing`): which hardware tags fit each session profile,
    and how a profile is learnt from a session's calls when the session does not declare one."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    fit: dict[str, list[str]] = Field(default_factory=lambda: {p.value: sorted(t) for p, t in DEFAULT_FIT.items()})
    """Session profile (prefill | decode) -> the hardware tags of the engines that suit it."""
    learn: bool = True
    """Learn undeclared profiles online (prompt tokens fed vs tokens generated)."""
    ratio: float = LEARNER_RATIO
    """Prefill-heavy when fed >= ratio x generated."""
    min_tokens: int = LEARNER_MIN_TOKENS
    """Tokens seen before a profile is decided."""
    hysteresis: float = LEARNER_HYSTERESIS
    """A decided profile flips only past ratio x hysteresis (or below ratio / hysteresis)."""

    @field_validator("fit")
    @classmethod
    def _profiles(cls, fit: dict[str, list[str]]) -> dict[str, list[str]]:
        FitTable.from_mapping(fit)  # raises on a key that is not a profile
        return fit

    def fit_table(self) -> FitTable:
        return FitTable.from_mapping(self.fit)

    def learner(self) -> ProfileLearner:
        return ProfileLearner(ratio=self.ratio, min_tokens=self.min_tokens, hysteresis=self.hysteresis)


class TeamQuota(BaseModel):
    """A team's share of the proxy (`seamlessflow/proxy/quotas.py`): past it, its new calls get 429 with `Retry-After`.
    Each proxy worker enforces it on its own calls (`workers: 2` lets a team twice as much in all)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_sessions: int | None = Field(None, ge=1)
    """Sessions of the team generating at once (with a call in flight); a further call of a session already
    generating is let in. Unset: no limit."""
    tokens_per_s: float | None = Field(None, gt=0)
    """Tokens the team's calls may generate a second, on average: a bucket refilled at this rate is charged
    each call's generated tokens when it ends, and the team's new calls are refused while it is in debt.
    Unset: no limit."""
    burst_tokens: float | None = Field(None, gt=0)
    """The most the bucket holds (what an idle team may spend at once); unset: one second of `tokens_per_s`."""


class TeamOptions(TeamQuota):
    """A team's entry in `proxy.teams`: its share of the proxy and, optionally, its own adapter."""

    lora: TeamAdapter | None = None
    """The team's LoRA adapter; unset: the team is served the base model (`served_model`), as before."""


class ProxyOptions(SectionOptions):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "proxy"

    id: str = "proxy"
    """Its resource id on the control and status topics (workers: `<id>-<i>`)."""
    host: str = "127.0.0.1"
    """Address the proxy listens on."""
    port: int = 8100
    """Port the proxy listens on (agents call http://host:port/v1)."""
    workers: int = Field(1, ge=1)
    """Processes `up` starts on host:port (SO_REUSEPORT), resources <id>-<i>."""
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"
    """The proxy process's event loop: uvloop (vLLM's own dependency, so always installed) spends less CPU per call
    than asyncio's (docs/performance/proxy.md); `asyncio` is the standard library's."""
    engines: list[EngineOptions] = Field(default_factory=list)
    """Engines to route to besides those discovered on the status topic."""
    routing: RoutingOptions = Field(default_factory=RoutingOptions)
    """Hardware-aware routing of sessions to engines."""
    discover_engines: bool = True
    """Add rollout engines announced on the status topic."""
    listen_control: bool = True
    """Consume the control topic (pause/resume/load_weights)."""
    served_model: str | None = None
    """If set, replaces the client's `model` field upstream."""
    max_body_bytes: int = 4 * 1024 * 1024
    """Largest request body accepted; larger ones get 413."""
    max_n: int = 64
    """Most completions one call may ask for (`n`)."""
    max_inflight: int = 512
    """Calls generating at the engines at once."""
    max_queued: int = 1024
    """Calls waiting (for a slot, or while paused); beyond: 429."""
    retry_after_s: int = 1
    """The Retry-After sent with a 429 or a 503 when the proxy is at capacity."""
    max_attempts: int = 3
    """Tries per call over engine connection failures and mid-stream engine failures."""
    connect_timeout_s: float = 5.0
    """Longest wait to connect to an engine."""
    read_timeout_s: float = 600.0
    """Longest silence from an engine mid-generation."""
    pause_timeout_s: float = 600.0
    """Longest a queued or cut call waits for resume before 503."""
    delivery_timeout_s: float = 30.0
    """Longest wait for Kafka to confirm a call's events."""
    health_interval_s: float = 2.0
    """Period of the engines' health checks."""
    health_failures: int = 2
    """Consecutive failed checks before an engine is taken out."""
    heartbeat_s: float = 5.0
    """The proxy's own ResourceStatus period."""
    max_sessions: int = 100_000
    """LRU bound on per-session state (owner team, call counter)."""
    prompt_deltas: bool = True
    """Record a prompt as a delta of the session's earlier sequences (upgrade readers first)."""
    prompt_delta_bases: int = 4
    """Sequences (recorded choices) kept per session as bases."""
    prompt_delta_memory_mb: int = 256
    """All sessions' kept sequences together; the least recent go first."""
    stored_cache_mb: int = Field(64, ge=1)
    """Stored responses (`store: true`) each worker keeps in memory, the least recently used out first; the
    others are read from the responses topic when asked for. Conversations get a cache of this size too."""
    stored_wait_s: float = Field(2.0, gt=0)
    """How long a read of a stored response (or conversation) this worker has not seen waits for its topic to
    catch up (another worker stored it a moment ago) before a retryable 503."""
    stored_retention_s: float = Field(30 * 86400, gt=0)
    """Age past which a stored response is no longer served (404, as deleted). The responses topic's own
    retention (infra/topics.yaml, 30 days) removes it for good: serve no longer than that."""
    stored_retention_by_team: dict[str, float] = Field(default_factory=dict)
    """Per-team `stored_retention_s` (team -> seconds), e.g. a shorter one for a team whose data must go sooner."""
    teams: dict[str, TeamOptions] = Field(default_factory=dict)
    """Per-team quotas and adapters (team -> its entry), e.g. `{red: {max_sessions: 8, tokens_per_s: 2000, lora:
    {name: red, path: /adapters/red, rank: 8}}}`. A team not named here is limited only by the proxy's own
    capacity (`max_inflight`, `max_queued`) and served the base model."""
    end_wait_s: float = 30.0
    """How long /end waits for the session's in-flight calls."""
    producer: dict = Field(default_factory=lambda: {"linger.ms": 0})
    """Extra librdkafka producer properties."""

    def adapter_of(self, team: str) -> str | None:
        """The name of the adapter that serves `team`'s calls; None: the base model."""
        entry = self.teams.get(team)
        return entry.lora.name if entry is not None and entry.lora is not None else None
