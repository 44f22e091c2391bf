"""A reward worker killed in the middle of scoring loses and duplicates nothing: its records were not
committed, so the group hands them to the survivor, which publishes each exactly once."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from seamlessflow.avro import Codec
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.io import read_messages, read_topic
from seamlessflow.rewards.sandbox import start_forkserver
from seamlessflow.rewards.worker import RewardWorker, reward_group
from seamlessflow.topics import Topics
from tests.rewards.test_worker import REF, Running, options, publish, unscored, wait_for_outputs


def run_doomed_worker(settings) -> None:
    """In a fresh process: a worker that will be killed while its verifier calls sleep."""
    RewardWorker(settings, Codec(), REF, "default", options(timeout_s=10.0)).run()


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
    payload = {"answer": "42", "marks": str(tmp_path), "slow_s": 3.0}
    sent = [unscored(f"s{i}", "slow", payload=payload) for i in range(4)]
    publish(settings, codec, sent)
    doomed = multiprocessing.get_context("spawn").Process(target=run_doomed_worker, args=(settings,))
    doomed.start()
    deadline = time.monotonic() + 120
    while not any(tmp_path.iterdir()):  # a verifier call of the doomed worker has started
        assert time.monotonic() < deadline and doomed.is_alive(), "the doomed worker never started scoring"
        time.sleep(0.1)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(10)
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
