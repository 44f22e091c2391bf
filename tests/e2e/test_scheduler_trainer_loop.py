"""The scheduler driving the real DeepSpeed trainer through the real broker (part of the issue-6 loop).

Real: broker, scheduler service + rollout manager, trainer (DeepSpeed CPU) with its control handling and
weight export. Stand-ins, named as such: the rollout resource is a FakeResource (a real Kafka client that
obeys commands but runs no engine), and the test plays agents + proxy + assembler by publishing the
trajectories of the groups the manager handed out. The full loop test needs the rollout worker.
"""

from pathlib import Path

import pytest

from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import CommandAck, Task, WeightVersion
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.testing.in_process import InProcessStack, Stage
from seamlessflow.testing.scheduler_fakes import FakeResource, wait_until
from seamlessflow.testing.trainer_records import trajectory
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_scheduler_trains_on_ready_batch_and_reloads_rollout_with_trainer_weights(settings, codec, tiny_model_dir):
    topics = Topics(settings)
    with InProcessStack() as stack:
        engine = FakeResource(settings, codec, "r0", ["rollout"])
        stack.add(engine.close, Stage.PROCESSES)
        engine.heartbeat()
        config = TrainerOptions(enabled=True, model_path=str(tiny_model_dir), group_size=2, batch_threshold=1,
                               initial_role="idle", heartbeat_s=0.5)
        trainer = stack.trainer(settings, config)
        options = SchedulerOptions(policy="disaggregated", tick_s=0.3, min_dwell_s=0, batch_threshold=2,
                                   heartbeat_timeout_s=60)
        running = stack.scheduler(SchedulerService(settings, options, ManagerOptions(group_size=2, max_in_flight=2),
                                                   codec))
        wait_until(lambda: trainer.control.role == "train" and running.service.manager.published == 2, [engine], 180)
        task = sorted((t for t in read_messages(settings, topics.tasks, codec) if isinstance(t, Task)),
                      key=lambda t: t.task_id)[0]
        producer = MessageProducer(settings, codec)
        for session, reward in (("s1", 1.0), ("s2", 0.0)):  # different rewards: a group with signal
            producer.send(topics.trajectories, task.group_id,
                          trajectory(tiny_model_dir, f"{session}/0", task.group_id, [1, 2, 3, 4], [0, 0, 1, 1], reward))
        producer.flush()
        wait_until(lambda: engine.weight_version == 1 and engine.state == "active", [engine], 240)
        wait_until(lambda: running.service.manager.published == 3, [engine], 60)

    [version] = [w for w in read_messages(settings, topics.weights, codec) if isinstance(w, WeightVersion)]
    [load] = [c for c in engine.applied if c.command == "load_weights"]
    assert (load.weight_version, load.weight_uri) == (1, version.uri)
    assert (Path(version.uri.removeprefix("file://")) / "config.json").exists()
    assert [c.command for c in engine.applied] == ["pause", "load_weights", "resume"]
    acks = [a for a in read_messages(settings, topics.status, codec)
            if isinstance(a, CommandAck) and a.resource_id == "trainer-0"]
    assert [(a.epoch, a.command, a.outcome) for a in acks] == [(1, "set_active", "ok")]
    assert (running.service.manager.finished, running.service.manager.lost) == (1, 0)
