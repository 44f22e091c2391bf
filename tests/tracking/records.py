"""Status, weight and eval records shaped like the services publish them, for the tracking and dashboard tests."""

from __future__ import annotations

import json

from seamlessflow.messages import ResourceStatus, WeightVersion, new_id


def trainer_status(step: int, reward: float, at_ms: int, version: int = 0, team: str = "default",
                   run: str = "default") -> ResourceStatus:
    figures = {"step": float(step), "busy_s": float(step)}
    if step:
        figures.update({"reward_mean": reward, "loss": 1.0 / step, "tokens_trained": 100.0, "step_time_s": 0.5})
    return ResourceStatus(new_id(), "trainer-0", "trainer", ["train"], "train", "active", version, figures,
                          team, run, at_ms)


def rollout_status(resource_id: str, tokens_per_s: float, at_ms: int, running: float = 1.0) -> ResourceStatus:
    return ResourceStatus(new_id(), resource_id, "rollout", ["rollout"], "rollout", "active", 0,
                          {"tokens_per_s": tokens_per_s, "requests_running": running}, "default", "default", at_ms)


def weights(version: int, step: int, at_ms: int) -> WeightVersion:
    return WeightVersion(new_id(), version, f"file:///w/v{version}", step, "hf-safetensors", "trainer-0",
                         "default", "default", at_ms)


def eval_json(version: int, accuracy: float, mean_reward: float, mean_length: float) -> bytes:
    """An eval record as an external evaluator (or one without the project's codec) publishes it."""
    return json.dumps({"version": version, "accuracy": accuracy, "mean_reward": mean_reward,
                       "mean_length": mean_length, "team": "default", "run": "default"}).encode()
