"""On-policy distillation: what the trainer's objective makes of a teacher's per-token logprobs.

The student samples; a teacher scores each sampled token (`Trajectory.teacher_logprobs`, `seamlessflow.teacher`);
the learning signal of token t is the negative reverse-KL estimate

    A_distill[t] = coef * (log pi_teacher(y_t | y_<t) - log pi_student(y_t | y_<t))

(Agarwal et al. 2024, "On-policy distillation"; the Tinker cookbook's `on_policy_distillation`, whose advantage
is `-kl_penalty_coef * (sampler_logprob - teacher_logprob)`). It goes into the same clipped importance-weighted
loss as an RL advantage (`core.losses.ppo_clip_loss`), so the RL path's rules hold unchanged: pi_student is the
recorded behaviour logprob (`core.behaviour`: a token without a usable one is masked out), the ratio pi / pi_old
and TIS correct for the train/inference mismatch and staleness, and stale samples keep their weights.

Objectives (`trainer.objective`): ``rl`` (the RL advantage alone, as before), ``distill`` (the distillation
advantage alone: every group carries signal, even of one trajectory or of equal rewards), ``rl+distill`` (their
sum, the RL advantage broadcast over each token). A generated token the teacher gave no finite logprob gets no
distillation advantage (0); each difference is clamped to +-LOG_RATIO_BOUND like any log-ratio of the loss, so a
token the teacher deems impossible (vLLM's -9999) cannot dominate a step. Pure Python: the trainer, the tests and
any reference computation read the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from seamlessflow.core.loss_config import LOG_RATIO_BOUND


class Objective(StrEnum):
    RL = "rl"
    DISTILL = "distill"
    RL_DISTILL = "rl+distill"


@dataclass(frozen=True)
class ObjectiveConfig:
    """The frozen view of the trainer's `objective` and `distill_coef`."""

    objective: Objective = Objective.RL
    distill_coef: float = 1.0

    @property
    def distills(self) -> bool:
        return self.objective is not Objective.RL

    @property
    def uses_rewards(self) -> bool:
        return self.objective is not Objective.DISTILL


def distill_advantages(loss_mask: Sequence[int], behaviour: Sequence[float], teacher: Sequence[float],
                       coef: float = 1.0) -> list[float]:
    """Per token: coef * (teacher - behaviour) where trained and the teacher's logprob is finite, else 0.
    An untaught sequence (no teacher logprobs) gets 0 everywhere."""
    if not teacher:
        return [0.0] * len(loss_mask)
    if not len(loss_mask) == len(behaviour) == len(teacher):
        raise ValueError(f"per-token lengths differ: mask {len(loss_mask)}, behaviour {len(behaviour)}, "
                         f"teacher {len(teacher)}")
    return [coef * _clamped(t - b) if m and math.isfinite(t) and math.isfinite(b) else 0.0
            for m, b, t in zip(loss_mask, behaviour, teacher, strict=True)]


def reverse_kl(loss_mask: Sequence[int], behaviour: Sequence[float], teacher: Sequence[float]) -> tuple[float, int]:
    """(sum over taught trained tokens of log pi_student - log pi_teacher, their count): the per-token reverse KL
    estimate a step reports as `teacher_kl` (the Tinker cookbook's figure), falling as the student learns."""
    if not teacher:
        return 0.0, 0
    pairs = [(b, t) for m, b, t in zip(loss_mask, behaviour, teacher, strict=True)
             if m and math.isfinite(t) and math.isfinite(b)]
    return sum(b - t for b, t in pairs), len(pairs)


def _clamped(delta: float) -> float:
    return max(-LOG_RATIO_BOUND, min(LOG_RATIO_BOUND, delta))


def objective_advantages(config: ObjectiveConfig, rl_per_sample: Sequence[float],
                         rl_per_token: Sequence[Sequence[float]] | None, distilled: Sequence[Sequence[float]],
                         lengths: Sequence[int]) -> list[list[float]]:
    """One advantage per token of each sample under ``config``: the RL advantage (per token where a per-turn rule
    gave it, else the sample's broadcast), the distillation advantage, or their sum."""
    out = []
    for i, length in enumerate(lengths):
        rl = list(rl_per_token[i]) if rl_per_token is not None else [rl_per_sample[i]] * length
        if config.objective is Objective.RL:
            out.append(rl)
        elif config.objective is Objective.DISTILL:
            out.append(list(distilled[i]))
        else:
            out.append([r + d for r, d in zip(rl, distilled[i], strict=True)])
    return out
