"""A backlog of long trajectories on a topic, read slowly, and the fetch queue librdkafka holds meanwhile."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka import stats
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import Trajectory
from seamlessflow.testing.samples import SAMPLES

if TYPE_CHECKING:
    import pytest

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


def watch_fetch_queues(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every consumer built from now on reports its fetch queue (bytes, `kafka.stats.fetch_queues`) into the
    list returned, every 0.2 s while it polls. `monkeypatch`: pytest's, which undoes this after the test."""
    seen: list[int] = []
    monkeypatch.setenv(stats.ENV, "0.2")
    monkeypatch.setattr(stats, "log_fetch_queues", lambda _name, raw: seen.append(stats.fetch_queues(raw)[0]))
    return seen


def read_slowly(poll: Callable[[], list], seconds: float, done: Callable[[], bool] = lambda: False) -> int:
    """Polls one record every 0.2 s for `seconds` or until `done()`, as a consumer far behind does, so that
    librdkafka fills its queue as far as it is let; the records read."""
    deadline, read = time.monotonic() + seconds, 0
    while time.monotonic() < deadline and not done():
        read += len(poll())
        time.sleep(0.2)
    return read
