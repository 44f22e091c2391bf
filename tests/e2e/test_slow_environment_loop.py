"""A slow environment delays only its own group: the real scheduler (rollout manager) and the real DeepSpeed
trainer keep stepping while one group's sessions never come back, the manager gives that group up at its
deadline, and when its sessions finish late their trajectories are recorded and trained like any other.

Real: broker, scheduler service + rollout manager, trainer (DeepSpeed CPU). Stand-ins, named as such: the
rollout resource is a FakeResource, and the test plays agents + proxy + assembler by publishing the
trajectories of every group the manager handed out except the first one (its "environment" is slow).
"""

import json
import time

import pytest

from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import Task
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.testing.in_process import InProcessStack, Stage
from seamlessflow.testing.scheduler_fakes import FakeResource, wait_until
from seamlessflow.testing.trainer_records import trajectory
from seamlessflow.topics import Topics
from seamlessflow.trainer.loop import Trainer
from seamlessflow.trainer.options import TrainerOptions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def answer(producer, topics, model_dir, task: Task) -> None:
    """Both sessions of the group, with different rewards (a group with signal)."""
    for session, reward in (("s1", 1.0), ("s2", 0.0)):
        producer.send(topics.trajectories, task.group_id,
                      trajectory(model_dir, f"{task.group_id}-{session}/0", task.group_id, [1, 2, 3, 4], [0, 0, 1, 1],
                                 reward))
    producer.flush()


def test_a_slow_group_is_given_up_while_the_trainer_keeps_stepping_and_its_late_sessions_still_count(
        settings, codec, tiny_model_dir):
    topics = Topics(settings)
    producer, answered, slow = MessageProducer(settings, codec), set(), []
    last_play = [0.0]

    def play() -> None:
        """The agents of every group but the first, at most twice a second."""
        if time.monotonic() - last_play[0] < 0.5:
            return
        last_play[0] = time.monotonic()
        tasks = sorted((t for t in read_messages(settings, topics.tasks, codec) if isinstance(t, Task)),
                       key=lambda t: t.created_at_ms)
        for task in tasks:
            if not slow:
                slow.append(task)
            elif task.group_id != slow[0].group_id and task.group_id not in answered:
                answer(producer, topics, tiny_model_dir, task)
                answered.add(task.group_id)

    with InProcessStack() as stack:
        engine = FakeResource(settings, codec, "r0", ["rollout"])
        stack.add(engine.close, Stage.PROCESSES)
        engine.heartbeat()
        config = TrainerOptions(enabled=True, model_path=str(tiny_model_dir), group_size=2, batch_threshold=1,
                               initial_role="idle", heartbeat_s=0.5)
        trainer = stack.trainer(settings, config)
        options = SchedulerOptions(policy="disaggregated", tick_s=0.3, min_dwell_s=0, batch_threshold=2,
                                   heartbeat_timeout_s=60)
        manager = stack.scheduler(SchedulerService(
            settings, options, ManagerOptions(group_size=2, max_in_flight=2, task_timeout_s=10), codec)).service.manager
        wait_until(lambda: play() or (trainer.version >= 2 and manager.lost >= 1), [engine], 420)
        assert manager.groups[slow[0].group_id].size == -1  # given up at its deadline, not waited for
        # groups answered by the last play may still be on their way to the manager: count them first
        wait_until(lambda: all(len(g.sessions) >= g.size for g in map(manager.groups.get, answered) if g is not None),
                   [engine], 60)
        finished_before = manager.finished
        answer(producer, topics, tiny_model_dir, slow[0])  # its sessions finish, late
        wait_until(lambda: any(f"{slow[0].group_id}-s1/0" in ids for ids in _trained(trainer)), [engine], 120)
    assert manager.finished == finished_before  # a late group frees no slot twice
    assert manager.lost >= 1 and trainer.version >= 2


def _trained(trainer: Trainer) -> list[list[str]]:
    """Trajectory ids per step from the trainer's step log (written at each checkpoint: every step here)."""
    log = trainer.work / "steps.jsonl"
    return [json.loads(line)["trajectory_ids"] for line in log.read_text().splitlines()] if log.exists() else []
