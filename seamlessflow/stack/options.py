"""The stack's own sections, read by `seamlessflow up` rather than by a service: `services:`, `metrics:` and
`agent_pools:`. Each service validates its own section; these say which services run and where they report."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ServicesOptions(BaseModel):
    """Which services `up` runs on this machine (infra/stack-defaults.yaml turns every one on)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    assembler: bool = False
    """Run the assembler workers (`assembler.workers` processes) that turn session events into trajectories."""
    tracking: bool = False
    """Run the metrics sink that writes the run's figures to TensorBoard, W&B or MLflow (`tracking:`)."""
    dashboard: bool = False
    """Run the web dashboard (`dashboard:`)."""
    rollout: bool = False
    """Run one rollout worker and its inference engine per entry of `rollout.workers`."""
    proxy: bool = False
    """Run the proxy that agents call (`proxy.workers` processes)."""
    trainer: bool = False
    """Run the trainer (`trainer:`)."""
    scheduler: bool = False
    """Run the scheduler and its rollout manager (`scheduler:`, `manager:`)."""
    agents: bool = False
    """Run the agent workers of `agent_pools`."""
    eval: bool = False
    """Run the evaluation service (`eval:`)."""


class MetricsOptions(BaseModel):
    """Prometheus /metrics of the services `up` starts."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    host: str = "127.0.0.1"
    """The host named in the /metrics URLs that `up` lists in <data_dir>/run/metrics.json."""
    port: int = 9400
    """The first service's /metrics port; each further service takes the next (the proxy and dashboard: their own)."""


class AgentPoolOptions(BaseModel):
    """One entry of `agent_pools`: agent workers that `up` starts (`seamlessflow agent run` with these options)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    function: str
    """The agent, as MODULE:FUNCTION (e.g. `services.agents.examples.calculator:agent`)."""
    team: str | None = None
    """The team whose tasks it runs and whose key (<data_dir>/<team>.key) it uses (default: the run's team)."""
    pool: str = "default"
    """Pool name: the workers of one team and pool share its tasks (consumer group `<team>.<pool>`)."""
    concurrency: int = Field(4, ge=1)
    """Sessions the worker runs at once."""
