"""The assembler worker: session-events in, trajectories and dead letters out, one consumer-group member.

Reads like the pipeline: the worker polls raw session-events records in batches (up to
`assembler.batch_max` per poll, straight from librdkafka's fetch buffer); each record goes through
longest-prefix matching in the `SessionBook` (which decodes it, so a poison record becomes a dead letter
instead of stopping the stream); trajectories are published keyed by group id. Every
`checkpoint_interval_s` the worker flushes the producer, saves the published marks, and only then commits
source offsets, never past the first record of a session that is still open. Crash safety and the
guarantee are described in `seamlessflow/assembler/book.py`.

Why not a Faust stream job (what the first version was): measured on the same 8-turn backlog, Faust's
per-record path (a `wait_first` with two new asyncio tasks per record in the fetcher, then the conductor,
channel and stream) cost ~170 µs of CPU per record, twice the assembler's own work per call, and held a
worker at 2–4k calls per CPU-second; batches from librdkafka carry no per-record framework cost
(`docs/performance/assembler.md`). The group membership, rebalances and commits Faust gave are the Kafka layer's
`Subscriber`, as for every other consumer of the project.
"""

from __future__ import annotations

import logging
import threading
import time

from seamlessflow.assembler.book import SessionBook
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.assembler.progress import PublishedMarks
from seamlessflow.config import Settings
from seamlessflow.core.evaluation import is_eval_group
from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import KafkaException, MessageProducer, Record, transient
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import Trajectory
from seamlessflow.rewards.request import pending_request
from seamlessflow.teacher.options import TeacherOptions
from seamlessflow.topics import Topics

log = logging.getLogger("seamlessflow.assembler")

POLL_TIMEOUT_S = 0.1


class Assembler:
    """Owns the session book, the group member, the producer and the published marks; one thread."""

    def __init__(self, settings: Settings, options: AssemblerOptions | None = None):
        self.settings = settings
        self.options = options or AssemblerOptions.from_settings(settings)
        self.topics = Topics(settings)
        self.codec = codec_for(settings)
        self.group_id = f"{settings.topic_prefix}.{self.options.app_id}"
        self.book = SessionBook(self.options, self.codec, self.topics.session_events, settings.team, settings.run)
        self.producer = MessageProducer(settings, self.codec)
        self.marks = PublishedMarks(settings, f"{self.group_id}.published", self.topics.session_events)
        self.source = Subscriber(settings, None, None, group_id=self.group_id, name="assembler")
        self.teachers = set(TeacherOptions.from_settings(settings).teams)  # teams whose trajectories go to-teach
        self._committed: dict[int, int] = {}

    def run(self, stop: threading.Event) -> None:
        """Assemble until `stop` is set; then checkpoint once more and leave the group."""
        self.source.subscribe(self.topics.session_events, on_assign=self._on_assigned, on_revoke=self._on_revoked)
        next_checkpoint = time.monotonic() + self.options.checkpoint_interval_s
        try:
            while not stop.is_set():
                for record in self.source.poll(POLL_TIMEOUT_S, self.options.batch_max):
                    self._on_record(record)
                if time.monotonic() >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = time.monotonic() + self.options.checkpoint_interval_s
            self.checkpoint()
        finally:
            self.source.close()
            self.producer.close()
            self.marks.close()  # its side consumer too: an in-process assembler leaves no client reconnecting

    def _on_record(self, record: Record) -> None:
        out = self.book.on_record(record.partition, record.offset, record.key, record.value)
        for trajectory in out.trajectories:
            self.producer.send(self._next_topic(trajectory), trajectory.group_id, trajectory)
        for letter in out.dead_letters:
            self.producer.send(self.topics.dead_letter, _text(letter.key), letter)

    def _next_topic(self, trajectory: Trajectory) -> str:
        """A team's teacher first (its worker passes it on), then a reward worker when the session asked for a
        score, else straight to the trainers. An evaluation pass is measured, never trained: never taught."""
        if trajectory.team in self.teachers and not is_eval_group(trajectory.group_id):
            return self.topics.to_teach
        waits = pending_request(trajectory.info_json) is not None
        return self.topics.to_score if waits else self.topics.trajectories

    def checkpoint(self, partitions: set[int] | None = None) -> bool:
        """Flush outputs, save how far they go, then commit past closed sessions only (of `partitions`, or
        all held). False when the marks could not be saved now (the next checkpoint retries)."""
        for end in self.book.idle_aborts():
            self.producer.send(self.topics.session_events, end.session_id, end)
        self.producer.flush()
        held = sorted(self.book.processed if partitions is None else partitions & self.book.processed.keys())
        try:
            self.marks.save({p: self.book.processed[p] for p in held})
        except KafkaException as exc:
            if not transient(exc):
                raise
            # the group coordinator moved (a broker died): nothing is committed past unsaved marks
            log.warning("published marks not saved (%s); retrying at the next checkpoint", exc.args[0])
            return False
        points = {p: self.book.commit_offset(p) for p in held}
        moved = {p: o for p, o in points.items() if self._committed.get(p) != o}
        if self.source.commit(moved):
            self._committed.update(moved)
        return True

    def _on_assigned(self, partitions: list[int]) -> None:
        """Which partitions this worker holds now, and how far their outputs were already published."""
        self.book.replay_end.update(self.marks.read(sorted(partitions)))
        log.info("session-events partitions assigned: %s", sorted(partitions))

    def _on_revoked(self, partitions: list[int]) -> None:
        """Before the partitions move: publish and commit what can be, then drop their sessions (rebuilt there)."""
        revoked = set(partitions)
        try:
            self.checkpoint(revoked)
        except Exception as exc:  # a commit during a rebalance may be refused; the next owner re-reads
            log.warning("checkpoint on revoke: %s", exc)
        for partition in revoked:
            self.book.forget_partition(partition)
            self._committed.pop(partition, None)


def _text(key: bytes | None) -> str | None:
    return key.decode("utf-8", "replace") if key is not None else None


def run(settings: Settings, stop: threading.Event, _args: object = None) -> None:
    """Run one assembler worker until stopped (the entry point `services.assembler` runs)."""
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    ensure_topics(client)
    Assembler(client).run(stop)
