"""The embedded default (Tansu on a local S3 folder) keeps every committed record across a restart."""

import pytest

from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.io import MessageProducer, read_topic
from seamlessflow.topics import Topics
from seamlessflow.broker.local import LocalBroker
from tests.samples import SAMPLES


@pytest.mark.slow
def test_records_survive_a_broker_restart(tmp_path, codec):
    broker = LocalBroker(tmp_path, "s3").start()
    try:
        settings = broker.client_settings
        ensure_topics(settings)
        topic = Topics(settings).trajectories
        producer = MessageProducer(settings, codec)
        import dataclasses

        sent = [dataclasses.replace(SAMPLES[2], event_id=f"s{i}/0", session_id=f"s{i}") for i in range(300)]
        for msg in sent:
            producer.send(topic, msg.group_id, msg)
        producer.flush()

        broker.stop(kill=True)  # a crash, not a clean shutdown: acknowledged records must still be there
        broker.start()

        got = [r.message for r in read_topic(settings, topic, codec)]
        assert sorted(got, key=lambda m: m.event_id) == sorted(sent, key=lambda m: m.event_id)
    finally:
        broker.stop()
