"""The trainer's consumer holds at most `trainer.fetch_queue_mib` of prefetched records, against the real broker.

Why a test: the trainer holds back by pausing its consumer, and librdkafka throws its fetch queue away at each
pause and fetches it again at each resume. At librdkafka's default bound (64 MiB) that churn grew the trainer's
native memory ~0.1 MiB/s in the soak (`benchmarks/README.md`, soak), a growth no Python tracing sees and the
short soak's single quiet partition never shows. Here a backlog several times the bound waits on the topic and
the source reads it one record at a time, as a trainer behind its agents does; librdkafka's own statistics
(`SEAMLESSFLOW_KAFKA_STATS_S`, `seamlessflow/kafka/stats.py`) say how much it queued. A source built without
the bound (librdkafka's default) queues the whole backlog and fails this.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
import time

from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.stats import ENV
from seamlessflow.messages import Trajectory
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.source import TrajectorySource

TOKENS = 2_000  # ~ 20 KiB a record on the wire (ids, mask, logprobs, versions)
BACKLOG_MIB = 24
QUEUED = re.compile(r"librdkafka fetch queues ([0-9.]+) MiB")


def a_long_trajectory() -> Trajectory:
    sample = next(s for s in SAMPLES if isinstance(s, Trajectory))
    rng = random.Random(0)  # varied values: a compressed batch must not be smaller than the queue it fills
    return dataclasses.replace(sample, tokens=[rng.randrange(1, 30) for _ in range(TOKENS)], loss_mask=[1] * TOKENS,
                               logprobs=[-rng.random() for _ in range(TOKENS)], versions=[3] * TOKENS)


def produce_backlog(settings, codec, topic: str) -> None:
    """Writes about BACKLOG_MIB of trajectories over the topic's partitions."""
    value = codec.encode(a_long_trajectory(), topic)
    count = BACKLOG_MIB * 2**20 // len(value) + 1
    producer = MessageProducer(settings, codec)
    for n in range(count):
        producer.send_bytes(topic, f"g{n}".encode(), value)
    producer.flush(60)


def largest_queue_while_reading(source: TrajectorySource, caplog, seconds: float) -> float:
    """Reads one record per poll for `seconds` (a slow trainer); the largest fetch queue logged, in MiB."""
    deadline, read = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        read += len(source.poll(0.05, max_records=1))
    queued = [float(m.group(1)) for r in caplog.records if (m := QUEUED.search(r.getMessage()))]
    assert read and queued, "no record read or no statistics logged"
    return max(queued)


def test_the_trainer_prefetches_at_most_its_bound(settings, codec, monkeypatch, caplog):
    monkeypatch.setenv(ENV, "0.2")
    caplog.set_level(logging.INFO, logger="seamlessflow.kafka.stats")
    topic = Topics(settings).trajectories
    produce_backlog(settings, codec, topic)
    bound = TrainerOptions.model_fields["fetch_queue_mib"].default
    letters_out = MessageProducer(settings, codec)
    source = TrajectorySource(settings, codec, topic, "trainer-test", DeadLetters(settings, codec, "trainer",
                              letters_out.send), fetch_queue_mib=bound)
    try:
        largest = largest_queue_while_reading(source, caplog, seconds=8)
    finally:
        source.close()
    partitions = Topics(settings).specs["trajectories"].partitions
    # librdkafka may overshoot by one fetch (1 MiB) per partition; the default bound would queue the backlog
    assert largest <= bound + partitions + 1, f"{largest:.1f} MiB queued against a bound of {bound} MiB"
