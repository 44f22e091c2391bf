"""Affinity routing vs tag-blind hashing on a heterogeneous cluster with a mixed workload (`simulate --hetero`).

The reference scenario, chosen to be rollout-bound (the only regime where routing can shorten a step):

- Model: Qwen2.5-7B shape (`hardware.ModelShape`), one engine per GPU (TP=1), the `disaggregated` policy
  (fixed train pool, one-step off-policy rollout), 8 training steps, 16 trajectories per GPU per step.
- Cluster `48xh100:train,8xh100,16xh20`: 48 H100 in the train pool; rollout on 8 H100 tagged `compute`
  and 16 H20 tagged `bandwidth` (figures in `hardware.GPUS`).
- Tasks, half each: `long-context` (prefill-heavy: 8,192-token prompt, response lognormal median 256,
  sigma 0.5, cap 1,024) and `reasoning` (decode-heavy: 512-token prompt, response median 4,000, sigma 0.9,
  cap 16,384, the simulator's long-CoT default). Each declares its profile.

With fewer trainers the step is bound by training (12N FLOPs over every prompt and response token) and
the gain shrinks; `docs/performance/scheduler.md` gives the sweep. Every run also reports how busy each pool was.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from seamlessflow.sim.cluster import Pool, parse_cluster
from seamlessflow.sim.hardware import Roofline
from seamlessflow.sim.result import SimResult
from seamlessflow.sim.simulator import Simulator
from seamlessflow.sim.workload import TaskKind, Workload

DEFAULT_CLUSTER = "48xh100:train,8xh100,16xh20"
ROUTINGS = ("affinity", "blind", "least-loaded")


def mixed_workload(prefill_share: float = 0.5, **fields: Any) -> Workload:
    tasks = (
        TaskKind("long-context", prefill_share, "prefill", 8192, 256.0, 0.5, 1024),
        TaskKind("reasoning", 1.0 - prefill_share, "decode", 512, 4000.0, 0.9, 16384),
    )
    return Workload(tasks=tuple(t for t in tasks if t.share > 0), **fields)


@dataclass(frozen=True)
class RoutingRun:
    routing: str
    result: SimResult
    busy: dict[str, float]  # pool label -> share of its time spent generating or training

    @property
    def seconds(self) -> float:
        return self.result.seconds


def run_routing(routing: str, cluster: tuple[Pool, ...], workload: Workload, steps: int = 8, seed: int = 0,
                policy: str = "disaggregated") -> RoutingRun:
    sim = Simulator(policy, steps=steps, seed=seed, workload=workload, cluster=cluster, routing=routing)
    result = sim.run()
    return RoutingRun(routing, result, pool_busy(sim, result))


def pool_busy(sim: Simulator, result: SimResult) -> dict[str, float]:
    busy: dict[str, float] = defaultdict(float)
    total: dict[str, float] = defaultdict(float)
    for interval in result.intervals:
        engine = sim.by_id[interval.resource_id]
        assert isinstance(engine.cost, Roofline)  # a cluster's engines are costed by their GPU
        label = f"{engine.cost.gpu.key}{'+train' if 'train' in engine.tags else ''}"
        total[label] += interval.duration
        busy[label] += interval.duration if interval.kind in ("rollout", "train") else 0.0
    return {label: busy[label] / total[label] for label in total if total[label] > 0}


def compare(cluster: str | tuple[Pool, ...] = DEFAULT_CLUSTER, workload: Workload | None = None, steps: int = 8,
            seed: int = 0, routings: tuple[str, ...] = ROUTINGS) -> list[RoutingRun]:
    """One run per routing on the same cluster, workload and seed (the task stream is the same)."""
    pools = parse_cluster(cluster) if isinstance(cluster, str) else cluster
    workload = workload or mixed_workload()
    return [run_routing(routing, pools, workload, steps, seed) for routing in routings]


def speedup(runs: list[RoutingRun], over: str = "blind", of: str = "affinity") -> float:
    seconds = {r.routing: r.seconds for r in runs}
    return seconds[over] / seconds[of]
