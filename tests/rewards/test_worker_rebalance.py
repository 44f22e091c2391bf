"""The rebalance race of the two-worker test, made deterministic: a worker that was full (so its partitions
were paused) when a second one joined finishes its call during the revoke, unpauses while it owns nothing,
and must still read the partition it gets back. librdkafka keeps a partition's pause flag across unassign
and assign; before the subscriber set it on each assignment, that partition's trajectories waited forever."""

from __future__ import annotations

import time
from collections import Counter

from seamlessflow.kafka.io import read_messages, read_topic
from seamlessflow.rewards.verifier_call import start_forkserver
from seamlessflow.rewards.worker import RewardWorker
from seamlessflow.testing.reward_worker_harness import REF, Running, options, publish, unscored, wait_for_outputs
from seamlessflow.topics import Topics


def test_a_worker_paused_when_its_partitions_moved_reads_the_one_it_gets_back(settings, codec, tmp_path):
    start_forkserver(REF)
    payload = {"answer": "42", "marks": str(tmp_path), "slow_s": 2.0}
    sent = [unscored(f"r{i}", "slow", payload=payload) for i in range(6)]
    publish(settings, codec, sent)
    deadline = time.monotonic() + 30  # each read is a consumer of its own: seconds apiece at load 15-20 (CI)
    while (per_partition := Counter(r.partition for r in read_topic(settings, Topics(settings).to_score))).total() < 6:
        assert time.monotonic() < deadline, per_partition  # the end offsets read can lag the flush a little
        time.sleep(0.1)
    assert sorted(per_partition.values()) == [2, 4]  # unread records stay on both after the first is taken
    first = Running(RewardWorker(settings, codec, REF, "default", options(concurrency=1)))  # full after one
    deadline = time.monotonic() + 60
    while not any(tmp_path.iterdir()):  # its one call is running: both partitions paused
        assert time.monotonic() < deadline, "the first worker never started a call"
        time.sleep(0.05)
    second = Running(RewardWorker(settings, codec, REF, "default", options(concurrency=1)))
    try:
        wait_for_outputs(settings, codec, len(sent), timeout_s=45.0)
        time.sleep(1.0)  # anything published twice would arrive now
        out = read_messages(settings, Topics(settings).trajectories, codec)
    finally:
        first.stop()
        second.stop()
    assert sorted(t.event_id for t in out) == sorted(t.event_id for t in sent)
    assert first.worker.stats.settled == 1  # its call finished during the revoke, not redone by the second
    assert first.worker.stats.scored >= 2  # and it read again after the partitions moved
