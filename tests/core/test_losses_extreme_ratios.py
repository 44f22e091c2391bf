"""The PPO loss under ratios far outside the trust region: the log-ratio clamp and dual-clip PPO."""

import pytest
import torch
from pydantic import ValidationError

from seamlessflow.core.losses import ppo_clip_loss
from seamlessflow.testing.core_configs import loss_config
from seamlessflow.trainer.options import TrainerOptions

VLLM_MINUS_INF = -9999.0  # what the engine reports for a token it gave probability 0


def _probe(advantage: float, behaviour: float = VLLM_MINUS_INF, **config):
    """One trained token: the trainer's logprob -5 against the engine's ``behaviour``; returns (loss, grad)."""
    logprobs = torch.tensor([[0.0, -5.0]], requires_grad=True)
    out = ppo_clip_loss(logprobs, torch.tensor([[0.0, behaviour]]), torch.tensor([advantage]),
                        torch.tensor([[0, 1]]), loss_config(**config))
    (grad,) = torch.autograd.grad(out.loss, logprobs)
    return out, grad


@pytest.mark.parametrize("ratio", ["token", "sequence"])
@pytest.mark.parametrize("tis_cap", [None, 2.0])
@pytest.mark.parametrize("dual_clip", [3.0, None])
@pytest.mark.parametrize("advantage", [-1.0, 1.0])
@pytest.mark.parametrize("behaviour", [VLLM_MINUS_INF, float("-inf")])
def test_an_impossible_behaviour_logprob_gives_finite_loss_and_gradient(ratio, tis_cap, dual_clip, advantage,
                                                                        behaviour):
    out, grad = _probe(advantage, behaviour, ratio=ratio, tis_cap=tis_cap, dual_clip=dual_clip)
    assert torch.isfinite(out.loss) and torch.isfinite(grad).all()
    assert out.ratio_mean < float("inf") and out.is_weight_mean < float("inf")


def test_the_probe_with_a_negative_advantage_is_bounded_by_the_dual_clip():
    out, grad = _probe(-1.0)  # ratio e^9994, clamped to e^20, then min(e^20, -A * 3)
    assert out.loss.item() == pytest.approx(3.0)
    assert grad.abs().sum().item() == 0.0
    assert out.dual_clip_fraction == 1.0


def test_an_impossible_logprob_on_an_untrained_position_changes_nothing():
    logprobs = torch.tensor([[-1.0, -0.5]], requires_grad=True)
    old = torch.tensor([[float("-inf"), -0.4]])  # the prompt position carries -inf
    for ratio in ("token", "sequence"):
        out = ppo_clip_loss(logprobs, old, torch.tensor([1.0]), torch.tensor([[0, 1]]), loss_config(ratio=ratio))
        (grad,) = torch.autograd.grad(out.loss, logprobs)
        assert out.loss.item() == pytest.approx(-torch.exp(torch.tensor(-0.1)).item())
        assert grad[0, 0].item() == 0.0 and torch.isfinite(grad).all()


def _verl_dual_clip(logprobs, old, advantages, mask, clip_low, clip_high, clip_ratio_c):
    """verl's `compute_policy_loss` (token-mean aggregation) written out: returns (loss, clipfrac, clipfrac_lower)."""
    ratio = torch.exp((logprobs - old).clamp(-20.0, 20.0))
    losses1 = -advantages * ratio
    losses2 = -advantages * ratio.clamp(1 - clip_low, 1 + clip_high)
    clip_losses1 = torch.maximum(losses1, losses2)
    losses3 = -advantages * clip_ratio_c
    clip_losses2 = torch.min(losses3, clip_losses1)
    losses = torch.where(advantages < 0, clip_losses2, clip_losses1)

    def mean(values):
        return (values * mask).sum() / mask.sum()

    lower = (clip_losses1 > losses3).float() * (advantages < 0).float()
    return mean(losses), mean((losses2 > losses1).float()), mean(lower)


def _random_batch(seed: int):
    generator = torch.Generator().manual_seed(seed)
    logprobs = (-1.0 + 0.1 * torch.randn(4, 6, generator=generator)).requires_grad_()
    old = logprobs.detach() + 1.5 * torch.randn(4, 6, generator=generator)  # ratios from about e^-4 to e^4
    advantages = torch.randn(4, 6, generator=generator)
    mask = (torch.rand(4, 6, generator=generator) < 0.8).float()
    return logprobs, old, advantages, mask


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dual_clip_equals_verls_formula_value_gradient_and_fractions(seed):
    logprobs, old, advantages, mask = _random_batch(seed)
    ours = ppo_clip_loss(logprobs, old, advantages, mask, loss_config(clip_low=0.2, clip_high=0.28, dual_clip=3.0))
    (grad_ours,) = torch.autograd.grad(ours.loss, logprobs)
    verl, clipfrac, clipfrac_lower = _verl_dual_clip(logprobs, old, advantages, mask, 0.2, 0.28, 3.0)
    (grad_verl,) = torch.autograd.grad(verl, logprobs)
    assert torch.allclose(ours.loss, verl, atol=1e-6) and torch.allclose(grad_ours, grad_verl, atol=1e-6)
    assert ours.clip_fraction == pytest.approx(clipfrac.item())
    assert ours.dual_clip_fraction == pytest.approx(clipfrac_lower.item())
    assert ours.dual_clip_fraction > 0  # the batch exercises the bound


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_dual_clip_a_finite_ratio_gives_plain_ppo(seed):
    logprobs, old, advantages, mask = _random_batch(seed)
    ours = ppo_clip_loss(logprobs, old, advantages, mask, loss_config(dual_clip=None))
    ratio = torch.exp(logprobs - old)  # the formula before the clamp and the dual clip
    plain = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(0.8, 1.2))
    expected = (plain * mask).sum() / mask.sum()
    assert torch.allclose(ours.loss, expected, atol=1e-6)
    assert torch.allclose(*(torch.autograd.grad(loss, logprobs)[0] for loss in (ours.loss, expected)), atol=1e-6)
    assert ours.dual_clip_fraction == 0.0


def test_dual_clip_bounds_a_negative_advantages_sequence_ratio_under_gspo():
    # one sequence of two tokens whose ratios are e^1 and e^1.4: s = e^1.2 = 3.32 > 3; with A = -1 the term is 3
    logprobs = torch.tensor([[-1.0, -0.6]], requires_grad=True)
    old = torch.tensor([[-2.0, -2.0]])
    mask, config = torch.ones(1, 2), loss_config(ratio="sequence", clip_low=0.0003, clip_high=0.0004)
    out = ppo_clip_loss(logprobs, old, torch.tensor([-1.0]), mask, config)
    (grad,) = torch.autograd.grad(out.loss, logprobs)
    assert out.loss.item() == pytest.approx(3.0) and grad.abs().sum().item() == 0.0
    assert out.dual_clip_fraction == 1.0
    off = ppo_clip_loss(logprobs, old, torch.tensor([-1.0]), mask, loss_config(ratio="sequence", dual_clip=None))
    assert off.loss.item() == pytest.approx(torch.exp(torch.tensor(1.2)).item())  # GSPO alone: unbounded


def test_dual_clip_is_on_by_default_and_must_exceed_one():
    assert TrainerOptions().loss_config().dual_clip == 3.0
    assert TrainerOptions(dual_clip=None).loss_config().dual_clip is None
    with pytest.raises(ValidationError):
        TrainerOptions(dual_clip=1.0)
    with pytest.raises(ValueError, match="dual_clip"):
        loss_config(dual_clip=0.5)
