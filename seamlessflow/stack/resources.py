"""What a service needs from the machine it is placed on, and how it is restarted, as the `cluster:` section
(`stack.options.ClusterOptions`) asks for it.

```yaml
cluster:
  engine: local            # local (this machine's supervisor, the default) | ray
  address: null            # ray: the head's GCS address, host:port (`seamlessflow up --ray ADDRESS`)
  node_data_dir: /tmp/seamlessflow-ray   # ray: each node's own directory for a service's config and data
  resources:               # by service name (rollout-1) or by role (rollout, proxy, agents, ...)
    rollout: {cpus: 1, gpus: 1}
    rollout-1: {custom: {h100: 1}, node: node_b}
    agents: {replicas: 2}
```

Why a section of its own: every service validates its own section, and these settings are the placement's,
not the service's. The local supervisor reads none of it but `replicas` (it has one machine and restarts
every service always); Ray turns each into the actor's resource request and restart policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from seamlessflow.stack.options import ServiceResources

# What a service asks for unless configured: an engine or a trainer holds a core busy; the rest mostly wait.
DEFAULT_CPUS = {"rollout": 1.0, "trainer": 1.0}


@dataclass(frozen=True)
class Resources:
    """A placement's request for one copy of a service. `custom`: Ray custom resources (an engine's hardware
    tags land here); `node`: a resource that only the wanted node offers (`node_b`, Ray's `node:<ip>` or
    `node:__internal_head__`), asked for in a tiny amount so it selects a node without using it up."""

    cpus: float = 0.0
    gpus: float = 0.0
    memory_mb: int = 0
    custom: dict[str, float] = field(default_factory=dict)
    node: str | None = None

    def wanted(self) -> dict[str, float]:
        """Everything asked for, as Ray names resources (memory in bytes)."""
        out = {"CPU": self.cpus, "GPU": self.gpus, "memory": float(self.memory_mb) * 2**20, **self.custom}
        if self.node:
            out[self.node] = max(out.get(self.node, 0.0), NODE_SHARE)
        return {name: amount for name, amount in out.items() if amount > 0}


NODE_SHARE = 0.001


@dataclass(frozen=True)
class RestartPolicy:
    """How often a dead service is started again: -1 for always (the supervisor's only policy)."""

    max_restarts: int = -1
    max_backoff_s: float = 30.0


def requested(entry: ServiceResources, role: str, hardware_tags: Sequence[str] = (), gpus: float = 0.0) -> Resources:
    """The request of one service: its entry over the role's defaults; an engine's hardware tags become custom
    resources (one unit of `h100` per engine: a node offering `h100: 8` hosts eight)."""
    custom = {tag: 1.0 for tag in hardware_tags}
    custom.update(entry.custom)
    return Resources(
        cpus=entry.cpus if entry.cpus is not None else DEFAULT_CPUS.get(role, 0.0),
        gpus=entry.gpus if entry.gpus is not None else gpus,
        memory_mb=entry.memory_mb or 0,
        custom=custom,
        node=entry.node,
    )
