"""The metrics sink's own options: the `tracking:` section of the settings file (or SEAMLESSFLOW_TRACKING__*)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from seamlessflow.config import SectionOptions


class TrackingOptions(SectionOptions):
    """The `tracking:` section. `logdir` default: <data_dir>/tensorboard/<team>/<run>."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    SECTION = "tracking"

    tensorboard: bool = True
    """Write TensorBoard event files."""
    logdir: str | None = None
    """Where the event files go; None: <data_dir>/tensorboard/<team>/<run>."""
    flush_s: float = 2.0
    """Seconds between flushes of the trackers (and commits of what was written)."""
    wandb: dict[str, Any] | None = None
    """Log to Weights & Biases with these `wandb.init` arguments, e.g. {project: demo, mode: offline}; None: off."""
    mlflow: dict[str, Any] | None = None
    """Log to MLflow, e.g. {tracking_uri: file:///..., experiment: demo}; None: off."""
    group: str = "metrics-sink"
    """Its consumer group, named `<prefix>.<group>.<team>.<run>`."""
    pools: bool = True
    """Each agent pool's own reward and sessions a minute (`pool/<pool>/...`): the sink reads the session ends
    on the session-events topic, calls included (false: it reads status, weights and eval only)."""

