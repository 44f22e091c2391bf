"""Where the trainer's resident memory grows: its step loop taken apart, each part's RSS slope side by side.

The full-stack soak shows the trainer growing ~0.15 MiB/s (~47 KB a step) outside Python's heap
(`docs/performance/soak.md`). This script runs the trainer's own per-step work on the tests' random tiny
model (one DeepSpeed rank, gloo, the default CPU config), in one fresh process per variant, adding one part
at a time as the trainer does it each step with `publish_every: 1`, `checkpoint_every: 1`:
- `step`: `PolicyEngine.train_step` on a new batch of varied lengths (as the topic brings them);
- `export`: + the version's host snapshot written as safetensors by the background writer, old ones pruned;
- `checkpoint`: + a full DeepSpeed checkpoint, old tags pruned.
Each variant runs as the services start (`seamlessflow/allocator.py`: glibc's defaults unless asked) and
under the settings given with `--env` (e.g. `SEAMLESSFLOW_MALLOC_MMAP_THRESHOLD=131072`: glibc's mmap
threshold fixed at 128 KiB; or `LD_PRELOAD=...libjemalloc.so.2`). RSS is read every `--every` steps
after `--warmup` steps; the slope is a least-squares fit, in KiB per step and MiB per second of this machine's
step rate; the mean step time says what the setting costs.

Usage: python benchmarks/trainer_rss.py [--steps 600] [--warmup 100] [--modes step,export,checkpoint]
       [--env NAME=VALUE[,NAME=VALUE] ...] [--csv OUT.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

MODES = ("step", "export", "checkpoint")


def rss_kib() -> int:
    return psutil.Process().memory_info().rss // 1024


def batch(rng: random.Random, vocab: int, groups: int = 2, size: int = 2):
    """Groups of varied lengths (40-400 tokens): the allocator sees new tensor shapes each step."""
    from seamlessflow.core.batching import KeptGroup, TrajectorySample

    out = []
    for g in range(groups):
        samples = []
        for i in range(size):
            prompt, generated = rng.randint(20, 200), rng.randint(20, 200)
            tokens = tuple(rng.randrange(1, vocab) for _ in range(prompt + generated))
            mask = (0,) * prompt + (1,) * generated
            samples.append(TrajectorySample(f"g{g}s{i}", f"g{g}", f"t{g}", tokens, mask,
                                            tuple(-5.0 * m for m in mask), tuple(0 if m else -1 for m in mask),
                                            reward=float(i % 2)))
        out.append(KeptGroup(f"g{g}", f"t{g}", samples, [1.0] * size))
    return out


def run_variant(mode: str, steps: int, warmup: int, every: int) -> dict:
    """One process: the trainer's parts up to `mode`, `steps` times; the RSS samples."""
    from seamlessflow.allocator import fix_mmap_threshold
    from seamlessflow.testing.models import build_random_tiny_model
    from seamlessflow.trainer.options import DEEPSPEED_CONFIGS
    from seamlessflow.trainer.policy_engine import PolicyEngine
    from seamlessflow.weights.files import WeightWriter, prune_versions, save_weights
    from seamlessflow.weights.snapshot import host_snapshot

    fix_mmap_threshold()  # as every service does at its start (`service_main`)
    tmp = Path(tempfile.mkdtemp(prefix="trainer-rss-"))
    model = build_random_tiny_model(tmp / "model")
    engine = PolicyEngine(model, json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text()))
    vocab, rng, writer = engine.module.config.vocab_size, random.Random(0), WeightWriter()
    samples, started = [], time.monotonic()
    for step in range(1, steps + 1):
        engine.train_step(batch(rng, vocab))
        if mode in ("export", "checkpoint"):
            state = host_snapshot(engine.module.state_dict())
            writer.submit(step, step, lambda v=step, s=state: save_weights(engine.module, tmp / "w", v, model, s))
            for _ in writer.drain():
                prune_versions(tmp / "w", 3, protect=step)
        if mode == "checkpoint":
            engine.save_checkpoint(tmp / "ckpt", f"step{step:08d}", {"sf_step": step})
            for old in sorted((tmp / "ckpt").glob("step*"))[:-2]:
                shutil.rmtree(old)
        if step == warmup:
            started = time.monotonic()
        if step >= warmup and (step - warmup) % every == 0:
            samples.append((step, time.monotonic() - started, rss_kib()))
    shutil.rmtree(tmp, ignore_errors=True)
    return {"mode": mode, "samples": samples, "step_s": (time.monotonic() - started) / (steps - warmup)}


def slope(points: list[tuple[float, float]]) -> float:
    """The least-squares line's slope (as `bench_soak.slopes` fits each service's curve)."""
    return statistics.linear_regression(*zip(*points, strict=True)).slope


def child(args) -> None:
    print(json.dumps(run_variant(args.child, args.steps, args.warmup, args.every)))


def compare(args) -> None:
    envs = [""] + list(args.env)  # "": as the services start by default
    rows = []
    for mode in args.modes.split(","):
        for extra in envs:
            env = dict(os.environ, **dict(kv.split("=", 1) for kv in extra.split(",") if kv))
            out = subprocess.run([sys.executable, __file__, "--child", mode, "--steps", str(args.steps), "--warmup",
                                  str(args.warmup), "--every", str(args.every)],
                                 env=env, capture_output=True, text=True, check=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            samples = result["samples"]
            per_step = slope([(s, kib) for s, _, kib in samples])
            per_s = slope([(t, kib) for _, t, kib in samples]) / 1024
            rows.append((mode, extra or "(default)", samples[0][2] // 1024, samples[-1][2] // 1024,
                         per_step, per_s, samples))
            print(f"{mode:10s} {extra or '(default)':45s} RSS {samples[0][2] // 1024} -> "
                  f"{samples[-1][2] // 1024} MiB  {per_step:+.2f} KiB/step  {per_s:+.4f} MiB/s  "
                  f"{result['step_s'] * 1000:.0f} ms/step", flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            table = csv.writer(f)
            table.writerow(["mode", "env", "step", "seconds", "rss_kib"])
            for mode, extra, *_, samples in rows:
                table.writerows([mode, extra, s, f"{t:.2f}", kib] for s, t, kib in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE[,NAME=VALUE]: another variant")
    parser.add_argument("--csv")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    child(args) if args.child else compare(args)


if __name__ == "__main__":
    main()
