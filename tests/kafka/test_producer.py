"""The producer wrapper: durable sends with headers, raw bytes as they were, fire-and-forget heartbeats."""

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.reader import read_topic
from seamlessflow.topics import Topics
from tests.samples import SAMPLES


def test_send_and_wait_delivers_with_headers(settings, codec):
    topic = Topics(settings).tasks
    MessageProducer(settings, codec).send_and_wait(topic, "g1", SAMPLES[3], headers=[("pool", b"red")])
    [record] = list(read_topic(settings, topic, codec))
    assert record.message == SAMPLES[3] and record.headers == {"pool": b"red"} and record.key == b"g1"


def test_send_bytes_republishes_a_record_unchanged(settings, codec):
    topic = Topics(settings).session_events
    value = codec.encode(SAMPLES[0], topic)
    producer = MessageProducer(settings, codec)
    producer.send_bytes(topic, b"s1", value)
    producer.flush()
    [record] = list(read_topic(settings, topic, codec))
    assert record.value == value and record.key == b"s1" and record.message == SAMPLES[0]


def test_try_send_queues_without_blocking(settings, codec):
    topic = Topics(settings).status
    producer = MessageProducer(settings, codec)
    assert producer.try_send(topic, "gpu-0", SAMPLES[5])
    assert producer.close() == 0
    assert [r.message for r in read_topic(settings, topic, codec)] == [SAMPLES[5]]
