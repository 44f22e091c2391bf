"""Looking positions up: a group's committed offsets as marks, offsets and timestamps by time."""

import dataclasses

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.positions import CommittedOffsets, OffsetLookup
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics


def test_committed_offsets_round_trip_and_default_to_zero(settings):
    topic = Topics(settings).session_events
    marks = CommittedOffsets(settings, f"{settings.topic_prefix}.marks", topic)
    try:
        assert marks.read([0, 1]) == {0: 0, 1: 0}
        marks.save({1: 7})
    finally:
        marks.close()
    again = CommittedOffsets(settings, f"{settings.topic_prefix}.marks", topic)
    try:
        assert again.read([0, 1]) == {0: 0, 1: 7}
    finally:
        again.close()


def test_offsets_for_a_time_and_the_timestamps_there(settings, codec):
    topic = Topics(settings).weights  # 1 partition
    producer = MessageProducer(settings, codec)
    for i in range(3):
        producer.send(topic, "run1", dataclasses.replace(SAMPLES[7], event_id=f"w-{i}"))
        producer.flush()
    lookup = OffsetLookup(settings, topic)
    try:
        assert lookup.partitions() == [0] and lookup.watermarks(0) == (0, 3)
        stamps = [lookup.timestamp_at(0, o) for o in range(3)]
        assert all(s is not None for s in stamps) and stamps == sorted(stamps)
        assert lookup.offsets_for_time(stamps[-1])[0] == next(o for o, s in enumerate(stamps) if s == stamps[-1])
        assert lookup.offsets_for_time(stamps[-1] + 60_000) == {0: None}
    finally:
        lookup.close()
