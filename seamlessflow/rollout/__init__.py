"""Rollout workers: a vLLM engine per inference resource, driven by the control topic."""

from seamlessflow.rollout.options import RolloutOptions, WorkerSpec
from seamlessflow.rollout.service import RolloutService, run_service
from seamlessflow.rollout.worker import RolloutWorker

__all__ = ["RolloutOptions", "RolloutService", "RolloutWorker", "WorkerSpec", "run_service"]
