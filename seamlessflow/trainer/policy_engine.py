"""A transformers causal LM under DeepSpeed, trained one batch of GRPO groups per optimizer step.

DeepSpeed owns precision, ZeRO sharding and the optimizer (all from its JSON config). We own the
split into micro-batches: a step's size is set by the batch threshold, not by DeepSpeed's accumulation
count, so the accumulation boundary is set by hand on the last micro-batch, and each micro-batch loss is
already divided by the step's total trained tokens (token-level mean over the whole step). Which
sequences share a micro-batch is `core.micro_batches` (a token budget, packed or length-sorted).

Data-parallel ranks: the leader (rank 0) computes the step's advantages and token count over the whole
batch, splits the sequences across ranks by tokens and scatters the shares; each rank runs the same
number of micro-batches (an idle rank runs zero-loss ones, since ZeRO's collectives run per forward and
backward), and DeepSpeed's all-reduce averages the gradients, so each rank's loss is divided by the
step's tokens over the world size: the sum of the shares is the one-rank loss, and so is the update.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import deepspeed
import torch

from seamlessflow.core.batching import KeptGroup, TrajectorySample
from seamlessflow.core.behaviour import behaviour_of
from seamlessflow.core.distillation import ObjectiveConfig, distill_advantages, objective_advantages, reverse_kl
from seamlessflow.core.losses import (
    PolicyLoss,
    PolicyLossConfig,
    group_relative_advantages,
    logprob_abs_diff,
    ppo_clip_loss,
    reward_stats,
)
from seamlessflow.core.micro_batches import plan_micro_batches, split_across_ranks
from seamlessflow.core.mismatch import Drift, split_by_version
from seamlessflow.core.tree_shares import split_trees_across_ranks
from seamlessflow.core.turn_advantages import AdvantageRule, token_advantages
from seamlessflow.model.lora import TeamAdapter
from seamlessflow.ports import free_port
from seamlessflow.trainer.adapter import (
    AdapterOff,
    AdapterSpec,
    adapter_parameters,
    adapter_tensors,
    attach_adapter,
    load_adapter_state,
)
from seamlessflow.trainer.memory import MemoryConfig
from seamlessflow.trainer.model import TokenLogprobModel, load_causal_lm, zero_stage
from seamlessflow.trainer.ops import preload_ops
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.ranks import RankGroup
from seamlessflow.trainer.samples import MicroBatch, collate
from seamlessflow.trainer.tree import TreeBatch, TreeChoice, merges_chains, model_shape, plan_by_prefix

log = logging.getLogger("seamlessflow.trainer.policy_engine")


VARLEN_ATTENTION = ("flash_attention_2", "flash_attention_3")


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
    dual_clip_fraction: float = 0.0  # trained tokens whose negative-advantage loss the dual clip bounded
    positions: int = 0  # token positions computed, all ranks; below flat_positions when trees shared prefixes
    flat_positions: int = 0  # what the step's sequences take flat
    positions_largest_rank: int = 0  # the busiest rank's positions (the step waits for it): the split's balance
    masked_tokens: int = 0  # generated tokens without a usable behaviour logprob, kept out of the loss
    mismatch: Drift = Drift()  # trainer vs recorded logprobs on tokens of the version it held (`core.mismatch`)
    stale: Drift = Drift()  # the same on tokens of older versions
    teacher_kl: float = 0.0  # mean log pi_student - log pi_teacher over the step's taught tokens (distillation)
    taught_tokens: int = 0  # trained tokens a teacher scored

    def figures(self) -> dict[str, float]:
        plain = {k: float(v) for k, v in vars(self).items() if not isinstance(v, Drift)}
        return {**plain, **self.mismatch.figures("mismatch"), **self.stale.figures("stale")}


@dataclass(frozen=True)
class MicroStep:
    """What one micro-batch's forward/backward measured on this rank."""

    loss: float
    tokens: int  # trained tokens
    logprob_abs_diff: float  # mean over its trained tokens, as are the next two
    clip_fraction: float
    kl_mean: float
    positions: int  # token positions computed (the tree's when it ran as one)
    flat_positions: int  # what the same sequences take flat
    dual_clip_fraction: float = 0.0
    mismatch: Drift = Drift()
    stale: Drift = Drift()

    def sums(self) -> list[float]:
        """The figures that add up over micro-batches and ranks: loss and tokens as they are, the per-token
        means weighted by tokens (divided by the step's tokens once summed), the positions, the drift sums
        (their maxima are taken apart, `maxima`)."""
        weighted = (self.logprob_abs_diff, self.clip_fraction, self.kl_mean, self.dual_clip_fraction)
        return [self.loss, self.tokens, *(mean * self.tokens for mean in weighted), self.positions,
                self.flat_positions, *self.mismatch.sums(), *self.stale.sums()]

    def maxima(self) -> list[float]:
        return [self.mismatch.abs_max, self.stale.abs_max]


