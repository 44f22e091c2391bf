"""A 2-rank trainer group (torch's launcher, real DeepSpeed on gloo) fed through the real broker.

One run covers the group's promises in order: one member of the consumer group (the leader), exactly one
WeightVersion per version, a `ranks` figure of 2 in the heartbeat; then kill -9 of the follower rank with
a group left incomplete (g3 before g4, g5, as in test_trainer_crash.py): the launcher takes the group
down, a restarted group resumes from the checkpoint and every produced trajectory (the test's own record)
is trained exactly once.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import psutil
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.clients import common_config
from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import ControlCommand, ResourceStatus, WeightVersion
from seamlessflow.testing.trainer_records import wait_for
from seamlessflow.testing.trainer_runs import publish_gap_scenario
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions

pytestmark = pytest.mark.slow


def start(config_path, log_path):
    log = open(log_path, "ab")
    return subprocess.Popen([sys.executable, "-m", "services.trainer", "--config", str(config_path)],
                            stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def rank_process(launcher: subprocess.Popen, rank: str, timeout_s: float = 60) -> psutil.Process:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in psutil.Process(launcher.pid).children(recursive=True):
            try:
                if child.environ().get("RANK") == rank:
                    return child
            except psutil.Error:
                continue
        time.sleep(0.2)
    raise TimeoutError(f"no rank {rank} under the launcher")


def group_members(settings, group_id: str) -> int:
    admin = AdminClient(common_config(settings))
    [future] = admin.describe_consumer_groups([group_id]).values()
    return len(future.result(timeout=30).members)


def committed(settings, group_id: str, topic: str) -> int:
    admin = AdminClient(common_config(settings))
    request = [ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, 0)])]
    [future] = admin.list_consumer_group_offsets(request).values()
    return future.result(timeout=30).topic_partitions[0].offset


@pytest.mark.timeout(270)
def test_two_rank_group_publishes_once_commits_once_and_survives_kill_9_of_a_rank(settings, codec, tiny_model_dir,
                                                                                   tmp_path):
    settings = settings.with_overrides(
        topic_prefix=f"t{uuid.uuid4().hex[:10]}", partitions={"trajectories": 1},
        trainer={"enabled": True, "model_path": str(tiny_model_dir), "group_size": 2, "batch_threshold": 2,
                 "heartbeat_s": 1.0, "ranks": 2},
    )
    ensure_topics(settings)
    config_path = settings.dump_yaml(tmp_path / "config.yaml")
    config = TrainerOptions.from_settings(settings)
    topics = Topics(settings)
    producer, (g1, g2, g3, g4, g5, g6) = publish_gap_scenario(settings, codec, tiny_model_dir)

    first = start(config_path, tmp_path / "run1.log")
    try:
        wait_for(settings, codec, topics.weights, lambda x: isinstance(x, WeightVersion) and x.version == 2)
        wait_for(settings, codec, topics.status,
                 lambda x: isinstance(x, ResourceStatus) and x.kind == "trainer" and x.figures.get("ranks") == 2.0)
        assert group_members(settings, config.group_id(settings)) == 1  # the leader alone reads Kafka
        published = Counter(w.version for w in read_messages(settings, topics.weights, codec)
                            if isinstance(w, WeightVersion))
        assert published == {1: 1, 2: 1}  # one record per version, not one per rank
        assert committed(settings, config.group_id(settings), topics.trajectories) == 4  # below g3's sample
        rank_process(first, "1").send_signal(signal.SIGKILL)
        assert first.wait(timeout=120) != 0  # the launcher took the group down
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=30)

    for record in g3[1:] + g6:
        producer.send(topics.trajectories, record.group_id, record)
    producer.flush()
    second = start(config_path, tmp_path / "run2.log")
    try:
        wait_for(settings, codec, topics.weights, lambda x: isinstance(x, WeightVersion) and x.version == 3)
        producer.send_and_wait(topics.control, "trainer-0",
                               ControlCommand("stop", "trainer-0", 1, "shutdown", "default", "default", 0))
        assert second.wait(timeout=120) == 0  # the leader's stop order lets the follower exit cleanly too
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(timeout=30)

    assert "at step 2, version 2" in (tmp_path / "run2.log").read_text()
    steps = [json.loads(line) for line in (config.work_dir(settings) / "steps.jsonl").read_text().splitlines()]
    trained = [tid for s in steps for tid in s["trajectory_ids"]]
    assert sorted(trained) == sorted(r.event_id for r in g1 + g2 + g3 + g4 + g5 + g6)  # each exactly once
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert sorted(steps[2]["trajectory_ids"]) == sorted(r.event_id for r in g3 + g6)
    assert committed(settings, config.group_id(settings), topics.trajectories) == 12  # all 12 records, at the end
