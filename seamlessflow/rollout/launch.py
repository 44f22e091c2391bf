"""What `seamlessflow up` needs to start rollout workers: their ids (the model they serve is
`seamlessflow.model.choice`'s).

One worker process per configured resource id:
`python -m services.rollout --config <effective config> --resource-id <id>`.
"""

from __future__ import annotations

from seamlessflow.config import Settings
from seamlessflow.rollout.options import RolloutOptions

DEFAULT_WORKER = "rollout-0"


def worker_ids(settings: Settings) -> list[str]:
    """The configured resources, or one default worker when none are named."""
    return sorted(RolloutOptions.from_settings(settings).workers) or [DEFAULT_WORKER]
