"""The agent worker: a member of consumer group `<team>.<pool>` on the shared tasks topic.

Every team's pools run the tasks published for the run's team (`settings.team`: shared by the teams); a task
published for one team (`manager.sources[].team`) is run by that team's pools only.

For each task it runs `group_size` sessions of the user's agent (see episode.py), at most `concurrency` at a
time, or a limit that follows the engines' load up to `max_concurrency` (flight.py). A task's offset is
committed only after the proxy accepted the end of every one of its sessions (and any retry record was durably
published), so a worker that dies loses nothing: the group hands its uncommitted tasks to another worker. A
session whose agent raised is ended as `aborted` and its task is republished with `attempt + 1` (only the
sessions still owed, same group id), addressed by a record header to this pool alone, so other teams sharing
the topic do not run it twice; on the last attempt the session ends as `failed`. A task whose agent killed the
worker process comes back uncommitted; the delivery journal (deliveries.py) counts those deaths into its
attempt, so after `max_attempts` its sessions end `failed` without running the agent again. Delivery is
at-least-once: a task whose partition moves mid-run may run again.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from seamlessflow.agents.deliveries import DeliveryJournal
from seamlessflow.agents.episode import ABORTED, FAILED, SessionOutcome, end_session, run_session
from seamlessflow.agents.flight import FlightControl
from seamlessflow.agents.options import AgentOptions, consumer_group
from seamlessflow.agents.proxy import EndRejected, ProxyClient
from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.core.sessions_in_flight import FlightBounds
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.group import Delivery, GroupMember, Settling
from seamlessflow.kafka.heartbeat import Heartbeat, worker_resource_id
from seamlessflow.kafka.io import DeliveryFailed, KafkaException, MessageProducer
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import DeadLetter, ResourceStatus, Task, new_id, now_ms
from seamlessflow.topics import Topics

log = logging.getLogger(__name__)
POOL_HEADER = "seamlessflow-pool"  # set on retry records: only this consumer group runs them
MAX_WAITING = 1000  # tasks held back by the gate before the worker stops fetching


class WorkerFailed(RuntimeError):
    """The worker stopped because the proxy would not accept session ends; uncommitted tasks remain."""


@dataclass
class TaskRun:
    task: Task
    partition: int
    offset: int
    outcomes: list[SessionOutcome] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return len(self.outcomes) == self.task.group_size


@dataclass
class WorkerStats:
    tasks_done: int = 0
    tasks_skipped: int = 0
    retries_published: int = 0
    dead_letters: int = 0
    worker_deaths_seen: int = 0  # deliveries of tasks a previous worker died holding
    sessions: dict[str, int] = field(default_factory=dict)  # status -> count


class AgentWorker:
    def __init__(self, settings: Settings, codec: Codec, agent: Callable, team: str, key: str,
                 opts: AgentOptions | None = None):
        self.settings, self.codec, self.agent, self.team, self.key = settings, codec, agent, team, key
        # told of each task whose sessions all ended (`agent run` prints its pool's reward per pass by it)
        self.on_task_done: Callable[[Task, list[SessionOutcome]], None] | None = None
        # whether a task may start now (`agent run` paces a task file's passes by it); one that may not waits,
        # uncommitted, while the worker goes on fetching (the tasks it waits for may be on other partitions), up
        # to `MAX_WAITING` of them
        self.gate: Callable[[Task], bool] | None = None
        self._waiting: deque[Delivery] = deque()
        self.opts = opts or AgentOptions.from_settings(settings)
        self.group = consumer_group(team, self.opts.pool)
        self.topics = Topics(settings)
        self.stats = WorkerStats()
        self._stop = threading.Event()
        self._member: GroupMember | None = None  # joins the group in `run`
        self._joined = threading.Event()
        self._done: queue.Queue[tuple[TaskRun, SessionOutcome]] = queue.Queue()
        self._sessions_in_flight = 0
        self._flight: FlightControl | None = None  # where `max_concurrency` is set: opened in `run`
        self._fatal: BaseException | None = None
        self._settling_failed = False
        self.resource_id = worker_resource_id(ResourceKind.AGENT, self.group)
        self._journal = DeliveryJournal(settings.data_dir / "agents" / f"{self.group}.deliveries.sqlite")
        self._held: dict[str, TaskRun] = {}  # by task event id: noted in the journal, not finished

    # -- lifecycle ---------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def wait_assigned(self, timeout_s: float) -> bool:
        """True once the group gave this worker its partitions (tests wait for it before producing)."""
        deadline = time.monotonic() + timeout_s
        if not self._joined.wait(timeout_s):
            return False
        assert self._member is not None  # set before `_joined`
        return self._member.wait_assigned(max(0.0, deadline - time.monotonic()))

    def run(self, stop: threading.Event | None = None) -> WorkerStats:
        """Until `stop()` (or `stop` is set: a service's signal), or the proxy refuses session ends."""
        if stop is not None:
            self._stop = stop
        self._producer = MessageProducer(self.settings, self.codec)
        self._dead_letters = DeadLetters(self.settings, self.codec, f"agent:{self.group}", self._produce_letter)
        self._proxy = ProxyClient(self.opts.proxy_url, self.key)
        most = max(self.opts.concurrency, self.opts.max_concurrency or 0)
        if self.opts.max_concurrency:
            bounds = FlightBounds(min(self.opts.min_concurrency, self.opts.max_concurrency), self.opts.max_concurrency)
            self._flight = FlightControl(self.settings, self.codec, bounds, self.opts.concurrency, self.group)
        self._http = httpx.Client(limits=httpx.Limits(max_connections=most * 2))
        self._pool = ThreadPoolExecutor(most, thread_name_prefix=f"agent-{self.group}")
        # fire and forget (try_send: never blocks), never on the task-commit path
        heartbeat = Heartbeat(self._producer.try_send, self.topics.status, self.opts.heartbeat_s,
                              lambda: self._status(ResourceState.ACTIVE))
        settling = Settling(self._drain_while_settling, self.opts.revoke_grace_s, self._settling_hopeless)
        member = self._member = GroupMember(self.settings, self.topics.tasks, self.group, self._dead_letters,
                                            settling, on_revoke=self._hand_back)
        self._joined.set()
        try:
            while not self._stop.is_set() and self._fatal is None:
                self._drain(0)
                member.commit()
                self._release_waiting()
                member.set_paused(self._sessions_in_flight >= self._limit() or len(self._waiting) >= MAX_WAITING)
                heartbeat.beat()
                delivery = member.poll(0.05 if self._sessions_in_flight else self.opts.poll_s)
                if delivery is not None:
                    self._on_delivery(delivery)
            member.settle()
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            member.close()
            if self._flight is not None:
                self._flight.close()
            heartbeat.publish(self._status(ResourceState.FAILED if self._fatal is not None else ResourceState.STOPPED))
            self._producer.close(10)
            self._journal.forget(*self._held)  # handed back in order: not the tasks' fault
            self._journal.close()
            self._proxy.close()
            self._http.close()
        if self._fatal is not None:
            raise WorkerFailed(str(self._fatal)) from self._fatal
        return self.stats

    # -- tasks in ------------------------------------------------------------------------------

    def _on_delivery(self, delivery: Delivery) -> None:
        task = delivery.message
        if not self._wanted(task, delivery.headers):
            self.stats.tasks_skipped += 1
            self._member_done(delivery.partition, delivery.offset)
            return
        if self.gate is not None and not self.gate(task):
            self._waiting.append(delivery)
            return
        self._start(delivery)

    def _release_waiting(self) -> None:
        """Starts the waiting tasks the gate now lets through, in the order they came."""
        if not self._waiting:
            return
        still: deque[Delivery] = deque()
        for delivery in self._waiting:
            if self.gate is None or self.gate(delivery.message):
                self._start(delivery)
            else:
                still.append(delivery)
        self._waiting = still

    def _start(self, delivery: Delivery) -> None:
        task = delivery.message
        deaths = self._journal.deliver(task.event_id)
        if deaths:
            self.stats.worker_deaths_seen += 1
            task = dataclasses.replace(task, attempt=task.attempt + deaths)
        run = TaskRun(task, delivery.partition, delivery.offset)
        self._held[task.event_id] = run
        job = self._session_job if task.attempt < self.opts.max_attempts else self._give_up_job
        for index in range(task.group_size):
            self._sessions_in_flight += 1
            self._pool.submit(job, run, index)

    def _wanted(self, task: Task, headers: dict[str, bytes]) -> bool:
        addressed = headers.get(POOL_HEADER)
        if addressed is not None and addressed.decode() != self.group:
            return False
        if task.group_size <= 0:
            return False
        if task.team not in (self.team, self.settings.team):  # published for another team (its own task source)
            return False
        return not self.opts.kinds or task.kind in self.opts.kinds

    def _session_job(self, run: TaskRun, index: int) -> None:
        outcome = run_session(self.agent, run.task, new_id(), index, self.key, self.opts, self._proxy,
                              self._session_info(run, index), self._http)
        self._done.put((run, outcome))

    def _session_info(self, run: TaskRun, index: int) -> dict[str, Any]:
        return {"team": self.team, "pool": self.opts.pool, "attempt": run.task.attempt, "index": index}

    def _give_up_job(self, run: TaskRun, index: int) -> None:
        reason = (f"workers died running this task (attempt {run.task.attempt}, max_attempts "
                  f"{self.opts.max_attempts}); the agent is not run again")
        info = {**self._session_info(run, index), "error": reason}
        outcome = end_session(run.task, new_id(), index, self.opts, self._proxy, FAILED, self.opts.failure_reward, info)
        self._done.put((run, outcome))

    # -- sessions out --------------------------------------------------------------------------

    def _drain(self, wait_s: float) -> None:
        try:
            item = self._done.get(timeout=wait_s) if wait_s > 0 else self._done.get_nowait()
        except queue.Empty:
            return
        while True:
            self._session_finished(*item)
            try:
                item = self._done.get_nowait()
            except queue.Empty:
                return

    def _session_finished(self, run: TaskRun, outcome: SessionOutcome) -> None:
        self._sessions_in_flight -= 1
        run.outcomes.append(outcome)
        self.stats.sessions[outcome.status] = self.stats.sessions.get(outcome.status, 0) + 1
        if run.finished and self._task_finished(run):
            self._member_done(run.partition, run.offset)

    def _task_finished(self, run: TaskRun) -> bool:
        """Ends a task's bookkeeping; True when its offset may be committed."""
        if self._held.pop(run.task.event_id, None) is not None:  # else handed back: the entry is the new holder's
            self._journal.forget(run.task.event_id)
        unreachable = [o for o in run.outcomes if o.end_error and not isinstance(o.end_error, EndRejected)]
        if unreachable:  # not accepted: leave the offset uncommitted and stop; another worker redoes it
            self._fatal = unreachable[0].end_error
            return False
        for rejected in (o for o in run.outcomes if o.end_error):
            self._dead_letter_task(
                run,
                f"proxy rejected the end of session {rejected.session_id}: {rejected.end_error}",
                rejected.session_id,
            )
        owed = sum(1 for o in run.outcomes if o.status == ABORTED and not o.end_error)
        if owed:
            self._republish(run.task, owed)
        self.stats.tasks_done += 1
        if self.on_task_done is not None:
            self.on_task_done(run.task, run.outcomes)
        return True

    def _republish(self, task: Task, owed: int) -> None:
        retry = dataclasses.replace(task, event_id=new_id(), attempt=task.attempt + 1, group_size=owed,
                                    created_at_ms=now_ms())
        self._producer.send_and_wait(
            self.topics.tasks, task.group_id, retry, headers=[(POOL_HEADER, self.group.encode())]
        )
        self.stats.retries_published += 1

    def _dead_letter_task(self, run: TaskRun, reason: str, session_id: str) -> None:
        value = self.codec.encode(run.task, self.topics.tasks)
        self._dead_letters.file(self.topics.tasks, run.partition, run.offset, run.task.group_id.encode(), value, reason,
                                detail=session_id)

    def _produce_letter(self, topic: str, key: str | None, letter: DeadLetter) -> None:
        self._producer.send_and_wait(topic, key, letter)  # durable before the task's offset may be committed
        self.stats.dead_letters += 1

    def _limit(self) -> int:
        return self._flight.update() if self._flight is not None else self.opts.concurrency

    def _status(self, state: ResourceState) -> ResourceStatus:
        """For operators (is the pool alive, how many sessions run, how many ended failed): agent workers hold
        no engine and take no commands, so the scheduler does not track them."""
        limit = self._flight.limit if self._flight is not None else self.opts.concurrency
        figures = {"concurrency": limit, "sessions_in_flight": self._sessions_in_flight,
                   "tasks_done": self.stats.tasks_done, "tasks_skipped": self.stats.tasks_skipped,
                   "retries_published": self.stats.retries_published, "dead_letters": self.stats.dead_letters,
                   "worker_deaths_seen": self.stats.worker_deaths_seen,
                   **{f"sessions_{status}": n for status, n in self.stats.sessions.items()}}
        return resource_status(
            self.resource_id,
            ResourceKind.AGENT,
            state,
            self.opts.pool,
            self.team,
            self.settings.run,
            capability_tags=[ResourceKind.AGENT],
            figures=figures,
            note=f"sessions in flight {limit}: {self._flight.decision.reason}" if self._flight is not None else None,
        )

    # -- offsets and group membership -----------------------------------------------------------

    def _member_done(self, partition: int, offset: int) -> None:
        assert self._member is not None  # records come from the member
        self._member.done(partition, offset)

    def _drain_while_settling(self, wait_s: float) -> None:
        """`_drain` while partitions are about to move: a record that cannot be published ends the wait (what
        finished is still committed, the rest goes to the next owner)."""
        try:
            self._drain(wait_s)
        except (KafkaException, DeliveryFailed) as exc:
            log.warning("publishing while settling: %s", exc)
            self._settling_failed = True

    def _settling_hopeless(self) -> bool:
        return self._fatal is not None or self._settling_failed

    def _hand_back(self, partitions: set[int]) -> None:
        """The partitions moved to another worker: their held tasks are its now, and no one died."""
        self._settling_failed = False  # that settle is over: the next one waits again
        self._waiting = deque(d for d in self._waiting if d.partition not in partitions)
        handed_back = [e for e, run in self._held.items() if run.partition in partitions]
        for event_id in handed_back:
            del self._held[event_id]
        self._journal.forget(*handed_back)
