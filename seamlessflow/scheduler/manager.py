"""The rollout manager: publishes task groups within the rollout capacity and counts finished ones.

Capacity is the core's `RolloutLedger` counted in *groups*: at most `max_in_flight` groups published and not
finished, and no more than the staleness bound allows for the trainer's current version (a step consumes
`ceil(batch_threshold / group_size)` groups). There is one ledger per policy: the base's, and where the stack
trains the teams' LoRA adapters (`trainer.target: adapters`), one per adapter team, each bounded by its own
adapter's newest version (`policy_of`: team -> adapter). A team whose trainer lags then gets no more groups than
its own trainer can still take fresh enough, while the others go on; `max_in_flight` stays one bound for all.

A group is finished when trajectories from `group_size` distinct sessions have arrived (a forked session yields
several trajectories but counts once; failed episodes still arrive as trajectories with status `failed`). A group
silent for `task_timeout_s` is given up (`lost`), so one lost session cannot stall the pipeline; the count is
reported, never hidden.

The staleness bound assumes every finished group feeds a step. The trainer skips groups without signal
(fewer than two trainable sessions, or all rewards equal), so such a group frees its slot instead of
counting as accepted (`no_signal`); otherwise each skipped group would shrink the capacity for good, and
the pipeline would stall waiting for a batch it may no longer start. The rule is the trainer's own
(`core.batching.rewards_vary`), applied to each session's reward as its episode end or trajectory reports it.

SRPO history resampling: a group whose trainable sessions all reached `success_reward` marks its source task
"too easy" (`core.batching.solved_by_all`, the trainer's rule); later cycles over the task set skip it, so rollout
capacity goes to tasks that
still teach something. When every task is too easy, nothing is skipped (a run never starves).

Several task sources (`manager.sources`: e.g. math, code, tool use), each with its kind (the agent pool that
runs it), its verifier and its weight, share every batch: the next group comes from the source furthest
behind its share (`core.mixing.next_source`), each source cycling over its own tasks; `figures()` reports
published, finished and mean reward per source. A session still waiting for a reward worker (its end
carries a reward request) counts when its scored or `unscorable` trajectory arrives, not at its end.

Stages (`manager.stages`, `scheduler/stages.py`): the sources and weights can change with the run (SRPO's
math first, then math and code), each stage ending at a step, a version or a metric threshold; the shares
are counted within the current stage and each task's payload names its stage.

The weight-update sequence (pause -> load vN -> resume) is not run here: the core policies already emit
it for every rollout resource whose weights are older than the trainer's (core.policies.base.keep_generating).
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from seamlessflow.core.batching import TRAINABLE_STATUSES, rewards_vary, solved_by_all
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.core.mixing import next_source
from seamlessflow.core.staleness import RolloutLedger
from seamlessflow.messages import EpisodeEnd, Task, Trajectory, new_id, now_ms
from seamlessflow.rewards.request import pending_request
from seamlessflow.scheduler.options import ManagerOptions
from seamlessflow.scheduler.sources import DEFAULT, TaskSource, load_task_set, named
from seamlessflow.scheduler.stages import StagePlan
from seamlessflow.tasks import ArithmeticTask
from seamlessflow.tasks.arithmetic import expression_of

FINAL_STATUSES = (EpisodeStatus.DONE, EpisodeStatus.FAILED)  # aborted sessions are retried
BASE = ""  # the policy key of the shared base weights (an adapter's key is its name)


def task_set(options: ManagerOptions) -> list[ArithmeticTask]:
    return load_task_set(options.source, options.demo_seed, options.demo_count, options.demo_max_operand)


@dataclass
class Group:
    size: int
    published_at: float
    sessions: set[str] = field(default_factory=set)
    rewards: list[float] = field(default_factory=list)  # of sessions that ended in a trainable status
    arrival_versions: list[int] = field(default_factory=list)  # weight version current as each trajectory came
    no_signal: bool = False
    source_task_id: str | None = None
    source: str = DEFAULT  # the task source's name
    policy: str = BASE  # whose ledger the group counts in: the team's adapter, or the base


@dataclass
class RolloutManager:
    options: ManagerOptions
    tasks: list[ArithmeticTask]
    team: str
    run: str
    batch_threshold: int
    max_staleness: int
    clock: Callable[[], float]
    policy_of: Mapping[str, str] = field(default_factory=dict)  # team -> the adapter trained on its rollouts
    groups: dict[str, Group] = field(default_factory=dict)
    published: int = 0
    finished: int = 0
    lost: int = 0
    no_signal: int = 0
    trajectories: int = 0
    unusable: collections.Counter[tuple[str, int]] = field(default_factory=collections.Counter)  # (policy, version)
    draining: bool = False  # no new tasks; groups in flight still finish
    too_easy: set[str] = field(default_factory=set)  # source task ids every session of a group solved
    ledgers: dict[str, RolloutLedger] = field(init=False)  # policy -> its staleness ledger
    sources: list[TaskSource] = field(init=False)  # `options.sources`, else one source of `tasks`

    def __post_init__(self) -> None:
        self.sources = [named(o) for o in self.options.sources] or [TaskSource(DEFAULT, self.tasks, self.options.kind)]
        self._source_named = {s.name: s for s in self.sources}
        self.teams = frozenset({self.team} | {s.team for s in self.sources if s.team})  # whose tasks are ours
        self.stages = StagePlan(self.options.stages, [s.name for s in self.sources], self.options.stage_window) \
            if self.options.stages else None
        batch_groups = math.ceil(self.batch_threshold / self.options.group_size)
        self.ledgers = {policy: RolloutLedger(batch_groups, self.max_staleness, self.options.max_in_flight)
                        for policy in {self.policy(s) for s in self.sources}}

    def policy(self, source: TaskSource) -> str:
        """The policy a source's rollouts train: its team's adapter where adapters train, else the base."""
        return self.policy_of.get(source.team or self.team, BASE)

    @property
    def outstanding(self) -> int:
        return sum(ledger.running for ledger in self.ledgers.values())

    def on_task(self, task: Task) -> None:
        """A task record of this run (ours, seen on the tasks topic or just published)."""
        if task.group_id in self.groups or task.team not in self.teams or task.run != self.run:
            return
        payload = _payload(task)
        source_task_id = payload.get("source_task_id")
        source = self._source_named.get(payload.get("task_source") or DEFAULT, self.sources[0])
        self.groups[task.group_id] = Group(task.group_size, self.clock(), source_task_id=source_task_id,
                                           source=source.name, policy=self.policy(source))
        self.published += 1
        source.published += 1
        if self.stages is not None:
            self.stages.on_task(int(payload.get("stage", 0)), source.name)
        self.ledgers[self.policy(source)].on_submitted()
        position = self._position(source, source_task_id, task.task_id)
        if position is not None:  # a restarted scheduler continues the cycle after the last task published
            source.cursor = max(source.cursor, position + 1)

    def on_trajectory(self, trajectory: Trajectory, version: int = 0,
                      adapter_versions: Mapping[str, int] | None = None) -> bool:
        """Count one trajectory, which arrived while `version` was the base's newest (and `adapter_versions`
        the adapters'); True when it completes its group."""
        group = self.groups.get(trajectory.group_id)
        version = version_of(group.policy if group else BASE, version, adapter_versions)
        if self.stages is not None and group is not None and trajectory.status in TRAINABLE_STATUSES:
            self.stages.on_trajectory(group.source, trajectory.reward, sum(trajectory.loss_mask))
        return self._session_finished(trajectory.group_id, trajectory.session_id, trajectory.status,
                                      trajectory.reward, arrived_at=version)

    def on_episode_end(self, end: EpisodeEnd) -> bool:
        """A final session end (done or failed; aborted ones are retried) also fills its group's slot:
        a session that never reached an engine (all calls refused) has no trajectory to wait for."""
        if end.status not in FINAL_STATUSES or not end.group_id or pending_request(end.info_json) is not None:
            return False  # a session waiting for a reward worker counts when its scored trajectory comes
        return self._session_finished(end.group_id, end.session_id, end.status, end.reward, arrived_at=None)

    def _session_finished(self, group_id: str, session_id: str, status: str, reward: float,
                          arrived_at: int | None) -> bool:
        """`arrived_at`: the weight version current when the trajectory came; None for an episode end."""
        group = self.groups.get(group_id)
        if group is None:
            return False
        trajectory = arrived_at is not None
        if arrived_at is not None:
            group.arrival_versions.append(arrived_at)
        if len(group.sessions) >= group.size:
            if arrived_at is not None and group.no_signal:  # a trajectory that arrived after its group was judged
                self.unusable[group.policy, arrived_at] += 1
            return False
        self.trajectories += int(trajectory)
        if session_id in group.sessions:
            return False  # a session counts once, whether its end or trajectory came first
        group.sessions.add(session_id)
        source = self._source_named.get(group.source, self.sources[0])
        if status in TRAINABLE_STATUSES:
            group.rewards.append(reward)
            source.reward_sum += reward
            source.reward_count += 1
        if len(group.sessions) < group.size:
            return False
        self.finished += 1
        source.finished += 1
        if rewards_vary(group.rewards):
            self.ledgers[group.policy].on_accepted()
        else:
            self.no_signal += 1
            group.no_signal = True
            self._note_too_easy(group)
            self.unusable.update((group.policy, v) for v in group.arrival_versions)
            self.ledgers[group.policy].on_rejected()
        return True

    def drain(self) -> None:
        """Stop publishing; what is in flight still finishes and is counted (a clean end of a run)."""
        self.draining = True

    def take_unusable(self, current_version: int = 0,
                      adapter_versions: Mapping[str, int] | None = None) -> dict[str, int]:
        """Per policy, trajectories its trainer will skip (their group has no signal) that arrived since its
        newest version was published: the scheduler counts arrivals since then as buffered, so only these
        come out of that estimate (earlier ones were never in it). Each is reported once."""
        if not self.unusable:  # the common case: the scheduler asks after every record it folds
            return {}
        taken = collections.Counter[str]()
        for (policy, version), n in self.unusable.items():
            if version >= version_of(policy, current_version, adapter_versions):
                taken[policy] += n
        self.unusable.clear()
        return dict(taken)

    def expire(self) -> list[str]:
        now, expired = self.clock(), []
        for group_id, group in self.groups.items():
            if 0 <= len(group.sessions) < group.size and now - group.published_at > self.options.task_timeout_s:
                group.size = -1  # closed: late trajectories are ignored
                expired.append(group_id)
                self.ledgers[group.policy].on_rejected()
        self.lost += len(expired)
        return expired

    def next_tasks(self, current_version: int = 0, adapter_versions: Mapping[str, int] | None = None) -> list[Task]:
        """Tasks to publish now (caller publishes them, then feeds each to `on_task`): `current_version` is the
        base's newest, `adapter_versions` each adapter's (by name; missing: 0)."""
        if self.draining:
            return []
        room = self.options.max_in_flight - self.outstanding
        if self.options.max_tasks is not None:
            room = min(room, self.options.max_tasks - self.published)
        fresh = {policy: ledger.staleness_room(version_of(policy, current_version, adapter_versions))
                 for policy, ledger in self.ledgers.items()}
        sources, weights, counts = self._shares()
        out = []
        for _ in range(max(0, room)):
            open_ = [i for i, source in enumerate(sources) if fresh[self.policy(source)] > 0]
            if not open_:
                break
            # each source's share of every batch (core.mixing), among those whose policy can take more
            index = open_[next_source([weights[i] for i in open_], [counts[i] for i in open_])]
            counts[index] += 1
            source = sources[index]
            fresh[self.policy(source)] -= 1
            out.append(self._task(source, self._next_position(source)))
        return out

    def _shares(self) -> tuple[list[TaskSource], list[float], list[int]]:
        """The sources feeding the run now, their weights and the groups each got (within the stage)."""
        if self.stages is None:
            return self.sources, [s.weight for s in self.sources], [s.published for s in self.sources]
        names, weights, counts = self.stages.shares()
        return [self._source_named[n] for n in names], weights, counts

    def advance_stage(self, step: float, version: int) -> bool:
        """Moves to the next stage when the current one's end holds (True when it did)."""
        return self.stages is not None and self.stages.advance(step, version)

    def _next_position(self, source: TaskSource) -> int:
        tasks = source.tasks
        skip = self.options.resample_too_easy and sum(t.task_id in self.too_easy for t in tasks) < len(tasks)
        while skip and tasks[source.cursor % len(tasks)].task_id in self.too_easy:
            source.cursor += 1
        source.cursor += 1
        return source.cursor - 1

    def _position(self, source: TaskSource, source_task_id: str | None, task_id: str) -> int | None:
        """Inverse of `_task`'s naming: "<source task>.r<round>" -> round * len(tasks) + the task's index."""
        _, _, round_text = task_id.rpartition(".r")
        if source_task_id not in source.position_of or not round_text.isdigit():
            return None
        return int(round_text) * len(source.tasks) + source.position_of[source_task_id]

    def _note_too_easy(self, group: Group) -> None:
        if group.source_task_id and solved_by_all(group.rewards, self.options.success_reward):
            self.too_easy.add(group.source_task_id)

    def _task(self, source: TaskSource, index: int) -> Task:
        chosen = source.tasks[index % len(source.tasks)]
        task_id = f"{chosen.task_id}.r{index // len(source.tasks)}"
        payload: dict[str, object] = {**dict(chosen.extra), "answer": chosen.answer,
                                      "expression": _expression(chosen.prompt), "source_task_id": chosen.task_id}
        if source.name != DEFAULT:
            payload["task_source"] = source.name
        if source.verifier:
            payload["verifier"] = source.verifier  # the reward pool that scores an agent's Unscored result
        if self.stages is not None:
            payload["stage"] = self.stages.current
        return Task(new_id(), task_id, f"{self.run}.{task_id}", source.team or self.team, self.run, source.kind,
                    chosen.prompt, json.dumps(payload), self.options.group_size, 0, now_ms())

    def figures(self) -> dict[str, float]:
        figures: dict[str, float] = {
            "tasks_published": self.published, "groups_finished": self.finished, "groups_lost": self.lost,
            "groups_no_signal": self.no_signal, "groups_in_flight": self.outstanding,
            "trajectories": self.trajectories, "tasks_too_easy": len(self.too_easy)}
        if len(self.sources) > 1 or self.sources[0].name != DEFAULT:
            for source in self.sources:
                figures.update(source.figures())
        if self.stages is not None:
            figures.update(self.stages.figures())
        return figures


def version_of(policy: str, base: int, adapters: Mapping[str, int] | None) -> int:
    """A policy's newest version: the base's for BASE, else its adapter's (0 before its first)."""
    return base if policy == BASE else (adapters or {}).get(policy, 0)


def _payload(task: Task) -> dict:
    try:
        payload = json.loads(task.payload_json)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _expression(prompt: str) -> str | None:
    """"What is 3+4?" -> "3+4": the payload field the example tool-use agent computes with (None for a
    prompt from a task file that is not an arithmetic question)."""
    try:
        return expression_of(prompt)
    except ValueError:
        return None
