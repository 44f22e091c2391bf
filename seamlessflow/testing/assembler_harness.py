"""Helpers for assembler tests through the real broker: a worker process, sessions in, records out."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.assembler import SessionAssembler
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.core.prefix_tree import Call
from seamlessflow.kafka.io import MessageProducer, read_topic
from seamlessflow.messages import EpisodeEnd, TokenIO, Trajectory
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics

ROOT = Path(__file__).resolve().parents[2]


class AssemblerProcess:
    """`python -m services.assembler --config PATH` as a real process that tests can kill -9."""

    def __init__(self, settings: Settings, tmp_path: Path, **options: object) -> None:
        self.settings = settings.with_overrides(assembler={"checkpoint_interval_s": 0.2, **options})
        self.config = self.settings.dump_yaml(tmp_path / "assembler.yaml")
        self.log_path = tmp_path / "assembler.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> AssemblerProcess:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "services.assembler", "--config", str(self.config)],
                                     cwd=ROOT, stdout=log, stderr=log, start_new_session=True)
        return self

    @property
    def running(self) -> subprocess.Popen:
        """The started process (AssertionError before `start`)."""
        assert self.proc is not None, "AssemblerProcess.start() was not called"
        return self.proc

    def kill9(self) -> None:
        os.killpg(self.running.pid, signal.SIGKILL)
        self.running.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.kill9()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def assigned(self) -> set[int] | None:
        """The partitions the worker last said it holds (its log line), None before its first assignment."""
        lines = [line for line in self.log_path.read_text(errors="replace").splitlines()
                 if "session-events partitions assigned:" in line]
        return set(json.loads(lines[-1].split("assigned:")[1])) if lines else None


def token_io(session_id: str, call: Call) -> TokenIO:
    return TokenIO(call.call_id, session_id, "teamA", "run1", call.call_id.split(".")[0], "engine-0", 0,
                   list(call.prompt_ids), list(call.completion_ids), list(call.logprobs), list(call.versions),
                   "stop", 0.0, 0.0, 0.0, 1)


def episode_end(session_id: str, reward: float = 1.0, status: EpisodeStatus = EpisodeStatus.DONE) -> EpisodeEnd:
    return EpisodeEnd(f"{session_id}/end", session_id, "teamA", "run1", reward, status, "{}", -1, 2,
                      group_id=f"g-{session_id}", task_id="t")


def float32(values: Iterable[float]) -> list[float]:
    import struct

    return [struct.unpack("f", struct.pack("f", v))[0] for v in values]


def as_engine_reports(calls: list[Call]) -> list[Call]:
    """Calls as they read back from Avro (logprobs are 32-bit floats on the wire)."""
    return [Call(c.call_id, list(c.prompt_ids), list(c.completion_ids), float32(c.logprobs), list(c.versions))
            for c in calls]


def expected_trajectories(sessions: dict[str, list[Call]]) -> dict[str, tuple]:
    """The truth, from the pure core: trajectory id -> (tokens, mask, logprobs, versions)."""
    truth = {}
    for session_id, calls in sessions.items():
        assembler = SessionAssembler(AssemblerOptions().assembler_config())
        for call in as_engine_reports(calls):
            assembler.add(call)
        for seq in assembler.finish():
            truth[f"{session_id}/{seq.branch_id}"] = (seq.tokens, seq.loss_mask, seq.logprobs, seq.versions)
    return truth


def publish(settings: Settings, codec: Codec, items: list[tuple[str, object]]) -> None:
    producer = MessageProducer(settings, codec)
    topic = Topics(settings).session_events
    for key, message in items:
        producer.send(topic, key, message)
    producer.flush()


def read_trajectories(settings: Settings, codec: Codec) -> list[Trajectory]:
    return [r.message for r in read_topic(settings, Topics(settings).trajectories, codec)]


def wait_for(settings: Settings, codec: Codec, topic_attr: str, count: int, timeout_s: float,
             proc: AssemblerProcess) -> list:
    """The records on the topic once there are at least `count`; fails after `timeout_s` or once the assembler
    process has exited, with its log."""
    topic = getattr(Topics(settings), topic_attr)

    def enough() -> list | None:
        records = [r.message for r in read_topic(settings, topic, codec)]
        return records if len(records) >= count else None

    return wait_until(enough, timeout_s, lambda: f"{count} records on {topic}; the assembler's log:\n{proc.log()}",
                      every_s=0.5, alive=[proc.running])


def as_records(sessions: dict[str, list[Call]], rng: random.Random, window: int = 6) -> list[tuple[str, object]]:
    """Every session's events in order, then its end; at most `window` sessions interleaved at random."""
    waiting: list[tuple[str, list[tuple[str, object]]]] = [
        (sid, [(sid, token_io(sid, c)) for c in calls] + [(sid, episode_end(sid))]) for sid, calls in sessions.items()]
    active: dict[str, list[tuple[str, object]]] = {}
    out: list[tuple[str, object]] = []
    while waiting or active:
        while waiting and len(active) < window:
            sid, queue = waiting.pop(0)
            active[sid] = queue
        sid = rng.choice(sorted(active))
        out.append(active[sid].pop(0))
        if not active[sid]:
            del active[sid]
    return out
