"""The tiny random model every engine and trainer test loads must stay tiny: a config argument lost to a
comment once made it Qwen2's default 32 layers x 22016 (272 M parameters, 1 GB), which slowed every engine
start and left gigabytes of optimizer state in any process that trained it."""

import json

from seamlessflow.testing.models import build_random_tiny_model


def test_the_tiny_model_has_two_small_layers(tmp_path):
    out = build_random_tiny_model(tmp_path / "model")
    config = json.loads((out / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["intermediate_size"]) == (2, 128, 256)
    assert sum(p.stat().st_size for p in out.glob("*.safetensors")) < 4 << 20


def test_the_long_context_model_holds_an_agent_cli_prompt_in_few_tokens(tmp_path):
    """Its tokenizer learnt English and code from local text, so a CLI's 40-50 KB prompt fits its positions."""
    from transformers import AutoTokenizer

    from seamlessflow.testing.models import build_long_context_tiny_model

    out = build_long_context_tiny_model(tmp_path / "model", vocab_size=4096, max_positions=8192)
    config = json.loads((out / "config.json").read_text())
    assert (config["num_hidden_layers"], config["max_position_embeddings"], config["vocab_size"]) == (2, 8192, 4096)
    prose = "Run the tests before you commit, and read the error message: it usually says what is wrong. " * 20
    assert len(AutoTokenizer.from_pretrained(out)(prose)["input_ids"]) < len(prose) / 3
