"""Which model a run serves and trains: decided here once, so neither the engines nor the trainer asks the other.

The user names it with `rollout.model` (an HF directory or hub name; the key stays where configurations
have always had it, and `RolloutOptions` validates and documents it). Left empty, it is the tiny model in this
node's `<data_dir>/models/tiny`, built on first use. The rollout workers serve `model_dir`; the trainer
trains `model_name_or_path` unless `trainer.model_path` names another.

Cheap to import (no torch): the build is imported only when a model must be built.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from seamlessflow.config import Settings

TINY_MODEL_DIR = Path("models") / "tiny"  # under data_dir


def configured_model(settings: Settings) -> str | None:
    """The model the user named (`rollout.model`), as written; None: the tiny model."""
    named = settings.section("rollout").get("model")
    return str(named) if named else None


def model_dir(settings: Settings) -> Path:
    """The configured model as a path, else the tiny model's directory on this node (built or not yet)."""
    named = configured_model(settings)
    return Path(named) if named else Path(settings.data_dir) / TINY_MODEL_DIR


def model_name_or_path(settings: Settings) -> str:
    """What a trainer loads: a configured hub name stays a name; the tiny model's directory, absolute (the
    trainer's working directory may differ from the one `data_dir` is relative to)."""
    return configured_model(settings) or str(model_dir(settings).resolve())


def ensure_model(settings: Settings, log: Callable[[str], None] = print) -> Path:
    """The model directory to serve and train; the tiny model is built (or reused) when none is configured.

    Call once per node before starting its workers or trainer ranks, so no two processes build it at once.
    """
    if configured_model(settings):
        return model_dir(settings)
    from seamlessflow.model.build import build_tiny_model  # torch only when building

    return build_tiny_model(model_dir(settings), log=log).path
