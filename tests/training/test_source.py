"""The trainer's source reads trajectories in every wire form: packed, Avro arrays, and the pre-packing schema."""

import dataclasses
import time

from confluent_kafka import Producer

from seamlessflow.avro import Codec
from seamlessflow.kafka.clients import producer_config
from seamlessflow.topics import Topics
from seamlessflow.training.source import TrajectorySource
from tests.samples import encode_before_packing
from tests.samples import SAMPLES

TRAJECTORY = SAMPLES[2]


def test_packed_array_and_pre_packing_trajectories_read_alike(settings):
    topic = Topics(settings).trajectories
    forms = [Codec().encode(dataclasses.replace(TRAJECTORY, event_id="s1/0"), topic),
             Codec(packed=False).encode(dataclasses.replace(TRAJECTORY, event_id="s1/1"), topic),
             encode_before_packing(dataclasses.replace(TRAJECTORY, event_id="s1/2"))]
    producer = Producer(producer_config(settings))
    for value in forms:
        producer.produce(topic, key=b"g1", value=value)
    producer.flush(30)
    source = TrajectorySource(settings, Codec(), topic, "trainer-test")
    got, deadline = [], time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        got += source.poll(1.0)
    source.close()
    assert [i.error for i in got] == [None] * 3
    assert [i.trajectory for i in got] == [dataclasses.replace(TRAJECTORY, event_id=f"s1/{n}") for n in range(3)]
