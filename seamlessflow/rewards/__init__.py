"""Reward workers: trajectories of sessions that ended without a reward are scored off the GPU path."""

from seamlessflow.rewards.request import ScoreRequest, Unscored

__all__ = ["ScoreRequest", "Unscored"]
