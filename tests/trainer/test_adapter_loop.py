"""An adapter team's trainer loop through the real broker: team red's trajectories its adapter sampled are trained,
team blue's and red's the base sampled (an old record without `adapter`) are finished untrained and counted, and the
version announced is red's adapter as a PEFT directory."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from safetensors.torch import load_file

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.messages import ResourceStatus, WeightVersion
from seamlessflow.model.lora import write_adapter
from seamlessflow.testing.trainer_records import group, wait_for
from seamlessflow.topics import Topics
from seamlessflow.trainer.loop import Trainer
from seamlessflow.trainer.options import TrainerOptions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # a trainer process: ~60 s alone, 2x under load


def test_adapter_trainer_trains_its_team_only_and_publishes_a_peft_version(settings, codec, tiny_model_dir, tmp_path):
    adapter = write_adapter(tiny_model_dir, tmp_path / "red", 4)
    settings = settings.with_overrides(
        proxy={"teams": {"red": {"lora": {"name": "red-lora", "path": str(adapter), "rank": 4}}}})
    topics = Topics(settings)
    producer = MessageProducer(settings, codec)
    blue = [dataclasses.replace(t, team="blue", adapter="blue-lora") for t in group(tiny_model_dir, "gb")]
    red_base = [dataclasses.replace(t, team="red") for t in group(tiny_model_dir, "go")]  # adapter None: the base's
    red = [dataclasses.replace(t, team="red", adapter="red-lora") for t in group(tiny_model_dir, "gr")]
    for record in blue + red_base + red:  # on one partition: the commit covers red's only if the others finished
        producer.send(topics.trajectories, "one-partition", record)
    producer.flush(30)

    config = TrainerOptions(enabled=True, model_path=str(tiny_model_dir), group_size=2, batch_threshold=1,
                            heartbeat_s=0.5, adapter="red", max_steps=1)
    trainer = Trainer(settings, config)
    thread = threading.Thread(target=trainer.run)
    thread.start()
    try:
        [version] = wait_for(settings, codec, topics.weights, lambda x: isinstance(x, WeightVersion))
        thread.join(timeout=120)
        assert not thread.is_alive()
    finally:
        trainer.stopping = True
        thread.join(timeout=120)

    assert (version.version, version.format, version.adapter) == (1, "peft-lora", "red-lora")
    directory = version.uri.removeprefix("file://")
    tensors = load_file(f"{directory}/adapter_model.safetensors")
    assert set(tensors) == set(load_file(f"{adapter}/adapter_model.safetensors"))
    assert all(k.endswith((".lora_A.weight", ".lora_B.weight")) for k in tensors)
    assert trainer.last_metrics.sequences == 2 and trainer.own.skipped["other_teams_skipped"] == 2
    assert trainer.own.skipped["other_adapters_skipped"] == 2  # red's the base sampled
    assert trainer.builder.counters.groups_kept == 1  # blue's and the base's never reached the batch builder

    beats = [s for s in wait_for(settings, codec, topics.status,
                                 lambda s: isinstance(s, ResourceStatus) and s.kind == "trainer")]
    assert (beats[-1].figures["other_teams_skipped"], beats[-1].figures["other_adapters_skipped"]) == (2.0, 2.0)
    marks = CommittedOffsets(settings, config.group_id(settings), topics.trajectories, timeout_s=30)
    committed = marks.read([0, 1])
    marks.close()
    assert sum(v for v in committed.values() if v > 0) == 6  # the skipped offsets were finished with red's
