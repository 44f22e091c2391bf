"""Running an agent worker in a test against the real broker: the worker in a thread, the tasks topic's
committed and end offsets, and a plain wait (the proxy's end endpoint: `end_proxy_stand_in`)."""

from __future__ import annotations

from seamlessflow.config import Settings
from seamlessflow.kafka.io import read_topic
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.topics import Topics

KEY = "sf-red-test-key"


def committed(settings: Settings, group: str) -> dict[int, int]:
    topics = Topics(settings)
    marks = CommittedOffsets(settings, group, topics.tasks)
    try:
        found = marks.read(list(range(topics.specs["tasks"].partitions)))
        return {p: offset for p, offset in found.items() if offset > 0}  # 0: nothing committed there
    finally:
        marks.close()


def end_offsets(settings: Settings) -> dict[int, int]:
    ends = {}
    for record in read_topic(settings, Topics(settings).tasks):
        ends[record.partition] = record.offset + 1
    return ends
