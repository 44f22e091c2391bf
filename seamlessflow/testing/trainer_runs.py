"""A trainer service run as a process, the way `up` runs it, for the tests that kill and restart one.

`publish_gap_scenario` is the crash tests' shared setup: one partition, a group (g3) left incomplete before
two complete ones (g4, g5), so after steps 1-2 the commit point sits below g3's first sample while g4 and g5
above it are already trained; a restart must replay g3's sample and skip g4/g5.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.control import CommandKind
from seamlessflow.exit_codes import FENCED_EXIT_CODE
from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import ControlCommand, Trajectory, WeightVersion
from seamlessflow.testing.trainer_records import group, wait_for
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics


def start(config_path: str | Path, log_path: str | Path) -> subprocess.Popen:
    log = open(log_path, "ab")
    return subprocess.Popen([sys.executable, "-m", "services.trainer", "--config", str(config_path)],
                            stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def wait_for_version_restarting_fenced(settings: Settings, codec: Codec, proc: subprocess.Popen,
                                      config_path: str | Path, log_path: Path, version: int,
                                      timeout_s: float = 300.0) -> subprocess.Popen:
    """Waits for `version` on the weights topic while doing what the supervisor does: a trainer that exits
    fenced (its transaction outlived the broker's timeout while a killed broker's partitions moved, on a
    loaded machine) is started again; returns the process now running. Any other exit, or no `version`
    within `timeout_s`, fails with the log's tail."""
    topics = Topics(settings)
    deadline = time.monotonic() + timeout_s
    while not any(isinstance(m, WeightVersion) and m.version == version
                  for m in read_messages(settings, topics.weights, codec)):
        code = proc.poll()
        if code == FENCED_EXIT_CODE:
            proc = start(config_path, log_path)
        elif code is not None or time.monotonic() > deadline:
            raise AssertionError(f"no version {version}; trainer exit {code}; its log's tail:\n"
                                 + Path(log_path).read_text(errors="replace")[-6000:])
        time.sleep(0.5)
    return proc


def run_to_version_then_stop(settings: Settings, codec: Codec, producer: MessageProducer, config_path: str | Path,
                             log_path: str | Path, version: int) -> None:
    """Start a trainer, wait until it publishes `version`, then stop it with a shutdown command: exit 0."""
    topics = Topics(settings)
    proc = start(config_path, log_path)
    try:
        wait_for(settings, codec, topics.weights, lambda x: isinstance(x, WeightVersion) and x.version == version)
        producer.send_and_wait(topics.control, "trainer-0",
                               ControlCommand("stop", "trainer-0", 1, CommandKind.SHUTDOWN, "default", "default", 0))
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def kill_9_after_checkpoint(settings: Settings, codec: Codec, config_path: str | Path, log_path: Path,
                            step: int = 2) -> None:
    """Start a trainer, wait until version `step` is published and its checkpoint saved, then kill -9 it.
    Version N is published just before its checkpoint is saved: the kill comes after the save (a kill between
    the two replays that step under the next version, by design; not the case these tests pin down)."""
    proc = start(config_path, log_path)
    try:
        weights = Topics(settings).weights
        wait_for(settings, codec, weights, lambda x: isinstance(x, WeightVersion) and x.version == step)
        wait_until(lambda: f"checkpoint at step {step} " in log_path.read_text(errors="replace"), 60,
                   f"a checkpoint at step {step}", every_s=0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def versions(settings: Settings, codec: Codec) -> list[int]:
    return sorted(m.version for m in read_messages(settings, Topics(settings).weights, codec)
                  if isinstance(m, WeightVersion))


def publish_gap_scenario(settings: Settings, codec: Codec,
                         model_dir: Path) -> tuple[MessageProducer, list[list[Trajectory]]]:
    """Publishes g1, g2, g3's first sample, g4, g5 (see the module's docstring); returns the producer and the
    groups g1..g6 (g3's second sample and g6 are the test's to publish later)."""
    producer = MessageProducer(settings, codec)
    groups = [group(model_dir, f"g{i}") for i in range(1, 7)]
    g1, g2, g3, g4, g5, _ = groups
    for record in g1 + g2 + g3[:1] + g4 + g5:
        producer.send(Topics(settings).trajectories, record.group_id, record)
    producer.flush()
    return producer, groups
