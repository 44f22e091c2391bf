"""The trajectories topic as a consumer group whose commits follow training, never precede it.

At-least-once by construction: offsets are committed only to the tracker's commit points, which stop
below any record not yet trained or discarded. The checkpoint carries the same points, and on the first
assignment the consumer seeks there (the checkpoint is saved before the commit, so it may be ahead).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.messages import Trajectory
from seamlessflow.trainer.offsets import OffsetTracker

log = logging.getLogger("seamlessflow.trainer.source")


@dataclass
class Incoming:
    """One trajectory and where it was read."""

    partition: int
    offset: int
    trajectory: Trajectory


class TrajectorySource:
    def __init__(self, settings: Settings, codec: Codec, topic: str, group_id: str, dead_letters: DeadLetters,
                 start_offsets: dict[int, int] | None = None):
        self.topic = topic
        self.codec = codec
        self.dead_letters = dead_letters  # poison is filed there and finished at once: never trained, never blocking
        self.tracker = OffsetTracker()
        self.revoked = False  # set when partitions were taken away: the caller rebuilds its buffers
        self._start_offsets = dict(start_offsets or {})
        self._paused = False
        self._consumer = Consumer(consumer_config(settings, group_id))
        self._consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            if tp.partition in self._start_offsets:
                tp.offset = self._start_offsets.pop(tp.partition)
        consumer.assign(partitions)
        if self._paused:
            consumer.pause(partitions)
        log.info("assigned %s", [(tp.partition, tp.offset) for tp in partitions])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.tracker.drop_partition(tp.partition)
        self.revoked = True

    def poll(self, timeout_s: float, max_records: int = 256) -> list[Incoming]:
        out = []
        for msg in self._consumer.consume(max_records, timeout_s):
            error = msg.error()
            if error:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(error)
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None  # a consumed record always has both
            trajectory = self.dead_letters.decode_message(msg)
            self.tracker.seen(partition, offset, trajectory.event_id if trajectory else "")
            if trajectory is None:
                self.tracker.finish(partition, offset)
            else:
                out.append(Incoming(partition, offset, trajectory))
        return out

    def commit(self) -> dict[int, int]:
        """Commits the tracker's commit points synchronously; returns them."""
        points = self.tracker.commit_points()
        if points:
            self._consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in points.items()],
                                  asynchronous=False)
            self.tracker.forget_below_commit()
        return points

    def set_paused(self, paused: bool) -> None:
        """Stops fetching while idle (the group membership stays alive through polls)."""
        if paused == self._paused:
            return
        self._paused = paused
        assignment = self._consumer.assignment()
        if assignment:
            (self._consumer.pause if paused else self._consumer.resume)(assignment)

    def close(self) -> None:
        self._consumer.close()
