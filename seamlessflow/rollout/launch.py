"""What `seamlessflow up` needs to start rollout workers: their ids, and a model to serve.

One worker process per configured resource id:
`python -m services.rollout --config <effective config> --resource-id <id>`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from seamlessflow.config import Settings
from seamlessflow.rollout.options import RolloutOptions

DEFAULT_WORKER = "rollout-0"


def worker_ids(settings: Settings) -> list[str]:
    """The configured resources, or one default worker when none are named."""
    return sorted(RolloutOptions.from_settings(settings).workers) or [DEFAULT_WORKER]


def ensure_model(settings: Settings, log: Callable[[str], None] = print) -> Path:
    """The model directory workers will serve; the tiny model is built (or reused) when none is configured.

    Call once before starting workers, so parallel workers never build it at the same time.
    """
    options = RolloutOptions.from_settings(settings)
    if options.model:
        return Path(options.model)
    from seamlessflow.model import build_tiny_model  # torch only when building

    return build_tiny_model(options.model_dir(settings), log=log).path
