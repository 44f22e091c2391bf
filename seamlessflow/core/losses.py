"""GRPO / PPO maths on plain tensors.

Why it lives here: the trainer, the simulator and the tests need the same numbers, and none of them
should need DeepSpeed or Kafka to get them. Everything is torch only.

Shapes used throughout (B sequences, T tokens, V vocabulary):

- ``tokens``          LongTensor [B, T]
- ``logprobs``        FloatTensor [B, T]; ``logprobs[b, t] = log p(tokens[b, t] | tokens[b, :t])``,
                       0 at t = 0 (the first token has no predecessor)
- ``loss_mask``       [B, T], 1 on generated tokens that are trained, 0 on prompt, tool output, padding
- ``advantages``      [B] (one per sequence, broadcast over tokens) or [B, T]

The behaviour policy is the one that generated the tokens: its logprobs were recorded by the inference
engine and travel with the trajectory, so there is no recomputation pass for it. With truncated importance
sampling the ratio is clipped against the proximal policy instead (see `PolicyLossConfig`), whose logprobs the
caller recomputes only when a batch gets several optimizer steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from seamlessflow.core.loss_config import LOG_RATIO_BOUND, PolicyLossConfig


def token_logprobs(
    states: torch.Tensor,
    tokens: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor] | None = None,
    chunk_tokens: int | None = None,
    temperatures: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token logprobs [B, T] of ``tokens`` [B, T]; 0 at t = 0.

    ``temperatures`` [B, T]: the temperature token t was sampled at (its logits are divided by it before the
    log-softmax), so the logprob is of the distribution the engine drew it from (`core.sampling`); None: 1.

    ``states`` are causal-LM logits [B, T, V] when ``head`` is None, else the last hidden states [B, T, H]
    that ``head`` (the LM head, a module so that ZeRO-3 can gather its weight) turns into logits.

    Why chunks: with a 152k vocabulary the fp32 logits of one token take ~0.6 MB, and log-softmax plus its
    gradient triple that, so a 16k-token micro-batch would need ~30 GB for this one line. With
    ``chunk_tokens`` set, positions go through head, fp32 log-softmax and the gather ``chunk_tokens`` at
    a time; under autograd each chunk is wrapped in `torch.utils.checkpoint`, so the forward keeps only
    the chunk's inputs and the backward rebuilds one chunk's logits at a time. No [B*T, V] tensor exists.
    """
    batch, length = tokens.shape
    flat = states[:, :-1].reshape(-1, states.shape[-1])
    tempered = None if temperatures is None else temperatures[:, 1:].reshape(-1)
    picked = pair_logprobs(flat, tokens[:, 1:].reshape(-1), head, chunk_tokens, tempered)
    return F.pad(picked.view(batch, length - 1), (1, 0))


def pair_logprobs(
    states: torch.Tensor,
    targets: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor] | None = None,
    chunk_tokens: int | None = None,
    temperatures: torch.Tensor | None = None,
) -> torch.Tensor:
    """Logprobs [E] of ``targets`` [E] under the next-token distribution of each of ``states`` [E, V or H]
    (see `token_logprobs` for ``head``, the chunks and ``temperatures`` [E]): the consecutive pairs of a
    sequence, or the (parent, child) pairs of a token tree (`core.token_tree.edges`)."""
    step = chunk_tokens or max(len(targets), 1)
    keep_graph = torch.is_grad_enabled() and (states.requires_grad or _has_trainable_parameters(head))
    pieces = []
    for begin in range(0, len(targets), step):
        chunk = None if temperatures is None else temperatures[begin:begin + step]
        args = (states[begin:begin + step], targets[begin:begin + step], head, chunk)
        if keep_graph and chunk_tokens is not None:
            pieces.append(checkpoint(_picked_logprobs, *args, use_reentrant=False))
        else:
            pieces.append(_picked_logprobs(*args))
    return torch.cat(pieces) if pieces else states.new_zeros(0, dtype=torch.float32)


def _picked_logprobs(states: torch.Tensor, targets: torch.Tensor,
                     head: Callable[[torch.Tensor], torch.Tensor] | None,
                     temperatures: torch.Tensor | None = None) -> torch.Tensor:
    logits = (states if head is None else head(states)).float()
    if temperatures is not None:
        logits = logits / temperatures.to(logits.device, torch.float32)[:, None]
    return logits.gather(-1, targets[:, None]).squeeze(-1) - logits.logsumexp(-1)


def _has_trainable_parameters(head: Callable[[torch.Tensor], torch.Tensor] | None) -> bool:
    return isinstance(head, torch.nn.Module) and any(p.requires_grad for p in head.parameters())


