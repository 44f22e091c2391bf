"""Scalar points (tag, step, value) from the records the services already publish: what a tracker logs and
what the dashboard plots. Pure: messages in, points out.

Why from heartbeats: the trainer's heartbeat carries its last optimizer step's figures (`step`, `loss`,
`reward_mean`, ...), so the records on the status topic are the step records; a point is made when a trainer's
`step` figure moves (a heartbeat repeating the same step adds nothing); the train-inference mismatch figures
(`MISMATCH_FIGURES`) come the same way, as `train/mismatch_abs_mean`, `train/stale_kl`, ... (a figure a step did not
define makes no point: missing, NaN, or a mismatch kind's figures at a step with no token of that kind). Throughput
is per step too: the rollout workers' `tokens_per_s` heartbeats are summed per heartbeat round and averaged over the
time since the previous step. Evaluation records (topic `eval`) are pinned to a policy version and plotted at that
version's training step when the weights topic (or a trainer heartbeat) said which step it was.
The eval and weights topics are read by one consumer with no order between them, so an eval of a version
whose step is not known yet waits for it, `eval_wait_s` at most, and is then plotted at the version: a
TensorBoard point cannot be moved once written.

Teams' adapters: in a stack that trains them (`trainer.target: adapters`) each team's trainer has its own steps
and versions, so each gets curves of its own, its tags naming the team after the group: `train/<team>/reward_mean`,
`train/<team>/version`, `eval/<team>/accuracy`, `throughput/<team>/steps_per_min`, `pipeline/<team>/buffered`
(TensorBoard shows a team's figures side by side in each group, and a filter such as `reward_mean` shows every
team's). Which trainer is whose comes from the settings (`trainer.adapter_trainers`): a heartbeat by the
trainer's resource id, a version by its trainer (else its `adapter`), an eval by its `team`. The base's tags stay
`train/<figure>`, as in a stack that trains the base. The rollout throughput and the scheduler's backlog are the
stack's, plotted with each team's steps.

Agent pools: where session ends are read too, each pool's mean reward and sessions a minute are plotted per step
(`pool/<pool>/...`, `tracking.pools`): a newcomer's own agent has its own curve beside the demo's.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seamlessflow.messages import EpisodeEnd, ResourceStatus, WeightVersion
from seamlessflow.tracking.pools import PoolRewards

if TYPE_CHECKING:
    from seamlessflow.config import Settings
    from seamlessflow.trainer.adapter_trainers import AdapterTrainer

log = logging.getLogger(__name__)

# the train-inference mismatch monitor: the trainer's logprobs against the engine's recorded ones, for the
# tokens of the version it holds (`mismatch_*`, ~0 when healthy) and of older versions (`stale_*`, staleness)
MISMATCH_FIGURES = tuple(f"{kind}_{figure}" for kind in ("mismatch", "stale")
                         for figure in ("abs_mean", "abs_max", "kl", "share", "tokens")) + ("masked_tokens",)
TRAIN_FIGURES = ("reward_mean", "reward_std", "loss", "kl_mean", "clip_fraction", "dual_clip_fraction",
                 "logprob_abs_diff", "step_time_s", "tokens_trained", "sequences", "groups", *MISMATCH_FIGURES,
                 "teacher_kl", "taught_tokens")  # on-policy distillation: only for steps with taught tokens
EVAL_FIELDS = ("accuracy", "mean_reward", "mean_length")


@dataclass(frozen=True)
class Point:
    tag: str  # e.g. train/reward_mean, eval/accuracy, throughput/rollout_tokens_per_s; train/red/reward_mean
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
    team: str | None = None  # whose policy: in an adapters stack, the team whose adapter was evaluated


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
    created, team = get("created_at_ms", 0), get("team")
    return EvalFigures(version, figures, int(created) if isinstance(created, (int, float)) else 0,
                       team if isinstance(team, str) else None)


VERSIONS_KEPT = 10_000


@dataclass
class Lane:
    """What one trainer's curves need: the base's (`team` None, tags `train/<figure>`) or a team's adapter's
    (tags `train/<team>/<figure>`), each with its own steps and versions."""

    team: str | None = None
    version_steps: dict[int, int] = field(default_factory=dict)
    waiting_evals: dict[int, list[tuple[EvalFigures, float]]] = field(default_factory=dict)
    rate_samples: list[float] = field(default_factory=list)
    last_step_time_s: float | None = None

    def tag(self, group: str, name: str) -> str:
        return f"{group}/{name}" if self.team is None else f"{group}/{self.team}/{name}"


@dataclass
class PointMaker:
    """Keeps what a point needs from earlier records (each trainer's last step, the step of each version,
    the throughput samples since the last step); `feed` returns the points one record adds. `trainers`
    (trainer resource id -> team) and `adapters` (adapter name -> team) name the teams' adapter trainers of an
    adapters stack (`for_settings` reads them); their points go on each team's own tags."""

    team: str | None = None
    run: str | None = None
    step: int = 0  # the newest trainer step seen (any trainer's)
    trainer_steps: dict[str, int] = field(default_factory=dict)
    eval_wait_s: float = 10.0  # how long an eval waits for its version's step before it is plotted at the version
    trainers: dict[str, str] = field(default_factory=dict)
    adapters: dict[str, str] = field(default_factory=dict)
    _lanes: dict[str | None, Lane] = field(default_factory=dict)
    _rollout_rate: dict[str, float] = field(default_factory=dict)
    _buffered: float | None = None
    _stage: float | None = None  # the scheduler's task-mix stage (SRPO), plotted with each step
    _pools: PoolRewards = field(default_factory=PoolRewards)  # each agent pool's own curve (tracking.pools)

    def __post_init__(self) -> None:
        for team in self.teams:  # from the start: each team's rollout throughput counts before its first step
            self._lane(team)

    @classmethod
    def for_settings(cls, settings: Settings) -> PointMaker:
        """The run's maker; in an adapters stack it knows each team's adapter trainer from the settings."""
        from pydantic import ValidationError

        from seamlessflow.trainer.adapter_trainers import adapter_trainers

        try:
            trainers = adapter_trainers(settings)
        except ValidationError as exc:  # the trainer reports it too; the curves go on, on the base's tags
            log.warning("tracking: which trainer trains which team's adapter is not readable (%s); every "
                        "trainer is plotted on the base's tags", exc)
            trainers = ()
        return cls.with_trainers(settings.team, settings.run, trainers)

    @classmethod
    def with_trainers(cls, team: str | None, run: str | None, trainers: Iterable[AdapterTrainer]) -> PointMaker:
        """A maker that plots each of `trainers` (the teams' adapter trainers) on its team's own tags."""
        listed = list(trainers)
        return cls(team, run, trainers={t.resource_id: t.team for t in listed},
                   adapters={t.adapter: t.team for t in listed})

    @property
    def teams(self) -> list[str]:
        """The teams whose adapters have curves of their own ([] in a stack that trains the base)."""
        return list(dict.fromkeys([*self.trainers.values(), *self.adapters.values()]))

    @property
    def version_steps(self) -> dict[int, int]:
        """The base's versions -> their steps."""
        return self._lane(None).version_steps

    @property
    def waiting_evals(self) -> dict[int, list[tuple[EvalFigures, float]]]:
        """The base's evals still waiting for their version's step (version -> evals)."""
        return self._lane(None).waiting_evals

    def team_steps(self) -> dict[str, int]:
        """Each team's adapter trainer's newest step (teams of an adapters stack only)."""
        steps = {team: 0 for team in self.teams}
        for resource_id, step in self.trainer_steps.items():
            if (team := self.trainers.get(resource_id)) is not None:
                steps[team] = max(steps[team], step)
        return steps

    def _lane(self, team: str | None) -> Lane:
        lane = self._lanes.get(team)
        if lane is None:
            lane = self._lanes[team] = Lane(team)
        return lane

    def feed(self, message: object, now_s: float | None = None) -> list[Point]:
        """The points `message` adds; `now_s` (monotonic seconds) dates an eval that waits for its step.
        A reader calls `overdue` once per poll for the evals that waited too long."""
        if not self._ours(message):
            return []
        if isinstance(message, ResourceStatus):
            return self._status(message) + self._version_began(message)
        if isinstance(message, EpisodeEnd):  # read where session-events are followed (the dashboard, tracking)
            self._pools.end(message)
            return []
        if isinstance(message, WeightVersion):  # says exactly which step a version holds
            lane = self._version_lane(message)
            if lane is None:
                return []
            self._note_version(lane, message.version, int(message.step))
            return [Point(lane.tag("train", "version"), int(message.step), float(message.version),
                          message.created_at_ms / 1000), *self._release(lane, message.version)]
        result = message if isinstance(message, EvalFigures) else eval_result(message)
        if result is None:
            return []
        lane = self._lane(result.team if result.team in self.teams else None)
        if result.version not in lane.version_steps:
            waited_from = time.monotonic() if now_s is None else now_s
            lane.waiting_evals.setdefault(result.version, []).append((result, waited_from))
            return []
        return eval_points(result, lane.version_steps[result.version], lane.team)

    def overdue(self, now_s: float) -> list[Point]:
        """Points of the evals that waited `eval_wait_s` for their version's step, plotted at the version."""
        points = []
        for lane in list(self._lanes.values()):
            late = [v for v, waiting in lane.waiting_evals.items() if now_s - waiting[0][1] >= self.eval_wait_s]
            points += [p for version in late for p in self._release(lane, version)]
        return points

    def _trainer_lane(self, resource_id: str) -> Lane:
        return self._lane(self.trainers.get(resource_id))

    def _version_lane(self, version: WeightVersion) -> Lane | None:
        """A version's trainer's lane: by the trainer, else by the adapter; None: an adapter no team here owns."""
        team = self.trainers.get(version.trainer_id)
        if team is None and version.adapter is not None:
            team = self.adapters.get(version.adapter)
            if team is None:
                return None
        return self._lane(team)

    def _version_began(self, status: ResourceStatus) -> list[Point]:
        """A trainer heartbeat's first step on a version (the weights topic may be compacted): the evals
        waiting for that version's step are released."""
        version = status.weight_version
        if status.kind != "trainer" or "step" not in status.figures or version <= 0:
            return []
        lane = self._trainer_lane(status.resource_id)
        if version in lane.version_steps:
            return []
        self._note_version(lane, version, int(status.figures["step"]))
        return self._release(lane, version)

    @staticmethod
    def _note_version(lane: Lane, version: int, step: int) -> None:
        """Remembers the newest `VERSIONS_KEPT` versions' steps (an eval comes for a recent version; a run of
        days publishes hundreds of thousands)."""
        lane.version_steps[version] = step
        while len(lane.version_steps) > VERSIONS_KEPT:
            del lane.version_steps[next(iter(lane.version_steps))]  # the first noted: versions come in order

    @staticmethod
    def _release(lane: Lane, version: int) -> list[Point]:
        step = lane.version_steps.get(version, version)
        return [p for result, _ in lane.waiting_evals.pop(version, []) for p in eval_points(result, step, lane.team)]

    def _ours(self, message: object) -> bool:
        if isinstance(message, EvalFigures):  # an eval's team is whose policy it evaluated (its lane), not a filter
            return True
        team, run = getattr(message, "team", None), getattr(message, "run", None)
        return ((self.team is None or team in (None, self.team) or team in self.teams)
                and (self.run is None or run in (None, self.run)))

    def _status(self, status: ResourceStatus) -> list[Point]:
        wall = status.created_at_ms / 1000
        if status.kind == "rollout" and "tokens_per_s" in status.figures:
            self._rollout_rate[status.resource_id] = status.figures["tokens_per_s"]
            total = sum(self._rollout_rate.values())
            for lane in self._sampling_lanes():
                lane.rate_samples.append(total)
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
        lane = self._trainer_lane(status.resource_id)
        points = [Point(lane.tag("train", name), step, value, wall)
                  for name, value in train_figures(status.figures).items()]
        points.append(Point(lane.tag("train", "weight_version"), step, float(status.weight_version), wall))
        if self._buffered is not None:
            points.append(Point(lane.tag("pipeline", "buffered"), step, self._buffered, wall))
        if self._stage is not None:
            points.append(Point(lane.tag("pipeline", "stage"), step, self._stage, wall))
        if lane.rate_samples:
            mean = sum(lane.rate_samples) / len(lane.rate_samples)
            points.append(Point(lane.tag("throughput", "rollout_tokens_per_s"), step, mean, wall))
            lane.rate_samples = []
        if lane.last_step_time_s is not None and wall > lane.last_step_time_s:
            points.append(Point(lane.tag("throughput", "steps_per_min"), step, 60.0 / (wall - lane.last_step_time_s),
                                wall))
            if "tokens_trained" in status.figures:
                points.append(Point(lane.tag("throughput", "trained_tokens_per_s"), step,
                                    status.figures["tokens_trained"] / (wall - lane.last_step_time_s), wall))
        lane.last_step_time_s = wall
        if lane.team is None:  # the base's policy: every pool's sessions
            points += [Point(tag, step, value, wall) for tag, value in self._pools.points(step, wall)]
        return points

    def _sampling_lanes(self) -> list[Lane]:
        """The lanes a rollout throughput sample counts for: every team's in an adapters stack (the engines serve
        them all), the base's otherwise (and a base trainer's, should one step beside the teams')."""
        if not self.teams:
            return [self._lane(None)]
        return [lane for team, lane in self._lanes.items() if team is not None or lane.last_step_time_s is not None]


def train_figures(figures: Mapping[str, float]) -> dict[str, float]:
    """The `TRAIN_FIGURES` a trainer heartbeat defines: finite ones, and a mismatch kind's figures only when the
    step had tokens of that kind (with `mismatch_tokens` 0 the trainer says 0 for each: no measure, not a perfect
    one)."""
    empty = {kind for kind in ("mismatch", "stale") if figures.get(f"{kind}_tokens") == 0}
    untaught = not figures.get("taught_tokens")
    return {name: float(figures[name]) for name in TRAIN_FIGURES
            if name in figures and math.isfinite(figures[name])
            and not (name.split("_")[0] in empty and not name.endswith("_tokens"))
            and not (untaught and name in ("teacher_kl", "taught_tokens"))}


def eval_points(result: EvalFigures, step: int, team: str | None = None) -> list[Point]:
    """The eval's points at `step`: `eval/<figure>`, or `eval/<team>/<figure>` for a team's adapter."""
    wall = result.created_at_ms / 1000 if result.created_at_ms else 0.0
    lane = Lane(team)
    return [Point(lane.tag("eval", name), step, value, wall) for name, value in sorted(result.figures.items())]
