"""SRPO's two stages through the scheduler process and the real broker: the published mix switches when the
metric crosses its threshold, and a scheduler killed -9 in stage 2 comes back in stage 2 even though the metric
has fallen below the threshold since (stages only move forward; the stage is rebuilt from the tasks topic).

The test stands in for the agents and the assembler: it answers every published task with a trajectory whose
reward it chooses.
"""

import json
import signal
import subprocess
import sys
import time

import pytest

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import Task, Trajectory, now_ms
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.topics import Topics

pytestmark = pytest.mark.timeout(300)
SOURCES = [{"name": "math", "demo_count": 8}, {"name": "code", "kind": "code", "demo_seed": 1, "demo_count": 8}]
STAGES = [{"name": "math", "weights": {"math": 1},
           "until": {"metric": "source.math.recent_reward", "above": 0.6}},
          {"name": "math+code", "weights": {"math": 1, "code": 1}}]


class Agents:
    """Answers each new task with one trajectory of the reward `reward_of(task)` gives."""

    def __init__(self, settings, codec):
        self.settings, self.codec = settings, codec
        self.topics, self.producer = Topics(settings), MessageProducer(settings, codec)
        self.tasks: list[Task] = []

    def answer(self, reward_of) -> list[Task]:
        seen = {t.event_id for t in self.tasks}
        new = [m for m in messages_until(self.settings, self.topics.tasks, self.codec, timeout_s=5)
               if isinstance(m, Task) and m.event_id not in seen]
        for task in new:
            trajectory = Trajectory(f"{task.task_id}/0", task.task_id, 0, task.group_id, task.task_id, task.team,
                                    task.run, [1, 2, 3], [0, 1, 1], [0.0, -0.1, -0.1], [-1, 0, 0], reward_of(task),
                                    "done", 1, 0, now_ms())
            self.producer.send(self.topics.trajectories, task.group_id, trajectory)
        self.producer.flush()
        self.tasks += new
        return new


def stage_of(task: Task) -> int:
    return json.loads(task.payload_json)["stage"]


def source_of(task: Task) -> str:
    return json.loads(task.payload_json)["task_source"]


def start(path):
    return subprocess.Popen([sys.executable, "-m", "services.scheduler", "--config", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def answer_until(agents: Agents, proc, reward_of, done, timeout_s: float = 90):
    deadline = time.monotonic() + timeout_s
    while not done():
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, f"published so far: {[(source_of(t), stage_of(t)) for t in agents.tasks]}"
        agents.answer(reward_of)
        time.sleep(0.3)


def test_the_mix_switches_by_metric_and_a_scheduler_killed_in_stage_2_resumes_in_stage_2(settings, codec, tmp_path):
    config = settings.with_overrides(
        scheduler={"policy": "colocated", "tick_s": 0.2},
        manager={"group_size": 1, "max_in_flight": 2, "max_staleness": 1000, "stage_window": 4,
                 "sources": SOURCES, "stages": STAGES})
    path = config.dump_yaml(tmp_path / "config.yaml")
    agents, reward = Agents(settings, codec), {"math": 0.0}
    proc = start(path)
    try:
        answer_until(agents, proc, lambda t: reward["math"], lambda: len(agents.tasks) >= 6)
        assert {(source_of(t), stage_of(t)) for t in agents.tasks} == {("math", 0)}  # stage 1: math alone
        reward["math"] = 1.0  # the math reward climbs past the threshold
        answer_until(agents, proc, lambda t: reward["math"],
                     lambda: sum(stage_of(t) == 1 for t in agents.tasks) >= 4)
        first_stage_2 = next(i for i, t in enumerate(agents.tasks) if stage_of(t) == 1)
        assert all(stage_of(t) == 1 for t in agents.tasks[first_stage_2:])  # never back
        assert {source_of(t) for t in agents.tasks[first_stage_2:]} == {"math", "code"}

        reward["math"] = 0.0  # below the threshold again: a scheduler that re-derived its stage would go back
        answer_until(agents, proc, lambda t: reward["math"], lambda: len(agents.tasks) >= first_stage_2 + 10)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed_at = len(agents.tasks)
        proc = start(path)
        answer_until(agents, proc, lambda t: reward["math"], lambda: len(agents.tasks) >= killed_at + 6)
        after = agents.tasks[killed_at:]
        assert [stage_of(t) for t in after] == [1] * len(after)
        assert {source_of(t) for t in after} == {"math", "code"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
