"""A backlog of long trajectories on a topic: what a consumer's fetch queue is measured against."""

from __future__ import annotations

import dataclasses
import random

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import Trajectory
from seamlessflow.testing.samples import SAMPLES

TOKENS = 2_000  # ~ 26 KiB a record on the wire (ids, mask, logprobs, versions)


def a_long_trajectory() -> Trajectory:
    sample = next(s for s in SAMPLES if isinstance(s, Trajectory))
    rng = random.Random(0)  # varied values: a compressed batch must not be smaller than the queue it fills
    return dataclasses.replace(sample, tokens=[rng.randrange(1, 30) for _ in range(TOKENS)], loss_mask=[1] * TOKENS,
                               logprobs=[-rng.random() for _ in range(TOKENS)], versions=[3] * TOKENS)


def produce_backlog(settings: Settings, codec: Codec, topic: str, mib: float) -> int:
    """Writes about `mib` MiB of trajectories over the topic's partitions (keys spread them); the bytes written."""
    value = codec.encode(a_long_trajectory(), topic)
    count = int(mib * 2**20) // len(value) + 1
    producer = MessageProducer(settings, codec)
    for n in range(count):
        producer.send_bytes(topic, f"g{n}".encode(), value)
    producer.flush(60)
    return count * len(value)
