"""Two data-parallel ranks (real DeepSpeed on gloo, launched by torch's elastic launcher) and one rank
train the same batch to the same weights: the leader's token-balanced shares, the loss divided by the
world size against DeepSpeed's gradient averaging, and idle micro-batches for the lighter rank."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.tree_shares import split_trees_across_ranks
from seamlessflow.testing.tree_batches import STEPS
from seamlessflow.trainer.ranks import launched_ranks

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-6  # float32 weights after one SGD step (lr 0.5): only the all-reduce's summation order differs
STAGES = (1, 3)  # ZeRO-3: parameters, gradients and optimizer state partitioned


def run_step(ranks: int, model_dir, out: Path, stages: tuple[int, ...]) -> dict:
    """Each ZeRO stage's step from the same start weights, in one launch of `ranks` ranks; by stage."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
            str(ROOT / "tests" / "trainer" / "rank_step.py"), str(model_dir), str(out), ",".join(map(str, stages))]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return torch.load(out)


@pytest.mark.timeout(150)
@pytest.mark.slow
def test_two_ranks_and_one_rank_train_the_same_batch_to_the_same_weights(tiny_model_dir, tmp_path):
    """Under ZeRO-1 and ZeRO-3 (each stage from the same start weights, all in one launch per world size)."""
    ones = run_step(1, tiny_model_dir, tmp_path / "one.pt", STAGES)
    twos = run_step(2, tiny_model_dir, tmp_path / "two.pt", STAGES)
    assert sorted(ones) == sorted(twos) == list(STAGES)
    start = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).named_parameters())
    for stage in STAGES:
        same_step(ones[stage], twos[stage], start)


def same_step(one: dict, two: dict, start: dict) -> None:
    """One rank's step and two ranks' step of the same batch: the same figures and weights."""
    assert (one["world"], two["world"]) == (1, 2)
    assert {p.dtype for p in two["weights"].values()} == {torch.float32}  # no silent bf16 (see trainer/model.py)
    for key in ("tokens_trained", "sequences", "groups", "flat_positions"):  # the lighter rank's idle micro-
        assert one["metrics"][key] == two["metrics"][key], key  # batches count no positions
    assert two["metrics"]["loss"] == pytest.approx(one["metrics"]["loss"], abs=1e-6)
    for name, p in one["weights"].items():
        assert torch.allclose(two["weights"][name], p, rtol=0, atol=TOLERANCE), name
    moved = max(float((one["weights"][n] - start[n].detach()).abs().max()) for n in one["weights"])
    assert moved > 1000 * TOLERANCE  # the step moved the weights far more than the tolerance (a gradient
    # off by the world size would leave half of that between the two)


def test_a_lone_process_is_one_rank(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert launched_ranks() == 1
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert launched_ranks() == 4


@pytest.mark.timeout(270)
@pytest.mark.slow
def test_tree_and_flat_steps_give_the_same_update_on_two_ranks(tiny_model_dir, tmp_path):
    """Under 2 ranks and ZeRO-1 and -3 (one launch): GRPO groups on one system prompt and multi-turn sessions
    forked by rewrites train to the same loss and weights as trees and flat, each rank computing the trie of
    its share as `core.tree_shares` dealt it (whole groups; a session cut only where that balances the
    ranks, its shared tokens then summed across them); a step that shares nothing trains exactly as flat."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
            str(ROOT / "tests" / "trainer" / "rank_step.py"), str(tiny_model_dir), str(tmp_path / "trees.pt"), "1,3",
            "trees"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    results = torch.load(tmp_path / "trees.pt")
    start = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).named_parameters())
    for (stage, name, tree), result in results.items():
        if not tree:
            continue
        flat, metrics = results[stage, name, False], result["metrics"]
        sequences = [s.tokens for g in STEPS[name]() for s in g.samples]
        plan = split_trees_across_ranks(sequences, 2)
        assert flat["metrics"]["positions"] == flat["metrics"]["flat_positions"] == sum(map(len, sequences))
        assert metrics["flat_positions"] == sum(map(len, sequences))  # idle micro-batches count nothing
        if name == "unshared":  # nothing shared: the flat split, the flat micro-batches, the same numbers
            assert {k: v for k, v in metrics.items() if k != "step_time_s"} == \
                   {k: v for k, v in flat["metrics"].items() if k != "step_time_s"}
            assert all(torch.equal(result["weights"][n], w) for n, w in flat["weights"].items())
            continue
        assert (metrics["positions"], metrics["positions_largest_rank"]) == (sum(plan.tree_tokens), plan.largest)
        assert metrics["positions"] < 0.95 * metrics["flat_positions"]
        assert metrics["loss"] == pytest.approx(flat["metrics"]["loss"], abs=1e-6), (stage, name)
        for key in ("tokens_trained", "sequences", "groups"):
            assert metrics[key] == flat["metrics"][key], (stage, name, key)
        for n, w in flat["weights"].items():  # SGD: the update is the gradient (see rank_step.py)
            assert torch.allclose(result["weights"][n], w, rtol=0, atol=TOLERANCE), (stage, name, n)
        assert max(float((w - start[n].detach()).abs().max()) for n, w in flat["weights"].items()) > 1000 * TOLERANCE
    for name, spanning in (("grpo", 0), ("sessions", 1)):  # what the ranks trained: whole groups and sessions,
        group_of = [g.group_id for g in STEPS[name]() for _ in g.samples]  # but one of three sessions (balance)
        shares = split_trees_across_ranks([s.tokens for g in STEPS[name]() for s in g.samples], 2).shares
        first, second = ({group_of[i] for i in share} for share in shares)
        assert len(first & second) == spanning and len(first) == len(second) == 2, name
