"""Trajectory records to core samples, and samples to the tensors of one micro-batch (padded or packed)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.core.behaviour import behaviour_of
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
        turn_ends=tuple(record.turn_ends),
        turn_rewards=tuple(record.turn_rewards),
        temperatures=tuple(record.temperatures),
        teacher_logprobs=tuple(record.teacher_logprobs),
    )


@dataclass
class MicroBatch:
    """Tensors [rows, T] for one forward/backward.

    Padded: one sequence per row, right-padded; padding has attention 0, loss mask 0 and sequence index -1;
    ``position_ids`` is None (the model counts from 0 per row). Packed: one row holding the sequences end
    to end, no attention mask, ``position_ids`` restarting at 0 per sequence (transformers then confines
    attention to each sequence: a block-diagonal causal mask, or varlen kernels with flash attention).
    ``sequence_index`` says which sample of the micro-batch each position belongs to.

    The loss mask, behaviour logprobs and temperatures are the samples' `core.behaviour` view: tokens without a
    usable behaviour logprob are masked, and ``temperatures`` (None: 1.0 everywhere) is what each token was
    sampled at, applied to its logits in the forward. ``versions`` (-1 off generated tokens and on padding) tells
    the mismatch monitor tokens of the trainer's own weights from older ones.
    """

    tokens: torch.Tensor
    attention_mask: torch.Tensor | None
    position_ids: torch.Tensor | None
    sequence_index: torch.Tensor
    loss_mask: torch.Tensor
    logprobs: torch.Tensor
    versions: torch.Tensor
    temperatures: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> MicroBatch:
        return MicroBatch(*(None if t is None else t.to(device) for t in vars(self).values()))  # type: ignore[arg-type]  # position_ids may be None

    @property
    def flat(self) -> MicroBatch:
        """The padded or packed layout the loss reads: itself (a tree batch has its own, `trainer.tree`)."""
        return self

    def logprobs_of(self, model: torch.nn.Module) -> torch.Tensor:
        """Logprobs [rows, T] from a `TokenLogprobModel` (or a DeepSpeed engine around one)."""
        return model(input_ids=self.tokens, attention_mask=self.attention_mask, position_ids=self.position_ids,
                     temperatures=self.temperatures)

    def per_token(self, values: torch.Tensor) -> torch.Tensor:
        """Per-sequence ``values`` [n] spread over positions [rows, T] (any value on padding)."""
        return values.to(self.tokens.device)[self.sequence_index.clamp(min=0)]


    def per_position(self, values: list[torch.Tensor]) -> torch.Tensor:
        """Per-token ``values`` (one 1-D tensor per sample, as long as its tokens) laid out like the batch
        [rows, T] (any value on padding)."""
        lengths = torch.tensor([len(v) for v in values], dtype=torch.long)
        offsets = torch.cumsum(lengths, 0) - lengths
        flat = torch.cat([v.float() for v in values]).to(self.tokens.device)
        position = self.position_ids if self.position_ids is not None else \
            torch.arange(self.tokens.shape[1], device=self.tokens.device).expand_as(self.tokens)
        index = offsets.to(self.tokens.device)[self.sequence_index.clamp(min=0)] + position
        return flat[index.clamp(max=len(flat) - 1)]


def collate(samples: list[TrajectorySample], pad_id: int = 0, packed: bool = False) -> MicroBatch:
    if packed:
        return _packed(samples)
    seen = [behaviour_of(s) for s in samples]
    length = max(len(s.tokens) for s in samples)
    tokens = torch.full((len(samples), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(samples), length), dtype=torch.long)
    index = torch.full((len(samples), length), -1, dtype=torch.long)
    loss_mask = torch.zeros((len(samples), length), dtype=torch.float32)
    logprobs = torch.zeros((len(samples), length), dtype=torch.float32)
    versions = torch.full((len(samples), length), -1, dtype=torch.long)
    tempered = any(b.temperatures is not None for b in seen)
    temperatures = torch.ones((len(samples), length), dtype=torch.float32) if tempered else None
    for row, (s, b) in enumerate(zip(samples, seen, strict=True)):
        n = len(s.tokens)
        tokens[row, :n] = torch.tensor(s.tokens)
        attention[row, :n] = 1
        index[row, :n] = row
        loss_mask[row, :n] = torch.tensor(b.loss_mask, dtype=torch.float32)
        logprobs[row, :n] = torch.tensor(b.logprobs, dtype=torch.float32)
        versions[row, :n] = torch.tensor(s.versions, dtype=torch.long)
        if temperatures is not None and b.temperatures is not None:
            temperatures[row, :n] = torch.tensor(b.temperatures, dtype=torch.float32)
    loss_mask[:, 0] = 0  # the first token has no prediction to train
    return MicroBatch(tokens, attention, None, index, loss_mask, logprobs, versions, temperatures)


def _packed(samples: list[TrajectorySample]) -> MicroBatch:
    seen = [behaviour_of(s) for s in samples]
    row = lambda values, dtype: torch.tensor([v for b in seen for v in values(b)], dtype=dtype)[None]  # noqa: E731
    loss_mask = row(lambda b: (0, *b.loss_mask[1:]), torch.float32)  # a sequence's first token is never trained
    tempered = any(b.temperatures is not None for b in seen)
    return MicroBatch(
        tokens=torch.tensor([t for s in samples for t in s.tokens], dtype=torch.long)[None],
        attention_mask=None,
        position_ids=torch.tensor([p for s in samples for p in range(len(s.tokens))], dtype=torch.long)[None],
        sequence_index=torch.tensor([i for i, s in enumerate(samples) for _ in s.tokens], dtype=torch.long)[None],
        loss_mask=loss_mask,
        logprobs=row(lambda b: b.logprobs, torch.float32),
        versions=torch.tensor([v for s in samples for v in s.versions], dtype=torch.long)[None],
        temperatures=row(lambda b: b.temperatures or (1.0,) * len(b.loss_mask), torch.float32) if tempered else None,
    )
