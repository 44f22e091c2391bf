"""The reward workers' own options: the `rewards:` section of the settings file (or SEAMLESSFLOW_REWARDS__*)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from seamlessflow.config import SectionOptions


class RewardOptions(SectionOptions):
    """Options of reward workers, from the `rewards` section of the settings."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "rewards"

    pool: str = "default"
    """The verifier name this pool serves (a request's `verifier`)."""
    concurrency: int = Field(4, ge=1)
    """Verifier calls at once (each in its own child process)."""
    timeout_s: float = Field(30.0, gt=0)
    """One verifier call; a hang is killed here."""
    memory_mb: int | None = Field(2048, ge=16)
    """Address-space limit of each call (None: unlimited)."""
    max_attempts: int = Field(2, ge=1)
    """Calls of a verifier that raises or crashes, before unscorable."""
    revoke_grace_s: float = Field(60.0, ge=0)
    """On a rebalance, finish running calls this long before handing over."""
    poll_s: float = 0.2
    """Longest wait for new requests in one poll when no verifier call is running."""
    heartbeat_s: float = Field(5.0, gt=0)
    """Period of the pool's status heartbeat (kind "reward") in seconds."""