def group_relative_advantages(
    rewards: torch.Tensor,
    group_index: torch.Tensor,
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GRPO advantages [B]: reward minus its group's mean, optionally divided by the group's std.

    ``group_index`` [B] holds 0..G-1. The std is the unbiased sample std (as in verl and TRL); a group of
    one has std 0. ``scale_by_std=False`` is the Dr. GRPO variant, which avoids favouring groups whose
    rewards barely differ.
    """
    rewards = rewards.float()
    n_groups = int(group_index.max()) + 1
    counts = rewards.new_zeros(n_groups).index_add_(0, group_index, torch.ones_like(rewards))
    means = rewards.new_zeros(n_groups).index_add_(0, group_index, rewards) / counts
    centred = rewards - means[group_index]
    if not scale_by_std:
        return centred
    squares = rewards.new_zeros(n_groups).index_add_(0, group_index, centred**2)
    stds = (squares / (counts - 1).clamp(min=1)).sqrt()
    return centred / (stds[group_index] + eps)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1; 0 when the mask is empty."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1)


def logprob_abs_diff(train: torch.Tensor, rollout: torch.Tensor, loss_mask: torch.Tensor) -> float:
    """Mean |train - rollout| logprob over trained tokens: how far the trainer's numbers drift from
    the inference engine's on the very same tokens (precision, kernels, staleness)."""
    return float(masked_mean((train.detach() - rollout).abs(), loss_mask))


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token KL(pi || ref) estimate k3 = exp(ref - lp) - (ref - lp) - 1: unbiased and >= 0."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1


@dataclass
class PolicyLoss:
    """The loss to back-propagate and what it was made of (plain floats for logging)."""

    loss: torch.Tensor
    tokens: int
    clip_fraction: float
    ratio_mean: float
    kl_mean: float
    is_weight_mean: float
    dual_clip_fraction: float = 0.0  # trained tokens whose term the dual clip bounded (`PolicyLossConfig.dual_clip`)


def ppo_clip_loss(
    logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    config: PolicyLossConfig,
    ref_logprobs: torch.Tensor | None = None,
    sample_weights: torch.Tensor | None = None,
    normaliser: float | None = None,
    sequence_index: torch.Tensor | None = None,
    proximal_logprobs: torch.Tensor | None = None,
) -> PolicyLoss:
    """Token-level PPO-clip loss: sum over masked tokens divided by ``normaliser``.

    ``normaliser`` defaults to the number of masked tokens here; pass the count of the whole optimizer
    step when a step is split into micro-batches, so every token weighs the same (DAPO's token-level
    aggregation). ``sample_weights`` [B] scale whole sequences (down-weighted stale trajectories); [B, T]
    gives each position its sequence's weight when sequences are packed into one row. With
    ``config.ratio`` "sequence" (GSPO), ``sequence_index`` [B, T] names each position's sequence (-1 on
    padding; default: one sequence per row) and ``normaliser`` defaults to the number of sequences.

    ``proximal_logprobs`` [B, T], only with ``config.tis_cap``: the proximal policy's logprobs, computed without
    grad by the weights the batch's first optimizer step starts from. None: ``logprobs.detach()``, exact only
    when those weights compute ``logprobs``, i.e. the batch gets one optimizer step (the trainer's case,
    `trainer.policy_engine.PolicyEngine.train_share`); a caller that steps several times on a batch passes them.

    Every log-ratio is clamped to +-20 before its exp (`_log_ratio`), so loss and gradient stay finite whatever
    logprobs the engine reported. ``config.dual_clip`` bounds a negative advantage's term at -A * c after PPO's
    clip and before the TIS, staleness and 1/|y_i| weights, on the token ratio or GSPO's sequence ratio alike
    (verl has it for the token ratio only; a sequence with ratio above c and A < 0 is as far off-policy).
    ``dual_clip_fraction`` is the share of trained tokens where that bound was taken.
    """
    mask = loss_mask.to(logprobs.dtype)
    adv = advantages[:, None] if advantages.dim() == 1 else advantages
    proximal = _proximal(logprobs, behaviour_logprobs, proximal_logprobs, config)
    if config.ratio == "sequence":
        ratio, is_weight, token_weight, sequences = _sequence_ratio(logprobs, behaviour_logprobs, proximal, mask,
                                                                    config.tis_cap, sequence_index)
        normaliser = sequences if normaliser is None else normaliser
    else:
        ratio = torch.exp(_log_ratio(logprobs, proximal))
        is_weight = _behaviour_weight(_log_ratio(proximal, behaviour_logprobs), config.tis_cap)
        token_weight = torch.ones_like(mask)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - config.clip_low, 1 + config.clip_high)
    ppo, dual_clipped = _dual_clip(torch.maximum(unclipped, clipped), adv, config.dual_clip)
    per_token = ppo * is_weight
    kl = torch.zeros_like(per_token)
    if ref_logprobs is not None and config.kl_coef > 0:
        kl = k3_kl(logprobs, ref_logprobs)
        per_token = per_token + config.kl_coef * kl
    if sample_weights is not None:
        per_token = per_token * (sample_weights[:, None] if sample_weights.dim() == 1 else sample_weights)
    per_token = per_token * token_weight
    tokens = int(mask.sum())
    denominator = normaliser if normaliser is not None else max(tokens, 1)
    return PolicyLoss(
        loss=(per_token * mask).sum() / denominator,
        tokens=tokens,
        clip_fraction=float(masked_mean((clipped > unclipped).float(), mask)),
        ratio_mean=float(masked_mean(ratio.detach(), mask)),
        kl_mean=float(masked_mean(kl.detach(), mask)),
        is_weight_mean=float(masked_mean(is_weight, mask)),
        dual_clip_fraction=float(masked_mean(dual_clipped.float(), mask)),
    )


