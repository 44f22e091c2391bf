"""Packed and padded micro-batches: the same loss and gradients; the token budget held by the engine."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.batching import KeptGroup
from seamlessflow.core.micro_batches import micro_batch_cost
from seamlessflow.testing.core_configs import loss_config
from seamlessflow.testing.trainer_samples import random_samples
from seamlessflow.trainer.model import TokenLogprobModel
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions
from seamlessflow.trainer.policy_engine import PolicyEngine, forward_logprobs, micro_batch_loss
from seamlessflow.trainer.samples import collate


def loss_and_grads(model, samples, plan, packed, advantages, weights, config):
    model.zero_grad()
    total = len(samples) if config.ratio == "sequence" else sum(max(s.trained_tokens - s.loss_mask[0], 0)
                                                                for s in samples)
    loss = 0.0
    for chosen in plan:
        batch = collate([samples[i] for i in chosen], packed=packed)
        out, _ = micro_batch_loss(model, batch, advantages[chosen], weights[chosen], total, config, reference=model)
        out.loss.backward()
        loss += float(out.loss.detach())
    return loss, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("ratio", ["token", "sequence"])  # sequence: GSPO's per-sequence means survive packing
def test_packed_and_padded_micro_batches_give_the_same_loss_and_gradients(tiny_model_dir, ratio):
    hf = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model = TokenLogprobModel(hf, chunk_tokens=7)
    samples = random_samples(7)
    advantages, weights = torch.randn(7), torch.tensor([1.0, 0.5, 1.0, 1.0, 0.25, 1.0, 1.0])
    # the reference (the same model, no grad) goes through packing too
    config = loss_config(kl_coef=0.1, ratio=ratio)
    # different splits on purpose: one padded row per sequence vs two packed rows
    padded = loss_and_grads(model, samples, [[i] for i in range(7)], False, advantages, weights, config)
    packed = loss_and_grads(model, samples, [[0, 1, 2], [3, 4, 5, 6]], True, advantages, weights, config)
    assert packed[0] == pytest.approx(padded[0], abs=1e-6)
    for name, grad in padded[1].items():
        assert torch.allclose(packed[1][name], grad, atol=1e-6, rtol=1e-4), name
    # the test can fail: with attention leaking across the packed sequences the logprobs differ
    batch = collate(samples[:3], packed=True)
    with torch.no_grad():
        right = forward_logprobs(model, batch)
        leaky = model(input_ids=batch.tokens, attention_mask=torch.ones_like(batch.tokens),
                      position_ids=batch.position_ids)
    assert (right - leaky)[batch.loss_mask.bool()].abs().max() > 1e-3


@pytest.mark.parametrize("packing", [True, False])
def test_engine_holds_the_token_budget_and_trains(tiny_model_dir, packing):
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    memory = TrainerOptions(max_tokens_per_micro_batch=40, packing=packing).memory_config()
    engine = PolicyEngine(tiny_model_dir, config, memory=memory)
    assert engine.packing is packing  # Qwen2 confines attention to each packed sequence: the probe agrees
    samples = random_samples(8, seed=1)
    plan = engine.plan(samples)
    assert sorted(i for b in plan for i in b) == list(range(8)) and len(plan) > 1
    assert all(micro_batch_cost([len(samples[i].tokens) for i in b], packing) <= 40 for b in plan)
    metrics = engine.train_step([KeptGroup("g", "t", samples, [1.0] * 8)])
    assert metrics.sequences == 8 and metrics.tokens_trained == sum(s.trained_tokens - s.loss_mask[0] for s in samples)


def test_per_token_advantages_reach_the_loss_in_either_layout(tiny_model_dir):
    """Per-token advantages (a per-turn rule) that are constant per sequence train exactly as the per-sequence
    ones; varying ones give the same loss padded and packed, and a different one from the constant case."""
    model = TokenLogprobModel(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), 7)
    samples = random_samples(4, seed=3)
    weights, config = torch.ones(4), loss_config()
    scalar = torch.tensor([1.0, -1.0, 0.5, -0.5])
    constant = [torch.full((len(s.tokens),), float(a)) for s, a in zip(samples, scalar, strict=True)]
    varying = [torch.linspace(-1.0, 1.0, len(s.tokens)) for s in samples]

    def loss(advantages, packed):
        total = sum(max(s.trained_tokens - s.loss_mask[0], 0) for s in samples)
        out, _ = micro_batch_loss(model, collate(samples, packed=packed), advantages, weights, total, config)
        return float(out.loss.detach())

    assert loss(constant, False) == pytest.approx(loss(scalar, False), abs=1e-6)
    assert loss(varying, True) == pytest.approx(loss(varying, False), abs=1e-6)
    assert abs(loss(varying, False) - loss(constant, False)) > 1e-3


def test_a_per_turn_rule_trains_through_the_engine(tiny_model_dir):
    """`trainer.advantages: per_turn_group` through a whole engine step: the leader's share carries per-token
    advantages (on one-turn sessions, each sequence's group-relative one on every token) and the step trains."""
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    samples = random_samples(4, seed=2)
    engine = PolicyEngine(tiny_model_dir, config, advantages="per_turn_group")
    (share,) = engine.split_step([KeptGroup("g", "t", samples, [1.0] * 4)], 1)
    assert share.token_advantages is not None
    for sample, scalar, per_token in zip(share.samples, share.advantages, share.token_advantages, strict=True):
        assert per_token == pytest.approx([scalar] * len(sample.tokens), abs=1e-5) and scalar != 0.0
    metrics = engine.train_share(share)
    assert metrics.sequences == 4 and metrics.loss != 0.0
