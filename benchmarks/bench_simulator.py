"""Simulator: multiplexed vs colocated vs disaggregated on a long-tail workload at 64 GPUs, in one run.

Targets from issue 6: multiplexed >= 2.0x colocated throughput, multiplexed bubble ratio <= 5 %.
Besides the headline (the policies' own staleness bounds, half the GPUs tagged {rollout, train}) it
prints how the figures move with the tag mix and the staleness bound, and the same run at 512 GPUs, so a
reader sees where the bubble comes from. Workload and cost defaults: `seamlessflow/sim/workload.py`.

With `--autoscale` it prints instead a fixed-size cluster beside the same cluster whose rollout-only engines
the autoscaling policy (`seamlessflow/core/autoscale.py`) grows and drains, on a burst of tasks then its long
tail (`sim.workload.burst_then_lull`, `sim/elastic.py`): GPU-hours, bubble and throughput side by side.

Usage: python benchmarks/bench_simulator.py [--steps 10] [--seed 0]
       python benchmarks/bench_simulator.py --autoscale [--gpus 64] [--steps 20] [--policy multiplexed]
Writes benchmarks/figures/simulator_64.png (timelines of the three headline runs; not with --autoscale).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from seamlessflow.core.autoscale import ScalingLimits
from seamlessflow.sim import SimResult, simulate
from seamlessflow.sim.elastic import ElasticResult, simulate_elastic
from seamlessflow.sim.timeline_plot import draw_timelines
from seamlessflow.sim.workload import burst_then_lull

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


def elastic_row(label: str, result: ElasticResult, base: ElasticResult) -> str:
    sim = result.sim
    cells = [label, f"{result.engines_mean:.1f} / {result.engines_peak}", f"{result.gpu_hours:.1f}",
             f"{result.gpu_hours / base.gpu_hours:.2f}x", f"{sim.bubble_ratio:.1%}", f"{result.slots_used:.1%}",
             f"{sim.throughput:,.0f}", f"{sim.throughput / base.sim.throughput:.3f}x", f"{sim.seconds:,.0f}",
             str(len(result.decisions))]
    return "| " + " | ".join(cells) + " |"


ELASTIC_HEADER = ("run", "GPUs mean / peak", "GPU-hours", "GPU-h vs fixed", "bubble", "slots used", "tok/s",
                  "tok/s vs fixed", "seconds", "scale changes")


def autoscale(args: argparse.Namespace) -> None:
    """Fixed vs autoscaled rollout engines on one burst-then-lull workload (same seed, same tasks)."""
    gpus, steps = args.gpus, args.steps or 20
    arrivals = burst_then_lull(peak=0.25 * gpus)  # 16 tasks/s at 64 GPUs, above what they serve (~12/s)
    rollout_only = gpus - round(gpus * 0.5)
    limits = ScalingLimits(min_engines=max(1, rollout_only // 8), max_engines=rollout_only)
    common = dict(gpus=gpus, mix=0.5, steps=steps, seed=args.seed)
    fixed = simulate_elastic(args.policy, arrivals, None, **common)
    scaled = simulate_elastic(args.policy, arrivals, limits, **common)
    burst, lull = arrivals.phases
    print(f"{gpus} GPUs ({gpus - rollout_only} rollout+train fixed, {rollout_only} rollout-only), {args.policy}, "
          f"{steps} steps of {fixed.sim.batch_size}, seed {args.seed}; tasks {burst[1]:g}/s for {burst[0]:.0f} s "
          f"then {lull[1]:g}/s; autoscaled rollout-only engines in [{limits.min_engines}, {limits.max_engines}], "
          f"start-up 60 s, cool-down {limits.cooldown_s:g} s")
    print("| " + " | ".join(ELASTIC_HEADER) + " |")
    print("|" + "---|" * len(ELASTIC_HEADER))
    print(elastic_row("fixed", fixed, fixed))
    print(elastic_row("autoscaled", scaled, fixed))
    print(f"autoscaled: {1 - scaled.gpu_hours / fixed.gpu_hours:.0%} fewer GPU-hours at "
          f"{scaled.sim.throughput / fixed.sim.throughput:.1%} of the fixed cluster's throughput")
    print("\ndecisions (time, change, target, reason)")
    for decision in scaled.decisions:
        print(f"  {decision.at:7.0f} s {decision.change:+d} -> {decision.target}: {decision.reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="training steps (default 10; 20 with --autoscale)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--autoscale", action="store_true", help="fixed vs autoscaled engines, burst then lull")
    parser.add_argument("--gpus", type=int, default=64, help="cluster size for --autoscale")
    parser.add_argument("--policy", default="multiplexed", help="scheduler policy for --autoscale")
    args = parser.parse_args()
    if args.autoscale:
        autoscale(args)
        return
    args.steps = args.steps or 10
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
    for name, result in headline.items():
        print(f"{name}: every GPU-second (core.accounting)")
        print("\n".join(result.accounts().lines()))
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
