"""One writer per role, with real processes on the real broker: a scheduler and a trainer are each frozen
(SIGSTOP), a replacement of the same role and run starts and writes, and the old one is woken (SIGCONT).
Its next write is refused by the broker (it was fenced when the replacement started): it exits with
`FENCED_EXIT_CODE`, and nothing it wrote after its replacement began is on any topic read `read_committed`
(every record names its writer process in a header), nor is its checkpoint the one a restart loads.
The Kafka layer's own checks are in tests/kafka/test_fencing.py."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.control import CommandKind
from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.fencing import FENCED_EXIT_CODE, WRITER_HEADER
from seamlessflow.kafka.io import MessageProducer, read_topic
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.messages import ControlCommand, WeightVersion
from seamlessflow.testing.scheduler_fakes import FakeResource, publish_weights, wait_until
from seamlessflow.testing.trainer_records import group
from seamlessflow.testing.waiting import wait_until as wait_for_condition
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions

pytestmark = pytest.mark.timeout(300)


def start(service: str, config: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", service, "--config", str(config)], stdout=out, stderr=out,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})


def written_by(settings: Settings, codec: Codec, proc: subprocess.Popen) -> dict[str, list[tuple[int, int]]]:
    """Per topic a role writes, where the records of process `proc` lie (committed ones only: read_committed)."""
    writer = f"{socket.gethostname()}:{proc.pid}".encode()
    topics = Topics(settings)
    return {topic: sorted((r.partition, r.offset) for r in read_topic(settings, topic, codec)
                          if (r.headers or {}).get(WRITER_HEADER) == writer)  # partitions are read in any order
            for topic in (topics.control, topics.tasks, topics.status, topics.weights, topics.dead_letter)}


def stop(*procs: subprocess.Popen) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(30)


def assert_fenced(proc: subprocess.Popen, log: Path) -> None:
    assert proc.wait(60) == FENCED_EXIT_CODE, log.read_text()[-3000:]
    text = log.read_text()
    assert "fenced, exiting" in text and re.search(r"fenced by (a )?newer", text)  # ours, and the broker's reason


def test_a_scheduler_woken_after_its_replacement_started_issues_nothing_and_exits(settings, codec, tmp_path):
    """Process level: the old scheduler commands a fake engine to version 1 and is frozen; the replacement
    commands it to version 2; the old one, woken, has the tick's heartbeat (and whatever commands and tasks
    the tick issued) refused, and exits."""
    engine = FakeResource(settings, codec, "r0", ["rollout"])
    engine.heartbeat()
    config = settings.with_overrides(
        scheduler={"policy": "disaggregated", "tick_s": 0.2, "min_dwell_s": 0, "switch_cost_s": 0.1,
                   "batch_threshold": 2},
        manager={"group_size": 1, "max_in_flight": 2})
    path, topics = config.dump_yaml(tmp_path / "config.yaml"), Topics(settings)
    old = start("services.scheduler", path, tmp_path / "old.log")
    new = None
    try:
        publish_weights(settings, codec, 1)
        wait_until(lambda: engine.weight_version == 1 and engine.state == "active", [engine], 90)
        old.send_signal(signal.SIGSTOP)
        before = written_by(settings, codec, old)
        assert before[topics.control]  # its commands to r0

        new = start("services.scheduler", path, tmp_path / "new.log")
        publish_weights(settings, codec, 2)
        wait_until(lambda: engine.weight_version == 2 and engine.state == "active", [engine], 90)
        old.send_signal(signal.SIGCONT)
        assert_fenced(old, tmp_path / "old.log")
        assert new.poll() is None  # the replacement goes on

        assert written_by(settings, codec, old) == before  # nothing after the replacement began, anywhere
        by_new = written_by(settings, codec, new)
        assert by_new[topics.control] and by_new[topics.status]
        issued = {r.message.event_id: (r.partition, r.offset) for r in read_topic(settings, topics.control, codec)}
        acted = [issued.get(c.event_id) for c in engine.applied]
        assert acted and all(at in before[topics.control] or at in by_new[topics.control] for at in acted)
    finally:
        engine.close()
        stop(old, *([new] if new else []))


@pytest.mark.slow
def test_a_trainer_woken_after_its_replacement_started_publishes_no_version_and_moves_nothing(
        settings, codec, tiny_model_dir, tmp_path):
    """Process level, DeepSpeed and all: the old trainer is frozen right after its second step (before it
    publishes, checkpoints and commits it); the replacement restores the last named checkpoint, trains and
    checkpoints; the old one, woken, is refused at its next commit and exits. On the topics: no version of
    its after the freeze; the group's offsets and `latest` are the replacement's; each trajectory trained
    once in the step log."""
    settings = settings.with_overrides(
        topic_prefix=f"t{uuid.uuid4().hex[:10]}", partitions={"trajectories": 1},
        trainer={"enabled": True, "model_path": str(tiny_model_dir), "group_size": 2, "batch_threshold": 2,
                 "heartbeat_s": 1.0})
    ensure_topics(settings)
    path = settings.dump_yaml(tmp_path / "config.yaml")
    topics, producer = Topics(settings), MessageProducer(settings, codec)
    groups = [group(tiny_model_dir, f"g{i}") for i in range(1, 7)]
    logs = {name: tmp_path / f"{name}.log" for name in ("old", "new")}

    def publish(*chosen: list) -> None:
        for record in [r for g in chosen for r in g]:
            producer.send(topics.trajectories, record.group_id, record)
        producer.flush()

    def logged(name: str, pattern: str) -> re.Match | None:
        return re.search(pattern, logs[name].read_text(errors="replace")) if logs[name].exists() else None

    publish(*groups[:2])
    old, new = start("services.trainer", path, logs["old"]), None
    try:
        wait_for_condition(lambda: logged("old", r"checkpoint at step 1 "), 180, "the old trainer's checkpoint 1")
        publish(*groups[2:4])
        wait_for_condition(lambda: logged("old", r"step 2: "), 60, "the old trainer's step 2", every_s=0.01)
        old.send_signal(signal.SIGSTOP)  # step 2 trained; its version, checkpoint and commit (mostly) to come
        before = written_by(settings, codec, old)

        new = start("services.trainer", path, logs["new"])
        wait_for_condition(lambda: logged("new", r"incarnation"), 180, "the replacement's start")
        publish(*groups[4:])
        wait_for_condition(lambda: logged("new", r"checkpoint at step 3 "), 180, "the replacement's checkpoint 3")
        old.send_signal(signal.SIGCONT)
        assert_fenced(old, logs["old"])

        assert written_by(settings, codec, old) == before  # no version, heartbeat or ack after the freeze
        versions = [r.message.version for r in read_topic(settings, topics.weights, codec)
                    if isinstance(r.message, WeightVersion)]
        assert versions == sorted(versions) and versions[-1] >= 3  # never backwards
        producer.send_and_wait(topics.control, "trainer-0",
                               ControlCommand("stop", "trainer-0", 1, CommandKind.SHUTDOWN, "default", "default", 0))
        assert new.wait(120) == 0
    finally:
        stop(old, *([new] if new else []))

    new_incarnation = logged("new", r"incarnation (\w+)")
    work = TrainerOptions.from_settings(settings).work_dir(settings)
    assert new_incarnation and (work / "checkpoints" / "latest").read_text().endswith(f"-{new_incarnation[1]}")
    steps = [line for line in (work / "steps.jsonl").read_text().splitlines() if line]
    trained = sorted(tid for line in steps for tid in json.loads(line)["trajectory_ids"])
    assert trained == sorted(r.event_id for g in groups for r in g)  # each once: the old one's step 2 not logged
    marks = CommittedOffsets(settings, TrainerOptions.from_settings(settings).group_id(settings), topics.trajectories)
    try:
        assert marks.read([0]) == {0: 12}  # the replacement's commit, with its last checkpoint
    finally:
        marks.close()
