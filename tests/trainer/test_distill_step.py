"""A real DeepSpeed (CPU, gloo) step under the distilling objectives: the loss equals the reference computation.

The samples' behaviour logprobs are the model's own on trained tokens (ratio 1, inside every clip), so the loss
of one optimizer step is -(1/N) sum over the N trained tokens of the token's advantage: coef * (T_t - B_t) under
`distill`, plus the sample's GRPO advantage under `rl+distill` (the Tinker cookbook's importance-sampled
distillation loss at ratio 1). Untrained positions carry garbage teacher values that must not matter."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.batching import KeptGroup, TrajectorySample
from seamlessflow.core.distillation import Objective, ObjectiveConfig
from seamlessflow.core.losses import token_logprobs
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS
from seamlessflow.trainer.policy_engine import PolicyEngine

SPECS = [("a", [1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 0, 1], 1.0), ("b", [1, 2, 7, 8], [0, 0, 1, 1], 0.0)]
GAPS = {"a": [0.0, 0.0, 0.5, -1.0, 0.0, 0.25], "b": [0.0, 0.0, -0.75, 2.0]}  # teacher - behaviour where trained
GARBAGE = -7.0


def taught_samples(model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    out = []
    for tid, tokens, mask, reward in SPECS:
        with torch.no_grad():
            lp = token_logprobs(model(input_ids=torch.tensor([tokens])).logits, torch.tensor([tokens]))[0].tolist()
        behaviour = tuple(lp[t] if m else 0.0 for t, m in enumerate(mask))
        teacher = tuple(lp[t] + GAPS[tid][t] if m else GARBAGE for t, m in enumerate(mask))
        versions = tuple(0 if m else -1 for m in mask)
        out.append(TrajectorySample(tid, "g", "t", tuple(tokens), tuple(mask), behaviour, versions, reward,
                                    teacher_logprobs=teacher))
    return out


@pytest.fixture(scope="module")
def engines(tiny_model_dir):
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    return {objective: PolicyEngine(tiny_model_dir, config, objective=ObjectiveConfig(objective, 0.5))
            for objective in (Objective.DISTILL, Objective.RL_DISTILL)}


@pytest.mark.parametrize("objective", [Objective.DISTILL, Objective.RL_DISTILL])
def test_a_distillation_step_takes_the_reference_loss(engines, tiny_model_dir, objective):
    samples = taught_samples(tiny_model_dir)
    rl = {"a": 2**-0.5, "b": -(2**-0.5)} if objective is Objective.RL_DISTILL else {"a": 0.0, "b": 0.0}
    terms = [rl[tid] + 0.5 * GAPS[tid][t] for tid, _, mask, _ in SPECS for t, m in enumerate(mask) if m]
    metrics = engines[objective].train_step([KeptGroup("g", "t", samples, [1.0, 1.0])], version=0)
    assert metrics.tokens_trained == len(terms) == 5
    assert metrics.loss == pytest.approx(-sum(terms) / len(terms), abs=1e-5)
    assert metrics.taught_tokens == 5
    assert metrics.teacher_kl == pytest.approx(-sum(g for gaps in GAPS.values() for g in gaps) / 5, abs=1e-5)
