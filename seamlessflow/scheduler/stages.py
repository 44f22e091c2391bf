"""Stages of the task mix (`manager.stages`): which sources feed the run, with which weights, until when.

SRPO's two-stage paradigm is the example (`infra/examples/srpo-stages.yaml`): math alone until a step (or
until the math reward is high enough), then math and code, so neither domain's response length and reward
dynamics drown the other. The rules (end conditions, forward only) are `core.stages`; this module holds the
shares within the current stage, and the recent per-source figures the metric conditions read.
Shares are counted within a stage: groups published in an earlier stage do not make a source "ahead" in the
next one. Each published task names its stage in its payload, so a restarted scheduler, which folds the tasks
topic, resumes in the newest stage it had published in.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping

from seamlessflow.core.stages import stage_after
from seamlessflow.scheduler.options import StageOptions

log = logging.getLogger(__name__)


def check_stages(stages: list[StageOptions], source_names: list[str]) -> None:
    for i, stage in enumerate(stages):
        unknown = set(stage.weights) - set(source_names)
        if unknown:
            raise ValueError(f"stage {stage.name!r} names unknown sources {sorted(unknown)} (known: {source_names})")
        if min(stage.weights.values()) <= 0:
            raise ValueError(f"stage {stage.name!r}: weights must be positive")
        if stage.until is None and i < len(stages) - 1:
            raise ValueError(f"stage {stage.name!r} is not the last, so it needs `until`")


class StagePlan:
    """The current stage, its per-source counts, and the recent figures its end may depend on."""

    def __init__(self, stages: list[StageOptions], source_names: list[str], window: int = 32):
        check_stages(stages, source_names)
        self.stages, self.names = stages, source_names
        self.current = 0
        self.published: collections.Counter[str] = collections.Counter()  # groups per source in this stage
        self._recent: dict[str, collections.deque[tuple[float, int]]] = {
            name: collections.deque(maxlen=window) for name in source_names}

    @property
    def name(self) -> str:
        return self.stages[self.current].name

    def shares(self) -> tuple[list[str], list[float], list[int]]:
        """The current stage's sources, their weights and the groups each got in this stage."""
        weights = self.stages[self.current].weights
        names = [n for n in self.names if n in weights]
        return names, [weights[n] for n in names], [self.published[n] for n in names]

    def on_task(self, stage: int, source: str) -> None:
        """A task published in `stage` (this process's or, on a rebuild, an earlier one's)."""
        if stage > self.current:
            self._enter(min(stage, len(self.stages) - 1))
        if stage == self.current:
            self.published[source] += 1

    def on_trajectory(self, source: str, reward: float, response_tokens: int) -> None:
        if source in self._recent:
            self._recent[source].append((reward, response_tokens))

    def metrics(self) -> dict[str, float]:
        """Mean reward and response length (trained tokens) of each source's recent trajectories, and of all."""
        out: dict[str, float] = {}
        every = [item for recent in self._recent.values() for item in recent]
        for prefix, items in [("", every)] + [(f"source.{n}.", list(r)) for n, r in self._recent.items()]:
            if items:
                out[f"{prefix}recent_reward"] = sum(r for r, _ in items) / len(items)
                out[f"{prefix}recent_length"] = sum(n for _, n in items) / len(items)
        return out

    def advance(self, step: float, version: int) -> bool:
        """Moves past every stage whose end holds now; True when the stage changed."""
        progress: Mapping[str, float] = {"step": step, "version": version, **self.metrics()}
        ends = [s.until.rule() if s.until else None for s in self.stages]
        after = stage_after(ends, self.current, progress)
        if after == self.current:
            return False
        log.info("stage %s -> %s at step %d, version %d (%s)", self.name, self.stages[after].name, step, version,
                 ", ".join(f"{k}={v:.3g}" for k, v in sorted(progress.items())))
        self._enter(after)
        return True

    def _enter(self, stage: int) -> None:
        self.current = stage
        self.published.clear()

    def figures(self) -> dict[str, float]:
        return {"stage": float(self.current), **self.metrics()}
