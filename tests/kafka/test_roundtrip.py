"""Every message type through the real broker with the codec, on the topic declared for it."""

import pytest

from seamlessflow.kafka.io import MessageProducer, read_topic
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics, topic_specs


def test_every_message_type_round_trips_through_its_topic(settings, codec):
    topics = {spec.full_name: spec for spec in topic_specs(settings)}
    producer = MessageProducer(settings, codec)
    sent = {}
    for message in SAMPLES:
        topic = next(name for name, spec in topics.items() if type(message).__name__ in spec.values)
        producer.send(topic, "k", message)
        sent.setdefault(topic, []).append(message)
    producer.flush()
    for topic, messages in sent.items():
        got = [r.message for r in read_topic(settings, topic, codec)]
        assert got == messages, topic


def test_topics_have_declared_partitions(settings):
    from seamlessflow.kafka.admin import list_topics

    actual = list_topics(settings)
    for spec in topic_specs(settings):
        assert actual[spec.full_name] == spec.partitions


def test_ensure_topics_is_idempotent(settings):
    from seamlessflow.kafka.admin import ensure_topics

    assert ensure_topics(settings) == []


def test_order_per_session_key_is_kept(settings, codec):
    """Token events and the episode end share a key, so the end never overtakes the last turn."""
    import dataclasses

    topic = Topics(settings).session_events
    producer = MessageProducer(settings, codec)
    token, end = SAMPLES[0], SAMPLES[1]
    expected = []
    for i in range(50):
        msg = dataclasses.replace(token, event_id=f"c{i}.0", call_id=f"c{i}")
        producer.send(topic, "s1", msg)
        expected.append(msg)
    producer.send(topic, "s1", end)
    producer.flush()
    got = [r.message for r in read_topic(settings, topic, codec)]
    assert got == expected + [end]


@pytest.mark.parametrize("bad", [b"\x07nonsense", b""])
def test_reader_reports_undecodable_records_instead_of_crashing(settings, codec, bad):
    from confluent_kafka import Producer

    from seamlessflow.kafka.clients import producer_config

    topic = Topics(settings).dead_letter
    p = Producer(producer_config(settings))
    p.produce(topic, value=bad, key=b"k")
    p.flush(10)
    [record] = list(read_topic(settings, topic, codec))
    assert record.message is None and record.error


def test_read_topic_returns_on_a_topic_that_is_written_all_the_time(settings, codec):
    """A live topic (heartbeats) is never quiet: reading stops at records newer than the call."""
    import threading
    import time

    from seamlessflow.kafka.io import read_topic

    topic = Topics(settings).status
    producer = MessageProducer(settings, codec)
    stop, first_written = threading.Event(), threading.Event()

    def heartbeat():
        while not stop.is_set():
            producer.send(topic, "gpu-0", SAMPLES[5])
            producer.flush()
            first_written.set()
            time.sleep(0.05)

    writer = threading.Thread(target=heartbeat, daemon=True)
    writer.start()
    try:
        assert first_written.wait(30)  # on a loaded machine the first delivery can take seconds
        records = list(read_topic(settings, topic, codec, timeout_s=20))
        assert records and all(r.message == SAMPLES[5] for r in records)
    finally:
        stop.set()
        writer.join()
