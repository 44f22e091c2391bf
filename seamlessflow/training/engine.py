"""A transformers causal LM under DeepSpeed, trained one batch of GRPO groups per optimizer step.

DeepSpeed owns precision, ZeRO sharding and the optimizer (all from its JSON config). We own the
split into micro-batches: a step's size is set by the batch threshold, not by DeepSpeed's accumulation
count, so the accumulation boundary is set by hand on the last micro-batch, and each micro-batch loss is
already divided by the step's total trained tokens (token-level mean over the whole step).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deepspeed
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.batching import KeptGroup
from seamlessflow.core.losses import (
    PolicyLossConfig,
    group_relative_advantages,
    logprob_abs_diff,
    ppo_clip_loss,
    reward_stats,
    token_logprobs,
)
from seamlessflow.training.ops import preload_ops
from seamlessflow.training.samples import collate


@dataclass
class StepMetrics:
    """What one optimizer step did; `figures()` gives the ResourceStatus form."""

    loss: float
    reward_mean: float
    reward_std: float
    groups: int
    sequences: int
    tokens_trained: int
    logprob_abs_diff: float
    clip_fraction: float
    kl_mean: float
    step_time_s: float

    def figures(self) -> dict[str, float]:
        return {k: float(v) for k, v in vars(self).items()}


def init_distributed() -> None:
    """gloo on CPU, NCCL on GPU. Under a launcher (deepspeed, torchrun) its env decides; a lone process
    gets a single-rank group on a free local port, passed directly (not as MASTER_PORT in the env, which
    child processes would inherit and then collide on)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        deepspeed.init_distributed(dist_backend=backend)
    else:
        os.environ.setdefault("LOCAL_RANK", "0")  # deepspeed.initialize insists on it
        deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False, rank=0, world_size=1,
                                   init_method=f"tcp://127.0.0.1:{_free_port()}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PolicyEngine:
    """Loads the model from an HF directory and wraps it with `deepspeed.initialize`."""

    def __init__(
        self,
        model_path: str | Path,
        ds_config: dict[str, Any],
        loss_config: PolicyLossConfig = PolicyLossConfig(),
        scale_by_std: bool = True,
    ):
        self.loss_config = loss_config
        self.scale_by_std = scale_by_std
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
        self.pad_id = model.config.pad_token_id or 0
        preload_ops()  # under a lock that survives a killed build (see training/ops.py)
        init_distributed()
        self.engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
        self.reference = self._load_reference(model_path) if loss_config.kl_coef > 0 else None

    def _load_reference(self, model_path) -> torch.nn.Module:
        ref = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(self.engine.device)
        return ref.eval().requires_grad_(False)

    @property
    def module(self) -> torch.nn.Module:
        return self.engine.module

    def train_step(self, groups: list[KeptGroup]) -> StepMetrics:
        """One optimizer step over every sample of ``groups``."""
        start = time.perf_counter()
        samples = [s for g in groups for s in g.samples]
        weights = torch.tensor([w for g in groups for w in g.weights])
        index = torch.tensor([i for i, g in enumerate(groups) for _ in g.samples])
        rewards = torch.tensor([s.reward for s in samples])
        advantages = group_relative_advantages(rewards, index, self.scale_by_std)
        micro = self.engine.train_micro_batch_size_per_gpu()
        total_tokens = sum(max(s.trained_tokens - s.loss_mask[0], 0) for s in samples)
        loss_sum, parts = 0.0, []
        self.engine.train()
        for begin in range(0, len(samples), micro):
            end = min(begin + micro, len(samples))
            self.engine.set_gradient_accumulation_boundary(end == len(samples))
            part = self._micro_step(samples[begin:end], advantages[begin:end], weights[begin:end], total_tokens)
            loss_sum += part[0]
            parts.append(part)
        self.engine.step()
        tokens = sum(p[1] for p in parts)
        mean = lambda k: sum(p[k] * p[1] for p in parts) / max(tokens, 1)  # noqa: E731  token-weighted
        reward_mean, reward_std = reward_stats(rewards.tolist())
        return StepMetrics(
            loss=loss_sum, reward_mean=reward_mean, reward_std=reward_std, groups=len(groups),
            sequences=len(samples), tokens_trained=tokens, logprob_abs_diff=mean(2), clip_fraction=mean(3),
            kl_mean=mean(4), step_time_s=time.perf_counter() - start,
        )

    def _micro_step(self, samples, advantages, weights, total_tokens) -> tuple[float, int, float, float, float]:
        batch = collate(samples, self.pad_id).to(self.engine.device)
        logits = self.engine(input_ids=batch.tokens, attention_mask=batch.attention_mask).logits
        logprobs = token_logprobs(logits, batch.tokens)
        ref = self._reference_logprobs(batch) if self.reference is not None else None
        out = ppo_clip_loss(
            logprobs, batch.logprobs, advantages.to(logprobs.device), batch.loss_mask, self.loss_config,
            ref_logprobs=ref, sample_weights=weights.to(logprobs.device), normaliser=max(total_tokens, 1),
        )
        self.engine.backward(out.loss, scale_wrt_gas=False)
        diff = logprob_abs_diff(logprobs, batch.logprobs, batch.loss_mask)
        return float(out.loss.detach()), out.tokens, diff, out.clip_fraction, out.kl_mean

    @torch.no_grad()
    def _reference_logprobs(self, batch) -> torch.Tensor:
        logits = self.reference(input_ids=batch.tokens, attention_mask=batch.attention_mask).logits
        return token_logprobs(logits, batch.tokens)

    def save_checkpoint(self, directory: Path, tag: str, client_state: dict[str, Any]) -> None:
        self.engine.save_checkpoint(str(directory), tag=tag, client_state=client_state)

    def load_checkpoint(self, directory: Path) -> dict[str, Any] | None:
        """Restores model and optimizer from the latest tag; returns its client state (None if none)."""
        if not (Path(directory) / "latest").exists():
            return None
        path, client_state = self.engine.load_checkpoint(str(directory))
        return client_state if path is not None else None

    def state_dict_for_export(self) -> dict[str, torch.Tensor] | None:
        """Full weights under ZeRO-3 (gathered); None otherwise (the module holds them whole)."""
        if self.engine.zero_optimization_stage() == 3:
            return self.engine._zero3_consolidated_16bit_state_dict()
        return None
