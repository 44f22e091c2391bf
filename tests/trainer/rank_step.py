"""One optimizer step on a fixed batch under a launcher (`python -m torch.distributed.run ... rank_step.py
MODEL OUT [ZERO_STAGE]`): the leader passes the batch, every rank trains its share, rank 0 saves the
resulting weights and the step's figures to OUT (tests/trainer/test_ranks.py compares 1 and 2 ranks)."""

import json
import sys

import deepspeed
import torch

from seamlessflow.core.batching import KeptGroup
from seamlessflow.trainer.engine import PolicyEngine
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS
from tests.trainer.test_packing import random_samples


def batch() -> list[KeptGroup]:
    samples = random_samples(9, seed=3)  # lengths 4..19: an odd count, so shares differ in sequences
    return [KeptGroup("g1", "t", samples[:5], [1.0] * 5), KeptGroup("g2", "t", samples[5:], [1.0, 0.5, 1.0, 1.0])]


def main(model_dir: str, out: str, stage: str | None = None) -> None:
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    config["train_micro_batch_size_per_gpu"] = 2
    # plain SGD, no clipping: the update is the gradient itself, so a gradient off by the world size shows
    # (AdamW's first step is about lr * sign(gradient) and would hide it); torch's SGD under ZeRO-1
    config.update(optimizer={"type": "SGD", "params": {"lr": 0.5}}, gradient_clipping=0.0,
                  zero_allow_untested_optimizer=True)
    if stage is not None:  # e.g. 3: the same check with parameters, gradients and optimizer partitioned
        config["zero_optimization"] = {"stage": int(stage)}
    engine = PolicyEngine(model_dir, config)
    metrics = engine.train_step(batch() if engine.ranks.leader else None)
    params = dict(engine.module.named_parameters())
    with deepspeed.zero.GatheredParameters(list(params.values()), enabled=engine.engine.zero_optimization_stage() == 3):
        weights = {name: p.detach().clone() for name, p in params.items()}  # dtype kept: checked
    if engine.ranks.leader:
        torch.save({"weights": weights, "metrics": vars(metrics), "world": engine.ranks.world}, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
