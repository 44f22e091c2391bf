"""The distillation advantage and the trainer's loss on it, against a reference computed by hand.

Reference (Tinker cookbook's on-policy distillation, importance-sampled): with A_t = coef * (T_t - B_t) on trained
tokens, the loss is -(1/N) sum_t exp(lp_t - B_t) * A_t over the N trained tokens (ratios inside the clip range),
and its gradient -(1/N) sum_t exp(lp_t - B_t) * A_t * grad lp_t."""

import math

import pytest
import torch

from seamlessflow.core.distillation import (
    LOG_RATIO_BOUND,
    Objective,
    ObjectiveConfig,
    distill_advantages,
    objective_advantages,
)
from seamlessflow.core.loss_config import PolicyLossConfig
from seamlessflow.core.losses import ppo_clip_loss

CONFIG = PolicyLossConfig(clip_low=0.2, clip_high=0.2, kl_coef=0.0, tis_cap=None, ratio="token", dual_clip=3.0)
MASK = [0, 1, 1, 0, 1]
BEHAVIOUR = [0.0, -1.0, -0.5, 0.0, -2.0]
TEACHER = [0.0, -0.25, -1.5, 0.0, float("nan")]


def test_the_advantage_is_teacher_minus_student_on_trained_tokens_with_a_teacher_logprob():
    assert distill_advantages(MASK, BEHAVIOUR, TEACHER, coef=2.0) == [0.0, 1.5, -2.0, 0.0, 0.0]
    assert distill_advantages(MASK, BEHAVIOUR, []) == [0.0] * 5  # not taught: no signal
    assert distill_advantages([1], [-1.0], [-9999.0]) == [-LOG_RATIO_BOUND]  # an impossible token, bounded


def test_objectives_take_the_rl_advantage_the_distillation_one_or_their_sum():
    distilled = [[0.0, 1.0, -1.0]]
    rl = [0.5]
    per_turn = [[0.25, 0.5, 0.75]]
    assert objective_advantages(ObjectiveConfig(Objective.RL), rl, None, distilled, [3]) == [[0.5] * 3]
    assert objective_advantages(ObjectiveConfig(Objective.DISTILL), rl, None, distilled, [3]) == distilled
    assert objective_advantages(ObjectiveConfig(Objective.RL_DISTILL), rl, None, distilled, [3]) == [[0.5, 1.5, -0.5]]
    assert objective_advantages(ObjectiveConfig(Objective.RL_DISTILL), rl, per_turn, distilled, [3]) == [
        [0.25, 1.5, -0.25]]


def reference_loss(logprobs, behaviour, teacher, mask, coef):
    terms = [math.exp(lp - b) * coef * (t - b)
             for lp, b, t, m in zip(logprobs, behaviour, teacher, mask, strict=True) if m]
    return -sum(terms) / len(terms)


@pytest.mark.parametrize("coef", [1.0, 0.5])
def test_the_distillation_loss_and_its_gradient_equal_the_reference(coef):
    behaviour = [0.0, -1.0, -0.5, 0.0, -2.0, -0.75]
    teacher = [0.0, -0.25, -1.5, 0.0, -1.0, -0.5]
    mask = [0, 1, 1, 0, 1, 1]
    current = torch.tensor([[0.0, -0.95, -0.55, 0.0, -1.9, -0.8]], requires_grad=True)  # inside the clip
    advantages = torch.tensor([distill_advantages(mask, behaviour, teacher, coef)])
    out = ppo_clip_loss(current, torch.tensor([behaviour]), advantages, torch.tensor([mask]), CONFIG)
    out.loss.backward()
    values = current.detach()[0].tolist()
    assert out.loss.item() == pytest.approx(reference_loss(values, behaviour, teacher, mask, coef), rel=1e-6)
    expected = [-math.exp(lp - b) * coef * (t - b) / sum(mask) if m else 0.0
                for lp, b, t, m in zip(values, behaviour, teacher, mask, strict=True)]
    assert current.grad[0].tolist() == pytest.approx(expected, rel=1e-5)
