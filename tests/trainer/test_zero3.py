"""ZeRO-3 on CPU (gloo, one rank): partitioned loading, a training step, a 16-bit export that loads back."""

import json

import deepspeed
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.batching import KeptGroup
from seamlessflow.testing.trainer_samples import random_samples
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions
from seamlessflow.trainer.policy_engine import PolicyEngine
from seamlessflow.weights.files import save_weights


def full_parameters(module) -> dict[str, torch.Tensor]:
    params = dict(module.named_parameters())
    with deepspeed.zero.GatheredParameters(list(params.values())):
        return {name: p.detach().clone() for name, p in params.items()}


def test_zero3_loads_partitioned_trains_and_exports_16bit_weights(tiny_model_dir, tmp_path):
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero3_bf16.json").read_text())
    memory = TrainerOptions(max_tokens_per_micro_batch=48, packing=True, activation_checkpointing=True).memory_config()
    engine = PolicyEngine(tiny_model_dir, config, memory=memory)
    assert engine.engine.zero_optimization_stage() == 3
    assert all(p.numel() == 0 and hasattr(p, "ds_id") for p in engine.module.parameters())  # no full copy held
    expected = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16).state_dict()
    loaded = full_parameters(engine.module)
    assert all(torch.equal(loaded[name], expected[name]) for name in loaded)  # streamed into the shards exactly

    metrics = engine.train_step([KeptGroup("g", "t", random_samples(6), [1.0] * 6)])
    assert metrics.tokens_trained > 0 and engine.packing
    trained = full_parameters(engine.module)
    assert any(not torch.equal(trained[n], loaded[n]) for n in trained)

    saved = save_weights(engine.module, tmp_path / "weights", 1, tiny_model_dir, engine.state_dict_for_export())
    back = AutoModelForCausalLM.from_pretrained(saved)
    assert back.dtype == torch.bfloat16
    for name, p in back.named_parameters():
        assert torch.equal(p.detach(), trained[name]), name


def test_shipped_configs_are_valid_deepspeed_zero_sections():
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    for path in sorted(DEEPSPEED_CONFIGS.glob("*.json")):
        config = json.loads(path.read_text())
        zero = DeepSpeedZeroConfig(**config.get("zero_optimization", {}))
        if zero.stage == 3:  # engines get one consolidated 16-bit copy
            assert zero.gather_16bit_weights_on_model_save, path.name
        if path.name.startswith("gpu_"):
            assert config["bf16"]["enabled"], path.name
