"""The trainer computes each token's logprob at the temperature it was sampled at, flat, packed and as a tree, and
its mismatch monitor sees ~0 on its own tokens (and what the old rule gave: temperature 1 against a tempered
sample), with tokens lacking a behaviour logprob masked and counted."""

import json
import math
from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.batching import KeptGroup, TrajectorySample
from seamlessflow.core.token_tree import build_tree
from seamlessflow.trainer.model import TokenLogprobModel
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS
from seamlessflow.trainer.policy_engine import PolicyEngine
from seamlessflow.trainer.samples import collate
from seamlessflow.trainer.tree import MixedTemperatures, node_temperatures, tree_batch

PROMPT = [3, 9, 4, 11, 5, 6]
COMPLETIONS = [[12, 13, 14, 7], [12, 15, 8], [16, 17, 18, 19, 2]]


def hf_model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation="sdpa").eval()


def tempered(i: int, completion: list[int], temperature: float, logprobs=None, version: int = 0) -> TrajectorySample:
    tokens = PROMPT + completion
    mask = [0] * len(PROMPT) + [1] * len(completion)
    temps = [1.0] * len(PROMPT) + [temperature] * len(completion)
    return TrajectorySample(f"s{i}", "g", "t", tuple(tokens), tuple(mask), tuple(logprobs or [0.0] * len(tokens)),
                            tuple(version if m else -1 for m in mask), float(i % 2), temperatures=tuple(temps))


def test_the_logprob_of_a_token_is_taken_at_its_sampling_temperature(tiny_model_dir):
    hf = hf_model(tiny_model_dir)
    tokens = torch.tensor([PROMPT + COMPLETIONS[0]])
    temps = torch.full(tokens.shape, 0.6)
    with torch.no_grad():
        logits = hf(input_ids=tokens).logits[0, :-1].float()
        expected = torch.log_softmax(logits / 0.6, -1).gather(-1, tokens[0, 1:, None]).squeeze(-1)
        got = TokenLogprobModel(hf, chunk_tokens=3)(input_ids=tokens, temperatures=temps)[0, 1:]
        untempered = TokenLogprobModel(hf)(input_ids=tokens)[0, 1:]
    assert torch.allclose(got, expected, atol=1e-5)
    assert (got - untempered).abs().mean() > 0.05  # the check can fail: temperature 0.6 is not temperature 1


def test_flat_packed_and_tree_agree_under_temperatures(tiny_model_dir):
    model = TokenLogprobModel(hf_model(tiny_model_dir))
    samples = [tempered(i, c, t) for i, (c, t) in enumerate(zip(COMPLETIONS, (0.6, 0.6, 1.3), strict=True))]
    with torch.no_grad():
        flat = collate(samples).logprobs_of(model)
        packed = collate(samples, packed=True).logprobs_of(model)[0]
        tree = tree_batch(samples).logprobs_of(model)
    mask = collate(samples).loss_mask.bool()
    assert torch.allclose(tree[mask], flat[mask], atol=1e-5)
    assert torch.allclose(packed[collate(samples, packed=True).loss_mask[0].bool()], flat[mask], atol=1e-5)


def test_a_trie_node_sampled_at_two_temperatures_trains_flat():
    samples = [tempered(0, [12, 13], 0.6), tempered(1, [12, 14], 0.9)]  # token 12 after the prompt: shared
    with pytest.raises(MixedTemperatures):
        node_temperatures(samples, build_tree([s.tokens for s in samples]))


def own_logprobs(engine: PolicyEngine, samples: list[TrajectorySample], temperature: float) -> list[TrajectorySample]:
    """The samples with behaviour logprobs the engine's own weights give at ``temperature`` (as an engine serving
    exactly those weights would record them)."""
    with torch.no_grad():
        at = [replace(s, temperatures=tuple(temperature if m else 1.0 for m in s.loss_mask)) for s in samples]
        logprobs = collate(at).logprobs_of(engine.engine.module)
    return [replace(s, logprobs=tuple(logprobs[i, : len(s.tokens)].tolist())) for i, s in enumerate(samples)]


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    return PolicyEngine(tiny_model_dir, config)


def test_the_monitor_sees_no_mismatch_on_the_trainers_own_tokens_at_their_temperature(engine):
    samples = [tempered(i, c, 0.6, version=4) for i, c in enumerate(COMPLETIONS)]
    recorded = own_logprobs(engine, samples, 0.6)
    old_rule = [replace(s, temperatures=()) for s in recorded]  # before: trained at temperature 1
    before = engine.train_step([KeptGroup("g", "t", old_rule, [0.0] * 3)], version=4)  # weight 0: no update
    now = engine.train_step([KeptGroup("g", "t", recorded, [0.0] * 3)], version=4)
    figures = now.figures()
    assert figures["mismatch_tokens"] == sum(len(c) for c in COMPLETIONS) and figures["stale_tokens"] == 0
    assert figures["mismatch_abs_mean"] < 1e-4 and figures["mismatch_kl"] < 1e-6 and figures["mismatch_share"] == 0
    assert before.figures()["mismatch_abs_mean"] > 0.05  # what the old rule reports on the same tokens
    stale = engine.train_step([KeptGroup("g", "t", recorded, [0.0] * 3)], version=5).figures()
    assert stale["mismatch_tokens"] == 0 and stale["stale_tokens"] == figures["mismatch_tokens"]


def test_tokens_without_a_behaviour_logprob_are_masked_counted_and_never_a_number_in_the_loss(engine):
    [one, two, three] = [tempered(i, c, 0.8, version=1) for i, c in enumerate(COMPLETIONS)]
    lp = list(one.logprobs)
    lp[len(PROMPT) + 1] = math.nan  # the engine gave none
    greedy = replace(two, temperatures=tuple(0.0 if m else 1.0 for m in two.loss_mask))  # sampled greedily
    metrics = engine.train_step([KeptGroup("g", "t", [replace(one, logprobs=tuple(lp)), greedy, three],
                                           [1.0] * 3)], version=1)
    assert metrics.masked_tokens == 1 + len(COMPLETIONS[1])
    assert math.isfinite(metrics.loss) and metrics.tokens_trained == len(COMPLETIONS[0]) - 1 + len(COMPLETIONS[2])
