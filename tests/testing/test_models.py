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
