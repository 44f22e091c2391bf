"""A real DeepSpeed (CPU, gloo) engine on the tiny model: one step, exact loss, saved weights."""

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.batching import KeptGroup, TrajectorySample
from seamlessflow.core.losses import token_logprobs
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS
from seamlessflow.trainer.policy_engine import PolicyEngine
from seamlessflow.weights.files import save_weights, version_dir

GARBAGE = -9.0  # behaviour logprob on untrained positions: must not matter


def samples_with_own_logprobs(model_dir, specs):
    """Samples whose recorded logprobs equal the model's own on trained tokens (ratio 1 there)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    out = []
    for tid, tokens, mask, reward in specs:
        with torch.no_grad():
            lp = token_logprobs(model(input_ids=torch.tensor([tokens])).logits, torch.tensor([tokens]))[0]
        logprobs = tuple(float(lp[t]) if mask[t] else GARBAGE for t in range(len(tokens)))
        versions = tuple(0 if m else -1 for m in mask)
        out.append(TrajectorySample(tid, "g1", "t1", tuple(tokens), tuple(mask), logprobs, versions, reward))
    return out


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    config["train_micro_batch_size_per_gpu"] = 1  # two samples: two micro-batches in one step
    return PolicyEngine(tiny_model_dir, config)


def test_loss_is_taken_on_exactly_the_masked_tokens(engine, tiny_model_dir, tmp_path):
    specs = [
        ("a", [1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 1, 0], 1.0),  # 3 trained tokens
        ("b", [1, 2, 7, 8], [0, 0, 0, 1], 0.0),  # 1 trained token
    ]
    samples = samples_with_own_logprobs(tiny_model_dir, specs)
    before = [p.detach().clone() for p in engine.module.parameters()]
    metrics = engine.train_step([KeptGroup("g1", "t1", samples, [1.0, 1.0])])
    advantage = 1 / (2**0.5)  # rewards [1, 0]: centred +-0.5, unbiased std sqrt(0.5)
    # ratio 1 on every trained token: loss = -(sum of advantages over trained tokens) / trained tokens
    assert metrics.tokens_trained == 4
    assert metrics.loss == pytest.approx(-(advantage * 3 - advantage * 1) / 4, abs=1e-4)
    assert metrics.logprob_abs_diff == pytest.approx(0.0, abs=1e-5)
    assert metrics.groups == 1 and metrics.sequences == 2
    assert any(not torch.equal(b, p) for b, p in zip(before, engine.module.parameters(), strict=True))

    saved = save_weights(engine.module, tmp_path / "weights", 1, tiny_model_dir, engine.state_dict_for_export())
    assert saved == version_dir(tmp_path / "weights", 1) and (saved / "model.safetensors").exists()
    loaded = AutoModelForCausalLM.from_pretrained(saved, dtype=torch.float32)
    for (name, p), q in zip(engine.module.named_parameters(), loaded.parameters(), strict=True):
        assert torch.equal(p.detach(), q), name


def test_saved_version_carries_the_base_tokenizer_files(engine, tiny_model_dir, tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    for f in Path(tiny_model_dir).iterdir():
        (base / f.name).write_bytes(f.read_bytes())
    (base / "tokenizer.json").write_text('{"fake": "tokenizer"}')
    saved = save_weights(engine.module, tmp_path / "weights", 7, base)
    assert (saved / "tokenizer.json").read_text() == '{"fake": "tokenizer"}'
    assert not (tmp_path / "weights" / "v000007.tmp").exists()
