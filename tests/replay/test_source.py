"""Timestamp starts: the broker's offset-for-time answer is verified, never trusted."""

import time

from seamlessflow.kafka.io import read_topic
from seamlessflow.replay.source import plan_since, read_from, verified_start
from seamlessflow.testing.replay_samples import produce, two_turn_session
from seamlessflow.topics import Topics

TIMES = {10: 1000, 11: 2000, 12: 3000}  # offset -> record timestamp


def test_a_correct_answer_is_used():
    assert verified_start(11, 1500, 10, TIMES.get)[0] == 11


def test_a_wrong_answer_falls_back_to_scanning_the_partition():
    assert verified_start(12, 1500, 10, TIMES.get)[0] == 10  # skipped a matching record
    assert verified_start(10, 2500, 10, TIMES.get)[0] == 10  # record there is too early
    assert verified_start(11, 2500, 10, TIMES.get)[0] == 10
    assert verified_start(None, 1500, 10, TIMES.get)[0] == 10  # "nothing there" is checked by scanning
    assert verified_start(3, 1500, 10, TIMES.get)[0] == 10  # below the log start


def test_since_on_the_broker_reads_the_later_records_only(settings, codec):
    topic = Topics(settings).session_events
    early = int(time.time() * 1000) - 3_600_000  # not in 1970: past the topic's retention, the broker deletes it
    produce(settings, codec, topic, two_turn_session("early"), timestamp_ms=early)
    produce(settings, codec, topic, two_turn_session("late"), timestamp_ms=early + 1_000_000)
    plan = plan_since(settings, topic, early + 500_000)
    assert len(plan.notes) == len(plan.offsets) == 4
    kept = [r for r in read_from(settings, topic, codec, since_ms=early + 500_000) if r.timestamp_ms >= early + 500_000]
    assert {r.message.session_id for r in kept} == {"late"} and len(kept) == 3
    everything = list(read_topic(settings, topic, codec, start_offsets=plan.offsets))
    assert {r.message.session_id for r in everything} >= {"late"}
