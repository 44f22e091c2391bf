"""The reward worker: a member of consumer group `<team>.reward.<pool>` on the `to-score` topic.

Stateless and off the GPU path: it holds no engine and no session, so pools scale by starting workers on
any host, and a slow or broken verifier delays only the trajectories it scores. Each trajectory whose
request names this pool's verifier is scored in a sandboxed child (verifier_call.py), at most `concurrency` at a
time. A verifier that raises or kills its process is tried again up to `max_attempts` times; one that hangs
is killed at `timeout_s` and not retried (a hang is usually deterministic, and retrying multiplies the
wait). Then the trajectory is published once to `trajectories`: scored, or `unscorable` with the reason
plus a DeadLetter carrying the original record, so it is counted and nothing waits for it.

Offsets are committed only after that output is durable, so a worker that dies mid-score loses nothing:
the group hands its records to another worker, which scores them again. When the group moves partitions
between living workers (one joins or leaves), the old owner first finishes and publishes what it is
scoring on them (up to `revoke_grace_s`) and commits, so the new owner does not score them again. A worker
that dies between the output and the commit (or a call longer than the grace) makes the next one publish
the same trajectory id again; trainers de-duplicate on `Trajectory.event_id` (the assembler's outputs have
the same guarantee), so it is trained at most once.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.dead_letters import DeadLetters, letter_for
from seamlessflow.kafka.group import Delivery, GroupMember, Settling
from seamlessflow.kafka.heartbeat import Heartbeat, worker_resource_id
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import ResourceStatus, Trajectory
from seamlessflow.rewards.options import RewardOptions
from seamlessflow.rewards.request import ScoreRequest, request_of, scored, unscorable
from seamlessflow.rewards.verifier_call import OK, TIMED_OUT, Limits, Verdict, run_verifier, start_forkserver
from seamlessflow.topics import Topics

log = logging.getLogger(__name__)


def reward_group(team: str, pool: str) -> str:
    return f"{team}.reward.{pool}"


@dataclass
class RewardStats:
    scored: int = 0
    unscorable: int = 0
    skipped: int = 0  # requests for another pool's verifier
    settled: int = 0  # finished and published while their partitions were moving to another worker
    calls: dict[str, int] = field(default_factory=dict)  # verifier call outcome -> count


class RewardWorker:
    def __init__(self, settings: Settings, codec: Codec, reference: str, team: str,
                 opts: RewardOptions | None = None):
        self.settings, self.codec, self.reference, self.team = settings, codec, reference, team
        self.opts = opts or RewardOptions.from_settings(settings)
        self.group = reward_group(team, self.opts.pool)
        self.resource_id = worker_resource_id(ResourceKind.REWARD, self.group)
        self.topics = Topics(settings)
        self.stats = RewardStats()
        self._limits = Limits(self.opts.timeout_s, self.opts.memory_mb)
        self._stop = threading.Event()
        self._results: queue.Queue[tuple[Delivery, list[Verdict]]] = queue.Queue()
        self._running = 0

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> RewardStats:
        start_forkserver(self.reference)  # imports paid once, before any call is timed
        self._producer = MessageProducer(self.settings, self.codec)
        heartbeat = Heartbeat(self._producer.send, self.topics.status, self.opts.heartbeat_s,
                              lambda: self._status(ResourceState.ACTIVE))
        letters = DeadLetters(self.settings, self.codec, f"reward:{self.group}", self._producer.send)
        settling = Settling(self._publish_finished, self.opts.revoke_grace_s)
        self._member = GroupMember(self.settings, self.topics.to_score, self.group, letters, settling)
        pool = ThreadPoolExecutor(self.opts.concurrency, thread_name_prefix=f"reward-{self.opts.pool}")
        try:
            while not self._stop.is_set():
                self._publish_finished()
                self._member.commit()
                self._member.set_paused(self._running >= self.opts.concurrency)
                heartbeat.beat()
                delivery = self._member.poll(0.05 if self._running else self.opts.poll_s)
                if delivery is not None:
                    self._on_delivery(delivery, pool)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            self._member.settle()  # publish what is being scored (bounded) before leaving the group
            self._member.close()  # unfinished records stay uncommitted: the group gives them to another worker
            self.stats.settled = self._member.settled
            heartbeat.publish(self._status(ResourceState.STOPPED))
            self._producer.flush(10)
        return self.stats

    def _on_delivery(self, delivery: Delivery, pool: ThreadPoolExecutor) -> None:
        request = request_of(delivery.message)
        if request is None or request.verifier != self.opts.pool:
            self.stats.skipped += 1
            self._member.done(delivery.partition, delivery.offset)
            return
        self._running += 1
        pool.submit(self._score, delivery, request)

    def _score(self, delivery: Delivery, request: ScoreRequest) -> None:
        verdicts: list[Verdict] = []
        while len(verdicts) < self.opts.max_attempts:
            verdict = run_verifier(self.reference, request, self._limits)
            verdicts.append(verdict)
            if verdict.outcome in (OK, TIMED_OUT):
                break
        self._results.put((delivery, verdicts))

    def _publish_finished(self, wait_s: float = 0.0) -> None:
        """Outputs are durable before their offsets are marked done (the loop's thread owns both clients)."""
        while True:
            try:
                delivery, verdicts = self._results.get(timeout=wait_s) if wait_s else self._results.get_nowait()
            except queue.Empty:
                return
            wait_s = 0.0
            self._running -= 1
            self._publish(delivery, verdicts)
            self._member.done(delivery.partition, delivery.offset)

    def _publish(self, delivery: Delivery, verdicts: list[Verdict]) -> None:
        trajectory: Trajectory = delivery.message
        last = verdicts[-1]
        for verdict in verdicts:
            self.stats.calls[verdict.outcome] = self.stats.calls.get(verdict.outcome, 0) + 1
        info = {"worker": self.resource_id, "attempts": len(verdicts), "elapsed_s": round(last.elapsed_s, 3)}
        if last.outcome == OK:
            out = scored(trajectory, last.reward, {**info, **({"info": last.info} if last.info else {})})
            self.stats.scored += 1
        else:
            reason = (
                f"{last.outcome} after {len(verdicts)} attempt(s): {last.error.splitlines()[0] if last.error else ''}"
            )
            out = unscorable(trajectory, reason, info)
            letter = letter_for(f"reward:{self.group}", self.topics.to_score, delivery.partition, delivery.offset,
                                delivery.key, delivery.value, f"unscorable: {reason}", self.settings.team,
                                self.settings.run)
            self._producer.send(self.topics.dead_letter, trajectory.group_id, letter)
            self.stats.unscorable += 1
            log.warning("%s unscorable: %s", trajectory.event_id, reason)
        self._producer.send(self.topics.trajectories, out.group_id, out)
        self._producer.flush()

    def _status(self, state: ResourceState) -> ResourceStatus:
        figures = {"concurrency": float(self.opts.concurrency), "running": float(self._running),
                   "scored": float(self.stats.scored), "unscorable": float(self.stats.unscorable),
                   "skipped": float(self.stats.skipped),
                   **{f"calls_{k}": float(v) for k, v in self.stats.calls.items()}}
        return resource_status(self.resource_id, ResourceKind.REWARD, state, self.opts.pool, self.team,
                               self.settings.run, capability_tags=["reward"], figures=figures)
