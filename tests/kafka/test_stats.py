"""librdkafka's statistics document read for what a consumer holds in its fetch queues."""

import json

from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.group import GroupMember
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.stats import ENV, fetch_queues, stats_config
from seamlessflow.testing.backlog import produce_backlog, read_slowly, watch_fetch_queues
from seamlessflow.topics import Topics


def test_the_queue_is_the_largest_partitions_report():
    raw = json.dumps({"topics": {
        "a": {"partitions": {"0": {"fetchq_size": 1024, "fetchq_cnt": 4}, "1": {"fetchq_size": 1024, "fetchq_cnt": 4},
                             "-1": {"fetchq_size": 0, "fetchq_cnt": 0}}},
    }})
    assert fetch_queues(raw) == (1024, 4)
    assert fetch_queues("{}") == (0, 0)


def test_statistics_only_when_asked(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert stats_config("trainer") == {}
    monkeypatch.setenv(ENV, "2.5")
    assert stats_config("trainer")["statistics.interval.ms"] == 2500


def test_a_group_consumers_queue_is_counted_once_not_once_a_partition(settings, codec, monkeypatch):
    """Every partition's statistics report the consumer's one forwarded queue: a sum would double it here."""
    reported = watch_fetch_queues(monkeypatch)
    topic = Topics(settings).trajectories
    written = produce_backlog(settings, codec, topic, mib=2)
    member = GroupMember(settings, topic, "stats-test", DeadLetters(settings, codec, "test",
                         MessageProducer(settings, codec).send))
    try:
        read_slowly(lambda: member.poll_many(0.05, 1), seconds=30,
                    done=lambda: bool(reported) and max(reported) > written / 2)
    finally:
        member.close()
    assert Topics(settings).specs["trajectories"].partitions > 1
    assert written / 2 < max(reported, default=0) <= written
