"""The assembler as a Faust app: session-events in, trajectories and dead letters out.

Reads like the pipeline: records come in from the session-events topic as raw bytes, taken in batches from
the agent's buffer (`batches.py`; decoding happens in `SessionBook`, so a poison record becomes a dead letter
instead of stopping the stream); each record goes
through longest-prefix matching; trajectories are published keyed by group id. A checkpoint timer flushes
the producer, saves the published marks, and only then acks source records whose sessions are closed, so
Faust never commits past an open session. Crash safety and the guarantee are described in
`seamlessflow/assembler/book.py`.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import faust

from seamlessflow.assembler.batches import RawBytes, next_batch
from seamlessflow.assembler.book import SessionBook
from seamlessflow.assembler.config import AssemblyConfig
from seamlessflow.assembler.progress import PublishedMarks
from seamlessflow.avro import codec_for
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.clients import faust_app_kwargs
from seamlessflow.kafka.io import KafkaException, MessageProducer, transient
from seamlessflow.rewards.request import pending_request
from seamlessflow.topics import Topics, TopicSpec

log = logging.getLogger("seamlessflow.assembler")


class Assembler:
    """Owns the Faust app, the session book, the producer and the published marks."""

    def __init__(self, settings: Settings, config: AssemblyConfig | None = None):
        self.settings = settings
        self.config = config or AssemblyConfig.from_settings(settings)
        self.topics = Topics(settings)
        self.codec = codec_for(settings)
        self.app_id = f"{settings.topic_prefix}.{self.config.app_id}"
        self.book = SessionBook(self.config, self.codec, self.topics.session_events, settings.team, settings.run)
        self.producer = MessageProducer(settings, self.codec)
        self.marks = PublishedMarks(settings, f"{self.app_id}.published", self.topics.session_events)
        self.lock = asyncio.Lock()
        self.app = self._build_app()

    def _build_app(self) -> faust.App:
        datadir = Path(self.settings.data_dir).resolve() / "assembler" / self.app_id  # Faust's own files, not in the cwd
        datadir.mkdir(parents=True, exist_ok=True)
        app = faust.App(
            self.app_id, **faust_app_kwargs(self.settings), store="memory://", web_enabled=False,
            datadir=str(datadir),
            stream_wait_empty=False, consumer_auto_offset_reset="earliest",
            broker_commit_interval=self.config.checkpoint_interval_s,
        )
        source = app.topic(self.topics.session_events, schema=RawBytes())
        app.agent(source, name="assemble")(self._assemble)
        app.timer(self.config.checkpoint_interval_s)(self._checkpoint)
        app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]  # faust's hint wants *args and a named signal=; it calls (sender, revoked, signal=...)
        app.on_partitions_assigned.connect(self._on_assigned)  # type: ignore[arg-type]  # as above
        return app

    async def _assemble(self, stream) -> None:
        """Batches of records under one lock hold; the stream itself is never iterated (`batches.py`)."""
        queue = stream.channel.queue
        while True:
            events = await next_batch(self.app, queue, self.config.batch_max)
            async with self.lock:
                fresh = {event.message.partition for event in events} - self.book.replay_end.keys()
                if fresh:  # partitions new to this worker: how far their outputs were published
                    self.book.replay_end.update(await self._blocking(self.marks.read, sorted(fresh)))
                for event in events:
                    self._on_event(event)

    def _on_event(self, event) -> None:
        message = event.message
        out = self.book.on_record(message.partition, message.offset, event.key, event.value, handle=event)
        for trajectory in out.trajectories:
            waits = pending_request(trajectory.info_json) is not None  # for a reward worker first
            topic = self.topics.to_score if waits else self.topics.trajectories
            self.producer.send(topic, trajectory.group_id, trajectory)
        for letter in out.dead_letters:
            self.producer.send(self.topics.dead_letter, _text(letter.key), letter)

    async def _checkpoint(self) -> None:
        """Flush outputs, save how far they go, then let Faust commit past closed sessions only."""
        async with self.lock:
            for end in self.book.idle_aborts():
                self.producer.send(self.topics.session_events, end.session_id, end)
            marks = dict(self.book.processed)
            await self._blocking(self.producer.flush)
            try:
                await self._blocking(self.marks.save, marks)
            except KafkaException as exc:
                if not transient(exc):
                    raise
                # the group coordinator moved (a broker died): nothing is released past unsaved marks;
                # the next checkpoint saves them and releases
                log.warning("published marks not saved (%s); retrying at the next checkpoint", exc.args[0])
                return
            for partition in list(self.book.held):
                for event in self.book.release(partition):
                    if event is not None and event.ack():
                        self.app.consumer.ack(event.message)
            if self.book.stats:
                log.debug("assembler stats %s, open sessions %d", dict(self.book.stats), len(self.book.open))

    async def _on_revoked(self, app, revoked, **kwargs) -> None:
        async with self.lock:
            for tp in revoked:
                if tp.topic == self.topics.session_events:
                    self.book.forget_partition(tp.partition)

    async def _on_assigned(self, app, assigned, **kwargs) -> None:
        """Which partitions this worker holds now (with several workers, who assembles which sessions)."""
        mine = sorted(tp.partition for tp in assigned if tp.topic == self.topics.session_events)
        log.info("session-events partitions assigned: %s", mine)

    async def _blocking(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _text(key: bytes | None) -> str | None:
    return key.decode("utf-8", "replace") if key is not None else None


def leader_topic_spec(settings: Settings, app_id: str) -> TopicSpec:
    """Faust's assignor topic; created up front like every other topic (declared, not auto-created)."""
    return TopicSpec("assignor", f"{app_id}-__assignor-__leader", 1, settings.replication_factor or -1,
                     "delete", 86_400_000, "", (), "Faust leader election")


def run(settings: Settings) -> None:
    """Run one assembler worker until stopped (the supervisor's entry point)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    assembler = Assembler(client)
    ensure_topics(client)
    ensure_topics(client, [leader_topic_spec(client, assembler.app_id)])
    from faust.worker import Worker

    Worker(assembler.app, loglevel="info").execute_from_commandline()
