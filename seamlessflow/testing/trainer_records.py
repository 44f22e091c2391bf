"""Hand-made Trajectory records for trainer tests (the model's own logprobs on trained tokens, so the PPO
ratio is exactly 1 there), and a broker polling helper."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.episodes import TrajectoryStatus
from seamlessflow.core.losses import token_logprobs
from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import Trajectory

GARBAGE = -9.0  # recorded logprob on untrained positions: must never matter


@functools.lru_cache(maxsize=4)
def _model(model_dir: str) -> PreTrainedModel:
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)


def own_logprobs(model_dir: str | Path, tokens: list[int], mask: list[int]) -> list[float]:
    """The model's own logprobs on trained tokens (so the PPO ratio is exactly 1 there)."""
    model = _model(str(model_dir))
    with torch.no_grad():
        lp = token_logprobs(model(input_ids=torch.tensor([tokens])).logits, torch.tensor([tokens]))[0]
    return [float(lp[t]) if mask[t] else GARBAGE for t in range(len(tokens))]


def trajectory(model_dir: str | Path, tid: str, group: str, tokens: list[int], mask: list[int], reward: float,
               version: int = 0, status: str = "done") -> Trajectory:
    return Trajectory(
        event_id=tid, session_id=tid.split("/")[0], branch_id=0, group_id=group, task_id=f"task-{group}",
        team="default", run="default", tokens=tokens, loss_mask=mask, logprobs=own_logprobs(model_dir, tokens, mask),
        versions=[version if m else -1 for m in mask], reward=reward, status=TrajectoryStatus(status), num_calls=1,
        num_forks=0,
        created_at_ms=0,
    )


def group(model_dir: str | Path, name: str, rewards: Iterable[float] = (1.0, 0.0)) -> list[Trajectory]:
    """A GRPO group of short trajectories named `<name><i>/0`, one per reward."""
    return [
        trajectory(model_dir, f"{name}{i}/0", name, [1, 2, 3 + i, 4], [0, 0, 1, 1], r) for i, r in enumerate(rewards)
    ]


def wait_for(settings: Settings, codec: Codec, topic: str, predicate: Callable[[Any], bool],
             timeout_s: float = 120.0) -> list:
    """Reads ``topic`` until some messages satisfy ``predicate``; returns those."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [m for m in read_messages(settings, topic, codec) if predicate(m)]
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing on {topic} matched within {timeout_s} s")
        time.sleep(0.5)
