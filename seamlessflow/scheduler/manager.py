"""The rollout manager: publishes task groups within the rollout capacity and counts finished ones.

Capacity is the core's `RolloutLedger` counted in *groups*: at most `max_in_flight` groups published and not
finished, and no more than the staleness bound allows for the trainer's current version (a step consumes
`ceil(batch_threshold / group_size)` groups). A group is finished when trajectories from `group_size`
distinct sessions have arrived (a forked session yields several trajectories but counts once; failed
episodes still arrive as trajectories with status `failed`). A group silent for `task_timeout_s` is given
up (`lost`), so one lost session cannot stall the pipeline; the count is reported, never hidden.

The staleness bound assumes every finished group feeds a step. The trainer skips groups without signal
(fewer than two trainable sessions, or all rewards equal), so such a group frees its slot instead of
counting as accepted (`no_signal`); otherwise each skipped group would shrink the capacity for good, and
the pipeline would stall waiting for a batch it may no longer start. The rule is the trainer's own
(`core.batching.rewards_vary`), applied to each session's reward as its episode end or trajectory reports it.

SRPO history resampling: a group whose trainable sessions all reached `success_reward` marks its source task
"too easy" (`core.batching.solved_by_all`, the trainer's rule); later cycles over the task set skip it, so rollout capacity goes to tasks that
still teach something. When every task is too easy, nothing is skipped (a run never starves).

The weight-update sequence (pause -> load vN -> resume) is not run here: the core policies already emit
it for every rollout resource whose weights are older than the trainer's (core.policies.base.keep_generating).
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from seamlessflow.core.batching import TRAINABLE_STATUSES, rewards_vary, solved_by_all
from seamlessflow.core.staleness import RolloutLedger
from seamlessflow.messages import EpisodeEnd, Task, Trajectory, new_id, now_ms
from seamlessflow.scheduler.options import ManagerOptions
from seamlessflow.tasks import ArithmeticTask, generate_tasks, load_tasks
from seamlessflow.tasks.arithmetic import expression_of

FINAL_STATUSES = ("done", "failed")


def task_set(options: ManagerOptions) -> list[ArithmeticTask]:
    if options.source == "demo":
        return generate_tasks(options.demo_seed, options.demo_count, options.demo_max_operand)
    return load_tasks(options.source)


@dataclass
class Group:
    size: int
    published_at: float
    sessions: set[str] = field(default_factory=set)
    rewards: list[float] = field(default_factory=list)  # of sessions that ended in a trainable status
    arrival_versions: list[int] = field(default_factory=list)  # weight version current as each trajectory came
    no_signal: bool = False
    source_task_id: str | None = None


@dataclass
class RolloutManager:
    options: ManagerOptions
    tasks: list[ArithmeticTask]
    team: str
    run: str
    batch_threshold: int
    max_staleness: int
    clock: Callable[[], float]
    groups: dict[str, Group] = field(default_factory=dict)
    published: int = 0
    finished: int = 0
    lost: int = 0
    no_signal: int = 0
    trajectories: int = 0
    unusable: collections.Counter[int] = field(default_factory=collections.Counter)  # by arrival version, untaken
    draining: bool = False  # no new tasks; groups in flight still finish
    too_easy: set[str] = field(default_factory=set)  # source task ids every session of a group solved
    cursor: int = 0  # position in the endless cycle over `tasks` of the next task to publish
    ledger: RolloutLedger = field(init=False)

    def __post_init__(self) -> None:
        batch_groups = math.ceil(self.batch_threshold / self.options.group_size)
        self.ledger = RolloutLedger(batch_groups, self.max_staleness, self.options.max_in_flight)
        self._position_of = {t.task_id: i for i, t in enumerate(self.tasks)}

    @property
    def outstanding(self) -> int:
        return self.ledger.running

    def on_task(self, task: Task) -> None:
        """A task record of this run (ours, seen on the tasks topic or just published)."""
        if task.group_id in self.groups or task.team != self.team or task.run != self.run:
            return
        source_task_id = _source_task_id(task)
        self.groups[task.group_id] = Group(task.group_size, self.clock(), source_task_id=source_task_id)
        self.published += 1
        self.ledger.on_submitted()
        position = self._position(source_task_id, task.task_id)
        if position is not None:  # a restarted scheduler continues the cycle after the last task published
            self.cursor = max(self.cursor, position + 1)

    def on_trajectory(self, trajectory: Trajectory, version: int = 0) -> bool:
        """Count one trajectory, which arrived while `version` was the newest weights; True when it completes
        its group."""
        return self._session_finished(trajectory.group_id, trajectory.session_id, trajectory.status,
                                      trajectory.reward, arrived_at=version)

    def on_episode_end(self, end: EpisodeEnd) -> bool:
        """A final session end (done or failed; aborted ones are retried) also fills its group's slot:
        a session that never reached an engine (all calls refused) has no trajectory to wait for."""
        if end.status not in FINAL_STATUSES or not end.group_id:
            return False
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
                self.unusable[arrived_at] += 1
            return False
        self.trajectories += int(trajectory)
        if session_id in group.sessions:
            return False  # a session counts once, whether its end or trajectory came first
        group.sessions.add(session_id)
        if status in TRAINABLE_STATUSES:
            group.rewards.append(reward)
        if len(group.sessions) < group.size:
            return False
        self.finished += 1
        if rewards_vary(group.rewards):
            self.ledger.on_accepted()
        else:
            self.no_signal += 1
            group.no_signal = True
            self._note_too_easy(group)
            self.unusable.update(group.arrival_versions)
            self.ledger.on_rejected()
        return True

    def drain(self) -> None:
        """Stop publishing; what is in flight still finishes and is counted (a clean end of a run)."""
        self.draining = True

    def take_unusable(self, current_version: int = 0) -> int:
        """Trajectories the trainer will skip (their group has no signal) that arrived since `current_version`
        was published: the scheduler counts arrivals since the newest version as buffered, so only these
        come out of that estimate (earlier ones were never in it). Each is reported once."""
        taken = sum(n for version, n in self.unusable.items() if version >= current_version)
        self.unusable.clear()
        return taken

    def expire(self) -> list[str]:
        now, expired = self.clock(), []
        for group_id, group in self.groups.items():
            if 0 <= len(group.sessions) < group.size and now - group.published_at > self.options.task_timeout_s:
                group.size = -1  # closed: late trajectories are ignored
                expired.append(group_id)
        self.lost += len(expired)
        self.ledger.on_rejected(len(expired))
        return expired

    def next_tasks(self, current_version: int) -> list[Task]:
        """Tasks to publish now (caller publishes them, then feeds each to `on_task`)."""
        if self.draining:
            return []
        room = self.ledger.capacity(current_version)
        if self.options.max_tasks is not None:
            room = min(room, self.options.max_tasks - self.published)
        return [self._task(self._next_position()) for _ in range(max(0, room))]

    def _next_position(self) -> int:
        skip = self.options.resample_too_easy and len(self.too_easy) < len(self.tasks)
        while skip and self.tasks[self.cursor % len(self.tasks)].task_id in self.too_easy:
            self.cursor += 1
        self.cursor += 1
        return self.cursor - 1

    def _position(self, source_task_id: str | None, task_id: str) -> int | None:
        """Inverse of `_task`'s naming: "<source>.r<round>" -> round * len(tasks) + the source's index."""
        _, _, round_text = task_id.rpartition(".r")
        if source_task_id not in self._position_of or not round_text.isdigit():
            return None
        return int(round_text) * len(self.tasks) + self._position_of[source_task_id]

    def _note_too_easy(self, group: Group) -> None:
        if group.source_task_id and solved_by_all(group.rewards, self.options.success_reward):
            self.too_easy.add(group.source_task_id)

    def _task(self, index: int) -> Task:
        source = self.tasks[index % len(self.tasks)]
        task_id = f"{source.task_id}.r{index // len(self.tasks)}"
        payload = json.dumps({"answer": source.answer, "expression": _expression(source.prompt),
                              "source_task_id": source.task_id})
        return Task(new_id(), task_id, f"{self.run}.{task_id}", self.team, self.run, self.options.kind,
                    source.prompt, payload, self.options.group_size, 0, now_ms())

    def figures(self) -> dict[str, float]:
        return {"tasks_published": self.published, "groups_finished": self.finished, "groups_lost": self.lost,
                "groups_no_signal": self.no_signal, "groups_in_flight": self.outstanding,
                "trajectories": self.trajectories, "tasks_too_easy": len(self.too_easy)}


def _source_task_id(task: Task) -> str | None:
    try:
        return json.loads(task.payload_json).get("source_task_id")
    except (ValueError, AttributeError):
        return None


def _expression(prompt: str) -> str | None:
    """"What is 3+4?" -> "3+4": the payload field the example tool-use agent computes with (None for a
    prompt from a task file that is not an arithmetic question)."""
    try:
        return expression_of(prompt)
    except ValueError:
        return None
