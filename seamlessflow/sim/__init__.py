"""Cluster simulator: the real scheduler policies on simulated resources and a long-tail workload."""

from __future__ import annotations

from seamlessflow.core.timeline import Interval, bubble_ratio
from seamlessflow.sim.result import SimResult
from seamlessflow.sim.simulator import SimulationStalled, Simulator
from seamlessflow.sim.timeline_plot import draw_timeline
from seamlessflow.sim.workload import Workload


def simulate(policy: str, gpus: int = 64, mix: float = 0.5, steps: int = 8, seed: int = 0,
             workload: Workload | None = None, **options: object) -> SimResult:
    """Run one policy to `steps` training steps and return its figures and timeline."""
    return Simulator(policy, gpus=gpus, mix=mix, steps=steps, seed=seed, workload=workload, **options).run()  # type: ignore[arg-type]


__all__ = [
    "Interval",
    "SimResult",
    "SimulationStalled",
    "Simulator",
    "Workload",
    "bubble_ratio",
    "draw_timeline",
    "simulate",
]
