"""Hand-made trajectories through the real broker to a real DeepSpeed (CPU, gloo) trainer."""

import json
import threading

import pytest
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.messages import CommandAck, ControlCommand, DeadLetter, ResourceStatus, WeightVersion
from seamlessflow.testing.trainer_records import trajectory, wait_for
from seamlessflow.topics import Topics
from seamlessflow.trainer.loop import Trainer
from seamlessflow.trainer.options import TrainerOptions

pytestmark = pytest.mark.slow

ADV = 1 / 2**0.5  # a two-sample group with different rewards: advantages +-1/sqrt(2)


def command(epoch, name="set_active", role=None):
    return ControlCommand(f"cmd-{epoch}", "trainer-0", epoch, name, "default", "default", 0, role=role)


def test_trainer_trains_masked_tokens_publishes_loadable_weights_and_obeys_control(settings, codec, tiny_model_dir):
    topics = Topics(settings)
    producer = MessageProducer(settings, codec)
    m = tiny_model_dir
    records = [
        trajectory(m, "a/0", "g1", [1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 1, 0], 1.0),  # 3 trained tokens
        trajectory(m, "b/0", "g1", [1, 2, 7, 8], [0, 0, 0, 1], 0.0),  # 1
        trajectory(m, "c/0", "g2", [1, 3, 9, 10], [0, 0, 1, 1], 0.5),  # 2
        trajectory(m, "d/0", "g2", [1, 3, 11, 12, 13], [0, 0, 1, 0, 1], 0.0),  # 2
    ]
    producer.send_and_wait(topics.control, "trainer-0", command(1, role="idle"))
    for record in records + [records[0]]:  # the last one is a duplicate delivery
        producer.send(topics.trajectories, record.group_id, record)
    producer.flush()
    producer.send_bytes(topics.trajectories, b"g9", b"not avro")
    producer.flush(30)

    config = TrainerOptions(enabled=True, model_path=str(m), group_size=2, batch_threshold=2, heartbeat_s=0.5)
    config.deepspeed = {**config.deepspeed_dict(), "train_micro_batch_size_per_gpu": 3}
    trainer = Trainer(settings, config)
    thread = threading.Thread(target=trainer.run)
    thread.start()
    try:
        wait_for(settings, codec, topics.status, lambda x: isinstance(x, CommandAck) and x.epoch == 1)
        wait_for(settings, codec, topics.status,
                 lambda x: isinstance(x, ResourceStatus) and x.active_tag == "idle" and x.kind == "trainer")
        assert trainer.step == 0  # idle: no training although the data is there
        producer.send_and_wait(topics.control, "trainer-0", command(2, role="train"))
        [version] = wait_for(settings, codec, topics.weights, lambda x: isinstance(x, WeightVersion))
        producer.send_and_wait(topics.control, "trainer-0", command(3, name="shutdown"))
        thread.join(timeout=120)
        assert not thread.is_alive()
    finally:
        trainer.stopping = True
        thread.join(timeout=120)

    metrics = trainer.last_metrics
    assert metrics.tokens_trained == 8 and metrics.groups == 2 and metrics.sequences == 4
    assert metrics.loss == pytest.approx(-(ADV * 3 - ADV * 1 + ADV * 2 - ADV * 2) / 8, abs=1e-4)
    assert metrics.logprob_abs_diff == pytest.approx(0.0, abs=1e-5)
    assert trainer.builder.counters.duplicates == 1

    assert (version.version, version.step, version.format) == (1, 1, "hf-safetensors")
    loaded = AutoModelForCausalLM.from_pretrained(version.uri.removeprefix("file://"), dtype=torch.float32)
    for p, q in zip(trainer.engine.module.parameters(), loaded.parameters(), strict=True):
        assert torch.equal(p.detach(), q)

    status_records = read_messages(settings, topics.status, codec)
    acks = {a.epoch: a.outcome for a in status_records if isinstance(a, CommandAck)}
    assert acks == {1: "ok", 2: "ok", 3: "ok"}
    beats = [s for s in status_records if isinstance(s, ResourceStatus) and s.kind == "trainer"]
    assert (beats[-1].state, beats[-1].figures["step"]) == ("stopped", 1.0)  # the last word after a shutdown
    assert any(s.state == "active" and s.figures["step"] == 1.0 for s in beats)  # a beat right after the step
    [letter] = [d for d in read_messages(settings, topics.dead_letter, codec) if isinstance(d, DeadLetter)]
    assert letter.service == "trainer" and letter.value == b"not avro"
    [step] = [json.loads(line) for line in (trainer.work / "steps.jsonl").read_text().splitlines()]
    assert sorted(step["trajectory_ids"]) == ["a/0", "b/0", "c/0", "d/0"]
    assert step["tokens_trained"] == metrics.tokens_trained and step["finished_at_ms"] > 0
    assert step["sources"] == {"default": {"groups": 2, "samples": 4, "tokens": 8, "reward_mean": 0.375}}

    marks = CommittedOffsets(settings, config.group_id(settings), topics.trajectories, timeout_s=30)
    committed = marks.read([0, 1])
    marks.close()
    # every record consumed (5 trajectories + 1 undecodable); a partition that got none has no commit (< 0)
    assert sum(committed.values()) == 6
