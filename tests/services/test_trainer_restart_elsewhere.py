"""kill -9 a trainer, restart it with an EMPTY work dir (as on another node): it resumes from the newest
checkpoint in the object store, its versions never go backwards, and no trajectory is trained twice.

Real parts: the broker, the trainer service as a process (DeepSpeed on CPU), and an S3-compatible store
(moto's server) as `checkpoint_uri`. The groups are those of `test_trainer_crash.py`: after steps 1-2 the
commit point sits below g3's first sample while g4 and g5 above it are already trained. The trainer also
serves its versions (`serve_weights: always`): the restarted one finds the newest announced version's files
gone with the old work dir and exports the restored weights as the next version at once.
"""

import json
import shutil
import uuid

import pytest

from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import WeightVersion
from seamlessflow.storage import CheckpointStore
from seamlessflow.testing.object_store import object_store
from seamlessflow.testing.trainer_runs import (
    kill_9_after_checkpoint,
    publish_gap_scenario,
    run_to_version_then_stop,
)
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions

pytestmark = pytest.mark.slow


@pytest.fixture
def store():
    with object_store() as s3:
        yield s3


@pytest.mark.timeout(150)
def test_a_trainer_restarted_without_its_work_dir_resumes_from_the_object_store(settings, codec, tiny_model_dir,
                                                                                store, tmp_path):
    uri = store.make_bucket("checkpoints") + "/run-1"
    settings = settings.with_overrides(
        topic_prefix=f"t{uuid.uuid4().hex[:10]}", partitions={"trajectories": 1},
        trainer={"enabled": True, "model_path": str(tiny_model_dir), "group_size": 2, "batch_threshold": 2,
                 "heartbeat_s": 1.0, "checkpoint_uri": uri, "checkpoint_storage": store.storage_options(),
                 "serve_weights": "always"},
    )
    ensure_topics(settings)
    config_path = settings.dump_yaml(tmp_path / "config.yaml")
    topics = Topics(settings)
    producer, (g1, g2, g3, g4, g5, g6) = publish_gap_scenario(settings, codec, tiny_model_dir)

    kill_9_after_checkpoint(settings, codec, config_path, tmp_path / "run1.log")
    assert CheckpointStore(uri, store.storage_options()).latest().startswith("step00000002-")  # -<process>
    work = TrainerOptions.from_settings(settings).work_dir(settings)
    shutil.move(work, tmp_path / "lost-node")  # the node is gone, and its disk with it

    for record in g3[1:] + g6:
        producer.send(topics.trajectories, record.group_id, record)
    producer.flush()
    run_to_version_then_stop(settings, codec, producer, config_path, tmp_path / "run2.log", 4)

    restart_log = (tmp_path / "run2.log").read_text()
    assert "at step 2, version 2" in restart_log  # resumed from the store's checkpoint, not from scratch
    steps = [json.loads(line) for line in (work / "steps.jsonl").read_text().splitlines()]
    trained = [tid for s in steps for tid in s["trajectory_ids"]]
    assert sorted(trained) == sorted(r.event_id for r in g1 + g2 + g3 + g4 + g5 + g6)  # every one exactly once
    # version 3: the restored weights, exported at start (version 2's files were on the lost node)
    assert [(s["step"], s["version"]) for s in steps] == [(1, 1), (2, 2), (3, 4)]
    assert sorted(steps[2]["trajectory_ids"]) == sorted(r.event_id for r in g3 + g6)
    announced = [m for m in read_messages(settings, topics.weights, codec) if isinstance(m, WeightVersion)]
    numbers = [m.version for m in announced]
    assert set(numbers) == {1, 2, 3, 4} and numbers == sorted(numbers)  # in order: never backwards
    assert all(m.uri.startswith("http://127.0.0.1:") for m in announced)
    assert CheckpointStore(uri, store.storage_options()).latest().startswith("step00000003-")
