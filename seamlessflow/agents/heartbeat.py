"""An agent worker's heartbeat on the status topic, so `status` and `up` show every pool's workers and load.

Agent workers hold no engine and take no commands: their status is for operators (is the pool alive, how
many sessions run, how many ended failed). The scheduler only tracks the kinds it places work on.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import ResourceStatus


def agent_resource_id(group: str) -> str:
    """One id per worker process: pools scale by adding workers, and each one shows in the table."""
    return f"agent.{group}.{socket.gethostname()}-{os.getpid()}"


def agent_status(
    resource_id: str, pool: str, team: str, run: str, state: ResourceState, figures: Mapping[str, float]
) -> ResourceStatus:
    return resource_status(
        resource_id, ResourceKind.AGENT, state, pool, team, run, capability_tags=[ResourceKind.AGENT], figures=figures
    )
