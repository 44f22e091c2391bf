"""The scorer's shape: a consumer-group member that works on each record in a thread pool and publishes it once.

Why one shape: reward workers (a verifier's score) and teacher workers (a teacher's logprobs) are the same
service around a different call. Both are stateless and off the GPU path, so a pool scales by starting members on
any host, and a slow call delays only the records it works on. The loop here owns what they share: the group
member (`kafka.group`), at most `concurrency` calls at a time (the member pauses while full), the heartbeat,
publishing each result from the loop's thread, and the commit rule: an offset is marked done only once its
output is durable, so a worker that dies mid-call loses nothing (another member redoes the record), and when
partitions move between living members the old owner first finishes and publishes what it holds (up to
`revoke_grace_s`). A record published twice (a death between output and commit) keeps its event id; trainers
de-duplicate on it. A subclass says which records it takes (`job_of`), the call (`work`, in a pool thread, never
raising), what it publishes (`publish`) and its heartbeat figures.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeVar

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.group import Delivery, GroupMember, Settling
from seamlessflow.kafka.heartbeat import Heartbeat, worker_resource_id
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import ResourceStatus
from seamlessflow.topics import Topics

Job = TypeVar("Job")
Result = TypeVar("Result")


class PoolOptions(Protocol):
    """What the loop reads of a pool's options (`rewards:`, `teacher:`)."""

    concurrency: int
    revoke_grace_s: float
    poll_s: float
    heartbeat_s: float


class PoolWorker(ABC, Generic[Job, Result]):
    kind: ResourceKind

    def __init__(self, settings: Settings, codec: Codec, group: str, source: str, options: PoolOptions,
                 team: str, label: str):
        """``source``: the short topic name it reads (`to-score`, `to-teach`); ``label``: its active tag (its
        pool or teacher) on the status topic."""
        self.settings, self.codec, self.group, self.team, self.label = settings, codec, group, team, label
        self.options = options
        self.topics = Topics(settings)
        self.source = getattr(self.topics, source.replace("-", "_"))
        self.resource_id = worker_resource_id(self.kind, group)
        self._stop = threading.Event()
        self._results: queue.Queue[tuple[Delivery, Result]] = queue.Queue()
        self._running = 0
        self.settled = 0  # records finished and published while their partitions were moving (or at close)

    def stop(self) -> None:
        self._stop.set()

    def prepare(self) -> None:
        """What must hold before the first record is taken (a check, a warm-up); raising ends the run."""

    @abstractmethod
    def job_of(self, delivery: Delivery) -> Job | None:
        """The call's input for a record this pool works on; None: not this pool's (marked done)."""

    @abstractmethod
    def work(self, job: Job) -> Result:
        """The call, in a pool thread; never raises (a failure is a result)."""

    @abstractmethod
    def publish(self, delivery: Delivery, result: Result) -> None:
        """Send the record's outputs with `self.producer` (flushed by the loop before the offset is done)."""

    @abstractmethod
    def figures(self) -> dict[str, float]:
        """The heartbeat's figures."""

    def run_pool(self) -> None:
        self.prepare()
        self.producer = MessageProducer(self.settings, self.codec)
        heartbeat = Heartbeat(self.producer.send, self.topics.status, self.options.heartbeat_s,
                              lambda: self._status(ResourceState.ACTIVE))
        letters = DeadLetters(self.settings, self.codec, f"{self.kind}:{self.group}", self.producer.send)
        settling = Settling(self._publish_finished, self.options.revoke_grace_s)
        self._member = GroupMember(self.settings, self.source, self.group, letters, settling)
        pool = ThreadPoolExecutor(self.options.concurrency, thread_name_prefix=f"{self.kind}-{self.label}")
        try:
            while not self._stop.is_set():
                self._publish_finished()
                self._member.commit()
                self._member.set_paused(self._running >= self.options.concurrency)
                heartbeat.beat()
                delivery = self._member.poll(0.05 if self._running else self.options.poll_s)
                if delivery is not None:
                    self._on_delivery(delivery, pool)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            self._member.settle()  # publish what is being worked on (bounded) before leaving the group
            self._member.close()  # unfinished records stay uncommitted: the group gives them to another member
            self.settled = self._member.settled
            heartbeat.publish(self._status(ResourceState.STOPPED))
            self.producer.close(10)  # flushed, and librdkafka's threads let go (not left reconnecting)

    def _on_delivery(self, delivery: Delivery, pool: ThreadPoolExecutor) -> None:
        job = self.job_of(delivery)
        if job is None:
            self._member.done(delivery.partition, delivery.offset)
            return
        self._running += 1
        pool.submit(self._work, delivery, job)

    def _work(self, delivery: Delivery, job: Job) -> None:
        self._results.put((delivery, self.work(job)))

    def _publish_finished(self, wait_s: float = 0.0) -> None:
        """Outputs are durable before their offsets are marked done (the loop's thread owns both clients)."""
        while True:
            try:
                delivery, result = self._results.get(timeout=wait_s) if wait_s else self._results.get_nowait()
            except queue.Empty:
                return
            wait_s = 0.0
            self._running -= 1
            self.publish(delivery, result)
            self.producer.flush()
            self._member.done(delivery.partition, delivery.offset)

    def _status(self, state: ResourceState) -> ResourceStatus:
        figures: dict[str, Any] = {"concurrency": float(self.options.concurrency), "running": float(self._running),
                                   **self.figures()}
        return resource_status(self.resource_id, self.kind, state, self.label, self.team, self.settings.run,
                               capability_tags=[str(self.kind)], figures=figures)