@dataclass
class StepShare:
    """One rank's part of an optimizer step. Advantages are relative to each group and the normaliser is
    the whole step's trained-token count (its sequence count with GSPO's sequence ratio), so both are
    computed by the leader over the whole batch and travel with the sequences; the batch figures (groups,
    rewards) travel so every rank reports the same step."""

    samples: list[TrajectorySample]
    advantages: list[float]
    weights: list[float]
    normaliser: int
    groups: int
    sequences: int
    reward_mean: float
    reward_std: float
    token_advantages: list[list[float]] | None = None  # under a per-turn rule: one per token, beside `advantages`
    version: int = -1  # the policy version of the weights the step starts from (the mismatch monitor's "own")
    masked_tokens: int = 0  # the whole step's, like the batch figures
    teacher_kl: tuple[float, int] = (0.0, 0)  # the whole step's reverse KL to the teacher: sum and tokens


def step_advantages(groups: list[KeptGroup], scale_by_std: bool, rule: AdvantageRule = AdvantageRule.SESSION,
                    discount: float = 1.0,
                    objective: ObjectiveConfig | None = None) -> tuple[list[float], list[list[float]] | None]:
    """A step's advantages, its samples in group order: one per sample (GRPO on the session reward) and, under
    a per-turn rule (`core.turn_advantages`) or a distilling objective (`core.distillation`), one per token of each
    sample, which the loss then reads."""
    samples = [s for g in groups for s in g.samples]
    index = [i for i, g in enumerate(groups) for _ in g.samples]
    rewards = torch.tensor([s.reward for s in samples])
    per_sample = group_relative_advantages(rewards, torch.tensor(index), scale_by_std).tolist() if samples else []
    per_token = None if rule is AdvantageRule.SESSION else \
        token_advantages([s.turns for s in samples], index, rule, discount, scale_by_std)
    if objective is None or not objective.distills:
        return per_sample, per_token
    seen = [behaviour_of(s) for s in samples]
    distilled = [distill_advantages(b.loss_mask, b.logprobs, s.teacher_logprobs, objective.distill_coef)
                 for s, b in zip(samples, seen, strict=True)]
    lengths = [len(s.tokens) for s in samples]
    return per_sample, objective_advantages(objective, per_sample, per_token, distilled, lengths)


