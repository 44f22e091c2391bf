"""Live reading, typed: records come back decoded, and a record the reader cannot use is dead-lettered.

Why one subscriber: the services read Kafka two ways (as a member of a consumer group that commits after
the work is done, or assigned, without a group, from a position) and every one of them must decide what
to do with a record it cannot use. That decision is made once, by `DeadLetters`: a letter with the reason,
then go on (the record comes back with `message=None` so the caller can still count its offset as done).
A tombstone is not poison and comes back the same way without a letter. A reader that is no service (the
live table of `up`) passes no `DeadLetters`: it files nothing and only skips, since the services reading
the same topic file their own letters.

Consumer errors (a broker going away, a partition without a leader) are retried by librdkafka itself;
they are logged and reading goes on, unless the subscriber was made with `errors="raise"`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.clients import consumer_config, partitions_of, private_group
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.errors import commit_refused
from seamlessflow.kafka.io import DeliveryFailed
from seamlessflow.kafka.reader import Record, TopicReader, record_of
from seamlessflow.kafka.stats import stats_config

if TYPE_CHECKING:
    from seamlessflow.kafka.fencing import RoleWriter

log = logging.getLogger(__name__)

OnPartitions = Callable[[list[int]], None]


class Subscriber:
    """Decoded records of some topics; `group_id` makes it a group member (`subscribe`, `commit`), else its
    partitions are assigned from positions (`follow`, `catch_up`)."""

    def __init__(self, settings: Settings, codec: Codec | None, dead_letters: DeadLetters | None,
                 group_id: str | None = None, name: str = "reader", errors: Literal["log", "raise"] = "log",
                 config: dict[str, Any] | None = None):
        self.settings, self.codec, self.dead_letters, self.errors = settings, codec, dead_letters, errors
        group = group_id or private_group(settings, name)
        self._consumer = Consumer(consumer_config(settings, group, **stats_config(group), **(config or {})))
        self._paused = False
        self._topic: str | None = None
        self._start_offsets: dict[int, int] = {}

    # -- assigned (no group) ---------------------------------------------------------------------

    def follow(self, topic: str, start_offsets: dict[int, int] | None = None, timeout_s: float = 30.0) -> list[int]:
        """Adds every partition of `topic`, each from its start offset (default: the beginning); returns them
        ([] for a topic not created yet)."""
        partitions = partitions_of(self._consumer, topic, timeout_s)
        starts = start_offsets or {}
        self._consumer.incremental_assign([TopicPartition(topic, p, starts.get(p, OFFSET_BEGINNING))
                                           for p in sorted(partitions)])
        return sorted(partitions)

    def catch_up(self, topic: str, timeout_s: float = 30.0) -> list[Any]:
        """The usable messages on `topic` now (its history, up to the high watermarks); live reading of the
        topic continues right after them."""
        reader = TopicReader(self.settings, topic, self.codec, timeout_s=timeout_s)
        messages = [m for m in map(self._decode, reader.records()) if m is not None]
        self.follow(topic, reader.ends, timeout_s)
        return messages

    # -- group member -----------------------------------------------------------------------------

    def subscribe(self, topic: str | list[str], start_offsets: dict[int, int] | None = None,
                  on_assign: OnPartitions | None = None, on_revoke: OnPartitions | None = None) -> None:
        """Joins the group on `topic` (or on several topics: then `start_offsets` must be empty and `commit`
        names its topic); on the first assignment of a partition in `start_offsets` reading starts there (a
        checkpoint may be ahead of the group's commit), elsewhere at the committed offset."""
        topics = [topic] if isinstance(topic, str) else list(topic)
        assert len(topics) == 1 or not start_offsets, "start offsets are per partition of one topic"
        self._topic, self._start_offsets = (topics[0] if len(topics) == 1 else None), dict(start_offsets or {})

        def assigned(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                if tp.partition in self._start_offsets:
                    tp.offset = self._start_offsets.pop(tp.partition)
            consumer.assign(partitions)
            # librdkafka keeps a partition's pause flag across unassign and assign: one paused before it moved
            # away (and missed by a resume while nothing was assigned) would stay paused; so set it each time
            (consumer.pause if self._paused else consumer.resume)(partitions)
            log.info("%s: assigned %s", topic, [(tp.partition, tp.offset) for tp in partitions])
            if on_assign is not None:
                on_assign([tp.partition for tp in partitions])

        def revoked(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            if on_revoke is not None:
                on_revoke([tp.partition for tp in partitions])

        self._consumer.subscribe(topics, on_assign=assigned, on_revoke=revoked)

    def commit(self, points: dict[int, int], topic: str | None = None, writer: RoleWriter | None = None) -> bool:
        """Commits partition -> next offset to read, synchronously (after the work is done); False when the
        group refused it for the moment (a broker restart made the coordinator forget this member, a
        rebalance): the member rejoins on its next poll and a later commit covers these offsets, so the
        caller keeps them as not yet committed instead of dying. Other errors raise. With a role's `writer`
        the offsets go into its transaction: a fenced writer's commit raises `Fenced` and moves nothing."""
        topic = topic or self._topic
        assert topic is not None, "subscribe() first, or name the topic"
        if not points:
            return True
        offsets = [TopicPartition(topic, p, o) for p, o in points.items()]
        try:
            if writer is None:
                self._consumer.commit(offsets=offsets, asynchronous=False)
            else:
                writer.commit(offsets=offsets, group_metadata=self._consumer.consumer_group_metadata())
        except (KafkaException, DeliveryFailed) as exc:
            if isinstance(exc, KafkaException) and not commit_refused(exc):
                raise
            log.warning("%s: commit refused for now (a later one covers it): %s", topic, exc)
            return False
        return True

    def commit_consumed(self) -> None:
        """Commits everything returned so far (a viewer's position, not work done); a failure is logged:
        with nothing consumed yet, or during a rebalance, the next call covers it."""
        try:
            self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            log.debug("commit: %s", exc)

    # -- reading ----------------------------------------------------------------------------------

    def poll(self, timeout_s: float, max_records: int = 500) -> list[Record]:
        """The records that arrived (waiting up to `timeout_s` for the first); `message` is None for poison
        (dead-lettered) and tombstones."""
        out = []
        for msg in self._consumer.consume(max_records, timeout_s):
            error = msg.error()
            if error:
                self._on_error(error)
                continue
            record = record_of(msg, self.codec)
            record.message = self._decode(record)
            out.append(record)
        return out

    def messages(self, timeout_s: float, max_records: int = 500) -> list[Any]:
        """Only the usable messages of `poll`."""
        return [r.message for r in self.poll(timeout_s, max_records) if r.message is not None]

    def set_paused(self, paused: bool) -> None:
        """Stops fetching (a group member stays alive through polls); partitions assigned later stay paused.

        Callers say their state on every loop pass, and an unpaused state is re-asserted on the whole current
        assignment each time, not only on a change: a partition whose pause flag librdkafka kept across a
        rebalance would otherwise wait for the next change (a stall seen once in the two-reward-worker test
        after the assignment fix, not explained). Resuming a partition that fetches is a no-op."""
        changed, self._paused = paused != self._paused, paused
        if paused and not changed:
            return
        assignment = self._consumer.assignment()
        if assignment:
            (self._consumer.pause if paused else self._consumer.resume)(assignment)

    def close(self) -> None:
        self._consumer.close()

    def _decode(self, record: Record) -> Any:
        if self.codec is None:
            return None  # raw reading: the caller takes `value`
        if self.dead_letters is not None:
            return self.dead_letters.decode_record(record)
        if record.error is not None:
            log.debug("%s[%d]@%d skipped: %s", record.topic, record.partition, record.offset, record.error)
        return record.message

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and self.dead_letters is None:
            log.debug("consumer: %s", error)  # a viewer may follow a topic before it is created
            return
        if self.errors == "raise":
            raise KafkaException(error)
        log.warning("consumer: %s", error)
