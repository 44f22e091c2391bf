import json

import pytest
from click.testing import CliRunner
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from seamlessflow.cli.model import model_group
from seamlessflow.model import SMALL, build_tiny_model
from seamlessflow.model.spec import spec_hash
from seamlessflow.model.warmstart import measure_accuracy, teacher_forced_accuracy
from seamlessflow.tasks import generate_tasks


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("m") / "tiny", seed=3, small=True, log=lambda _: None)


def test_builds_an_hf_directory_vllm_can_serve(built):
    config = AutoConfig.from_pretrained(built.path)
    assert config.model_type == "qwen2" and config.head_dim >= 32
    tokenizer = AutoTokenizer.from_pretrained(built.path)
    assert config.vocab_size == len(tokenizer)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "What is 2+2?"}], add_generation_prompt=True)
    assert len(ids["input_ids"]) > 5
    assert not built.cached


def test_second_build_reuses_the_cache(built):
    again = build_tiny_model(built.path, seed=3, small=True, log=lambda _: None)
    assert again.cached and again.spec_hash == built.spec_hash == spec_hash(SMALL, 3)


def test_same_seed_gives_identical_weights(built, tmp_path):
    twin = build_tiny_model(tmp_path / "twin", seed=3, small=True, log=lambda _: None)
    assert (twin.path / "model.safetensors").read_bytes() == (built.path / "model.safetensors").read_bytes()
    assert (twin.path / "tokenizer.json").read_text() == (built.path / "tokenizer.json").read_text()


def test_other_seed_rebuilds_in_place(tmp_path):
    first = build_tiny_model(tmp_path / "m", seed=1, small=True, log=lambda _: None)
    second = build_tiny_model(tmp_path / "m", seed=2, small=True, log=lambda _: None)
    assert not second.cached and second.spec_hash != first.spec_hash
    assert json.loads((tmp_path / "m" / "build.json").read_text())["seed"] == 2


def test_teacher_forced_accuracy_agrees_with_greedy_decoding(built):
    model = AutoModelForCausalLM.from_pretrained(built.path)
    tokenizer = AutoTokenizer.from_pretrained(built.path)
    tasks = generate_tasks(11, 40)
    assert teacher_forced_accuracy(model, tokenizer, tasks) == pytest.approx(
        measure_accuracy(model, tokenizer, tasks).exact
    )


def test_cli_init_builds_then_reuses(tmp_path):
    runner = CliRunner()
    out = tmp_path / "cli-model"
    first = runner.invoke(model_group, ["init", "--out", str(out), "--seed", "4", "--small"])
    assert first.exit_code == 0, first.output
    assert f"built {out}" in first.output
    second = runner.invoke(model_group, ["init", "--out", str(out), "--seed", "4", "--small"])
    assert f"reused {out}" in second.output
