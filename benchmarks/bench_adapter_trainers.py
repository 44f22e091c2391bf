"""A trainer per team's adapter (what `up` runs) against one trainer holding every team's adapter, side by side.

The same work in each mode: `--steps` optimizer steps per team on a group of two `--tokens`-token trajectories,
two teams (LoRA rank 8 on q_proj and v_proj), the default model's shape (random weights), fp32 on the CPU. Plain
torch and PEFT in every mode (AdamW over the adapter's parameters, a policy-gradient loss on the trained tokens),
so the modes differ only in the design:

- `per team, together`: a process per team, each loading the base and its team's adapter, stepping at once
  (the teams' trainers as the OS schedules them);
- `per team, in turns`: the same processes, one stepping at a time (the scheduler's training time share,
  `scheduler.train_share` with `concurrent: 1`);
- `one for both`: one process, the base loaded once with both adapters injected under their names, an optimizer
  per adapter, the steps alternating between them (`set_adapter`).

Printed per mode: wall seconds for all steps, steps per minute, and the peak resident memory of its processes
summed (sampled every 20 ms). A last row, for scale: one team's trainer as `up` runs it (`PolicyEngine`, DeepSpeed),
its peak resident memory after the same steps.

Usage: python benchmarks/bench_adapter_trainers.py [--steps 30] [--tokens 384]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEAMS = ("red", "blue")


def rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def batch(tokens: int):
    import torch

    ids = torch.tensor([[(i * 7919 + k) % 16000 + 10 for i in range(tokens)] for k in (0, 1)])
    mask = torch.zeros_like(ids, dtype=torch.float32)
    mask[:, tokens // 2:] = 1.0
    return ids, mask, torch.tensor([1.0, -1.0])


def pg_step(model, optimizer, data) -> None:
    """One policy-gradient step: advantage-weighted logprobs of the trained tokens."""
    import torch

    ids, mask, advantages = data
    logits = model(input_ids=ids).logits[:, :-1].float()
    logprobs = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
    loss = -((logprobs * mask[:, 1:]).sum(1) * advantages).mean() / mask.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def with_adapters(model_dir: str, names: tuple[str, ...]):
    """The base once, with a LoRA adapter injected under each name; only adapters' parameters train."""
    import torch
    from peft import LoraConfig, inject_adapter_in_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    for name in names:
        model = inject_adapter_in_model(LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]), model,
                                        adapter_name=name)
    for pname, p in model.named_parameters():
        p.requires_grad_("lora_" in pname)
    optimizers = {name: torch.optim.AdamW([p for n, p in model.named_parameters() if f".{name}." in n], lr=1e-4)
                  for name in names}
    return model, optimizers


def set_adapter(model, name: str) -> None:
    from peft.tuners.tuners_utils import BaseTunerLayer

    for module in model.modules():
        if isinstance(module, BaseTunerLayer):
            module.set_adapter(name)


def worker(model_dir: str, names: tuple[str, ...], steps: int, tokens: int, ready, go, done) -> None:
    """Builds its trainer, waits for `go` (so a mode's processes can step together or in turns), steps, reports."""
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    model, optimizers = with_adapters(model_dir, names)
    data = batch(tokens)
    ready.put(os.getpid())
    go.wait()
    for _ in range(steps):
        for name in names:
            set_adapter(model, name)
            pg_step(model, optimizers[name], data)
    done.put(len(names) * steps)


def engine_worker(settings_yaml: str, team: str, steps: int, tokens: int, ready, go, done) -> None:
    """One team's trainer as `up` runs it: its `PolicyEngine` (DeepSpeed), the same steps."""
    from seamlessflow.config import Settings
    from seamlessflow.core.batching import KeptGroup, TrajectorySample
    from seamlessflow.trainer.options import TrainerOptions
    from seamlessflow.trainer.policy_engine import PolicyEngine

    settings = Settings.load(Path(settings_yaml), env={})
    options = TrainerOptions.from_settings(settings).for_adapter(team).with_model(settings)
    engine = PolicyEngine.from_options(options, options.team_adapter(settings))
    ids, mask, _ = batch(tokens)
    samples = tuple(TrajectorySample(f"s{k}", "g", "t", tuple(ids[k].tolist()), tuple(int(m) for m in mask[k]),
                                     (-1.0,) * tokens, (0,) * tokens, float(1 - k)) for k in (0, 1))
    group = KeptGroup("g", "t", list(samples), [1.0, 1.0])
    ready.put(os.getpid())
    go.wait()
    for _ in range(steps):
        engine.train_step([group])
    done.put(steps)


def run_mode(processes: list[tuple], together: bool) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB summed over the processes, steps)."""
    spawn = multiprocessing.get_context("spawn")
    ready, done = spawn.Queue(), spawn.Queue()
    gates = [spawn.Event() for _ in processes]
    procs = [spawn.Process(target=target, args=(*args, ready, gate, done))
             for (target, args), gate in zip(processes, gates, strict=True)]
    for p in procs:
        p.start()
    peak, steps = 0.0, 0
    try:
        for _ in procs:
            ready.get(timeout=600)  # each built its trainer
        started = time.perf_counter()
        order = [gates] if together else [[g] for g in gates]
        for turn in order:
            for gate in turn:
                gate.set()
            for _ in turn:
                while True:
                    peak = max(peak, sum(rss_mib(p.pid) for p in procs if p.is_alive()))
                    if not done.empty():
                        steps += done.get()
                        break
                    time.sleep(0.02)
        return time.perf_counter() - started, peak, steps
    finally:
        for p in procs:
            p.join(60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=384)
    args = parser.parse_args()

    from seamlessflow.config import Settings
    from seamlessflow.model.lora import write_adapter
    from seamlessflow.testing.models import build_long_context_tiny_model

    work = Path(tempfile.mkdtemp(prefix="bench-adapter-trainers-"))
    model_dir = str(build_long_context_tiny_model(work / "model"))
    one = (worker, (model_dir, ("red",), args.steps, args.tokens))
    rows = {
        "per team, together": (run_mode([one, (worker, (model_dir, ("blue",), args.steps, args.tokens))], True)),
        "per team, in turns": (run_mode([one, (worker, (model_dir, ("blue",), args.steps, args.tokens))], False)),
        "one for both": run_mode([(worker, (model_dir, TEAMS, args.steps, args.tokens))], True),
    }
    path = write_adapter(Path(model_dir), work / "adapters" / "red", rank=8)
    settings = Settings().with_overrides(
        data_dir=str(work / "data"), proxy={"teams": {"red": {"lora": {"name": "red-lora", "path": str(path),
                                                                         "rank": 8}}}},
        trainer={"target": "adapters", "model_path": model_dir})
    engine = run_mode([(engine_worker, (str(settings.dump_yaml(work / "config.yaml")), "red", args.steps,
                                        args.tokens))], True)
    print(f"two teams' LoRA adapters (rank 8, q_proj and v_proj) on the default model's shape, fp32; {args.steps} "
          f"steps per team on a group of two {args.tokens}-token trajectories; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'mode':>40} {'wall s':>7} {'steps/min':>10} {'peak RSS MiB':>13}")
    for name, (wall, peak, steps) in rows.items():
        print(f"{name + ' (torch + PEFT)':>40} {wall:7.1f} {steps * 60 / wall:10.1f} {peak:13.0f}")
    wall, peak, steps = engine
    print(f"{'one team, as up runs it (DeepSpeed)':>40} {wall:7.1f} {steps * 60 / wall:10.1f} {peak:13.0f}")


if __name__ == "__main__":
    main()
