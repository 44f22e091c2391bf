"""`seamlessflow model ...`: build the tiny local model the default run trains."""

from __future__ import annotations

import os
from pathlib import Path

import click

DEFAULT_MODEL_DIR = Path(os.environ.get("SEAMLESSFLOW_DATA_DIR", ".seamlessflow")) / "models" / "tiny"


@click.group("model")
def model_group() -> None:
    """Local model: build it, inspect it."""


@model_group.command("init")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_MODEL_DIR,
              show_default=True, help="Directory of the HF model to build (reused if already built).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for tasks, tokenizer and weights.")
@click.option("--small", is_flag=True, help="Seconds-long build for tests (the model learns little).")
def init_command(out: Path, seed: int, small: bool) -> None:
    """Build the tiny model: BPE tokenizer, Qwen2-style config, supervised warm start."""
    from seamlessflow.model import build_tiny_model  # torch import only when asked to build

    result = build_tiny_model(out, seed=seed, small=small, log=click.echo)
    state = "reused" if result.cached else "built"
    click.echo(
        f"{state} {result.path} (spec {result.spec_hash}): greedy accuracy {result.greedy_accuracy:.0%}, "
        f"sampled {result.sampled_accuracy:.0%}"
    )
