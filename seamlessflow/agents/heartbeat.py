"""An agent worker's heartbeat on the status topic, so `status` and `up` show every pool's workers and load.

Agent workers hold no engine and take no commands: their status is for operators (is the pool alive, how
many sessions run, how many ended failed). The scheduler only tracks the kinds it places work on.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.messages import ResourceStatus, new_id, now_ms


def agent_resource_id(group: str) -> str:
    """One id per worker process: pools scale by adding workers, and each one shows in the table."""
    return f"agent.{group}.{socket.gethostname()}-{os.getpid()}"


def agent_status(resource_id: str, pool: str, team: str, run: str, state: ResourceState,
                 figures: Mapping[str, float]) -> ResourceStatus:
    return ResourceStatus(
        event_id=new_id(), resource_id=resource_id, kind=ResourceKind.AGENT, capability_tags=[ResourceKind.AGENT], active_tag=pool,
        state=state, weight_version=-1, figures={k: float(v) for k, v in figures.items()}, team=team, run=run,
        created_at_ms=now_ms(),
    )
