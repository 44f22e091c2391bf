"""Loss maths on hand-computed tensors."""

import math

import pytest
import torch

from seamlessflow.core.losses import (
    group_relative_advantages,
    k3_kl,
    logprob_abs_diff,
    ppo_clip_loss,
    reward_stats,
    token_logprobs,
)
from seamlessflow.testing.core_configs import loss_config


def test_advantages_with_std_normalisation():
    rewards = torch.tensor([1.0, 0.0, 3.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1])
    adv = group_relative_advantages(rewards, groups, scale_by_std=True, eps=0.0)
    # group 0: mean 0.5, unbiased std sqrt(0.5); group 1: mean 4, std sqrt(2)
    expected = torch.tensor([0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5), -1 / math.sqrt(2), 1 / math.sqrt(2)])
    assert torch.allclose(adv, expected)


def test_advantages_without_std_normalisation_are_centred_rewards():
    adv = group_relative_advantages(torch.tensor([1.0, 0.0, 3.0, 5.0]), torch.tensor([0, 0, 1, 1]), scale_by_std=False)
    assert adv.tolist() == [0.5, -0.5, -1.0, 1.0]


def test_equal_rewards_give_zero_advantage():
    adv = group_relative_advantages(torch.tensor([2.0, 2.0, 2.0]), torch.tensor([0, 0, 0]))
    assert adv.tolist() == [0.0, 0.0, 0.0]


def test_token_logprobs_align_with_next_token():
    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 2] = math.log(3.0)  # position 0 predicts token 1 -> p(2) = 3/6
    tokens = torch.tensor([[1, 2, 3]])
    lp = token_logprobs(logits, tokens)
    assert lp[0, 0] == 0.0
    assert lp[0, 1].item() == pytest.approx(math.log(0.5))
    assert lp[0, 2].item() == pytest.approx(math.log(0.25))


