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

from seamlessflow.trainer.ranks import launched_ranks

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-6  # float32 weights after one SGD step (lr 0.5): only the all-reduce's summation order differs


def run_step(ranks: int, model_dir, out: Path, stage: int = 1) -> dict:
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
            str(ROOT / "tests" / "trainer" / "rank_step.py"), str(model_dir), str(out), str(stage)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    return torch.load(out)


@pytest.mark.slow
@pytest.mark.parametrize("stage", [1, 3])  # 3: parameters, gradients and optimizer state partitioned
def test_two_ranks_and_one_rank_train_the_same_batch_to_the_same_weights(tiny_model_dir, tmp_path, stage):
    one = run_step(1, tiny_model_dir, tmp_path / "one.pt", stage)
    two = run_step(2, tiny_model_dir, tmp_path / "two.pt", stage)
    assert (one["world"], two["world"]) == (1, 2)
    assert {p.dtype for p in two["weights"].values()} == {torch.float32}  # no silent bf16 (see trainer/model.py)
    for key in ("tokens_trained", "sequences", "groups"):
        assert one["metrics"][key] == two["metrics"][key], key
    assert two["metrics"]["loss"] == pytest.approx(one["metrics"]["loss"], abs=1e-6)
    for name, p in one["weights"].items():
        assert torch.allclose(two["weights"][name], p, rtol=0, atol=TOLERANCE), name
    start = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).named_parameters())
    moved = max(float((one["weights"][n] - start[n].detach()).abs().max()) for n in one["weights"])
    assert moved > 1000 * TOLERANCE  # the step moved the weights far more than the tolerance (a gradient
    # off by the world size would leave half of that between the two)


def test_a_lone_process_is_one_rank(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert launched_ranks() == 1
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert launched_ranks() == 4
