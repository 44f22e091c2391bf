"""A reward worker (`seamlessflow reward run`, a real process) killed in the middle of scoring loses and
duplicates nothing: its records were not committed, so the group hands them to the survivor, which
publishes each exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.io import read_messages, read_topic
from seamlessflow.rewards.verifier_call import start_forkserver
from seamlessflow.rewards.worker import RewardWorker, reward_group
from seamlessflow.testing.reward_worker_harness import REF, Running, options, publish, unscored, wait_for_outputs
from seamlessflow.topics import Topics

ROOT = Path(__file__).resolve().parents[2]


def doomed_worker(settings, tmp_path) -> subprocess.Popen:
    """The CLI in its own process group: a worker that will be killed while its verifier calls sleep."""
    config = settings.dump_yaml(tmp_path / "reward.yaml")
    argv = [sys.executable, "-m", "seamlessflow", "--config", str(config), "reward", "run", REF, "--pool", "exact",
            "--concurrency", "2", "--timeout-s", "10", "--max-attempts", "2"]
    log = open(tmp_path / "doomed.log", "ab")
    return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log, start_new_session=True)


def committed(settings, group: str) -> dict[int, int]:
    topic = Topics(settings).to_score
    consumer = Consumer(consumer_config(settings, group))
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in parts], 10)
                if tp.offset >= 0}
    finally:
        consumer.close()


@pytest.mark.slow
def test_killing_a_reward_worker_mid_score_loses_and_duplicates_nothing(settings, codec, tmp_path):
    start_forkserver(REF)
    marks = tmp_path / "marks"
    marks.mkdir()
    sent = [unscored(f"s{i}", "slow", payload={"answer": "42", "marks": str(marks), "slow_s": 3.0}) for i in range(4)]
    publish(settings, codec, sent)
    doomed = doomed_worker(settings, tmp_path)
    deadline = time.monotonic() + 120
    while not any(marks.iterdir()):  # a verifier call of the doomed worker has started
        alive = doomed.poll() is None
        assert time.monotonic() < deadline and alive, (tmp_path / "doomed.log").read_text()[-3000:]
        time.sleep(0.1)
    os.killpg(doomed.pid, signal.SIGKILL)  # the worker, its fork server and the verifier calls
    doomed.wait(10)
    assert read_messages(settings, Topics(settings).trajectories, codec) == []  # killed before publishing
    survivor = Running(RewardWorker(settings, codec, REF, "default", options(timeout_s=10.0)))
    try:
        wait_for_outputs(settings, codec, len(sent))
        time.sleep(1.0)
        out = read_messages(settings, Topics(settings).trajectories, codec)
    finally:
        survivor.stop()
    assert sorted(t.event_id for t in out) == sorted(t.event_id for t in sent)
    assert {(t.status, t.reward) for t in out} == {("done", 0.5)}
    ends = {}
    for record in read_topic(settings, Topics(settings).to_score):
        ends[record.partition] = record.offset + 1
    assert committed(settings, reward_group("default", "exact")) == ends
