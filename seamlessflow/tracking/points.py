"""Scalar points (tag, step, value) from the records the services already publish: what a tracker logs and
what the dashboard plots. Pure: messages in, points out.

Why from heartbeats: the trainer's heartbeat carries its last optimizer step's figures (`step`, `loss`,
`reward_mean`, ...), so the records on the status topic are the step records; a point is made when a
trainer's `step` figure moves (a heartbeat repeating the same step adds nothing). Throughput is per step
too: the rollout workers' `tokens_per_s` heartbeats are summed per heartbeat round and averaged over the
time since the previous step. Evaluation records (topic `eval`) are pinned to a policy version and plotted
at that version's training step when the weights topic (or a trainer heartbeat) said which step it was.
The eval and weights topics are read by one consumer with no order between them, so an eval of a version
whose step is not known yet waits for it, `eval_wait_s` at most, and is then plotted at the version: a
TensorBoard point cannot be moved once written.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from seamlessflow.messages import ResourceStatus, WeightVersion

TRAIN_FIGURES = ("reward_mean", "reward_std", "loss", "kl_mean", "clip_fraction", "logprob_abs_diff",
                 "step_time_s", "tokens_trained", "sequences", "groups")
EVAL_FIELDS = ("accuracy", "mean_reward", "mean_length")


@dataclass(frozen=True)
class Point:
    tag: str  # e.g. train/reward_mean, eval/accuracy, throughput/rollout_tokens_per_s
    step: int
    value: float
    wall_time_s: float


@dataclass(frozen=True)
class EvalFigures:
    """One evaluation of one policy version, whatever record carried it (the project's Avro message, or
    JSON from an external evaluator)."""

    version: int
    figures: dict[str, float]
    created_at_ms: int = 0


def eval_result(message: object) -> EvalFigures | None:
    """An EvalFigures from a decoded record with `version` and any of accuracy/mean_reward/mean_length
    (attributes or JSON keys), else None."""
    if isinstance(message, (bytes, str)):
        try:
            message = json.loads(message)
        except ValueError:
            return None
    get = message.get if isinstance(message, Mapping) else (lambda k, d=None: getattr(message, k, d))
    version = get("version")
    values = {k: get(k) for k in EVAL_FIELDS}
    figures = {k: float(v) for k, v in values.items() if isinstance(v, (int, float))}
    if not isinstance(version, int) or not figures:
        return None
    created = get("created_at_ms", 0)
    return EvalFigures(version, figures, int(created) if isinstance(created, (int, float)) else 0)


VERSIONS_KEPT = 10_000


@dataclass
class PointMaker:
    """Keeps what a point needs from earlier records (each trainer's last step, the step of each version,
    the throughput samples since the last step); `feed` returns the points one record adds."""

    team: str | None = None
    run: str | None = None
    step: int = 0  # the newest trainer step seen
    trainer_steps: dict[str, int] = field(default_factory=dict)
    version_steps: dict[int, int] = field(default_factory=dict)
    _rollout_rate: dict[str, float] = field(default_factory=dict)
    _rate_samples: list[float] = field(default_factory=list)
    _last_step_time_s: float | None = None
    _buffered: float | None = None
    _stage: float | None = None  # the scheduler's task-mix stage (SRPO), plotted with each step
    eval_wait_s: float = 10.0  # how long an eval waits for its version's step before it is plotted at the version
    _waiting_evals: dict[int, list[tuple[EvalFigures, float]]] = field(default_factory=dict)

    def feed(self, message: object, now_s: float | None = None) -> list[Point]:
        """The points `message` adds; `now_s` (monotonic seconds) dates an eval that waits for its step.
        A reader calls `overdue` once per poll for the evals that waited too long."""
        if not self._ours(message):
            return []
        if isinstance(message, ResourceStatus):
            return self._status(message) + self._version_began(message)
        if isinstance(message, WeightVersion):  # says exactly which step a version holds
            self._note_version(message.version, int(message.step))
            return [Point("train/version", int(message.step), float(message.version), message.created_at_ms / 1000),
                    *self._release(message.version)]
        result = message if isinstance(message, EvalFigures) else eval_result(message)
        if result is None:
            return []
        if result.version not in self.version_steps:
            waited_from = time.monotonic() if now_s is None else now_s
            self._waiting_evals.setdefault(result.version, []).append((result, waited_from))
            return []
        return eval_points(result, self.version_steps[result.version])

    def overdue(self, now_s: float) -> list[Point]:
        """Points of the evals that waited `eval_wait_s` for their version's step, plotted at the version."""
        late = [v for v, waiting in self._waiting_evals.items() if now_s - waiting[0][1] >= self.eval_wait_s]
        return [p for version in late for p in self._release(version)]

    def _version_began(self, status: ResourceStatus) -> list[Point]:
        """A trainer heartbeat's first step on a version (the weights topic may be compacted): the evals
        waiting for that version's step are released."""
        version = status.weight_version
        if status.kind != "trainer" or "step" not in status.figures or version <= 0 or version in self.version_steps:
            return []
        self._note_version(version, int(status.figures["step"]))
        return self._release(version)

    def _note_version(self, version: int, step: int) -> None:
        """Remembers the newest `VERSIONS_KEPT` versions' steps (an eval comes for a recent version; a run of
        days publishes hundreds of thousands)."""
        self.version_steps[version] = step
        while len(self.version_steps) > VERSIONS_KEPT:
            del self.version_steps[next(iter(self.version_steps))]  # the first noted: versions come in order

    def _release(self, version: int) -> list[Point]:
        step = self.version_steps.get(version, version)
        return [p for result, _ in self._waiting_evals.pop(version, []) for p in eval_points(result, step)]

    def _ours(self, message: object) -> bool:
        team, run = getattr(message, "team", None), getattr(message, "run", None)
        return (self.team is None or team in (None, self.team)) and (self.run is None or run in (None, self.run))

    def _status(self, status: ResourceStatus) -> list[Point]:
        wall = status.created_at_ms / 1000
        if status.kind == "rollout" and "tokens_per_s" in status.figures:
            self._rollout_rate[status.resource_id] = status.figures["tokens_per_s"]
            self._rate_samples.append(sum(self._rollout_rate.values()))
            return []
        if status.kind == "scheduler" and "buffered" in status.figures:
            self._buffered = status.figures["buffered"]  # plotted once per step, with the trainer's point
            self._stage = status.figures.get("stage", self._stage)  # `manager.stages`: the current one's index
            return []
        if status.kind != "trainer" or "step" not in status.figures:
            return []
        step = int(status.figures["step"])
        if step <= self.trainer_steps.get(status.resource_id, 0) or "reward_mean" not in status.figures:
            self.trainer_steps.setdefault(status.resource_id, step)
            return []
        self.trainer_steps[status.resource_id] = step
        self.step = max(self.step, step)
        points = [Point(f"train/{name}", step, float(status.figures[name]), wall)
                  for name in TRAIN_FIGURES if name in status.figures and math.isfinite(status.figures[name])]
        points.append(Point("train/weight_version", step, float(status.weight_version), wall))
        if self._buffered is not None:
            points.append(Point("pipeline/buffered", step, self._buffered, wall))
        if self._stage is not None:
            points.append(Point("pipeline/stage", step, self._stage, wall))
        if self._rate_samples:
            mean = sum(self._rate_samples) / len(self._rate_samples)
            points.append(Point("throughput/rollout_tokens_per_s", step, mean, wall))
            self._rate_samples = []
        if self._last_step_time_s is not None and wall > self._last_step_time_s:
            points.append(Point("throughput/steps_per_min", step, 60.0 / (wall - self._last_step_time_s), wall))
            if "tokens_trained" in status.figures:
                points.append(Point("throughput/trained_tokens_per_s", step,
                                    status.figures["tokens_trained"] / (wall - self._last_step_time_s), wall))
        self._last_step_time_s = wall
        return points


def eval_points(result: EvalFigures, step: int) -> list[Point]:
    wall = result.created_at_ms / 1000 if result.created_at_ms else 0.0
    return [Point(f"eval/{name}", step, value, wall) for name, value in sorted(result.figures.items())]
