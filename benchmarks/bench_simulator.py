"""Simulator: multiplexed vs colocated vs disaggregated on a long-tail workload at 64 GPUs, in one run.

Targets from issue 6: multiplexed >= 2.0x colocated throughput, multiplexed bubble ratio <= 5 %.
Besides the headline (the policies' own staleness bounds, half the GPUs tagged {rollout, train}) it
prints how the figures move with the tag mix and the staleness bound, and the same run at 512 GPUs, so a
reader sees where the bubble comes from. Workload and cost defaults: `seamlessflow/sim/workload.py`.

Usage: python benchmarks/bench_simulator.py [--steps 10] [--seed 0]
Writes benchmarks/figures/simulator_64.png (timelines of the three headline runs).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from seamlessflow.sim import SimResult, simulate
from seamlessflow.sim.timeline_plot import draw_timelines

OUT = Path(__file__).parent / "figures"
POLICIES = ("colocated", "disaggregated", "multiplexed")


def row(label: str, result: SimResult, base: SimResult) -> str:
    return (f"{label:34s} {result.train_capable:3d}/{result.gpus:<4d} {result.throughput:11,.0f} "
            f"{result.throughput / base.throughput:6.2f}x {result.bubble_ratio:7.1%} {result.idle_ratio:6.1%} "
            f"{result.overhead_ratio:7.1%} {result.staleness_mean:5.2f}/{result.staleness_max}")


def header() -> str:
    return (
        f"{'run':34s} {'r+t/GPUs':8s} {'tok/s':>11s} {'x coloc':>7s} {'bubble':>7s} {'idle':>6s} {'switch':>7s} stale"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()

    headline = {p: simulate(p, gpus=64, mix=0.5, steps=args.steps, seed=args.seed) for p in POLICIES}
    base = headline["colocated"]
    print(f"64 GPUs, {args.steps} steps, batch {base.batch_size}, seed {args.seed}; "
          f"colocated rollout share of step time {base.rollout_share:.0%}")
    print(header())
    for name, result in headline.items():
        print(row(name, result, base))
    multiplexed = headline["multiplexed"]
    speedup = multiplexed.throughput / base.throughput
    print(
        f"target multiplexed >= 2.0x colocated: {speedup:.2f}x {'met' if speedup >= 2.0 else 'MISSED'}; "
        f"target bubble <= 5%: {multiplexed.bubble_ratio:.1%} {'met' if multiplexed.bubble_ratio <= 0.05 else 'MISSED'}"
    )
    png = draw_timelines([(f"{n} ({r.throughput:,.0f} tok/s)", r.intervals) for n, r in headline.items()],
                         OUT / "simulator_64.png")

    print("\nmix of {rollout,train} GPUs (staleness bound 1)")
    for mix in (0.25, 0.5, 0.75):
        for name in ("disaggregated", "multiplexed"):
            print(row(f"{name} mix={mix}", simulate(name, gpus=64, mix=mix, steps=args.steps, seed=args.seed), base))

    print("\nstaleness bound 2 (two steps off-policy), mix 0.5")
    for name in ("disaggregated", "multiplexed"):
        result = simulate(name, gpus=64, mix=0.5, steps=args.steps, seed=args.seed, max_staleness=2)
        print(row(f"{name} max_staleness=2", result, base))

    print("\n512 GPUs, mix 0.5")
    big = {p: simulate(p, gpus=512, mix=0.5, steps=args.steps, seed=args.seed) for p in POLICIES}
    for name, result in big.items():
        print(row(name, result, big["colocated"]))
    print(f"\ntimeline: {png}  ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
