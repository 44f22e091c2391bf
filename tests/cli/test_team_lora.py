"""`seamlessflow team add NAME --lora RANK`: a fresh adapter for the base model, and the entry that serves it."""

import json
import math

import pytest
import yaml
from click.testing import CliRunner
from safetensors.torch import load_file

from seamlessflow.cli.team import team
from seamlessflow.config import Settings
from seamlessflow.proxy.options import TeamOptions
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.models import build_random_tiny_model


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_random_tiny_model(tmp_path_factory.mktemp("base") / "model")


def invoke(settings, *args):
    return CliRunner().invoke(team, list(args), obj=settings)


def test_add_with_lora_writes_a_fresh_peft_adapter_and_prints_its_entry(tmp_path, base):
    settings = Settings.model_validate({"data_dir": str(tmp_path), "rollout": {"model": str(base)}})
    result = invoke(settings, "add", "red", "--lora", "8")
    assert result.exit_code == 0, result.output
    key, *entry_lines = result.stdout.splitlines()
    assert TeamKeys.from_settings(settings).team_for(key) == "red"

    entry = TeamOptions.model_validate(yaml.safe_load("\n".join(entry_lines))["red"])
    assert entry.lora is not None and (entry.lora.name, entry.lora.rank) == ("red-lora", 8)
    out = tmp_path / "adapters" / "red"
    assert entry.lora.path == str(out.resolve())

    config = json.loads((out / "adapter_config.json").read_text())
    assert (config["peft_type"], config["r"], config["lora_alpha"]) == ("LORA", 8, 16)
    assert config["target_modules"] == ["q_proj", "v_proj"]
    tensors = load_file(str(out / "adapter_model.safetensors"))
    weights = json.loads((base / "config.json").read_text())
    hidden = weights["hidden_size"]
    kv = weights["num_key_value_heads"] * hidden // weights["num_attention_heads"]
    expected = {}
    for layer in range(weights["num_hidden_layers"]):
        for module, out_features in (("q_proj", hidden), ("v_proj", kv)):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            expected[f"{prefix}.lora_A.weight"] = (8, hidden)
            expected[f"{prefix}.lora_B.weight"] = (out_features, 8)
    assert {name: tuple(t.shape) for name, t in tensors.items()} == expected
    for name, tensor in tensors.items():
        if "lora_B" in name:
            assert not tensor.any()  # B starts at zero: the adapter equals the base
        else:
            assert tensor.std() > 0 and tensor.abs().max() <= 1 / math.sqrt(hidden)  # PEFT's kaiming-uniform


def test_targets_and_alpha_can_be_chosen_and_the_model_given(tmp_path, base):
    result = invoke(Settings(data_dir=tmp_path), "add", "blue", "--lora", "4", "--lora-targets", "k_proj,o_proj",
                    "--lora-alpha", "3", "--model", str(base))
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "adapters" / "blue" / "adapter_config.json").read_text())
    assert (config["target_modules"], config["lora_alpha"]) == (["k_proj", "o_proj"], 3)
    names = load_file(str(tmp_path / "adapters" / "blue" / "adapter_model.safetensors"))
    assert {n.split(".")[-3] for n in names} == {"k_proj", "o_proj"}


def test_without_the_model_or_with_an_unknown_module_no_key_is_issued(tmp_path, base):
    settings = Settings(data_dir=tmp_path)
    missing = invoke(settings, "add", "red", "--lora", "8")
    assert missing.exit_code == 1 and "run `seamlessflow up` once" in missing.output and "--model" in missing.output
    unknown = invoke(settings, "add", "red", "--lora", "8", "--lora-targets", "nope_proj", "--model", str(base))
    assert unknown.exit_code == 1 and "nope_proj" in unknown.output
    assert TeamKeys.from_settings(settings).teams() == {}


def test_an_existing_adapter_is_not_overwritten(tmp_path, base):
    settings = Settings(data_dir=tmp_path)
    assert invoke(settings, "add", "red", "--lora", "8", "--model", str(base)).exit_code == 0
    again = invoke(settings, "add", "red", "--lora", "16", "--model", str(base))
    assert again.exit_code == 1 and "already has an adapter" in again.output
    assert json.loads((tmp_path / "adapters" / "red" / "adapter_config.json").read_text())["r"] == 8
