"""One optimizer step on a fixed batch under a launcher (`python -m torch.distributed.run ... rank_step.py
MODEL OUT STAGES`, STAGES e.g. 1,3): for each ZeRO stage, from the same start weights, the leader passes the
batch, every rank trains its share, and rank 0 saves each stage's resulting weights and figures to OUT, a map
from the stage (tests/trainer/test_ranks.py compares 1 and 2 ranks). All stages in one launch: starting the
ranks costs more than the steps.

`rank_step.py MODEL OUT STAGES trees` (STAGES e.g. 1,3): for each ZeRO stage and each step of
`seamlessflow.testing.tree_batches`, one step flat and one on trees, each from the same start weights, in one
launch (starting the ranks costs more than the steps); OUT maps (stage, step, tree) to weights and figures."""

import gc
import json
import sys

import deepspeed
import torch

from seamlessflow.core.batching import KeptGroup
from seamlessflow.testing.trainer_samples import random_samples
from seamlessflow.testing.tree_batches import STEPS
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions
from seamlessflow.trainer.policy_engine import MemoryConfig, PolicyEngine


def batch() -> list[KeptGroup]:
    samples = random_samples(9, seed=3)  # lengths 4..19: an odd count, so shares differ in sequences
    return [KeptGroup("g1", "t", samples[:5], [1.0] * 5), KeptGroup("g2", "t", samples[5:], [1.0, 0.5, 1.0, 1.0])]


def sgd_config(stage: str) -> dict:
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    config["train_micro_batch_size_per_gpu"] = 2
    # plain SGD, no clipping: the update is the gradient itself, so a gradient off by the world size shows
    # (AdamW's first step is about lr * sign(gradient) and would hide it); torch's SGD under ZeRO-1
    config.update(optimizer={"type": "SGD", "params": {"lr": 0.5}}, gradient_clipping=0.0,
                  zero_allow_untested_optimizer=True)
    config["zero_optimization"] = {"stage": int(stage)}  # 3: parameters, gradients and optimizer partitioned
    return config


def step(model_dir: str, config: dict, groups: list[KeptGroup], memory: MemoryConfig | None = None) -> dict:
    """One step from the model directory's weights: the step's figures and the whole updated weights."""
    engine = PolicyEngine(model_dir, config, memory=memory)
    metrics = engine.train_step(groups if engine.ranks.leader else None)
    params = dict(engine.module.named_parameters())
    with deepspeed.zero.GatheredParameters(list(params.values()), enabled=engine.engine.zero_optimization_stage() == 3):
        weights = {name: p.detach().clone() for name, p in params.items()}  # dtype kept: checked
    result = {"weights": weights, "metrics": metrics.figures(), "world": engine.ranks.world}  # plain floats: torch.load
    engine.engine.destroy()
    del engine
    gc.collect()
    return result


def main(model_dir: str, out: str, stages: str) -> None:
    results = {int(stage): step(model_dir, sgd_config(stage), batch()) for stage in stages.split(",")}
    if torch.distributed.get_rank() == 0:
        torch.save(results, out)


TREE_BUDGET = 256  # a rank's share of each tree step in one micro-batch, so its positions are its whole trie


def trees(model_dir: str, out: str, stages: str) -> None:
    results = {}
    for stage in stages.split(","):
        for name, make in STEPS.items():
            for tree in (False, True):
                memory = TrainerOptions(tree=tree, max_tokens_per_micro_batch=TREE_BUDGET).memory_config()
                results[stage, name, tree] = step(model_dir, sgd_config(stage), make(), memory)
    if torch.distributed.get_rank() == 0:
        torch.save(results, out)


if __name__ == "__main__":
    if sys.argv[4:] == ["trees"]:
        trees(*sys.argv[1:4])
    else:
        main(*sys.argv[1:])
