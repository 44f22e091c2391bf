"""Trajectory records to core samples, and samples to padded tensors for one micro-batch."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.messages import Trajectory


def sample_from_record(record: Trajectory) -> TrajectorySample:
    return TrajectorySample(
        trajectory_id=record.event_id,
        group_id=record.group_id,
        task_id=record.task_id,
        tokens=tuple(record.tokens),
        loss_mask=tuple(record.loss_mask),
        logprobs=tuple(record.logprobs),
        versions=tuple(record.versions),
        reward=record.reward,
        status=record.status,
    )


@dataclass
class MicroBatch:
    """Right-padded tensors [b, T]; padding has attention 0 and loss mask 0."""

    tokens: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    logprobs: torch.Tensor

    def to(self, device) -> "MicroBatch":
        return MicroBatch(*(t.to(device) for t in (self.tokens, self.attention_mask, self.loss_mask, self.logprobs)))


def collate(samples: list[TrajectorySample], pad_id: int = 0) -> MicroBatch:
    length = max(len(s.tokens) for s in samples)
    tokens = torch.full((len(samples), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(samples), length), dtype=torch.long)
    loss_mask = torch.zeros((len(samples), length), dtype=torch.float32)
    logprobs = torch.zeros((len(samples), length), dtype=torch.float32)
    for row, s in enumerate(samples):
        n = len(s.tokens)
        tokens[row, :n] = torch.tensor(s.tokens)
        attention[row, :n] = 1
        loss_mask[row, :n] = torch.tensor(s.loss_mask, dtype=torch.float32)
        logprobs[row, :n] = torch.tensor(s.logprobs, dtype=torch.float32)
    loss_mask[:, 0] = 0  # the first token has no prediction to train
    return MicroBatch(tokens, attention, loss_mask, logprobs)
