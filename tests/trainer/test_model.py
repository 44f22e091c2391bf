"""Loading in the training dtype, activation checkpointing, and the reference model only when KL is on."""

import json

import pytest
import torch

from seamlessflow.core.batching import KeptGroup
from seamlessflow.testing.core_configs import loss_config
from seamlessflow.testing.trainer_samples import random_samples
from seamlessflow.trainer.model import TokenLogprobModel, load_causal_lm, training_dtype
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions
from seamlessflow.trainer.policy_engine import PolicyEngine


def cpu_config(**extra):
    return {**json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text()), **extra}


def test_the_model_is_loaded_in_deepspeeds_dtype(tiny_model_dir):
    assert training_dtype(cpu_config()) == torch.float32
    assert training_dtype(cpu_config(fp16={"enabled": True})) == torch.float16
    model = load_causal_lm(tiny_model_dir, cpu_config(bf16={"enabled": True}))
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_activation_checkpointing_reaches_the_model_and_keeps_the_gradients(tiny_model_dir):
    samples = random_samples(3)
    tokens = torch.tensor([list(samples[0].tokens)])
    grads = []
    for on in (False, True):
        model = load_causal_lm(tiny_model_dir, cpu_config(), activation_checkpointing=on).train()
        assert model.is_gradient_checkpointing is on
        TokenLogprobModel(model)(input_ids=tokens).sum().backward()
        grads.append([p.grad for p in model.parameters()])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads, strict=True))


def test_bf16_engine_without_kl_has_no_reference(tiny_model_dir):
    engine = PolicyEngine(tiny_model_dir, cpu_config(bf16={"enabled": True}),
                          memory=TrainerOptions(activation_checkpointing=True).memory_config())
    assert engine.reference is None
    assert {p.dtype for p in engine.module.parameters()} == {torch.bfloat16}
    assert engine.module.is_gradient_checkpointing
    assert not engine.packing  # auto: sdpa has no varlen kernel, so rows are padded, not packed
    metrics = engine.train_step([KeptGroup("g", "t", random_samples(4), [1.0] * 4)])
    assert metrics.tokens_trained > 0 and metrics.loss == metrics.loss  # finite, not NaN


@pytest.mark.parametrize("offload", [False, True])
def test_kl_reference_is_frozen_in_the_training_dtype(tiny_model_dir, offload):
    engine = PolicyEngine(tiny_model_dir, cpu_config(bf16={"enabled": True}), loss_config(kl_coef=0.1),
                          memory=TrainerOptions(offload_reference=offload).memory_config())
    reference = engine.reference.module if offload else engine.reference
    if offload:  # a ZeRO-3 engine: its parameters live partitioned, in host memory
        assert all(hasattr(p, "ds_id") for p in reference.parameters())
    assert {p.ds_tensor.dtype if offload else p.dtype for p in reference.parameters()} == {torch.bfloat16}
    assert not any(p.requires_grad for p in reference.parameters())
    metrics = engine.train_step([KeptGroup("g", "t", random_samples(4), [1.0] * 4)])
    assert metrics.kl_mean == pytest.approx(0.0, abs=1e-3)  # policy == reference before the first update
    metrics = engine.train_step([KeptGroup("g", "t", random_samples(4), [1.0] * 4)])
    assert metrics.kl_mean > 0  # the reference did not move with the policy
