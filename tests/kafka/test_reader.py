"""The reader: a topic's history up to the high watermarks at open, and where live reading continues."""

import dataclasses

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.reader import TopicReader, read_topic
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics

TASK = SAMPLES[3]


def _tasks(n: int, start: int = 0) -> list:
    return [dataclasses.replace(TASK, event_id=f"task-{i}", group_id=f"g{i}") for i in range(start, start + n)]


def test_history_stops_at_the_marks_taken_at_open_on_every_partition(settings, codec):
    topic = Topics(settings).tasks  # 4 partitions
    producer = MessageProducer(settings, codec)
    before = _tasks(12)
    for task in before:
        producer.send(topic, task.group_id, task)
    producer.flush()
    reader = TopicReader(settings, topic, codec)
    later = _tasks(5, start=100)
    for task in later:  # written after open: not history
        producer.send(topic, task.group_id, task)
    producer.flush()
    records = list(reader.records())
    assert sorted(r.message.event_id for r in records) == sorted(t.event_id for t in before)
    assert len(reader.ends) == 4 and sum(reader.ends.values()) == 12
    assert all(r.offset < reader.ends[r.partition] for r in records)


def test_start_offsets_skip_what_lies_below_them(settings, codec):
    topic = Topics(settings).control  # 1 partition
    producer = MessageProducer(settings, codec)
    commands = [dataclasses.replace(SAMPLES[4], event_id=f"cmd-{i}", epoch=i) for i in range(6)]
    for command in commands:
        producer.send(topic, command.resource_id, command)
    producer.flush()
    assert [r.message for r in read_topic(settings, topic, codec, start_offsets={0: 4})] == commands[4:]
    assert [r.message for r in read_topic(settings, topic, codec, start_offsets={0: 99})] == []


def test_an_empty_topic_reads_nothing_and_ends_at_zero(settings, codec):
    reader = TopicReader(settings, Topics(settings).weights, codec)
    assert list(reader.records()) == [] and reader.ends == {0: 0}
