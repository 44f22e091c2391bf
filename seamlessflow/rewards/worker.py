"""The reward worker: a member of consumer group `<team>.reward.<pool>` on the `to-score` topic, in the scorers'
shape (`kafka.pool_worker`, which teachers share).

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
from dataclasses import dataclass, field

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind
from seamlessflow.kafka.dead_letters import letter_for
from seamlessflow.kafka.group import Delivery
from seamlessflow.kafka.pool_worker import PoolWorker
from seamlessflow.messages import Trajectory
from seamlessflow.rewards.options import RewardOptions
from seamlessflow.rewards.request import ScoreRequest, request_of, scored, unscorable
from seamlessflow.rewards.verifier_call import OK, TIMED_OUT, Limits, Verdict, run_verifier, start_forkserver

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


class RewardWorker(PoolWorker[ScoreRequest, list[Verdict]]):
    kind = ResourceKind.REWARD

    def __init__(self, settings: Settings, codec: Codec, reference: str, team: str,
                 options: RewardOptions | None = None):
        options = options or RewardOptions.from_settings(settings)
        super().__init__(settings, codec, reward_group(team, options.pool), "to-score", options, team, options.pool)
        self.reference, self.reward_options = reference, options
        self.stats = RewardStats()
        self._limits = Limits(options.timeout_s, options.memory_mb)

    def run(self) -> RewardStats:
        self.run_pool()
        self.stats.settled = self.settled
        return self.stats

    def prepare(self) -> None:
        start_forkserver(self.reference)  # imports paid once, before any call is timed

    def job_of(self, delivery: Delivery) -> ScoreRequest | None:
        request = request_of(delivery.message)
        if request is None or request.verifier != self.reward_options.pool:
            self.stats.skipped += 1
            return None
        return request

    def work(self, job: ScoreRequest) -> list[Verdict]:
        verdicts: list[Verdict] = []
        while len(verdicts) < self.reward_options.max_attempts:
            verdict = run_verifier(self.reference, job, self._limits)
            verdicts.append(verdict)
            if verdict.outcome in (OK, TIMED_OUT):
                break
        return verdicts

    def publish(self, delivery: Delivery, result: list[Verdict]) -> None:
        trajectory: Trajectory = delivery.message
        last = result[-1]
        for verdict in result:
            self.stats.calls[verdict.outcome] = self.stats.calls.get(verdict.outcome, 0) + 1
        info = {"worker": self.resource_id, "attempts": len(result), "elapsed_s": round(last.elapsed_s, 3)}
        if last.outcome == OK:
            out = scored(trajectory, last.reward, {**info, **({"info": last.info} if last.info else {})})
            self.stats.scored += 1
        else:
            first_line = last.error.splitlines()[0] if last.error else ""
            reason = f"{last.outcome} after {len(result)} attempt(s): {first_line}"
            out = unscorable(trajectory, reason, info)
            letter = letter_for(f"reward:{self.group}", self.topics.to_score, delivery.partition, delivery.offset,
                                delivery.key, delivery.value, f"unscorable: {reason}", self.settings.team,
                                self.settings.run)
            self.producer.send(self.topics.dead_letter, trajectory.group_id, letter)
            self.stats.unscorable += 1
            log.warning("%s unscorable: %s", trajectory.event_id, reason)
        self.producer.send(self.topics.trajectories, out.group_id, out)

    def figures(self) -> dict[str, float]:
        return {"scored": float(self.stats.scored), "unscorable": float(self.stats.unscorable),
                "skipped": float(self.stats.skipped), **{f"calls_{k}": float(v) for k, v in self.stats.calls.items()}}
