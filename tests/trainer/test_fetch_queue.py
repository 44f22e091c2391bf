"""The trainer's consumer holds at most `trainer.fetch_queue_mib` of prefetched records, against the real broker.

Why a test: the trainer holds back by pausing its consumer, and librdkafka throws its fetch queue away at each
pause and fetches it again at each resume. At librdkafka's default bound (64 MiB) that churn grew the trainer's
native memory ~0.1 MiB/s in the soak (`docs/performance/soak.md`), a growth no Python tracing sees and the
short soak's single quiet partition never shows. Here a backlog several times the bound waits on the topic and
the source reads one record every 0.2 s, as a trainer behind its agents does, so librdkafka fills its queue
as far as it is let; librdkafka's own statistics (`SEAMLESSFLOW_KAFKA_STATS_S`, `seamlessflow/kafka/stats.py`)
say how much it queued. A source built without the bound (librdkafka's default) queues the whole backlog and
fails this.
"""

from __future__ import annotations

from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.testing.backlog import produce_backlog, read_slowly, watch_fetch_queues
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.source import TrajectorySource

BACKLOG_MIB = 24


def test_the_trainer_prefetches_at_most_its_bound(settings, codec, monkeypatch):
    queued = watch_fetch_queues(monkeypatch)
    topic = Topics(settings).trajectories
    produce_backlog(settings, codec, topic, BACKLOG_MIB)
    bound = TrainerOptions.model_fields["fetch_queue_mib"].default
    letters_out = MessageProducer(settings, codec)
    source = TrajectorySource(settings, codec, topic, "trainer-test", DeadLetters(settings, codec, "trainer",
                              letters_out.send), fetch_queue_mib=bound)
    try:
        read = read_slowly(lambda: source.poll(0.05, max_records=1), seconds=10)
    finally:
        source.close()
    assert read and queued, "no record read or no statistics reported"
    largest = max(queued) / 2**20
    partitions = Topics(settings).specs["trajectories"].partitions
    # librdkafka may overshoot by one fetch (1 MiB a partition), and 1 MiB of slack; the default bound would
    # queue the whole backlog (24.0 MiB, shown once)
    assert largest <= bound + partitions + 1, f"{largest:.1f} MiB queued against a bound of {bound} MiB"
    assert largest >= bound / 2, f"only {largest:.1f} MiB queued: the backlog did not reach the bound"
