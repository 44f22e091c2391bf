"""kill -9 a trainer process with buffered work, restart it: nothing skipped, nothing trained twice.

One partition, and a group (g3) left incomplete before two complete ones (g4, g5): after steps 1-2 the
commit point sits below g3's first sample while g4 and g5 above it are already trained. The restart
must replay g3's sample, skip g4/g5 (remembered in the checkpoint), and keep the version numbering.
"""

import json
import signal
import uuid

import pytest

from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.messages import WeightVersion
from seamlessflow.testing.trainer_records import group, wait_for
from seamlessflow.testing.trainer_runs import (
    kill_9_after_checkpoint,
    publish_gap_scenario,
    run_to_version_then_stop,
    start,
    versions,
)
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions

pytestmark = pytest.mark.slow


def test_kill_9_and_restart_resumes_without_skipping_or_retraining(settings, codec, tiny_model_dir, tmp_path):
    settings = settings.with_overrides(
        topic_prefix=f"t{uuid.uuid4().hex[:10]}", partitions={"trajectories": 1},
        trainer={"enabled": True, "model_path": str(tiny_model_dir), "group_size": 2, "batch_threshold": 2,
                 "heartbeat_s": 1.0},
    )
    ensure_topics(settings)
    config_path = settings.dump_yaml(tmp_path / "config.yaml")
    topics = Topics(settings)
    producer, (g1, g2, g3, g4, g5, g6) = publish_gap_scenario(settings, codec, tiny_model_dir)

    kill_9_after_checkpoint(settings, codec, config_path, tmp_path / "run1.log")

    for record in g3[1:] + g6:
        producer.send(topics.trajectories, record.group_id, record)
    producer.flush()
    run_to_version_then_stop(settings, codec, producer, config_path, tmp_path / "run2.log", 3)

    restart_log = (tmp_path / "run2.log").read_text()
    assert "at step 2, version 2" in restart_log  # resumed from the checkpoint, not from scratch
    work = TrainerOptions.from_settings(settings).work_dir(settings)
    steps = [json.loads(line) for line in (work / "steps.jsonl").read_text().splitlines()]
    trained = [tid for s in steps for tid in s["trajectory_ids"]]
    expected = [r.event_id for r in g1 + g2 + g3 + g4 + g5 + g6]
    assert sorted(trained) == sorted(expected)  # every trajectory exactly once
    assert [s["step"] for s in steps] == [1, 2, 3] and [s["version"] for s in steps] == [1, 2, 3]
    assert sorted(steps[2]["trajectory_ids"]) == sorted(r.event_id for r in g3 + g6)
    assert set(versions(settings, codec)) == {1, 2, 3}


def test_versions_between_checkpoints_are_weights_only_and_a_crash_replays_since_the_last_checkpoint(
        settings, codec, tiny_model_dir, tmp_path):
    """checkpoint_every 2: version 3 is weights only (no checkpoint, no commit); kill -9 after it replays
    step 3's trajectories from the version-2 checkpoint, and the versions number on from 3."""
    settings = settings.with_overrides(
        topic_prefix=f"t{uuid.uuid4().hex[:10]}", partitions={"trajectories": 1},
        trainer={"enabled": True, "model_path": str(tiny_model_dir), "group_size": 2, "batch_threshold": 2,
                 "heartbeat_s": 1.0, "checkpoint_every": 2},
    )
    ensure_topics(settings)
    config_path = settings.dump_yaml(tmp_path / "config.yaml")
    config = TrainerOptions.from_settings(settings)
    topics = Topics(settings)
    producer = MessageProducer(settings, codec)
    groups = [group(tiny_model_dir, f"g{i}") for i in range(1, 7)]
    for record in [r for g in groups for r in g]:
        producer.send(topics.trajectories, record.group_id, record)
    producer.flush()

    first = start(config_path, tmp_path / "run1.log")
    try:
        wait_for(settings, codec, topics.weights, lambda x: isinstance(x, WeightVersion) and x.version == 3)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    work = config.work_dir(settings)
    assert (work / "checkpoints" / "latest").read_text().startswith("step00000002-")  # none at version 3
    assert committed_offset(settings, config.group_id(settings), topics.trajectories) == 8  # with the checkpoint

    run_to_version_then_stop(settings, codec, producer, config_path, tmp_path / "run2.log", 4)

    assert "at step 2, version 3" in (tmp_path / "run2.log").read_text()
    steps = [json.loads(line) for line in (work / "steps.jsonl").read_text().splitlines()]
    trained = [tid for s in steps for tid in s["trajectory_ids"]]
    assert sorted(trained) == sorted(r.event_id for g in groups for r in g)  # every trajectory exactly once
    assert [(s["step"], s["version"]) for s in steps] == [(1, 1), (2, 2), (3, 4)]  # step 3 again, in version 4
    assert sorted(steps[2]["trajectory_ids"]) == sorted(r.event_id for r in groups[4] + groups[5])
    assert set(versions(settings, codec)) == {1, 2, 3, 4}
    assert committed_offset(settings, config.group_id(settings), topics.trajectories) == 12  # the stop checkpoints


def committed_offset(settings, group_id: str, topic: str) -> int:
    committed = CommittedOffsets(settings, group_id, topic, timeout_s=60)
    try:
        return committed.read([0])[0]
    finally:
        committed.close()
