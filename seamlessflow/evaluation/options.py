"""The `eval:` config section; its defaults come from the sections it evaluates (manager, agents, pools)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from seamlessflow.config import Settings


class EvalOptions(BaseModel):
    """`eval_every`: weight versions between passes; `count`: eval tasks per pass; `agent`: the MODULE:FN
    run on each (default: the first agent pool's, so the eval asks exactly as training does)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    eval_every: int = Field(10, ge=1)
    count: int = Field(64, ge=1)
    concurrency: int = Field(8, ge=1)
    agent: str = "services.agents.examples.single_turn:agent"
    team: str | None = None  # whose key the sessions use (default: the run's team)
    proxy_url: str = "http://127.0.0.1:8100"
    eval_file: str | None = None  # JSONL eval set for a file task source (default: its first `count` tasks)
    poll_s: float = Field(2.0, gt=0)
    request_timeout_s: float = Field(120.0, gt=0)

    @classmethod
    def from_settings(cls, settings: Settings) -> EvalOptions:
        section = settings.section("eval")
        pools = getattr(settings, "agent_pools", None) or []
        if "agent" not in section and pools:
            section["agent"] = pools[0]["function"]
        if "proxy_url" not in section and "proxy_url" in settings.section("agents"):
            section["proxy_url"] = settings.section("agents")["proxy_url"]
        return cls.model_validate(section)