def _saved_numel_peak(fn):
    """Largest tensor autograd keeps for the backward while ``fn`` runs (outside checkpointed chunks)."""
    peak = [0]

    def pack(t):
        peak[0] = max(peak[0], t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, peak[0]


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_chunked_token_logprobs_equal_the_full_computation_values_and_gradients(chunk):
    torch.manual_seed(0)
    batch, length, hidden, vocab = 2, 9, 16, 50
    head = torch.nn.Linear(hidden, vocab, bias=False)
    states = torch.randn(batch, length, hidden, requires_grad=True)
    tokens = torch.randint(0, vocab, (batch, length))
    weights = torch.randn(batch, length)  # an arbitrary downstream loss

    full, full_peak = _saved_numel_peak(lambda: token_logprobs(head(states), tokens))
    (full * weights).sum().backward()
    full_grads = (states.grad.clone(), head.weight.grad.clone())
    states.grad, head.weight.grad = None, None

    chunked, chunked_peak = _saved_numel_peak(lambda: token_logprobs(states, tokens, head=head, chunk_tokens=chunk))
    (chunked * weights).sum().backward()
    # fp32 throughout: the same numbers up to summation order
    assert torch.allclose(chunked, full, atol=1e-5, rtol=0)
    assert torch.allclose(states.grad, full_grads[0], atol=1e-5, rtol=0)
    assert torch.allclose(head.weight.grad, full_grads[1], atol=1e-5, rtol=0)
    assert chunked[:, 0].eq(0).all()
    assert full_peak >= batch * (length - 1) * vocab  # the full path keeps [tokens, vocab] for its backward
    assert chunked_peak < batch * (length - 1) * vocab  # the chunked one never keeps it


def test_chunked_token_logprobs_without_grad_and_on_logits():
    torch.manual_seed(1)
    logits = torch.randn(3, 7, 11).bfloat16()
    tokens = torch.randint(0, 11, (3, 7))
    with torch.no_grad():
        assert torch.allclose(token_logprobs(logits, tokens, chunk_tokens=4), token_logprobs(logits, tokens))


DEFAULT_CONFIG = loss_config()


def _one_token_loss(ratio: float, advantage: float, config=DEFAULT_CONFIG):
    logprob = torch.tensor([[0.0, math.log(ratio)]], requires_grad=True)
    out = ppo_clip_loss(logprob, torch.zeros(1, 2), torch.tensor([advantage]), torch.tensor([[0, 1]]), config)
    out.loss.backward()
    return out, logprob.grad[0, 1].item()


def test_clip_upper_side_positive_advantage_stops_gradient():
    out, grad = _one_token_loss(1.5, 1.0)
    assert out.loss.item() == pytest.approx(-1.2)
    assert grad == 0.0
    assert out.clip_fraction == 1.0


def test_clip_lower_side_negative_advantage_stops_gradient():
    out, grad = _one_token_loss(0.5, -1.0)
    assert out.loss.item() == pytest.approx(0.8)
    assert grad == 0.0


def test_unclipped_sides_keep_gradient():
    out, grad = _one_token_loss(0.5, 1.0)  # ratio below range but advantage positive: pessimistic term is unclipped
    assert out.loss.item() == pytest.approx(-0.5)
    assert grad == pytest.approx(-0.5)  # d(-A * exp(lp))/dlp = -A * ratio
    out, grad = _one_token_loss(1.5, -1.0)
    assert out.loss.item() == pytest.approx(1.5)
    assert grad == pytest.approx(1.5)
    assert out.clip_fraction == 0.0


def test_clip_higher_asymmetric_bounds():
    out, _ = _one_token_loss(1.25, 1.0, loss_config(clip_low=0.2, clip_high=0.28))
    assert out.loss.item() == pytest.approx(-1.25)
    out, _ = _one_token_loss(1.5, 1.0, loss_config(clip_low=0.2, clip_high=0.28))
    assert out.loss.item() == pytest.approx(-1.28)


def test_loss_counts_exactly_the_masked_tokens():
    logprobs = torch.zeros(2, 3, requires_grad=True)  # ratio 1 everywhere: per-token loss = -A
    mask = torch.tensor([[0, 1, 1], [0, 0, 1]])
    out = ppo_clip_loss(logprobs, torch.zeros(2, 3), torch.tensor([1.0, -2.0]), mask, DEFAULT_CONFIG)
    assert out.tokens == 3
    assert out.loss.item() == pytest.approx((-1 - 1 + 2) / 3)
    out.loss.backward()
    assert (logprobs.grad[mask == 0] == 0).all()
    assert logprobs.grad[0, 1].item() == pytest.approx(-1 / 3)
    assert logprobs.grad[1, 2].item() == pytest.approx(2 / 3)


def test_normaliser_and_sample_weights():
    logprobs = torch.zeros(2, 2)
    out = ppo_clip_loss(
        logprobs, torch.zeros(2, 2), torch.tensor([1.0, 1.0]), torch.tensor([[0, 1], [0, 1]]), DEFAULT_CONFIG,
        sample_weights=torch.tensor([1.0, 0.5]), normaliser=10,
    )
    assert out.loss.item() == pytest.approx(-(1 + 0.5) / 10)


def test_truncated_importance_sampling_weights_tokens_and_caps():
    # train logprob 0, rollout logprob log(0.5) -> pi_train/pi_rollout = 2, capped at 1.5
    logprobs = torch.zeros(1, 3, requires_grad=True)
    rollout = torch.tensor([[0.0, math.log(0.5), math.log(2.0)]])
    out = ppo_clip_loss(
        logprobs, rollout, torch.tensor([1.0]), torch.tensor([[0, 1, 1]]), loss_config(tis_cap=1.5)
    )
    out.loss.backward()
    assert out.is_weight_mean == pytest.approx((1.5 + 0.5) / 2)
    assert logprobs.grad[0, 1].item() == pytest.approx(-1.5 / 2)
    assert logprobs.grad[0, 2].item() == pytest.approx(-0.5 / 2)


def logs(*rows):
    """Logprobs [B, T] from probabilities, one list per row."""
    return torch.tensor([[math.log(p) for p in row] for row in rows])


# two tokens, advantage +1, tis_cap 1.5. Token 1: pi 0.6 against pi_prox 0.4 (ratio 1.5, clipped to 1.2),
# pi_rollout 0.5 (weight 0.8). Token 2: pi 0.55 against 0.5 (ratio 1.1), pi_rollout 0.25 (weight 2, capped 1.5).
CURRENT, PROXIMAL, ROLLOUT = (0.6, 0.55), (0.4, 0.5), (0.5, 0.25)


def test_tis_clips_the_ratio_against_the_proximal_policy():
    logprobs = logs(CURRENT).requires_grad_()
    out = ppo_clip_loss(logprobs, logs(ROLLOUT), torch.tensor([1.0]), torch.ones(1, 2), loss_config(tis_cap=1.5),
                        proximal_logprobs=logs(PROXIMAL))
    out.loss.backward()
    assert out.loss.item() == pytest.approx((-1.2 * 0.8 - 1.1 * 1.5) / 2)
    assert logprobs.grad[0, 0].item() == 0.0  # beyond the trust region around pi_prox: no gradient
    assert logprobs.grad[0, 1].item() == pytest.approx(-1.1 * 1.5 / 2)  # -A * ratio * weight / tokens
    assert out.clip_fraction == 0.5 and out.ratio_mean == pytest.approx(1.3)
    assert out.is_weight_mean == pytest.approx((0.8 + 1.5) / 2)


def test_gspo_with_tis_clips_the_sequence_ratio_against_the_proximal_policy():
    # the same tokens, each row one sequence whose two tokens share a ratio: sequence 0's is 1.5 (clipped to 1.2)
    # with weight 0.8, sequence 1's 1.1 with weight 1.5 (capped)
    rows = lambda pair: logs(*([p, p] for p in pair))  # noqa: E731
    logprobs = rows(CURRENT).requires_grad_()
    config = loss_config(tis_cap=1.5, ratio="sequence")
    out = ppo_clip_loss(logprobs, rows(ROLLOUT), torch.tensor([1.0, 1.0]), torch.ones(2, 2), config,
                        proximal_logprobs=rows(PROXIMAL))
    out.loss.backward()
    assert out.loss.item() == pytest.approx((-1.2 * 0.8 - 1.1 * 1.5) / 2)
    assert torch.equal(logprobs.grad[0], torch.zeros(2))
    assert logprobs.grad[1].tolist() == pytest.approx([-1.1 * 1.5 / 2 / 2] * 2)  # 1/|y| per token, 2 sequences
    assert out.clip_fraction == 0.5


@pytest.mark.parametrize("ratio", ["token", "sequence"])
def test_without_proximal_logprobs_the_current_weights_are_the_proximal_policy(ratio):
    """One optimizer step per batch (the trainer's case): the weights that compute the logprobs are the ones the
    step starts from, so the ratio is 1 and the behaviour weight is min(pi / pi_rollout, cap)."""
    logprobs, config = logs(CURRENT).requires_grad_(), loss_config(tis_cap=1.5, ratio=ratio)
    implicit = ppo_clip_loss(logprobs, logs(ROLLOUT), torch.tensor([1.0]), torch.ones(1, 2), config)
    explicit = ppo_clip_loss(logprobs, logs(ROLLOUT), torch.tensor([1.0]), torch.ones(1, 2), config,
                             proximal_logprobs=logprobs.detach())
    assert torch.equal(implicit.loss, explicit.loss) and implicit.ratio_mean == pytest.approx(1.0)
    assert torch.equal(*(torch.autograd.grad(out.loss, logprobs)[0] for out in (implicit, explicit)))


def test_proximal_logprobs_without_tis_are_refused():
    # without tis_cap the rollout policy is PPO's old policy; silently ignoring a proximal policy would hide a bug
    with pytest.raises(ValueError, match="tis_cap"):
        ppo_clip_loss(logs(CURRENT), logs(ROLLOUT), torch.tensor([1.0]), torch.ones(1, 2), DEFAULT_CONFIG,
                      proximal_logprobs=logs(PROXIMAL))


def test_kl_term_only_with_reference_and_coefficient():
    logprobs = torch.zeros(1, 2)
    ref = torch.tensor([[0.0, math.log(0.5)]])
    base = ppo_clip_loss(logprobs, logprobs, torch.tensor([0.0]), torch.tensor([[0, 1]]), DEFAULT_CONFIG)
    free = ppo_clip_loss(logprobs, logprobs, torch.tensor([0.0]), torch.tensor([[0, 1]]), DEFAULT_CONFIG,
                         ref_logprobs=ref)
    with_kl = ppo_clip_loss(
        logprobs, logprobs, torch.tensor([0.0]), torch.tensor([[0, 1]]), loss_config(kl_coef=0.1), ref_logprobs=ref
    )
    expected_kl = 0.5 - math.log(0.5) - 1
    assert base.loss.item() == 0.0 and free.loss.item() == 0.0
    assert with_kl.kl_mean == pytest.approx(expected_kl)
    assert with_kl.loss.item() == pytest.approx(0.1 * expected_kl)
    assert k3_kl(torch.zeros(1), torch.zeros(1)).item() == 0.0


def test_logprob_abs_diff_only_on_generated_tokens():
    train = torch.tensor([[5.0, -1.0, -2.0]])
    rollout = torch.tensor([[0.0, -1.5, -1.0]])
    assert logprob_abs_diff(train, rollout, torch.tensor([[0, 1, 1]])) == pytest.approx(0.75)


def test_reward_stats():
    assert reward_stats([1.0, 3.0]) == (2.0, 1.0)
    assert reward_stats([]) == (0.0, 0.0)


def _gspo_by_the_paper(logprobs, old, advantages, lengths, eps_low, eps_high):
    """GSPO (Zheng et al. 2025, eq. 5-7) written directly: per sequence i, s_i = (pi(y_i)/pi_old(y_i))^(1/|y_i|),
    J = mean_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i); the loss is -J."""
    terms, begin = [], 0
    for length, advantage in zip(lengths, advantages, strict=True):
        s = torch.exp((logprobs[begin:begin + length] - old[begin:begin + length]).sum() / length)
        terms.append(torch.minimum(s * advantage, s.clamp(1 - eps_low, 1 + eps_high) * advantage))
        begin += length
    return -torch.stack(terms).mean()


def test_gspo_equals_the_papers_formula_on_packed_sequences_value_and_gradient():
    lengths = [2, 3, 1]
    raw = torch.tensor([-1.0, -0.5, -2.0, -0.2, -0.9, -1.3], requires_grad=True)
    old = torch.tensor([-1.1, -0.4, -1.5, -0.3, -1.0, -1.0])
    advantages = torch.tensor([1.0, -0.5, 2.0])
    config = loss_config(clip_low=0.05, clip_high=0.08, ratio="sequence")
    sequence_index = torch.tensor([[0, 0, 1, 1, 1, 2]])
    ours = ppo_clip_loss(raw[None], old[None], advantages[sequence_index.clamp(min=0)], torch.ones(1, 6), config,
                         sequence_index=sequence_index)
    (grad_ours,) = torch.autograd.grad(ours.loss, raw)
    paper = _gspo_by_the_paper(raw, old, advantages, lengths, 0.05, 0.08)
    (grad_paper,) = torch.autograd.grad(paper, raw)
    assert torch.allclose(ours.loss, paper, atol=1e-6)
    assert torch.allclose(grad_ours, grad_paper, atol=1e-6)
    assert ours.clip_fraction > 0  # the example exercises the clip (sequence 1's ratio is e^(-0.133))


def test_gspo_ignores_padding_and_untrained_positions():
    logprobs = torch.tensor([[-1.0, -0.5, 0.0], [-2.0, -0.2, -0.9]], requires_grad=True)
    old = torch.tensor([[-1.1, -0.4, 0.0], [-1.5, -0.3, -1.0]])
    mask = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 1.0]])  # first tokens untrained, row 0 padded
    config = loss_config(ratio="sequence")
    out = ppo_clip_loss(logprobs, old, torch.tensor([1.0, 1.0]), mask, config,
                        sequence_index=torch.tensor([[0, 0, -1], [1, 1, 1]]))
    expected = -(torch.exp(torch.tensor(-0.1)) + torch.exp(torch.tensor((0.1 + 0.1) / 2))) / 2
    assert torch.allclose(out.loss, expected, atol=1e-6)


def test_token_and_sequence_ratios_agree_when_every_sequence_has_one_token():
    logprobs = torch.tensor([[-1.0], [-0.3], [-2.2]], requires_grad=True)
    old = torch.tensor([[-0.9], [-0.5], [-2.0]])
    advantages, mask = torch.tensor([0.7, -1.2, 0.4]), torch.ones(3, 1)
    for tis_cap in (None, 1.5):
        token = ppo_clip_loss(logprobs, old, advantages, mask, loss_config(tis_cap=tis_cap))
        sequence = ppo_clip_loss(logprobs, old, advantages, mask, loss_config(tis_cap=tis_cap, ratio="sequence"))
        (g_token,) = torch.autograd.grad(token.loss, logprobs)
        (g_sequence,) = torch.autograd.grad(sequence.loss, logprobs)
        assert torch.allclose(token.loss, sequence.loss) and torch.allclose(g_token, g_sequence)
        assert token.is_weight_mean == pytest.approx(sequence.is_weight_mean)
