"""The core's frozen configurations as tests build them: the trainer's options give the defaults (one set, in
`seamlessflow/trainer/options.py`), a test names only what its case is about."""

from __future__ import annotations

import dataclasses
from typing import Any

from seamlessflow.core.batching import BatchConfig, StalenessPolicy
from seamlessflow.core.loss_config import PolicyLossConfig
from seamlessflow.trainer.options import TrainerOptions


def loss_config(**changes: Any) -> PolicyLossConfig:
    """The `trainer:` section's loss knobs with `changes` over them."""
    return dataclasses.replace(TrainerOptions().loss_config(), **changes)


def batch_config(**changes: Any) -> BatchConfig:
    """The `trainer:` section's batching with `changes` over them."""
    return dataclasses.replace(TrainerOptions().batch_config(), **changes)


def staleness(**changes: Any) -> StalenessPolicy:
    """The `trainer:` section's staleness rule with `changes` over it."""
    return dataclasses.replace(TrainerOptions().batch_config().staleness, **changes)
