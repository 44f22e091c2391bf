"""Stages of a run's task mix (SRPO's two-stage training: math alone to grow long reasoning, then math and
code), as pure rules.

A run's task sources can change with the run: a list of stages, each with its sources' weights and an end
condition (a trainer step, a weight version, or a metric crossing a threshold). Why stages only move
forward: a metric that crossed its threshold may fall back once the next stage's tasks come in (code drags
the mean reward down); going back would make the mix oscillate. Why the stage is re-derivable: the rollout
manager records each task's stage in its payload and rebuilds from the tasks topic, so a restarted
scheduler resumes at the newest stage it had published in, then re-checks the end conditions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StageEnd:
    """When a stage is over: at `step` (trainer steps), at `version` (weight versions), or once `metric` is
    `above` (or `below`) a threshold; any one of those given that holds ends it."""

    step: int | None = None
    version: int | None = None
    metric: str | None = None
    above: float | None = None
    below: float | None = None

    def reached(self, progress: Mapping[str, float]) -> bool:
        """`progress`: "step", "version" and the metrics by name (a metric not measured yet never holds)."""
        if self.step is not None and progress.get("step", 0) >= self.step:
            return True
        if self.version is not None and progress.get("version", 0) >= self.version:
            return True
        value = progress.get(self.metric) if self.metric else None
        if value is None:
            return False
        return (self.above is not None and value > self.above) or (self.below is not None and value < self.below)


def stage_after(ends: Sequence[StageEnd | None], current: int, progress: Mapping[str, float]) -> int:
    """The stage to be in now, from `current` on: move past every stage whose end holds (the last stage,
    whose end is None, never ends)."""
    stage = max(0, min(current, len(ends) - 1))
    while stage < len(ends) - 1 and (end := ends[stage]) is not None and end.reached(progress):
        stage += 1
    return stage
