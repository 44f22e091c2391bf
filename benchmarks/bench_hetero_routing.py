"""Simulator: hardware-aware (affinity) routing vs tag-blind hashing on H100 + H20, in one run.

Target from issue 14: affinity >= 1.3x shorter time to N training steps on a described workload
(ROLLART reports 1.31-2.05x). Headline: the `simulate --hetero` scenario (`seamlessflow/sim/hetero.py`).
Then the same rollout pool and workload with train pools of 16 to 64 H100, and prefill shares of 0.25 and
0.75, so a reader sees when routing matters (rollout-bound steps) and when it does not (train-bound).

Usage: python benchmarks/bench_hetero_routing.py [--steps 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from seamlessflow.sim.hetero import DEFAULT_CLUSTER, compare, mixed_workload, speedup


def line(label: str, runs) -> str:
    seconds = {r.routing: r.seconds for r in runs}
    busy = {r.routing: r.busy for r in runs}
    return (f"{label:42s} {seconds['affinity']:8.0f} {seconds['blind']:8.0f} {seconds['least-loaded']:8.0f} "
            f"{speedup(runs):6.2f}x {speedup(runs, over='least-loaded'):6.2f}x    "
            + " ".join(_share(busy["affinity"].get(pool)) for pool in ("h100", "h20", "h100+train")))


def _share(value: float | None) -> str:
    return f"{value:4.0%}" if value is not None else "   -"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{'run (s to ' + str(args.steps) + ' steps)':42s} {'affinity':>8s} {'blind':>8s} {'l-loaded':>8s} "
          f"{'blind/aff':>7s} {'ll/aff':>7s}   busy under affinity: h100 h20 train")
    print(line(f"headline {DEFAULT_CLUSTER}", compare(DEFAULT_CLUSTER, steps=args.steps, seed=args.seed)))
    for trainers in (16, 32, 64):
        cluster = f"{trainers}xh100:train,8xh100,16xh20"
        print(line(cluster, compare(cluster, steps=args.steps, seed=args.seed)))
    for share in (0.25, 0.75):
        runs = compare(DEFAULT_CLUSTER, mixed_workload(share), steps=args.steps, seed=args.seed)
        print(line(f"prefill share {share}", runs))
    runs = compare("48xh100:train,24xh100", steps=args.steps, seed=args.seed)
    print(line("homogeneous 48xh100:train,24xh100", runs))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
