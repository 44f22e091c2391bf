"""The teacher worker: a member of consumer group `<team>.teacher` on the `to-teach` topic, in the scorers' shape
(`kafka.pool_worker`, shared with the reward workers; `scale` it by starting more members).

For each of its team's trajectories it asks the team's teacher for the logprob of every token given its exact
prefix (`client.py`), lays the answer on the trajectory's own ids (`core.teaching`: generated tokens get the
teacher's logprob, prompt, tool and user tokens stay 0 and masked), names the teacher and its version, and
publishes the trajectory once: to `to-score` when it still waits for a reward worker, else to `trajectories`.
A teacher that cannot answer (down for `max_attempts` tries; a window too short or a misaligned answer, which
no retry mends) lets the trajectory go on untaught, with a dead letter saying why: a trainer distils nothing from
it, and nothing waits for it.

At start the teacher's tokenizer must give the student's ids on probe texts covering the student's vocabulary
(`core.teaching.tokenizer_difference`); a teacher with another tokenizer is refused with `TeacherRefused`, as
its logprobs would be of other strings under the same ids.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

import httpx

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind
from seamlessflow.core.teaching import (
    MisalignedTeacher,
    aligned_teacher_logprobs,
    probe_texts,
    tokenizer_difference,
)
from seamlessflow.kafka.dead_letters import letter_for
from seamlessflow.kafka.group import Delivery
from seamlessflow.kafka.pool_worker import PoolWorker
from seamlessflow.messages import Trajectory
from seamlessflow.model.choice import model_name_or_path
from seamlessflow.rewards.request import pending_request
from seamlessflow.teacher.client import TeacherClient, TeacherError
from seamlessflow.teacher.engines import engine_url
from seamlessflow.teacher.options import TeacherOptions

log = logging.getLogger(__name__)


class TeacherRefused(ValueError):
    """The configured teacher cannot teach this student (another tokenizer, or no teacher for the team)."""


def teacher_group(team: str) -> str:
    return f"{team}.teacher"


@dataclass(frozen=True)
class Lesson:
    """One trajectory's outcome: the teacher's per-token logprobs, or why there are none."""

    logprobs: list[float] | None
    attempts: int
    elapsed_s: float
    error: str = ""


@dataclass
class TeacherStats:
    taught: int = 0
    untaught: int = 0
    skipped: int = 0  # another team's trajectories
    settled: int = 0


class TeacherWorker(PoolWorker[Trajectory, Lesson]):
    kind = ResourceKind.TEACHER

    def __init__(self, settings: Settings, codec: Codec, team: str, options: TeacherOptions | None = None):
        options = options or TeacherOptions.from_settings(settings)
        if team not in options.teams:
            raise TeacherRefused(f"team {team!r} has no teacher (teacher.teams names {sorted(options.teams)})")
        self.spec, self.teacher_options = options.teams[team], options
        super().__init__(settings, codec, teacher_group(team), "to-teach", options, team,
                         self.spec.name or self.spec.model or self.spec.engine or "teacher")
        self.client: TeacherClient | None = None
        self.stats = TeacherStats()

    def run(self) -> TeacherStats:
        try:
            self.run_pool()
        finally:
            if self.client is not None:
                self.client.close()
        self.stats.settled = self.settled
        return self.stats

    def prepare(self) -> None:
        self.client = self._connect(wait_s=60.0)
        self.label = self.spec.name or self.client.served_model()
        check_tokenizer(self.client, self.teacher_options.student_tokenizer or model_name_or_path(self.settings))

    def _connect(self, wait_s: float) -> TeacherClient:
        """A client of the configured endpoint, or of the stack engine's URL as its newest heartbeat names it."""
        url = self.spec.url or engine_url(self.settings, self.codec, str(self.spec.engine), wait_s)
        return TeacherClient(self.spec, self.teacher_options.timeout_s, url)

    def _reconnect(self, client: TeacherClient) -> None:
        """After a dropped connection to a stack engine: its URL again (a restarted engine may listen elsewhere)."""
        if self.spec.engine is None:
            return
        fresh = self._connect(wait_s=0.0)
        if fresh.url != client.url:
            log.warning("teacher engine %s moved: %s -> %s", self.spec.engine, client.url, fresh.url)
            fresh.model = client.model
            self.client = fresh  # the old one goes with the calls still holding it
        else:
            fresh.close()

    def job_of(self, delivery: Delivery) -> Trajectory | None:
        trajectory: Trajectory = delivery.message
        if trajectory.team != self.team:  # that team's own teacher group takes it
            self.stats.skipped += 1
            return None
        return trajectory

    def work(self, job: Trajectory) -> Lesson:
        start, wait, error = time.monotonic(), self.teacher_options.retry_wait_s, ""
        for attempt in range(1, self.teacher_options.max_attempts + 1):
            client = self.client
            assert client is not None, "prepare() connects before any record is taken"
            try:
                scored = client.score(list(job.tokens))
                logprobs = aligned_teacher_logprobs(job.tokens, job.loss_mask, scored)
                return Lesson(logprobs, attempt, time.monotonic() - start)
            except Exception as exc:  # a failure is a result: the trajectory goes on untaught
                error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, httpx.TransportError):
                    self._reconnect_quietly(client)
                if not _retryable(exc) or attempt == self.teacher_options.max_attempts or self._stop.wait(wait):
                    return Lesson(None, attempt, time.monotonic() - start, error)
                wait *= 2
        raise AssertionError("unreachable: the last attempt returns")

    def _reconnect_quietly(self, client: TeacherClient) -> None:
        try:
            self._reconnect(client)
        except Exception as exc:  # no newer heartbeat yet: the next attempt tries the same URL
            log.warning("teacher engine %s not found again: %s", self.spec.engine, exc)

    def publish(self, delivery: Delivery, result: Lesson) -> None:
        trajectory: Trajectory = delivery.message
        if result.logprobs is not None:
            out = dataclasses.replace(trajectory, teacher_logprobs=result.logprobs, teacher=self.label,
                                      teacher_version=self.spec.version)
            self.stats.taught += 1
        else:
            out = trajectory
            reason = f"untaught after {result.attempts} attempt(s): {result.error.splitlines()[0][:300]}"
            letter = letter_for(f"teacher:{self.group}", self.source, delivery.partition, delivery.offset,
                                delivery.key, delivery.value, reason, self.settings.team, self.settings.run)
            self.producer.send(self.topics.dead_letter, trajectory.group_id, letter)
            self.stats.untaught += 1
            log.warning("%s %s", trajectory.event_id, reason)
        waits = pending_request(out.info_json) is not None  # for a reward worker next
        self.producer.send(self.topics.to_score if waits else self.topics.trajectories, out.group_id, out)

    def figures(self) -> dict[str, float]:
        return {"taught": float(self.stats.taught), "untaught": float(self.stats.untaught),
                "skipped": float(self.stats.skipped)}


def _retryable(exc: Exception) -> bool:
    """A misaligned answer or a refused request fails the same way again; a dropped connection may not."""
    if isinstance(exc, MisalignedTeacher):
        return False
    return exc.retryable if isinstance(exc, TeacherError) else True


def check_tokenizer(client: TeacherClient, student: str) -> None:
    """Raises TeacherRefused when the teacher's tokenizer gives other ids than the student's on the probes."""
    from transformers import AutoTokenizer  # the worker's only heavy import, paid once at start

    tokenizer = AutoTokenizer.from_pretrained(student)
    probes = probe_texts(lambda ids: str(tokenizer.decode(ids)), len(tokenizer))
    encode = lambda text: list(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    difference = tokenizer_difference(probes, encode, client.tokenize)
    if difference is not None:
        raise TeacherRefused(f"teacher {client.spec.name or client.served_model()!r} at {client.url} cannot "
                             f"teach the student {student!r}: {difference}. On-policy distillation needs the "
                             "student's tokenizer (its logprobs are of the student's very token ids).")
