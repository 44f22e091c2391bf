"""A team's LoRA adapter trained by a real DeepSpeed (CPU, gloo) engine on the tiny model: only the adapter
moves, every base weight stays bit-identical, versions are PEFT directories, checkpoints restore the adapter."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from seamlessflow.config import Settings
from seamlessflow.core.batching import KeptGroup, TrajectorySample
from seamlessflow.model.lora import TeamAdapter, write_adapter
from seamlessflow.testing.trainer_records import own_logprobs
from seamlessflow.trainer.adapter import AdapterOff, save_adapter_version
from seamlessflow.trainer.checkpoints import name_latest
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions
from seamlessflow.trainer.policy_engine import PolicyEngine
from seamlessflow.weights.snapshot import host_snapshot

RANK = 4


def red_group(model_dir, name: str) -> KeptGroup:
    """Two samples whose recorded logprobs are the base's own (the fresh adapter equals the base: ratio 1)."""
    samples = []
    for i, (tokens, reward) in enumerate((([1, 2, 3, 4, 5, 6], 1.0), ([1, 2, 7, 8, 9], 0.0))):
        mask = [0, 0] + [1] * (len(tokens) - 2)
        samples.append(TrajectorySample(f"{name}{i}", name, "t", tuple(tokens), tuple(mask),
                                        tuple(own_logprobs(model_dir, tokens, mask)),
                                        tuple(0 if m else -1 for m in mask), reward))
    return KeptGroup(name, "t", samples, [1.0, 1.0])


@pytest.fixture(scope="module")
def red(tiny_model_dir, tmp_path_factory) -> TeamAdapter:
    path = write_adapter(tiny_model_dir, tmp_path_factory.mktemp("adapters") / "red", RANK)
    return TeamAdapter(name="red-lora", path=str(path), rank=RANK)


@pytest.fixture(scope="module")
def engine(tiny_model_dir, red) -> PolicyEngine:
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    config["optimizer"]["params"]["lr"] = 1e-2  # a step moves the adapter well past float noise
    loss = TrainerOptions(kl_coef=0.1).loss_config()  # the reference: the same module, adapter off
    return PolicyEngine(tiny_model_dir, config, loss, adapter=red)


def test_only_the_adapter_trains_and_versions_and_checkpoints_hold_it_alone(engine, red, tiny_model_dir, tmp_path):
    initial = load_file(f"{red.path}/adapter_model.safetensors")
    assert isinstance(engine.reference, AdapterOff)
    trainable = [n for n, p in engine.engine.module.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A.red-lora." in n or ".lora_B.red-lora." in n for n in trainable)

    first = engine.train_step([red_group(tiny_model_dir, "g1")])
    second = engine.train_step([red_group(tiny_model_dir, "g2")])
    assert first.tokens_trained == 7 and first.kl_mean == pytest.approx(0.0, abs=1e-7)  # B = 0: policy = base
    assert second.kl_mean > 0  # the adapter moved the policy away from its frozen base

    assert_base_untouched(engine, tiny_model_dir)

    out = save_adapter_version(engine.adapter, tmp_path / "weights", 1, tiny_model_dir,
                               host_snapshot(engine.export_state()), "abc")
    assert out.name == "v000001-abc"
    version = load_file(str(out / "adapter_model.safetensors"))
    assert set(version) == set(initial)  # PEFT's key names, the adapter's tensors only
    for key, tensor in version.items():
        assert key.startswith("base_model.model.") and key.endswith((".lora_A.weight", ".lora_B.weight")), key
        assert tensor.shape[0 if ".lora_A." in key else 1] == RANK
        assert not torch.equal(tensor, initial[key]), key  # two steps moved both A and B
    config = json.loads((out / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["target_modules"]) == (RANK, 2 * RANK, ["q_proj", "v_proj"])

    checkpoints = tmp_path / "checkpoints"
    engine.save_checkpoint(checkpoints, "step2", {"step": 2})
    name_latest(checkpoints, "step2")
    saved = torch.load(checkpoints / "step2" / "mp_rank_00_model_states.pt", weights_only=False)
    # the base is the model dir's, not the checkpoint's (but the tied head, which DeepSpeed keeps under its alias)
    assert set(saved["module"]) - set(trainable) == {"lm_head.weight"} and set(trainable) <= set(saved["module"])
    with torch.no_grad():
        for _, param in engine.engine.module.named_parameters():
            if param.requires_grad:
                param.zero_()
    assert engine.load_checkpoint(checkpoints)["step"] == 2
    restored = host_snapshot(engine.export_state())
    assert all(torch.equal(restored[k], v) for k, v in version.items())  # the adapter exactly as saved
    assert_base_untouched(engine, tiny_model_dir)


def assert_base_untouched(engine: PolicyEngine, model_dir) -> None:
    """Every base tensor of the engine's module equals the model dir's safetensors, bit for bit."""
    base = load_file(f"{model_dir}/model.safetensors")
    seen = set()
    for name, param in engine.engine.module.named_parameters():
        if "lora_" not in name:
            key = name.replace(".base_layer.", ".")
            assert torch.equal(param.detach(), base[key]), key
            seen.add(key)
    assert seen == set(base)  # every base tensor checked (the tied head is the embedding)


def teams(**lora) -> Settings:
    return Settings().with_overrides(proxy={"teams": {"red": {"lora": lora} if lora else {"max_sessions": 2}}})


def test_adapter_options_name_what_adapter_training_needs(tmp_path):
    ok = teams(name="red-lora", path=str(tmp_path), rank=8)
    assert TrainerOptions().team_adapter(ok) is None
    assert TrainerOptions(adapter="red").team_adapter(ok) == TeamAdapter(name="red-lora", path=str(tmp_path), rank=8)
    assert TrainerOptions(adapter="red").group_id(ok).endswith(".trainer.red")  # a consumer group of its own
    with pytest.raises(ValueError, match=r"proxy\.teams\.red\.lora"):
        TrainerOptions(adapter="red").team_adapter(teams())
    with pytest.raises(ValueError, match=r"proxy\.teams\.blue\.lora"):
        TrainerOptions(adapter="blue").team_adapter(ok)
    with pytest.raises(ValueError, match="weight_transfer"):
        TrainerOptions(adapter="red", weight_transfer="gloo").team_adapter(ok)
    with pytest.raises(ValueError, match="ZeRO stage 3"):
        TrainerOptions(adapter="red", deepspeed={"zero_optimization": {"stage": 3}}).team_adapter(ok)
