"""Options of agent workers, read from the `agents` section of the settings (validated here)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from seamlessflow.config import SectionOptions


class AgentOptions(SectionOptions):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "agents"

    proxy_url: str = "http://127.0.0.1:8000"
    """The proxy's root URL; sessions live under /sessions/{id}/v1."""
    pool: str = "default"
    """Pool name: workers of one team and pool share its tasks (consumer group `<team>.<pool>`)."""
    concurrency: int = Field(4, ge=1)
    """Sessions run at the same time by one worker (where `max_concurrency` is set: the first limit)."""
    max_concurrency: int | None = Field(None, ge=1)
    """Let the limit follow the engines' load up to this (`core.sessions_in_flight`): up while an engine has
    room, down when every engine queues, halved when the trainer falls behind; None: fixed at `concurrency`."""
    min_concurrency: int = Field(1, ge=1)
    """The adapted limit's floor."""
    max_attempts: int = Field(3, ge=1)
    """Runs of a failing session before it ends as "failed"."""
    kinds: list[str] = Field(default_factory=list)
    """Task kinds this pool runs (empty: all)."""
    request_timeout_s: float = 600.0
    """One LLM call through the proxy (slow under weight updates)."""
    client_max_retries: int = 2
    """The openai client's own retries of a failed request."""
    episode_timeout_s: float | None = None
    """Whole agent call; enforced for async agents only."""
    end_timeout_s: float = 60.0
    """Keep retrying a session end this long before the worker gives up."""
    revoke_grace_s: float = 20.0
    """On a rebalance, wait this long for running tasks to finish."""
    failure_reward: float = 0.0
    """Reward reported with a failed or aborted session."""
    verifier: str | None = None
    """Scores an agent's `Unscored` result when neither it nor the task names one."""
    poll_s: float = 0.2
    """Longest wait for new tasks in one poll of the task topic when no session is running."""
    heartbeat_s: float = Field(5.0, gt=0)
    """Status-topic heartbeat (kind "agent") for `status` and `up`."""



def consumer_group(team: str, pool: str) -> str:
    """One consumer group per team pool: every pool gets every task; workers in a pool share them."""
    return f"{team}.{pool}"
