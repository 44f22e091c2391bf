"""Evaluation pinned to policy versions: a greedy pass over a task source's eval set through the proxy."""

from seamlessflow.evaluation.options import EvalOptions
from seamlessflow.evaluation.runner import GreedyClient, run_pass

__all__ = ["EvalOptions", "GreedyClient", "run_pass"]
