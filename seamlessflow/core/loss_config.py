"""The clipped objective's knobs, apart from its maths (`losses.py`): the trainer's options hold them, and
reading options must not import torch (a multi-rank trainer's launcher, `up`, the chaos audit read them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LOG_RATIO_BOUND = 20.0  # verl's: e^20 is far beyond any clip, and exp of it is finite in fp32 and bf16


@dataclass(frozen=True)
class PolicyLossConfig:
    """Knobs of the clipped objective: the frozen view of the trainer's options (`TrainerOptions.loss_config`),
    which hold the one set of defaults.

    ``clip_high`` may exceed ``clip_low`` (DAPO's clip-higher). ``kl_coef`` 0 or no reference logprobs
    means KL-free.

    ``tis_cap`` switches on the decoupled objective (AReaL's decoupled PPO) with truncated importance sampling
    (Yao et al. 2025): the ratio pi / pi_prox is taken, and clipped, against the proximal policy (the weights
    before the batch's first optimizer step), and each token is weighted by min(pi_prox / pi_rollout, tis_cap),
    detached, which corrects for the train/inference mismatch and staleness instead of letting the clip silence
    those tokens. The trust region is then around pi_prox: with one optimizer step per batch the ratio is 1 and
    the clip has nothing to do, as in on-policy PPO; with several (mini-batches, epochs) it bounds how far the
    later steps move. Without ``tis_cap`` the rollout policy is PPO's old policy: the ratio is pi / pi_rollout.

    ``ratio`` "sequence" is GSPO (Zheng et al. 2025): one importance ratio per sequence, the geometric mean
    of its tokens' ratios s_i = exp(mean_t(log pi - log pi_old)), clipped as a whole, each sequence's
    tokens weighted 1/|y_i| so a sequence counts once whatever its length (pass the step's sequence count
    as ``normaliser``). GSPO clips far tighter than PPO (the paper: 3e-4 / 4e-4).

    ``dual_clip`` c is dual-clip PPO (Ye et al. 2020; verl's ``clip_ratio_c``): for a negative advantage a
    token's term is min(PPO-clip term, -A * c), so a ratio far above 1 (a token the rollout policy found
    unlikely and the trainer does not) pushes down no harder than a ratio of c, with no gradient. It applies to
    whichever ratio is clipped: the token's, or under GSPO the sequence's s_i. Must exceed 1, as in verl;
    None: off.
    """

    clip_low: float
    clip_high: float
    kl_coef: float
    tis_cap: float | None
    ratio: Literal["token", "sequence"]
    dual_clip: float | None

    def __post_init__(self) -> None:
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ValueError(f"dual_clip {self.dual_clip} must exceed 1: at or below it, it would silence "
                             "negative-advantage tokens the policy has not moved")