def _proximal(logprobs: torch.Tensor, behaviour: torch.Tensor, given: torch.Tensor | None,
              config: PolicyLossConfig) -> torch.Tensor:
    """The logprobs the ratio is taken against: the rollout policy's without TIS (it is then PPO's old policy),
    the proximal policy's with it (``given``, else the current weights' when they are the proximal ones)."""
    if config.tis_cap is None:
        if given is not None:
            raise ValueError("proximal_logprobs are the decoupled objective's (tis_cap); without it the ratio is "
                             "taken against the behaviour logprobs")
        return behaviour
    return (logprobs if given is None else given).detach()


def _behaviour_weight(log_weight: torch.Tensor, tis_cap: float | None) -> torch.Tensor:
    """min(pi_prox / pi_rollout, tis_cap) from its log (no gradient: the proximal logprobs are detached);
    1 without TIS."""
    if tis_cap is None:
        return torch.ones_like(log_weight)
    return torch.exp(log_weight).clamp(max=tis_cap)




def _log_ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """log(numerator / denominator) clamped to +-LOG_RATIO_BOUND before any exp: a token the engine reported at
    -9999 (vLLM's -inf) would otherwise give an infinite ratio, and autograd's 0 * inf a NaN gradient even
    where the clip does not pick that term. A clamped token has no gradient through its ratio."""
    return (numerator - denominator).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def _dual_clip(ppo: torch.Tensor, adv: torch.Tensor, bound: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Dual-clip PPO (Ye et al. 2020, verl's ``compute_policy_loss`` with ``clip_ratio_c``): where A < 0 the
    term is min(PPO-clip term, -A * bound), since PPO's clip leaves a negative advantage's ratio unbounded above.
    Returns the terms and where the bound was taken (all False when ``bound`` is None)."""
    if bound is None:
        return ppo, torch.zeros_like(ppo, dtype=torch.bool)
    capped = -adv * bound
    taken = (adv < 0) & (ppo > capped)
    return torch.where(adv < 0, torch.minimum(ppo, capped), ppo), taken


def _sequence_ratio(logprobs: torch.Tensor, behaviour: torch.Tensor, proximal: torch.Tensor, mask: torch.Tensor,
                    tis_cap: float | None,
                    sequence_index: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """GSPO's per-sequence ratio spread over its tokens, in the paper's GSPO-token form: the value is
    s_i = exp(mean over the sequence's trained tokens of (log pi - log pi_old)), and the gradient of a token's
    term is s_i * grad log pi(y_t), so with 1/|y_i| per token a sequence's terms add up to exactly GSPO's
    sequence term (and per-token advantages, as per-turn rewards give, are well defined). With TIS the ratio is
    taken against the proximal policy (pi_old is pi_prox) and the train/inference mismatch becomes a capped
    per-sequence weight, the geometric mean of pi_prox / pi_rollout over its tokens. Each token's log-ratio is
    clamped (`_log_ratio`) before the mean, so a -9999 token does not make s_i infinite, nor a -inf one on a
    masked position the sum NaN (inf * 0).
    Returns (ratio, importance weight, per-token weight 1/|y_i|, sequence count)."""
    if sequence_index is None:  # one sequence per row
        sequence_index = torch.arange(logprobs.shape[0], device=logprobs.device)[:, None].expand_as(logprobs)
    ids = sequence_index.clamp(min=0).reshape(-1)
    count = int(ids.max()) + 1 if ids.numel() else 0
    lengths = mask.new_zeros(count).index_add_(0, ids, mask.reshape(-1))

    def sequence_mean(values: torch.Tensor) -> torch.Tensor:
        sums = values.new_zeros(count).index_add_(0, ids, (values * mask).reshape(-1))
        return (sums / lengths.clamp(min=1))[ids].view_as(values)

    log_s = sequence_mean(_log_ratio(logprobs.detach(), proximal))
    ratio = torch.exp(log_s + logprobs - logprobs.detach())
    is_weight = _behaviour_weight(sequence_mean(_log_ratio(proximal, behaviour)), tis_cap)
    token_weight = 1.0 / lengths.clamp(min=1)[ids].view_as(logprobs)
    return ratio, is_weight, token_weight, int((lengths > 0).sum())


def reward_stats(rewards: list[float]) -> tuple[float, float]:
    """Mean and population std of a step's rewards, for logging (0, 0 when empty)."""
    if not rewards:
        return 0.0, 0.0
    values = torch.tensor(rewards, dtype=torch.float64)
    return float(values.mean()), float(values.std(unbiased=False))