def step_teacher_kl(samples: list[TrajectorySample]) -> tuple[float, int]:
    """The step's reverse KL to its teacher (`core.distillation.reverse_kl`) over every sample: sum and tokens."""
    parts = [reverse_kl(b.loss_mask[1:], b.logprobs[1:], s.teacher_logprobs[1:])
             for s, b in ((s, behaviour_of(s)) for s in samples)]
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def init_distributed() -> None:
    """gloo on CPU, NCCL on GPU. Under a launcher (deepspeed, torchrun) its env decides; a lone process
    gets a single-rank group on a free local port, passed directly (not as MASTER_PORT in the env, which
    child processes would inherit and then collide on)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        if torch.cuda.is_available():  # before ZeRO-3 builds shards on "the current device"
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        deepspeed.init_distributed(dist_backend=backend)
    else:
        os.environ.setdefault("LOCAL_RANK", "0")  # deepspeed.initialize insists on it
        deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False, rank=0, world_size=1,
                                   init_method=f"tcp://127.0.0.1:{free_port()}")


def forward_logprobs(model: torch.nn.Module, batch: MicroBatch) -> torch.Tensor:
    """Logprobs [rows, T] from a `TokenLogprobModel` (or a DeepSpeed engine around one)."""
    return batch.logprobs_of(model)


def micro_batch_loss(model: torch.nn.Module, batch: MicroBatch | TreeBatch,
                     advantages: torch.Tensor | list[torch.Tensor], weights: torch.Tensor,
                     normaliser: int, config: PolicyLossConfig, reference: torch.nn.Module | None = None,
                     ranks: int = 1) -> tuple[PolicyLoss, torch.Tensor]:
    """The step's loss share of one micro-batch (padded, packed or a token tree: the same numbers) and its
    logprobs in the flat layout; ``ranks`` data-parallel ranks whose gradients DeepSpeed averages (so each
    share counts ``ranks`` times)."""
    flat = batch.flat
    logprobs = batch.logprobs_of(model)
    ref = None
    if reference is not None:
        with torch.no_grad():
            ref = batch.logprobs_of(reference)
    spread = flat.per_token(advantages) if isinstance(advantages, torch.Tensor) else flat.per_position(advantages)
    out = ppo_clip_loss(
        logprobs, flat.logprobs, spread, flat.loss_mask, config, ref_logprobs=ref,
        sample_weights=flat.per_token(weights), normaliser=max(normaliser, 1) / ranks,
        sequence_index=flat.sequence_index,
    )
    return out, logprobs


def reference_config(ds_config: dict[str, Any], offload: bool) -> dict[str, Any]:
    """A forward-only ZeRO-3 config for the reference model: the policy's precision and micro-batch size,
    parameters partitioned across ranks and, with ``offload``, kept in pinned host memory."""
    zero: dict[str, Any] = {"stage": 3}
    if offload:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict[str, Any] = {key: ds_config[key] for key in ("bf16", "fp16", "train_micro_batch_size_per_gpu")
                              if key in ds_config}
    return {**config, "gradient_accumulation_steps": 1, "zero_optimization": zero,
            "steps_per_print": 1_000_000, "wall_clock_breakdown": False}


class PolicyEngine:
    """Loads the model from an HF directory and wraps it with `deepspeed.initialize`. With ``adapter`` it trains
    only that team's LoRA adapter on the frozen base (`trainer.adapter`)."""

    def __init__(
        self,
        model_path: str | Path,
        ds_config: dict[str, Any],
        loss_config: PolicyLossConfig | None = None,
        scale_by_std: bool = True,
        memory: MemoryConfig | None = None,
        advantages: AdvantageRule = AdvantageRule.SESSION,
        discount: float = 1.0,
        adapter: TeamAdapter | None = None,
        objective: ObjectiveConfig | None = None,
    ):
        self.loss_config = loss_config or TrainerOptions().loss_config()  # None: the `trainer:` section's
        self.scale_by_std = scale_by_std
        self.advantages = AdvantageRule(advantages)
        self.discount = discount
        self.objective = objective or TrainerOptions().objective_config()
        memory = memory or TrainerOptions().memory_config()  # None: the `trainer:` section's defaults
        self.memory = memory
        preload_ops()  # under a lock that survives a killed build (see training/ops.py)
        init_distributed()  # before loading: ZeRO-3 partitions the model as it is built
        self.ranks = RankGroup()
        if adapter is not None and zero_stage(ds_config) == 3:
            raise ValueError("trainer.adapter: ZeRO stage 3 is not supported for adapter training (use stage 1 or 2)")
        model = load_causal_lm(model_path, ds_config, memory.activation_checkpointing, memory.attn_implementation)
        self.adapter = AdapterSpec.of(adapter) if adapter is not None else None
        if self.adapter is not None:
            attach_adapter(model, self.adapter)
        self.pad_id = model.config.pad_token_id or 0
        wrapped = TokenLogprobModel(model, memory.logprob_chunk_tokens)
        trained = adapter_parameters(wrapped, self.adapter.name).values() if self.adapter else wrapped.parameters()
        self.engine, _, _, _ = deepspeed.initialize(model=wrapped, model_parameters=trained, config=ds_config)
        self.reference: torch.nn.Module | None = None
        if self.loss_config.kl_coef > 0:  # a LoRA policy's reference is its frozen base: the adapter switched off
            self.reference = AdapterOff(wrapped) if self.adapter else self._load_reference(model_path, ds_config)
        varlen = model.config._attn_implementation in VARLEN_ATTENTION
        wanted = varlen if memory.packing is None else memory.packing
        self.packing = wanted and self._packing_confines_attention()
        if not wrapped.takes_trees and memory.tree:
            raise ValueError(f"trainer.tree attends by SDPA calls per branch; {model.config._attn_implementation} "
                             "attention takes no tree (use sdpa, or tree: false)")
        self.trees = TreeChoice(memory.tree if wrapped.takes_trees else False, model_shape(model),
                                causal_chains=merges_chains(model, self.engine.device))

    @classmethod
    def from_options(cls, options: TrainerOptions, adapter: TeamAdapter | None = None) -> PolicyEngine:
        """This rank's DeepSpeed engine (every rank builds one; its `ranks` tell the leader from a follower)."""
        return cls(options.model_path, options.deepspeed_dict(), options.loss_config(), options.scale_by_std,
                   options.memory_config(), options.advantages, options.discount, adapter,
                   options.objective_config())

    def _load_reference(self, model_path: str | Path, ds_config: dict[str, Any]) -> torch.nn.Module:
        """The frozen start model for the KL term, in the training dtype; offloaded or sharded as asked."""
        sharded = self.memory.offload_reference or zero_stage(ds_config) == 3
        config = reference_config(ds_config, self.memory.offload_reference) if sharded else ds_config
        model = load_causal_lm(model_path, config, attn_implementation=self.memory.attn_implementation)
        ref = TokenLogprobModel(model, self.memory.logprob_chunk_tokens).requires_grad_(False)
        if not sharded:
            return ref.to(self.engine.device).eval()
        engine, _, _, _ = deepspeed.initialize(model=ref, config=config)
        engine.eval()
        return engine

    @torch.no_grad()
    def _packing_confines_attention(self) -> bool:
        """Packing is only right if the model keeps each sequence's attention to itself when given
        restarting position ids and no mask. Two short sequences tell: packed, their logprobs must match
        those computed apart far more closely than those of the same row attended as one sequence (a
        relative test, so bf16 noise on a large model does not fail it)."""
        pair = [TrajectorySample(f"probe{i}", "", "", tuple(t), (1,) * 5, (0.0,) * 5, (0,) * 5, 0.0)
                for i, t in enumerate(((3, 1, 4, 1, 5), (2, 7, 1, 8, 2)))]
        was_training = self.engine.module.training
        self.engine.module.eval()
        packed = collate(pair, self.pad_id, packed=True).to(self.engine.device)
        apart = self._forward(collate(pair, self.pad_id).to(self.engine.device))[:, 1:].float()
        error = lambda lp: float((lp.view(2, 5)[:, 1:].float() - apart).abs().max())  # noqa: E731
        confined = error(self._forward(packed))
        leaked = error(self.engine(input_ids=packed.tokens, attention_mask=torch.ones_like(packed.tokens),
                                   position_ids=packed.position_ids))
        self.engine.module.train(was_training)
        log.info("packing probe: max |packed - apart| %.2g, attended as one row %.2g", confined, leaked)
        return confined < 0.1 * leaked

    def _forward(self, batch: MicroBatch) -> torch.Tensor:
        return forward_logprobs(self.engine, batch)

    @property
    def module(self) -> torch.nn.Module:
        """The HF model (for `save_pretrained`); its parameters are the engine's."""
        return self.engine.module.causal_lm

    def train_step(self, groups: list[KeptGroup] | None, version: int = -1) -> StepMetrics:
        """One optimizer step over every sample of ``groups``, all ranks together: the leader passes the
        batch (other ranks None) and every rank trains its token-balanced share; the figures are the step's.
        ``version``: the policy version of the weights held now (tokens it generated are the mismatch's own)."""
        shares = self.split_step(groups or [], self.ranks.world, version) if self.ranks.leader else None
        return self.train_share(self.ranks.scatter(shares))

    def split_step(self, groups: list[KeptGroup], ranks: int, version: int = -1) -> list[StepShare]:
        """The batch cut into ``ranks`` shares: balanced by tree tokens with each shared prefix on one rank
        when the step trains as trees (`core.tree_shares`), by flat tokens otherwise
        (`core.micro_batches.split_across_ranks`)."""
        samples = [s for g in groups for s in g.samples]
        weights = [w for g in groups for w in g.weights]
        rewards = torch.tensor([s.reward for s in samples])
        advantages, per_token = step_advantages(groups, self.scale_by_std, self.advantages, self.discount,
                                                self.objective)
        masked = [behaviour_of(s).masked for s in samples]
        normaliser = len(samples) if self.loss_config.ratio == "sequence" else \
            sum(max(s.trained_tokens - s.loss_mask[0] - m, 0) for s, m in zip(samples, masked, strict=True))
        reward_mean, reward_std = reward_stats(rewards.tolist())
        taught = step_teacher_kl(samples) if self.objective.distills else (0.0, 0)
        if self.objective.distills and samples and not taught[1]:
            log.warning("trainer.objective is %s but no token of this step was taught: does its team have a teacher "
                        "(teacher.teams) and are its teacher workers running?", self.objective.objective)
        return [StepShare([samples[i] for i in chosen], [advantages[i] for i in chosen], [weights[i] for i in chosen],
                          normaliser, len(groups), len(samples), reward_mean, reward_std,
                          [per_token[i] for i in chosen] if per_token is not None else None, version, sum(masked),
                          taught)
                for chosen in self.rank_shares(samples, ranks)]

    def rank_shares(self, samples: list[TrajectorySample], ranks: int) -> list[list[int]]:
        """Indices of ``samples`` per rank. On trees a rank's work is its own trie, so the split keeps a group's
        prompt or a session's forks on one rank (no prefix computed on two) and balances tree tokens."""
        if ranks > 1 and self.trees.pays(samples):
            return split_trees_across_ranks([s.tokens for s in samples], ranks).shares
        return split_across_ranks([len(s.tokens) for s in samples], ranks)

    def train_share(self, share: StepShare) -> StepMetrics:
        """This rank's forward/backward passes and the common optimizer step.

        One optimizer step per batch, after all its micro-batches: the weights that compute the logprobs are the
        ones the step starts from, which is what `tis_cap`'s decoupled objective clips against (the proximal
        policy), so no setting recomputes proximal logprobs. Stepping several times on one batch (mini-batches,
        epochs) would need them computed before the first step and passed to `ppo_clip_loss`."""
        start = time.perf_counter()
        samples, weights = share.samples, torch.tensor(share.weights)
        self.engine.train()
        plan = self.plan(samples) if samples else []
        count = self.ranks.max(len(plan))
        totals = [0.0] * 16  # `MicroStep.sums`: loss, tokens, diff, clip, kl, dual clip by tokens, positions, drifts
        maxima = [0.0, 0.0]  # `MicroStep.maxima`
        for n in range(count):
            self.engine.set_gradient_accumulation_boundary(n == count - 1)
            if n < len(plan):
                chosen = plan[n]
                part = self._micro_step([samples[i] for i in chosen], self._advantages_of(share, chosen),
                                        weights[chosen], share.normaliser, share.version)
            else:  # computes two padding positions, which are no part of the step's work
                part = replace(self._micro_step([self._idle_sample()], torch.zeros(1), torch.zeros(1),
                                                share.normaliser, share.version), positions=0, flat_positions=0)
            totals = [total + x for total, x in zip(totals, part.sums(), strict=True)]
            maxima = [max(m, x) for m, x in zip(maxima, part.maxima(), strict=True)]
        self.engine.step()
        self.trees.forget()  # the step's tries, each built once (`TreeChoice.trie`)
        largest_rank = self.ranks.max(int(totals[6]))
        loss, tokens, diff, clip, kl, dual, positions, flat_positions, *drifts = self.ranks.sum(totals)
        own_max, stale_max = self.ranks.maxima(maxima)
        return StepMetrics(
            loss=loss / self.ranks.world, reward_mean=share.reward_mean, reward_std=share.reward_std,
            groups=share.groups, sequences=share.sequences, tokens_trained=int(tokens),
            logprob_abs_diff=diff / max(tokens, 1), clip_fraction=clip / max(tokens, 1), kl_mean=kl / max(tokens, 1),
            step_time_s=time.perf_counter() - start, positions=int(positions), flat_positions=int(flat_positions),
            positions_largest_rank=largest_rank, masked_tokens=share.masked_tokens,
            dual_clip_fraction=dual / max(tokens, 1),
            mismatch=Drift.of(drifts[:4], own_max), stale=Drift.of(drifts[4:], stale_max),
            teacher_kl=share.teacher_kl[0] / max(share.teacher_kl[1], 1), taught_tokens=share.teacher_kl[1],
        )

    @staticmethod
    def _advantages_of(share: StepShare, chosen: list[int]) -> torch.Tensor | list[torch.Tensor]:
        """One micro-batch's advantages: per sample, or per token under a per-turn rule."""
        if share.token_advantages is not None:
            return [torch.tensor(share.token_advantages[i]) for i in chosen]
        return torch.tensor(share.advantages)[chosen]

    def _idle_sample(self) -> TrajectorySample:
        """Two padding tokens, nothing trained: a zero-loss micro-batch for a rank with fewer than the others."""
        return TrajectorySample("idle", "", "", (self.pad_id,) * 2, (0, 0), (0.0, 0.0), (-1, -1), 0.0)

    def plan(self, samples: list[TrajectorySample]) -> list[list[int]]:
        """Indices of ``samples`` per micro-batch (see `core.micro_batches`)."""
        budget = self.memory.max_tokens_per_micro_batch
        per_gpu = None if budget is not None else self.engine.train_micro_batch_size_per_gpu()
        if self.trees.pays(samples):
            return plan_by_prefix(samples, budget, per_gpu, self.packing, self.trees.pays)
        return plan_micro_batches([len(s.tokens) for s in samples], budget, per_gpu, self.packing)

    def _micro_step(self, samples: list[TrajectorySample], advantages: torch.Tensor | list[torch.Tensor],
                    weights: torch.Tensor, normaliser: int, version: int = -1) -> MicroStep:
        flat_positions = sum(len(s.tokens) for s in samples)
        tree = self.trees.batch(samples, self.pad_id)
        batch = (tree or collate(samples, self.pad_id, packed=self.packing)).to(self.engine.device)
        out, logprobs = micro_batch_loss(self.engine, batch, advantages, weights, normaliser, self.loss_config,
                                         self.reference, self.ranks.world)
        self.engine.backward(out.loss, scale_wrt_gas=False)
        flat = batch.flat
        diff = logprob_abs_diff(logprobs, flat.logprobs, flat.loss_mask)
        own, stale = split_by_version(logprobs, flat.logprobs, flat.loss_mask, flat.versions, version)
        positions = tree.tree.size if tree is not None else flat_positions
        return MicroStep(float(out.loss.detach()), out.tokens, diff, out.clip_fraction, out.kl_mean, positions,
                         flat_positions, out.dual_clip_fraction, own, stale)

    def save_checkpoint(self, directory: Path, tag: str, client_state: dict[str, Any]) -> None:
        """This rank's part of `tag`, without touching `latest`: the leader names a checkpoint there only after
        committing its offsets (`checkpoints.name_latest`), so a fenced trainer's is never the one loaded."""
        self.engine.save_checkpoint(str(directory), tag=tag, client_state=client_state, save_latest=False,
                                    exclude_frozen_parameters=self.adapter is not None)  # the base is the model's

    def load_checkpoint(self, directory: Path) -> dict[str, Any] | None:
        """Restores model and optimizer from the latest tag; returns its client state (None if none)."""
        if not (Path(directory) / "latest").exists():
            return None
        path, client_state = self.engine.load_checkpoint(
            str(directory), custom_load_fn=load_adapter_state if self.adapter is not None else None)
        return client_state if path is not None else None

    def export_state(self) -> dict[str, torch.Tensor]:
        """What a version holds, not yet copied: the adapter's tensors under PEFT's keys, else the whole model."""
        if self.adapter is not None:
            return adapter_tensors(self.engine.module, self.adapter.name)
        return self.state_dict_for_export() or self.module.state_dict()

    def state_dict_for_export(self) -> dict[str, torch.Tensor] | None:
        """Under ZeRO-3 the shards gathered into one consolidated state dict in the training dtype (bf16 on
        GPU configs: the 16-bit copy engines load), held on rank 0 only; DeepSpeed's `save_16bit_model`
        does the same gather (`stage3_gather_16bit_weights_on_model_save`), we write it as safetensors.
        None otherwise (the module holds the weights whole, already in the training dtype)."""
        if self.engine.zero_optimization_stage() == 3:
            return self.engine._zero3_consolidated_16bit_state_dict()
        return None
