"""librdkafka's statistics document read for what a consumer holds in its fetch queues."""

import json

from seamlessflow.kafka.stats import ENV, fetch_queues, stats_config


def test_fetch_queues_sum_every_partition_of_every_topic():
    raw = json.dumps({"topics": {
        "a": {"partitions": {"0": {"fetchq_size": 1000, "fetchq_cnt": 3}, "-1": {"fetchq_size": 0, "fetchq_cnt": 0}}},
        "b": {"partitions": {"1": {"fetchq_size": 24, "fetchq_cnt": 1}}},
    }})
    assert fetch_queues(raw) == (1024, 4)
    assert fetch_queues("{}") == (0, 0)


def test_statistics_only_when_asked(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert stats_config("trainer") == {}
    monkeypatch.setenv(ENV, "2.5")
    assert stats_config("trainer")["statistics.interval.ms"] == 2500
