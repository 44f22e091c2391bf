"""The stack's own sections, read by `seamlessflow up` rather than by a service: `services:`, `metrics:`,
`agent_pools:` and `cluster:`. Each service validates its own section; these say which services run, where they
report and what each asks of the machine it is placed on (`stack.resources`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seamlessflow.config import SectionOptions

# Services whose copies are interchangeable members of one consumer group; the proxy and the engines have
# their own counts (`proxy.workers`, `rollout.workers`), since each copy is a resource of its own there.
REPLICABLE = ("assembler", "agents", "teacher")


class ServicesOptions(SectionOptions):
    """Which services `up` runs on this machine (infra/stack-defaults.yaml turns every one on)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "services"

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
    teacher: bool = False
    """Run the teacher workers of `teacher.teams` (`teacher.workers` per team), for on-policy distillation."""



class MetricsOptions(SectionOptions):
    """Prometheus /metrics of the services `up` starts."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "metrics"

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
    """Sessions the worker runs at once (with `max_concurrency`: at first)."""
    max_concurrency: int | None = Field(None, ge=1)
    """Let the sessions in flight follow the engines' load up to this (`agents.max_concurrency`); None: fixed."""
    workers: int = Field(1, ge=1)
    """Worker processes of the pool (`agents-<team>-<pool>`, then `-1`, `-2`, ...), one consumer group;
    `seamlessflow scale agents=+N` changes it on a running stack."""


class ServiceResources(BaseModel):
    """One entry of `cluster.resources`: unset fields keep the role's default."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    cpus: float | None = Field(default=None, ge=0)
    """CPUs one copy asks for; None: the role's default (1 for an engine or a trainer, else 0)."""
    gpus: float | None = Field(default=None, ge=0)
    """GPUs one copy asks for; None: an engine's `rollout.workers.<id>.gpu` count, else 0."""
    memory_mb: int | None = Field(default=None, ge=0)
    """Memory one copy asks for, in MiB; None: nothing asked for."""
    custom: dict[str, float] = Field(default_factory=dict)
    """Ray custom resources one copy asks for (an engine's hardware tags are added as one unit each)."""
    node: str | None = None
    """A resource only the wanted node offers (e.g. `node_b`, Ray's `node:<ip>`): places the service there."""
    replicas: int = Field(default=1, ge=1)
    """Copies of the service (only assembler and agents; proxies and engines have their own counts)."""
    max_restarts: int = Field(default=-1, ge=-1)
    """Restarts of a dead copy under Ray; -1: always (the local supervisor always restarts)."""


class ClusterOptions(SectionOptions):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "cluster"

    engine: Literal["local", "ray"] = "local"
    """What places the services: `local` (this machine's supervisor) or `ray`."""
    address: str | None = None
    """With ray: the head's GCS address, host:port (`seamlessflow up --ray ADDRESS`)."""
    node_data_dir: str = "/tmp/seamlessflow-ray"
    """With ray: each node's own directory for a service's config and data."""
    resources: dict[str, ServiceResources] = Field(default_factory=dict)
    """Requests and restart policy by service name (`rollout-1`) or role (`rollout`, `agents`, ...)."""
    autoscaler: bool = False
    """With ray: the cluster adds nodes for pending demands (Ray's autoscaler, KubeRay's). A service that no node
    present can hold is then started anyway and waits for a node that joins (`node_wait_s`); without it, such a
    service is refused at once, naming what it asked for."""
    node_wait_s: float = Field(default=900.0, gt=0)
    """With ray and `autoscaler`: how long a service waits for a node that can hold it to join; past it, its
    actor is removed (so the demand does not linger) and the start fails."""

    @model_validator(mode="after")
    def _replicas_only_where_copies_are_alike(self) -> ClusterOptions:
        for name, entry in self.resources.items():
            if entry.replicas > 1 and not name.startswith(REPLICABLE):
                raise ValueError(f"cluster.resources.{name}.replicas: only {', '.join(REPLICABLE)} run as copies "
                                 "(proxies and engines: proxy.workers, rollout.workers)")
        return self


    def entry(self, name: str, role: str) -> ServiceResources:
        """The service's own entry, else its role's, else the defaults."""
        return self.resources.get(name) or self.resources.get(role) or ServiceResources()
