"""The `eval:` config section; its defaults come from the sections it evaluates (manager, agents, pools)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from seamlessflow.config import SectionOptions, Settings


class EvalOptions(SectionOptions):
    """`eval_every`: weight versions between passes; `count`: eval tasks per pass; `agent`: the MODULE:FN
    run on each (default: the first agent pool's, so the eval asks exactly as training does)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "eval"

    enabled: bool = True
    """Read by nothing: `eval` in the `services:` map says whether `up` runs the eval (kept so configs validate)."""
    eval_every: int = Field(10, ge=1)
    """Weight versions (of what the engines serve) between two eval passes."""
    count: int = Field(64, ge=1)
    """Eval tasks per pass."""
    concurrency: int = Field(8, ge=1)
    """Eval sessions run at the same time."""
    agent: str = "services.agents.examples.single_turn:agent"
    """The agent run on each task, as MODULE:FUNCTION; default: the first agent pool's."""
    team: str | None = None
    """The team whose key the eval sessions use; None: the run's team."""
    proxy_url: str = "http://127.0.0.1:8100"
    """The proxy's root URL; default: `agents.proxy_url`."""
    eval_file: str | None = None
    """A JSONL eval set for a file task source; None: the source's first `count` tasks."""
    poll_s: float = Field(2.0, gt=0)
    """Seconds between two checks of the version the engines serve."""
    request_timeout_s: float = Field(120.0, gt=0)
    """Time limit of one LLM call of an eval session."""

    @classmethod
    def section_data(cls, settings: Settings) -> dict[str, Any]:
        """The agent and its proxy default to the first agent pool's: the eval asks what the agents ask."""
        section = settings.section(cls.SECTION)
        pools = getattr(settings, "agent_pools", None) or []
        if "agent" not in section and pools:
            section["agent"] = pools[0]["function"]
        if "proxy_url" not in section and "proxy_url" in settings.section("agents"):
            section["proxy_url"] = settings.section("agents")["proxy_url"]
        return section
