"""The producer wrapper: durable sends with headers, raw bytes as they were, fire-and-forget heartbeats."""

import threading
import time

import pytest

from seamlessflow.broker.local import LocalBroker
from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.io import DeliveryFailed, MessageProducer
from seamlessflow.kafka.reader import read_topic
from seamlessflow.messages import WeightVersion
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics


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


@pytest.mark.slow
def test_deliver_outlasts_a_broker_restart_and_lands_once(tmp_path, codec):
    """A weight version's announcement made while the broker is down: `send_and_wait` gives up after its
    wait, `deliver` waits for the broker to come back, and the record is on the topic once."""
    broker = LocalBroker(tmp_path / "broker").start()
    settings = broker.client_settings.with_overrides(topic_prefix="restart")
    ensure_topics(settings)
    topic = Topics(settings).weights
    producer = MessageProducer(settings, codec)
    producer.send_and_wait(topic, "run1", SAMPLES[3])  # connected before the broker goes
    version = next(m for m in SAMPLES if isinstance(m, WeightVersion))
    try:
        broker.stop(kill=True)
        with pytest.raises(DeliveryFailed):
            producer.send_and_wait(topic, "run1", SAMPLES[3], timeout_s=2)
        producer.purge()
        done = threading.Event()
        thread = threading.Thread(target=lambda: (producer.deliver(topic, "run1", version, patience_s=120, wait_s=2),
                                                  done.set()), daemon=True)
        thread.start()
        time.sleep(5)
        assert not done.is_set(), "delivered with no broker"
        broker.start()
        thread.join(120)
        assert done.is_set()
        records = [r.message for r in read_topic(settings, topic, codec)]
        assert records.count(version) == 1 and records.count(SAMPLES[3]) == 1
    finally:
        broker.stop()
