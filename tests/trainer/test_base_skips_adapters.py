"""The base's trainer loop through the real broker: a trajectory an adapter sampled (`Trajectory.adapter` set) is
finished untrained and counted, never learned by the base; the base's own (and old records without the field) are
trained."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.messages import ResourceStatus, WeightVersion
from seamlessflow.testing.trainer_records import group, wait_for
from seamlessflow.topics import Topics
from seamlessflow.trainer.loop import Trainer
from seamlessflow.trainer.options import TrainerOptions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # a trainer process: ~60 s alone, 2x under load


def test_the_base_trainer_skips_an_adapters_trajectories(settings, codec, tiny_model_dir):
    topics = Topics(settings)
    producer = MessageProducer(settings, codec)
    adapters = [dataclasses.replace(t, team="red", adapter="red-lora") for t in group(tiny_model_dir, "ga")]
    base = group(tiny_model_dir, "gb")  # adapter None
    for record in adapters + base:  # on one partition: the commit covers the base's only if red's were finished
        producer.send(topics.trajectories, "one-partition", record)
    producer.flush(30)

    config = TrainerOptions(enabled=True, model_path=str(tiny_model_dir), group_size=2, batch_threshold=1,
                            heartbeat_s=0.5, max_steps=1)
    trainer = Trainer(settings, config)
    thread = threading.Thread(target=trainer.run)
    thread.start()
    try:
        wait_for(settings, codec, topics.weights, lambda x: isinstance(x, WeightVersion))
        thread.join(timeout=120)
        assert not thread.is_alive()
    finally:
        trainer.stopping = True
        thread.join(timeout=120)

    assert trainer.last_metrics.sequences == 2 and trainer.own.skipped["other_adapters_skipped"] == 2
    assert trainer.builder.counters.groups_kept == 1  # red's never reached the batch builder
    [step] = [line for line in trainer.steps_log.read_text().splitlines() if line.strip()]
    assert '"gb0/0"' in step and '"ga0/0"' not in step
    beats = wait_for(settings, codec, topics.status, lambda s: isinstance(s, ResourceStatus) and s.kind == "trainer")
    assert beats[-1].figures["other_adapters_skipped"] == 2.0
    marks = CommittedOffsets(settings, config.group_id(settings), topics.trajectories, timeout_s=30)
    committed = marks.read([0, 1])
    marks.close()
    assert sum(v for v in committed.values() if v > 0) == 4  # red's offsets were finished with the base's
