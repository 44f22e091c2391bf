"""A 3-broker KRaft cluster on one machine: declared topics replicate 3 ways with 2 in sync, and kill -9 of
the broker leading the session-events partitions, while the assembler works, loses and duplicates no
acknowledged session event and no trajectory. The audit reads the topics with a plain consumer."""

import random
import time
import uuid

import pytest
from confluent_kafka.admin import ConfigResource

from seamlessflow.broker.local import LocalBroker
from seamlessflow.kafka.admin import admin_client, ensure_topics
from seamlessflow.testing.assembler_harness import AssemblerProcess, as_records, expected_trajectories, publish
from seamlessflow.testing.independent_reader import independent_read
from seamlessflow.testing.sessions import forty_sessions
from seamlessflow.topics import Topics

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    broker = LocalBroker(tmp_path_factory.mktemp("cluster"), brokers=3).start(timeout_s=180)
    yield broker
    broker.stop()





def leaders(settings, topic: str) -> dict[int, int]:
    meta = admin_client(settings).list_topics(topic, timeout=10).topics[topic]
    return {p: m.leader for p, m in meta.partitions.items()}


def test_declared_topics_have_three_replicas_and_two_in_sync(cluster):
    settings = cluster.client_settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:8]}")
    ensure_topics(settings)
    topic = Topics(settings).session_events
    meta = admin_client(settings).list_topics(topic, timeout=10).topics[topic]
    assert all(len(p.replicas) == 3 and len(p.isrs) == 3 for p in meta.partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = admin_client(settings)  # held: a collected client cancels its pending futures
    config = admin.describe_configs([resource])[resource].result(timeout=10)
    assert config["min.insync.replicas"].value == "2"


@pytest.mark.timeout(270)
def test_killing_the_session_events_leader_loses_and_duplicates_nothing(cluster, codec, tmp_path):
    settings = cluster.client_settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:8]}", data_dir=tmp_path / "d")
    ensure_topics(settings)
    topics = Topics(settings)
    sessions = {f"s{i}": list({c.call_id: c for c in sent}.values()) for i, sent in enumerate(forty_sessions())}
    ordered = as_records(sessions, random.Random(7))
    half = len(ordered) // 2

    proc = AssemblerProcess(settings, tmp_path).start()
    try:
        publish(settings, codec, ordered[:half])
        deadline = time.monotonic() + 120  # the assembler is at work (its topics made, its group joined)
        while not independent_read(settings.kafka_bootstrap, topics.trajectories) and time.monotonic() < deadline:
            time.sleep(0.5)
        victim = leaders(settings, topics.session_events)[0]
        cluster.kill(f"broker-{victim}")
        publish(settings, codec, ordered[half:])  # returns once every record is acknowledged, through failover
        deadline = time.monotonic() + 60  # the controller moves leadership once the dead broker's session ends
        while leaders(settings, topics.session_events)[0] == victim:
            assert time.monotonic() < deadline, "leadership never moved off the killed broker"
            time.sleep(0.5)

        on_topic = [
            codec.decode(v).event_id for _, v in independent_read(settings.kafka_bootstrap, topics.session_events)
        ]
        assert sorted(on_topic) == sorted(msg.event_id for _, msg in ordered)  # each acknowledged event once

        truth = expected_trajectories(sessions)
        deadline, ids = time.monotonic() + 180, []
        while len(set(ids)) < len(truth) and time.monotonic() < deadline:
            time.sleep(1)
            out = [codec.decode(v) for _, v in independent_read(settings.kafka_bootstrap, topics.trajectories)]
            ids = [t.event_id for t in out]
        assert sorted(set(ids)) == sorted(truth), proc.log()
        assert len(ids) == len(set(ids)), "a trajectory was published twice"
        assert all((t.tokens, t.loss_mask, t.logprobs, t.versions) == truth[t.event_id] for t in out)
    finally:
        proc.stop()
        cluster.start()  # the killed node rejoins for any later test


@pytest.mark.timeout(360)
def test_the_trainer_trains_every_trajectory_once_through_a_broker_kill(cluster, codec, tiny_model_dir, tmp_path):
    """kill -9 of the broker leading the trajectories partition while the trainer works: the step log (the
    trainer's own view) holds every acknowledged trajectory exactly once, versions only rise, and the
    trainer's committed offset ends at the topic's end. A trainer fenced meanwhile (its transaction outlived
    the broker's timeout while the partitions moved, on a loaded machine) is started again, as `up` would."""
    import json

    from confluent_kafka import Consumer, TopicPartition

    from seamlessflow.kafka.io import MessageProducer, read_messages
    from seamlessflow.messages import ControlCommand, WeightVersion
    from seamlessflow.testing.trainer_records import group
    from seamlessflow.testing.trainer_records import wait_for as wait_on_topic
    from seamlessflow.testing.trainer_runs import start, wait_for_version_restarting_fenced
    from seamlessflow.trainer.options import TrainerOptions

    settings = cluster.client_settings.with_overrides(
        topic_prefix=f"t{uuid.uuid4().hex[:8]}", data_dir=tmp_path / "d", partitions={"trajectories": 1},
        trainer={"enabled": True, "model_path": str(tiny_model_dir), "group_size": 2, "batch_threshold": 2,
                 "heartbeat_s": 1.0})
    ensure_topics(settings)
    topics = Topics(settings)
    producer = MessageProducer(settings, codec)
    groups = [group(tiny_model_dir, f"g{i}") for i in range(1, 9)]
    for record in [r for g in groups[:4] for r in g]:
        producer.send(topics.trajectories, record.group_id, record)
    producer.flush()
    trainer = start(settings.dump_yaml(tmp_path / "config.yaml"), tmp_path / "trainer.log")
    try:
        wait_on_topic(settings, codec, topics.weights, lambda m: isinstance(m, WeightVersion), timeout_s=300)
        victim = leaders(settings, topics.trajectories)[0]
        cluster.kill(f"broker-{victim}")
        for record in [r for g in groups[4:] for r in g]:
            producer.send(topics.trajectories, record.group_id, record)
        producer.flush()
        trainer = wait_for_version_restarting_fenced(settings, codec, trainer, tmp_path / "config.yaml",
                                                     tmp_path / "trainer.log", version=4)
        producer.send_and_wait(topics.control, "trainer-0",
                               ControlCommand("stop", "trainer-0", 1, "shutdown", "default", "default", 0))
        assert trainer.wait(timeout=180) == 0, (tmp_path / "trainer.log").read_text()[-3000:]
    finally:
        if trainer.poll() is None:
            trainer.kill()
        cluster.start()

    work = TrainerOptions.from_settings(settings).work_dir(settings)
    steps = [json.loads(line) for line in (work / "steps.jsonl").read_text().splitlines()]
    trained = [tid for s in steps for tid in s["trajectory_ids"]]
    assert sorted(trained) == sorted(r.event_id for g in groups for r in g)  # each exactly once
    assert [s["version"] for s in steps] == [1, 2, 3, 4]
    published = [m.version for m in read_messages(settings, topics.weights, codec) if isinstance(m, WeightVersion)]
    assert published == sorted(set(published)) and max(published) == 4  # once each, rising
    reader = Consumer({"bootstrap.servers": settings.kafka_bootstrap,
                       "group.id": TrainerOptions.from_settings(settings).group_id(settings)})
    [committed] = reader.committed([TopicPartition(topics.trajectories, 0)], timeout=30)
    reader.close()
    assert committed.offset == 16  # every record consumed and committed once, none left behind
