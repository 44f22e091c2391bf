"""Where a stack keeps its files under its data directory: one place, so a module that `services` imports (the
/metrics list, `metrics_urls`) finds them without importing `services`."""

from __future__ import annotations

from pathlib import Path

from seamlessflow.config import Settings


def run_dir(settings: Settings) -> Path:
    return Path(settings.data_dir).resolve() / "run"


def log_dir(settings: Settings) -> Path:
    return Path(settings.data_dir).resolve() / "logs"


def config_path(settings: Settings) -> Path:
    return run_dir(settings) / "config.yaml"
